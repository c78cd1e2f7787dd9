"""Tensors as safetensors bytes (never pickle) with a SHA-256 checksum: how actor weights travel
(:class:`rl_core.wire.transport.Weights`) and how checkpoints store their tensors
(:mod:`rl_core.runs.checkpoint`).
"""

from __future__ import annotations

import hashlib

import torch
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes


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
