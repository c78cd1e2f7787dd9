"""Checkpoints and weight transport as safetensors (never pickle), each with a SHA-256 checksum.

A checkpoint is a directory with ``model.safetensors`` (networks, temperature and optimizer
moments) and ``checkpoint.json`` (format version, SAC config, sizes, counters, the optimizers'
hyperparameters and the checksum of the tensor file). The JSON is written last, so a checkpoint
interrupted half-way fails its checksum instead of loading garbage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

from rl_core.algorithms.sac import SAC
from rl_core.config import SACConfig
from rl_core.networks import SquashedGaussianActor

FORMAT_VERSION = 1
TENSORS_FILE = "model.safetensors"
META_FILE = "checkpoint.json"


def checksum(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def tensors_to_bytes(tensors: dict[str, torch.Tensor]) -> tuple[bytes, str]:
    """Serialise tensors to safetensors bytes; returns ``(data, sha256 hex)``."""
    data = save_safetensors_bytes({k: v.detach().contiguous().cpu() for k, v in tensors.items()})
    return data, checksum(data)


def tensors_from_bytes(data: bytes, expected_checksum: str) -> dict[str, torch.Tensor]:
    """Parse safetensors bytes after verifying their checksum.

    :raises ValueError: when the checksum does not match or the bytes are not safetensors.
    """
    actual = checksum(bytes(data))
    if actual != expected_checksum:
        raise ValueError(f"weights checksum mismatch (expected {expected_checksum[:12]}..., got "
                         f"{actual[:12]}...): the data was corrupted or truncated in transit")
    try:
        return load_safetensors_bytes(bytes(data))
    except Exception as error:  # safetensors raises its own SafetensorError type
        raise ValueError(f"weights are not a valid safetensors blob: {error}") from error


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


def save_checkpoint(directory: str | Path, sac: SAC, counters: dict[str, int] | None = None,
                    env_id: str | None = None) -> Path:
    """Write a checkpoint of ``sac`` into ``directory`` (created if needed).

    :param counters: extra integers to keep (env steps, weight version, episodes, ...).
    :param env_id: the task the learner was trained on (for evaluation and export tools).
    :returns: the checkpoint directory.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for name, module in sac.modules().items():
        tensors.update({f"{name}.{k}": v for k, v in module.state_dict().items()})
    tensors["log_alpha"] = sac.log_alpha.detach().reshape(1)
    groups = {}
    for name, optimizer in sac.optimizers().items():
        flat, groups[name] = _flatten_optimizer(name, optimizer)
        tensors.update(flat)
    data, digest = tensors_to_bytes(tensors)
    meta = {
        "format_version": FORMAT_VERSION,
        "algorithm": "sac",
        "env_id": env_id,
        "obs_dim": sac.obs_dim,
        "action_dim": sac.action_dim,
        "seed": sac.seed,
        "update_step": sac.update_step,
        "sac_config": dataclasses.asdict(sac.config),
        "optimizer_param_groups": groups,
        "counters": dict(counters or {}),
        "tensors_sha256": digest,
    }
    _atomic_write(directory / TENSORS_FILE, data)
    _atomic_write(directory / META_FILE, json.dumps(meta, indent=2, sort_keys=True).encode())
    return directory


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
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{meta_path} has format version {meta.get('format_version')!r}; this "
                         f"rl_core reads version {FORMAT_VERSION}")
    return meta


def _read_tensors(directory: Path, meta: dict[str, Any]) -> dict[str, torch.Tensor]:
    path = directory / TENSORS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(directory)!r} lacks {TENSORS_FILE}")
    return tensors_from_bytes(path.read_bytes(), meta["tensors_sha256"])


def load_checkpoint(directory: str | Path) -> tuple[SAC, dict[str, Any]]:
    """Rebuild the learner saved in ``directory``; returns ``(sac, meta)``.

    :raises FileNotFoundError: when the directory holds no checkpoint.
    :raises ValueError: when the files are corrupt or do not match each other.
    """
    directory = Path(directory)
    meta = read_checkpoint_meta(directory)
    tensors = _read_tensors(directory, meta)
    config = SACConfig(**meta["sac_config"])
    sac = SAC(meta["obs_dim"], meta["action_dim"], config, seed=meta["seed"])
    for name, module in sac.modules().items():
        prefix = name + "."
        _load_module_state(module, {k[len(prefix):]: v for k, v in tensors.items()
                                    if k.startswith(prefix)}, name)
    with torch.no_grad():
        sac.log_alpha.copy_(tensors["log_alpha"].reshape(()))
    for name, optimizer in sac.optimizers().items():
        optimizer.load_state_dict(
            _unflatten_optimizer(name, tensors, meta["optimizer_param_groups"][name]))
    sac.update_step = int(meta["update_step"])
    return sac, meta


def load_actor(directory: str | Path) -> tuple[SquashedGaussianActor, dict[str, Any]]:
    """Load only the actor of a checkpoint (evaluation, export, robot-side policies)."""
    directory = Path(directory)
    meta = read_checkpoint_meta(directory)
    tensors = _read_tensors(directory, meta)
    actor = SquashedGaussianActor(meta["obs_dim"], meta["action_dim"],
                                  meta["sac_config"]["hidden_sizes"])
    _load_module_state(actor, {k[6:]: v for k, v in tensors.items() if k.startswith("actor.")},
                       "actor")
    return actor, meta


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
