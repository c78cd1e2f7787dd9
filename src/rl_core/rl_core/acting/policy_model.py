"""What a policy node acts with: an exported ONNX model, the torch actor or a scripted expert,
the checks of the observations sent to it, and which received weights it loads.

:func:`build_policy_model` picks one by ``onnx_model`` and ``expert``: a file written by
``rl-bringup export`` runs on onnxruntime on the CPU with fixed weights and sizes the policy from
the model; ``expert`` acts with the scripted expert of ``env_id`` (:mod:`rl_core.acting.experts`);
otherwise the torch actor of ``env_id`` is built on ``device``, randomly initialised until weights
come. Every ``/policy_weights`` message goes through a :class:`WeightsGate`: weights whose
signature does not verify for this policy's run (:mod:`rl_core.security.weights_auth`), that come
without a public key unless unsigned ones are allowed, that are older than the current ones (a
replay), hold NaN or were built for another architecture are refused with the reason. torch and
the simulator code are imported only for the torch actor, the expert and checking weights, so an
ONNX policy runs from the robot-side install of requirements-edge.txt.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rl_core.config import ConfigError, PolicyConfig
from rl_core.runs.onnx_policy import OnnxPolicy
from rl_core.security import weights_auth
from rl_core.security.weights_auth import VerifyKey, verify_weights
from rl_core.wire.image_codecs import is_image_shape

if TYPE_CHECKING:
    from rl_core.acting.experts import Expert
    from rl_core.algorithms import Actor
    from rl_core.algorithms.encoders import EncodedActor


#: A policy still acting with its own initial actor after this long says so.
NO_WEIGHTS_WARNING_S = 30.0
#: Bytes allowed for the safetensors header of received weights beyond 256 per tensor.
HEADER_ALLOWANCE_BYTES = 64 * 1024
#: Weights older than this are reported as stale (the trainer stalled or is gone).
STALE_WEIGHTS_S = 60.0


#: Why weights are refused by a receiver that has no public key and does not allow unsigned ones.
NO_PUBLIC_KEY = (f"no public key to check the learner's signature ({weights_auth.PUBLIC_KEY_VARIABLE}"
                 f" or {weights_auth.PUBLIC_KEY_FILE_VARIABLE}; rl-bringup and the launch files "
                 "give one), and allow_unsigned is false")


def weights_refusal(msg: Any, key: VerifyKey | None, current: tuple[int, int],
                    max_bytes: int | None = None, allow_unsigned: bool = False) -> str | None:
    """Why received weights ``msg`` (``rl_nodes.messages.Weights``) must not replace the
    weights of ``current`` ``(epoch, version)``: more bytes than ``max_bytes`` (what the
    receiver's architecture takes), a signature that does not verify under the learner's public
    ``key`` for its run, no ``key`` at all unless ``allow_unsigned``, an
    older version (a replay), bytes that do not decode, or NaN; None when they may be loaded
    (architecture not checked). The checks run cheapest first: nothing is hashed before the
    size is known to fit, nothing decoded before the signature verifies."""
    import torch  # only nodes that follow weights call this

    if max_bytes is not None and msg.size > max_bytes:
        return (f"version {msg.version}: {msg.size} bytes, more than the {max_bytes} that this "
                "policy's architecture takes; ignored")
    if key is None and not allow_unsigned:
        return f"version {msg.version}: {NO_PUBLIC_KEY}; ignored"
    if key is not None and not verify_weights(msg, key):
        return (f"version {msg.version}: the signature does not verify (unsigned, or signed with "
                "another key or for another run); ignored")
    if (msg.epoch, msg.version) < current:
        return (f"epoch {msg.epoch} version {msg.version} is older than the current epoch "
                f"{current[0]} version {current[1]} (a replay); ignored")
    try:
        tensors = msg.tensors()
    except ValueError as error:
        return f"version {msg.version}: {error}; ignored"
    if not all(bool(torch.isfinite(tensor).all()) for tensor in tensors.values()):
        return f"version {msg.version} holds NaN or infinite values; ignored"
    return None


def encoded_size_bound(state: dict[str, Any]) -> int:
    """The most bytes weights of the architecture of ``state`` (an actor's ``state_dict``) may
    take encoded: the tensors' bytes and room for the safetensors header."""
    return sum(tensor.numel() * tensor.element_size() for tensor in state.values()) + \
        HEADER_ALLOWANCE_BYTES + 256 * len(state)


class WeightsGate:
    """The run epoch and version of the weights a policy acts with, and when they came.

    Version 0 is the policy's own randomly initialised actor.

    :param key: the learner's public key (None: every weights refused, unless ``allow_unsigned``).
    :param now: ``time.monotonic()`` when the policy started.
    :param max_bytes: the most bytes weights for this policy may take
        (:func:`encoded_size_bound`); None: only the wire's cap.
    :param allow_unsigned: without a key, load weights without checking a signature.
    """

    def __init__(self, key: VerifyKey | None, now: float, max_bytes: int | None = None,
                 allow_unsigned: bool = False) -> None:
        self.key = key
        self.allow_unsigned = allow_unsigned
        self.max_bytes = max_bytes
        self.epoch = 0  # run epoch of the trainer whose weights are loaded
        self.version = 0
        self.arrived_at = now  # when the current weights arrived (start: the initial actor)
        self.started_at = now

    def is_current(self, msg: Any) -> bool:
        """Whether ``msg`` is the latched copy of the current weights again."""
        return (msg.epoch, msg.version) == (self.epoch, self.version)

    def refusal(self, msg: Any, architecture: dict[str, Any]) -> str | None:
        """Why ``msg`` must not be loaded into an actor of ``architecture``; None to load it."""
        refusal = weights_refusal(msg, self.key, (self.epoch, self.version), self.max_bytes,
                                  self.allow_unsigned)
        if refusal is None and msg.architecture != architecture:
            refusal = (f"weights are for {msg.architecture}, this policy is {architecture}; use "
                       "the same env_id and hidden_sizes")
        return refusal

    def loaded(self, msg: Any, now: float) -> bool:
        """``msg`` was loaded into the actor at ``now``; whether they are the run's first."""
        first = self.version == 0
        self.epoch, self.version = msg.epoch, msg.version
        self.arrived_at = now
        return first

    def figures(self, now: float) -> dict[str, object]:
        """The diagnostics values of the weights: their version and age."""
        return {"weights version": self.version, "weights age s": f"{now - self.arrived_at:.1f}"}

    def warning(self, now: float) -> str | None:
        """What is wrong with the weights at ``now`` (none came, or they are stale), or None."""
        age = now - self.arrived_at
        if self.version == 0 and now - self.started_at > NO_WEIGHTS_WARNING_S:
            return "no weights received yet (is the trainer running?)"
        if self.version and age > STALE_WEIGHTS_S:
            return f"weights are {age:.0f} s old (trainer stalled or gone?)"
        return None


class PolicyModel:
    """Actions for a task's observations from an ONNX model or a torch actor; thread-safe.

    :param obs_shape: the task's observation shape.
    :param action_shape: the task's action shape.
    :param feature_dim: size of the encoder's features of an image task (a robot that runs the
        encoder, ``observation_codec`` latent, sends those instead of images).
    :param onnx: an exported model (fixed weights) ...
    :param actor: ... or the torch actor (follows weights) ...
    :param expert: ... or a scripted expert (no weights); exactly one of them.
    """

    def __init__(self, obs_shape: tuple[int, ...], action_shape: tuple[int, ...], feature_dim: int,
                 onnx: OnnxPolicy | None = None,
                 actor: Actor | None = None,
                 expert: Expert | None = None) -> None:
        given = sum(source is not None for source in (onnx, actor, expert))
        if given != 1:
            raise ValueError("a policy model acts with one of an ONNX model, a torch actor and a "
                             f"scripted expert, not {given}")
        self.obs_shape = obs_shape
        self.action_shape = action_shape
        self.feature_dim = feature_dim
        self.onnx = onnx
        self.actor = actor
        self.expert = expert
        self._lock = threading.Lock()  # acting and loading weights run on different threads

    @property
    def pixels(self) -> bool:
        """Whether the task observes images (the torch actor then has an encoder)."""
        return is_image_shape(self.obs_shape)

    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        """Actions for observations of :attr:`obs_shape`, or for an image task also for the
        encoder's features; ``(rows, *action_shape)``."""
        rows = obs.shape[0]
        if self.onnx is not None:
            return self.onnx.act(obs.reshape(rows, -1)).reshape((rows, *self.action_shape))
        if self.expert is not None:
            return self.expert.act(obs.reshape(rows, -1)).reshape((rows, *self.action_shape))
        assert self.actor is not None
        with self._lock:
            if not self.pixels:
                actions = self.actor.act(obs.reshape(rows, -1), deterministic=deterministic)
            elif obs.ndim == 2:  # features
                actions = cast("EncodedActor", self.actor).head.act(obs,
                                                                    deterministic=deterministic)
            else:
                actions = self.actor.act(obs, deterministic=deterministic)
        return actions.reshape((rows, *self.action_shape))

    def load(self, state: dict[str, Any]) -> None:
        """Load actor weights (between forward passes).

        :raises RuntimeError: when the tensors do not fit the actor.
        """
        assert self.actor is not None, "an ONNX policy or an expert has no weights to load"
        with self._lock:
            self.actor.load_state_dict(state)

    def observations_refusal(self, obs: np.ndarray) -> str | None:
        """Why a batch of observations ``obs`` cannot be acted on (its shape), or None."""
        shape = obs.shape[1:]
        if shape == self.obs_shape or self.pixels and shape == (self.feature_dim,):
            return None
        features = f" or encoder features (N, {self.feature_dim})" if self.pixels else ""
        return (f"expected observations of shape (N, {', '.join(map(str, self.obs_shape))})"
                f"{features}, got {obs.shape}")

    def request_observations(self, values: Any, shape: Any, max_rows: int) -> np.ndarray:
        """The observations of a request's flat ``values`` of observation ``shape``, as
        ``(rows, *obs_shape)``.

        :raises ValueError: for more than ``max_rows`` observations, another shape, no values,
            a count that is not a multiple of one observation's, or values that are not finite.
        """
        size = int(np.prod(self.obs_shape))
        if len(values) > max_rows * max(size, 1):
            raise ValueError(f"at most {max_rows} observations per request")
        obs = np.asarray(values, dtype=np.float32)
        shape = tuple(shape)
        if shape != self.obs_shape or obs.size == 0 or obs.size % size or not np.all(np.isfinite(obs)):
            raise ValueError(f"send finite observations with obs_shape {list(self.obs_shape)} and "
                             f"a multiple of {size} values; got obs_shape {list(shape)} and "
                             f"{obs.size} values")
        return obs.reshape((-1, *self.obs_shape))


def build_policy_model(config: PolicyConfig) -> tuple[PolicyModel, str | None]:
    """The model ``config`` asks for, and a line for the log about it (None: nothing to say).

    :raises ConfigError: when the ONNX model is missing or unreadable or was exported for
        another task than ``env_id``, when ``device:=cuda`` and torch has no CUDA, or when
        ``expert`` is asked for a task without one (or together with ``onnx_model``).
    """
    if config.expert:
        return _expert_model(config)
    if config.onnx_model:
        return _onnx_model(config)
    return _torch_model(config)


def _expert_model(config: PolicyConfig) -> tuple[PolicyModel, str]:
    from rl_core.acting.experts import make_expert
    from rl_core.robot.tasks import space_shapes

    if config.onnx_model:
        raise ConfigError("expert:=true acts with the scripted expert and onnx_model with an "
                          "exported model; set one of them")
    try:
        expert = make_expert(config.env_id, noise=config.expert_noise, seed=config.seed)
    except ValueError as error:
        raise ConfigError(f"expert: {error}") from error
    obs_shape, action_shape = space_shapes(config.env_id)
    note = (f"acting with the scripted expert of {config.env_id} ({type(expert).__name__}, "
            f"noise {config.expert_noise:g}); /policy_weights not followed")
    return PolicyModel(obs_shape, action_shape, config.feature_dim, expert=expert), note


def _onnx_model(config: PolicyConfig) -> tuple[PolicyModel, str]:
    path = config.onnx_model
    try:
        onnx = OnnxPolicy(path)
    except (OSError, ValueError) as error:
        raise ConfigError(f"onnx_model: {error}") from error
    if onnx.env_id is not None and onnx.env_id != config.env_id:
        raise ConfigError(f"ONNX model {path} was exported for {onnx.env_id}, this policy's "
                          f"env_id is {config.env_id}; set env_id:={onnx.env_id} or export a "
                          f"checkpoint of {config.env_id}")
    ignored = f"; device:={config.device} ignored" if config.device != "auto" else ""
    note = (f"acting with ONNX model {path} ({onnx.obs_dim} -> {onnx.action_dim}, task "
            f"{onnx.env_id or 'not recorded'}; onnxruntime on the CPU, deterministic; "
            f"/policy_weights not followed{ignored})")
    return PolicyModel((onnx.obs_dim,), (onnx.action_dim,), config.feature_dim, onnx=onnx), note


def _torch_model(config: PolicyConfig) -> tuple[PolicyModel, str | None]:
    import torch

    from rl_core.algorithms import new_actor
    from rl_core.algorithms.dqn import GreedyActor
    from rl_core.learning.device import describe, resolve_device
    from rl_core.robot.tasks import space_shapes, task_choices

    device = resolve_device(config.device)
    obs_shape, action_shape = space_shapes(config.env_id)
    torch.manual_seed(config.seed)
    actor = new_actor(obs_shape, action_shape, task_choices(config.env_id), config.hidden_sizes,
                      config.feature_dim, config.encoder_channels, config.algorithm)
    if isinstance(actor, GreedyActor):
        actor.epsilon = config.exploration_epsilon
    notes = [f"acting on {describe(device)}"] if device.type != "cpu" else []
    if config.checkpoint:
        notes.append(_load_checkpoint_actor(actor, config))
    actor = actor.to(device)
    note = "; ".join(notes) or None
    return PolicyModel(obs_shape, action_shape, config.feature_dim, actor=actor), note


def _load_checkpoint_actor(actor: Any, config: PolicyConfig) -> str:
    """Load the actor of the checkpoint ``config.checkpoint`` names into ``actor``; a line for
    the log. The checkpoint must be of this task and these sizes."""
    from rl_core.runs.checkpoint import load_actor
    from rl_core.runs.run_checkpoints import resolve_checkpoint

    try:
        directory = resolve_checkpoint(config.checkpoint, prefer="best")
        saved, meta = load_actor(directory)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"checkpoint: {error}") from error
    if meta.get("env_id") not in (None, config.env_id):
        raise ConfigError(f"checkpoint {directory} was trained on {meta['env_id']}, this "
                          f"policy's env_id is {config.env_id}; set env_id:={meta['env_id']}")
    if saved.architecture() != actor.architecture():
        raise ConfigError(f"checkpoint {directory} holds a {saved.architecture()}, this policy "
                          f"builds a {actor.architecture()}; set hidden_sizes (and the encoder "
                          "sizes) to the trained ones")
    actor.load_state_dict(saved.state_dict())
    return (f"acting with the actor of checkpoint {directory} "
            f"({meta.get('update_step', '?')} updates) until newer /policy_weights come")
