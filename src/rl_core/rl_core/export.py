"""Export a trained actor to ONNX and run it with onnxruntime (robot-side, no torch needed).

The exported graph is the *deterministic* policy ``obs -> tanh(mean(obs))``, the action a trained
SAC agent takes when exploration is off; the log-std head and the sampling are left out. The batch
dimension is dynamic, so one model serves ``(N, obs_dim)`` batches of any ``N``. The actor's
:meth:`~rl_core.networks.SquashedGaussianActor.architecture` is stored as JSON in the model's
``metadata_props`` (key :data:`ARCHITECTURE_KEY`), together with the task's ``env_id`` when known,
so a receiver can check what it loads before acting.

The export uses torch's ``torch.export``-based exporter (``dynamo=True``, needs onnxscript): the
TorchScript exporter (``dynamo=False``) still works in torch 2.13 but warns that it is deprecated
and will be removed. The dynamo exporter logs harmless notes (torchvision operators it skips) and
a FutureWarning from torch's own pytree code; both are silenced for the duration of the export.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
import json
import logging
import os
from pathlib import Path
from typing import Any
import warnings

import numpy as np
import torch
from torch import nn

from rl_core.networks import SquashedGaussianActor

ARCHITECTURE_KEY = "rl_ros2.architecture"
ENV_ID_KEY = "rl_ros2.env_id"
POLICY_KEY = "rl_ros2.policy"
POLICY_KIND = "deterministic tanh(mean)"
INPUT_NAME = "obs"
OUTPUT_NAME = "action"
#: Batch size of the example input; 2 rather than 1 so torch.export does not specialise the
#: batch dimension to a constant (it treats sizes 0 and 1 specially).
_EXAMPLE_BATCH = 2


class _DeterministicPolicy(nn.Module):
    """The actor's mean action, squashed: the part of the forward pass an exported policy needs."""

    def __init__(self, actor: SquashedGaussianActor) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # Mirrors SquashedGaussianActor.forward(deterministic=True); the parity test in
        # tests/unit/test_export.py fails if the two drift apart.
        features = torch.relu(self.actor.body(obs))
        return torch.tanh(self.actor.mean(features))


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's informational logging and torch-internal FutureWarnings."""
    logger = logging.getLogger("torch.onnx")
    previous_level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        logger.setLevel(previous_level)


def export_onnx(actor: SquashedGaussianActor, path: str | os.PathLike[str],
                env_id: str | None = None) -> Path:
    """Write the deterministic policy of ``actor`` as an ONNX model.

    The file is written atomically (a temporary file in the same folder, then a rename), so a
    reader never sees a half-written model.

    :param actor: the actor to export; it is not modified (its training flag is restored).
    :param path: the ``.onnx`` file to write; missing parent folders are created.
    :param env_id: the task the actor was trained on, stored in the metadata when given.
    :return: the path written.
    :raises ValueError: when ``actor`` is not a :class:`SquashedGaussianActor`.
    """
    if not isinstance(actor, SquashedGaussianActor):
        raise ValueError(f"export_onnx needs a SquashedGaussianActor, got {type(actor).__name__}")
    import onnx  # deferred: only exporting needs onnx/onnxscript, acting needs onnxruntime only

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    example = torch.zeros(_EXAMPLE_BATCH, actor.obs_dim, dtype=torch.float32)
    was_training = actor.training
    policy = _DeterministicPolicy(actor).eval()  # also puts the actor in eval mode
    try:
        with _quiet_exporter(), torch.no_grad():
            program = torch.onnx.export(
                policy, (example,), dynamo=True, verbose=False,
                input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
            )
    finally:
        actor.train(was_training)
    model = program.model_proto
    metadata = {ARCHITECTURE_KEY: json.dumps(actor.architecture(), sort_keys=True),
                POLICY_KEY: POLICY_KIND}
    if env_id:
        metadata[ENV_ID_KEY] = env_id
    onnx.helper.set_model_props(model, metadata)
    model.doc_string = (f"rl_ros2 SAC actor, {POLICY_KIND}: obs (N, {actor.obs_dim}) -> "
                        f"action (N, {actor.action_dim}) in [-1, 1]")
    onnx.checker.check_model(model)
    _atomic_write(path, model.SerializeToString())
    return path


class OnnxPolicy:
    """A policy exported by :func:`export_onnx`, run with onnxruntime on the CPU.

    It acts like :meth:`SquashedGaussianActor.act` with ``deterministic=True``, so it can stand in
    for the actor wherever only acting is needed (e.g. :func:`rl_core.evaluation.evaluate`).

    :param path: the ``.onnx`` file.
    :param intra_op_threads: onnxruntime intra-op threads; 1 by default, which is the fastest
        choice for these small networks and leaves the robot's other cores alone.
    :raises FileNotFoundError: when ``path`` does not exist.
    :raises ValueError: when the file is not an ONNX model or not one written by
        :func:`export_onnx` (no architecture metadata).
    """

    def __init__(self, path: str | os.PathLike[str], intra_op_threads: int = 1) -> None:
        import onnxruntime  # deferred so that importing rl_core never needs onnxruntime

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no ONNX model at {str(self.path)!r}; write one with "
                                    "rl_core.export.export_onnx or `rl-bringup export`")
        if intra_op_threads < 1:
            raise ValueError(f"intra_op_threads must be >= 1, got {intra_op_threads}")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only; warnings about unused initialisers are noise
        try:
            self._session = onnxruntime.InferenceSession(
                str(self.path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime raises its own Fail/InvalidProtobuf types
            raise ValueError(f"{str(self.path)!r} is not a loadable ONNX model: {error}") from error
        metadata = self._session.get_modelmeta().custom_metadata_map
        if ARCHITECTURE_KEY not in metadata:
            raise ValueError(f"{str(self.path)!r} has no {ARCHITECTURE_KEY!r} metadata; it was not "
                             "written by rl_core.export.export_onnx")
        try:
            self.architecture: dict[str, Any] = json.loads(metadata[ARCHITECTURE_KEY])
        except json.JSONDecodeError as error:
            raise ValueError(f"{str(self.path)!r}: {ARCHITECTURE_KEY} metadata is not JSON: "
                             f"{error}") from error
        #: The task the policy was trained on, or ``None`` when the exporter did not know it.
        self.env_id: str | None = metadata.get(ENV_ID_KEY) or None
        self.obs_dim = int(self.architecture["obs_dim"])
        self.action_dim = int(self.architecture["action_dim"])
        self._input_name = self._session.get_inputs()[0].name

    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of observations.

        :param obs: ``(N, obs_dim)`` observations (any real dtype; cast to float32).
        :param deterministic: must be true: the exported graph holds the mean action only.
        :return: ``(N, action_dim)`` float32 actions in [-1, 1].
        :raises ValueError: on a wrong shape, or when a stochastic action is asked for.
        """
        if not deterministic:
            raise ValueError("an exported policy is deterministic (mean action only); sample "
                             "exploration actions with the torch actor instead")
        obs = np.asarray(obs)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            hint = " (add a batch axis: obs[None, :])" if obs.shape == (self.obs_dim,) else ""
            raise ValueError(f"obs must have shape (N, {self.obs_dim}), got {obs.shape}{hint}")
        feed = {self._input_name: np.ascontiguousarray(obs, dtype=np.float32)}
        (actions,) = self._session.run(None, feed)
        return actions

    def __repr__(self) -> str:
        return f"OnnxPolicy({str(self.path)!r}, architecture={self.architecture})"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
