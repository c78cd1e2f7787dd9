"""Checkpoints and weight transport as safetensors (never pickle), each with a SHA-256 checksum.

A checkpoint is a directory with ``model.safetensors`` (networks, temperature and optimizer
moments) and ``checkpoint.json`` (format version, SAC config, sizes, counters, random-number
generator states, the optimizers' hyperparameters and the checksum of the tensor file).

Crash safety: a checkpoint is written completely into a temporary directory beside its target
(files fsynced), then renamed into place and the parent directory fsynced, so a crash at any
moment leaves either the previous or the new checkpoint, never a mix. :class:`CheckpointStore`
keeps the last K checkpoints of a run and finds the newest valid one to resume from.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rl_core.algorithms import WITH_CHOICES, Actor, Algorithm, new_actor, new_algorithm
from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.config import SACConfig, action_words
from rl_core.runs.atomic_files import fsync_directory
from rl_core.runs.checkpoint_upgrade import upgrade
from rl_core.wire.messages import tensors_from_bytes, tensors_to_bytes

#: Format written; earlier ones are read through :mod:`rl_core.runs.checkpoint_upgrade`.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: Optimizer settings that choose how a step runs, not what it computes.
IMPLEMENTATION_FLAGS = ("foreach", "fused", "capturable", "differentiable")
TENSORS_FILE = "model.safetensors"
META_FILE = "checkpoint.json"


def actor_to_bytes(actor: SquashedGaussianActor) -> tuple[bytes, str, str]:
    """The actor's weights for ``/policy_weights``: ``(data, checksum, architecture json)``."""
    data, digest = tensors_to_bytes(actor.state_dict())
    return data, digest, json.dumps(actor.architecture(), sort_keys=True)


def load_actor_bytes(actor: SquashedGaussianActor, data: bytes, expected_checksum: str,
                     architecture: str) -> None:
    """Load weights received as bytes into ``actor`` after checking checksum and architecture.

    :raises ValueError: when the checksum, the architecture or the tensor names/shapes differ;
        ``actor`` is unchanged then.
    """
    try:
        received = json.loads(architecture) if architecture else None
    except json.JSONDecodeError as error:
        raise ValueError(f"architecture field is not JSON: {error}") from error
    if received is not None and received != actor.architecture():
        raise ValueError(f"weights are for {received}, this policy is {actor.architecture()}; "
                         "use the same env_id and hidden_sizes on trainer and policy")
    state = tensors_from_bytes(data, expected_checksum)
    _load_module_state(actor, state, "actor")


def _load_module_state(module: torch.nn.Module, state: dict[str, torch.Tensor], name: str) -> None:
    expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if expected != got:
        raise ValueError(f"{name} tensors do not match the network: expected {expected}, got {got}")
    module.load_state_dict(state)


def _flatten_optimizer(prefix: str, optimizer: torch.optim.Optimizer
                       ) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    state = optimizer.state_dict()
    tensors = {f"{prefix}.state.{index}.{key}": value
               for index, slots in state["state"].items() for key, value in slots.items()
               if isinstance(value, torch.Tensor)}
    return tensors, state["param_groups"]


def _unflatten_optimizer(prefix: str, tensors: dict[str, torch.Tensor],
                         param_groups: list[dict[str, Any]]) -> dict[str, Any]:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith(prefix + ".state."):
            index, slot = key[len(prefix) + 7:].split(".", 1)
            state.setdefault(int(index), {})[slot] = value
    return {"state": state, "param_groups": param_groups}


def save_checkpoint(directory: str | Path, sac: Algorithm,
                    counters: dict[str, Any] | None = None,
                    env_id: str | None = None) -> Path:
    """Write a checkpoint of ``sac`` into ``directory``, replacing it atomically.

    :param counters: extra values to keep (env steps, weight version, episodes, ...; JSON).
    :param env_id: the task the learner was trained on (for evaluation and export tools).
    :returns: the checkpoint directory.
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for name, module in sac.modules().items():
        # Cloned: with image observations actor and critic hold the same encoder, and
        # safetensors refuses tensors that share memory.
        tensors.update({f"{name}.{k}": v.clone() for k, v in module.state_dict().items()})
    if hasattr(sac, "log_alpha"):  # SAC's temperature (DQN has none)
        tensors["log_alpha"] = sac.log_alpha.detach().reshape(1)
    tensors["rng.torch"] = torch.get_rng_state()
    groups = {}
    for name, optimizer in sac.optimizers().items():
        flat, groups[name] = _flatten_optimizer(name, optimizer)
        tensors.update(flat)
    data, digest = tensors_to_bytes(tensors)
    meta = {
        "format_version": FORMAT_VERSION,
        "algorithm": getattr(sac, "ALGORITHM", "sac"),
        "env_id": env_id,
        "obs_dim": sac.obs_dim,
        "obs_shape": list(sac.obs_shape),
        "action_dim": sac.action_dim,
        **({"choices": sac.choices} if isinstance(sac, WITH_CHOICES) else {}),
        "seed": sac.seed,
        "update_step": sac.update_step,
        "sac_config": dataclasses.asdict(sac.config),
        "optimizer_param_groups": groups,
        "counters": dict(counters or {}),
        "rng": {"python": _jsonable(random.getstate()), "numpy": _numpy_rng_state()},
        "tensors_sha256": digest,
    }
    staging = directory.with_name(f".{directory.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    _durable_write(staging / TENSORS_FILE, data)
    _durable_write(staging / META_FILE, json.dumps(meta, indent=2, sort_keys=True).encode())
    fsync_directory(staging)
    if directory.exists():  # swap: the old one stays complete until the new one is in place
        retired = directory.with_name(f".{directory.name}.old-{os.getpid()}")
        shutil.rmtree(retired, ignore_errors=True)
        os.replace(directory, retired)
        os.replace(staging, directory)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, directory)
    fsync_directory(directory.parent)
    return directory


def restore_rng(meta: dict[str, Any], tensors_directory: str | Path) -> None:
    """Restore Python's, numpy's and torch's global generators from a checkpoint."""
    rng = meta.get("rng")
    if not rng:
        return
    random.setstate(_tupled(rng["python"]))
    numpy_state = dict(rng["numpy"])
    numpy_state["state"] = {**numpy_state["state"],
                            "key": np.asarray(numpy_state["state"]["key"], dtype=np.uint32)}
    np.random.set_state(numpy_state)
    state = _read_tensors(Path(tensors_directory), meta).get("rng.torch")
    if state is not None:
        torch.set_rng_state(state)


def _numpy_rng_state() -> dict[str, Any]:
    state = np.random.get_state(legacy=False)
    return {**state, "state": {**state["state"], "key": state["state"]["key"].tolist()}}


def _jsonable(value: Any) -> Any:
    return [_jsonable(item) for item in value] if isinstance(value, (tuple, list)) else value


def _tupled(value: Any) -> Any:
    return tuple(_tupled(item) for item in value) if isinstance(value, list) else value


class CheckpointStore:
    """The last ``keep`` checkpoints of a run in ``root`` (``step-<update>-<n>`` folders).

    :param root: folder of the run's checkpoints (created on the first save).
    :param keep: how many to keep; older ones are removed after each save.
    """

    PREFIX = "step-"

    def __init__(self, root: str | Path, keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.root = Path(root)
        self.keep = keep

    def checkpoints(self) -> list[Path]:
        """The stored checkpoints, oldest first."""
        if not self.root.is_dir():
            return []
        found = [path for path in self.root.iterdir()
                 if path.is_dir() and path.name.startswith(self.PREFIX)]
        return sorted(found, key=lambda path: path.name)

    def save(self, sac: Algorithm, counters: dict[str, Any] | None = None,
             env_id: str | None = None) -> Path:
        """Write a new checkpoint (atomically) and drop all but the newest ``keep``."""
        existing = self.checkpoints()
        serial = int(existing[-1].name.rsplit("-", 1)[1]) + 1 if existing else 0
        path = save_checkpoint(self.root / f"{self.PREFIX}{sac.update_step:010d}-{serial:06d}",
                               sac, counters, env_id)
        for old in self.checkpoints()[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return path

    def newest_valid(self) -> Path | None:
        """The newest checkpoint whose files read back and match their checksum, if any."""
        for path in reversed(self.checkpoints()):
            try:
                _read_tensors(path, read_checkpoint_meta(path))
            except (OSError, ValueError):
                continue
            return path
        return None


def read_checkpoint_meta(directory: str | Path) -> dict[str, Any]:
    """Read and check ``checkpoint.json`` of a checkpoint directory."""
    directory = Path(directory)
    meta_path = directory / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"no checkpoint at {str(directory)!r} ({META_FILE} missing); "
                                "pass a directory written by save_checkpoint / the trainer")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{meta_path} is not valid JSON: {error}") from error
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(f"{meta_path} has format version {meta.get('format_version')!r}; this "
                         f"rl_core reads versions {', '.join(map(str, READABLE_VERSIONS))}: use "
                         "the rl_ros2 that wrote it")
    return meta


def _read_tensors(directory: Path, meta: dict[str, Any]) -> dict[str, torch.Tensor]:
    path = directory / TENSORS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(directory)!r} lacks {TENSORS_FILE}")
    return upgrade(meta, tensors_from_bytes(path.read_bytes(), meta["tensors_sha256"]))


def load_checkpoint(directory: str | Path, device: torch.device | str = "cpu"
                    ) -> tuple[Algorithm, dict[str, Any]]:
    """Rebuild the learner saved in ``directory`` on ``device``; returns ``(sac, meta)``.

    The file holds CPU tensors whatever device wrote it; loading copies them to ``device`` (the
    optimizers' moments follow their parameters).

    :raises FileNotFoundError: when the directory holds no checkpoint.
    :raises ValueError: when the files are corrupt or do not match each other.
    """
    directory = Path(directory)
    meta = read_checkpoint_meta(directory)
    tensors = _read_tensors(directory, meta)
    config = SACConfig(**meta["sac_config"])
    # Checkpoints from before image observations hold flat vectors and no obs_shape.
    obs = meta.get("obs_shape", meta["obs_dim"])
    sac = new_algorithm(obs, (meta["action_dim"],), _choices(meta), config, meta["seed"], device)
    for name, module in sac.modules().items():
        prefix = name + "."
        _load_module_state(module, {k[len(prefix):]: v for k, v in tensors.items()
                                    if k.startswith(prefix)}, name)
    if hasattr(sac, "log_alpha"):
        with torch.no_grad():
            sac.log_alpha.copy_(tensors["log_alpha"].reshape(()))
    for name, optimizer in sac.optimizers().items():
        # The saved groups carry the implementation flags of the optimizer that wrote them
        # (an older one stepped tensor by tensor): this learner keeps its own.
        flags = [{key: group[key] for key in IMPLEMENTATION_FLAGS if key in group}
                 for group in optimizer.param_groups]
        optimizer.load_state_dict(
            _unflatten_optimizer(name, tensors, meta["optimizer_param_groups"][name]))
        for group, own in zip(optimizer.param_groups, flags):
            group.update(own)
    sac.update_step = int(meta["update_step"])
    return sac, meta


def _choices(meta: dict[str, Any]) -> int:
    """The number of choices of a checkpoint's action (a ``Discrete`` one, or an arm and a
    choice); 0 for SAC's."""
    return int(meta.get("choices", 0))


def resume_or_new(resume: str | Path | None, obs_shape: tuple[int, ...],
                  action_shape: tuple[int, ...], choices: int, config: SACConfig, seed: int,
                  device: torch.device | str = "cpu") -> tuple[Algorithm, dict[str, Any]]:
    """The learner of checkpoint ``resume``, with the random-number generators it saved, and
    its counters; a fresh learner of the task (``choices``: of its ``Discrete`` action, 0 for a
    ``Box``) and no counters when ``resume`` is empty.

    :raises FileNotFoundError, ValueError: as :func:`load_checkpoint`, and when the checkpoint
        holds the other kind of action.
    """
    if not resume:
        return new_algorithm(obs_shape, action_shape, choices, config, seed, device), {}
    sac, meta = load_checkpoint(resume, device)
    saved = (sac.choices if isinstance(sac, WITH_CHOICES) else 0, sac.action_dim)
    wanted = (choices, int(np.prod(action_shape)))
    if saved != wanted:
        raise ValueError(f"{resume} holds a learner of {action_words(*saved)}, this task has "
                         f"{action_words(*wanted)}; resume a checkpoint of this task")
    if sac.config.algorithm != config.algorithm:
        raise ValueError(f"{resume} holds a learner of algorithm {sac.config.algorithm}, this "
                         f"run's is {config.algorithm}; resume a checkpoint of the same "
                         f"algorithm, or set algorithm: {sac.config.algorithm}")
    restore_rng(meta, resume)
    return sac, dict(meta["counters"])


def load_actor(directory: str | Path) -> tuple[Actor, dict[str, Any]]:
    """Load only the actor of a checkpoint (evaluation, export, robot-side policies)."""
    directory = Path(directory)
    meta = read_checkpoint_meta(directory)
    tensors = _read_tensors(directory, meta)
    config = SACConfig(**meta["sac_config"])
    actor = new_actor(meta.get("obs_shape", meta["obs_dim"]), (meta["action_dim"],),
                      _choices(meta), config.hidden_sizes, config.feature_dim,
                      config.encoder_channels, config.algorithm)
    _load_module_state(actor, {k[6:]: v for k, v in tensors.items() if k.startswith("actor.")},
                       "actor")
    return actor, meta


def _durable_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


