"""The torch device a learner or a torch policy runs on: the ``device`` parameter resolved.

``auto`` picks CUDA when torch sees a GPU and the CPU otherwise; ``cuda`` insists on a GPU and
fails with a :class:`~rl_core.config.ConfigError` that says why there is none and how to get one
(nodes and ``rl-train-bare`` exit with code 2 on it, like on any other configuration error).
Whatever the device, what leaves the learner (published weights, checkpoints, ONNX exports) is
made of CPU tensors, so the wire and file formats do not depend on where training ran.
"""

from __future__ import annotations

import torch

from rl_core.config import DEVICES, ConfigError

#: The image build that brings a CUDA torch (docker/Dockerfile); named in the error below.
CUDA_IMAGE_HINT = "docker build --build-arg TORCH_VARIANT=cu126 -f docker/Dockerfile ."


def cuda_unavailable_reason() -> str:
    """Why torch cannot use CUDA here (for messages), or ``""`` when it can."""
    if torch.cuda.is_available():
        return ""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no GPU: no NVIDIA "
            "driver, no device visible to this process (CUDA_VISIBLE_DEVICES, a container "
            "started without --gpus), or a driver older than this CUDA")


def resolve_device(name: str) -> torch.device:
    """The torch device for a ``device`` parameter value.

    :param name: ``auto``, ``cpu`` or ``cuda``.
    :raises ConfigError: for another value, or ``cuda`` where torch cannot use CUDA; the message
        names the reason and the fix.
    """
    if name not in DEVICES:
        raise ConfigError(f"device must be one of {', '.join(DEVICES)}, got {name!r}")
    if name == "cpu":
        return torch.device("cpu")
    reason = cuda_unavailable_reason()
    if name == "auto":
        return torch.device("cpu" if reason else "cuda")
    if reason:
        raise ConfigError(f"device:=cuda, but {reason}. Set device:=auto (CUDA when present, "
                          f"else CPU) or device:=cpu, or run with a CUDA build of torch on a "
                          f"machine with a GPU (the image: {CUDA_IMAGE_HINT}; docker run --gpus "
                          f"all)")
    return torch.device("cuda")


def describe(device: torch.device) -> str:
    """``cpu`` or ``cuda (NVIDIA H200)``, for logs."""
    if device.type != "cuda":
        return device.type
    return f"cuda ({torch.cuda.get_device_name(device)})"
