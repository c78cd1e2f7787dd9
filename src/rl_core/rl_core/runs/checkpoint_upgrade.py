"""Reading checkpoints of earlier formats: each is upgraded in memory to the current one.

* Format 1 held the twin critics as two networks (``q1.<i>.weight`` ``(out, in)``, ``q2...``);
  format 2 holds them as one ensemble (:class:`rl_core.algorithms.networks.EnsembleQ`:
  ``layers.<k>.weight`` ``(2, in, out)``, ``layers.<k>.bias`` ``(2, 1, out)``). The critic
  optimizer's moments are moved the same way, so a resumed run continues with the Adam state it
  had. Nothing on disk is rewritten; the next checkpoint the run saves is in the new format.
"""

from __future__ import annotations

import re
from typing import Any

import torch

#: A format-1 twin-critic tensor: module, optional encoder-head prefix, member, layer, kind.
_TWIN_KEY = re.compile(r"^(critic|critic_target)\.((?:heads\.)?)q([12])\.(\d+)\.(weight|bias)$")


def _member_to_ensemble(first: torch.Tensor, second: torch.Tensor, kind: str) -> torch.Tensor:
    """Two ``nn.Linear`` tensors (weight ``(out, in)`` or bias ``(out,)``) as one ensemble's."""
    if kind == "weight":
        return torch.stack([first.t(), second.t()]).contiguous()
    return torch.stack([first, second]).unsqueeze(1)


def _upgrade_twin_modules(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    upgraded = {key: value for key, value in tensors.items() if not _TWIN_KEY.match(key)}
    for key, value in tensors.items():
        match = _TWIN_KEY.match(key)
        if match is None or match.group(3) != "1":
            continue
        module, heads, _, index, kind = match.groups()
        second = tensors[f"{module}.{heads}q2.{index}.{kind}"]
        # nn.Sequential numbered Linear, ReLU, Linear, ...: Linear k sat at index 2k.
        upgraded[f"{module}.{heads}layers.{int(index) // 2}.{kind}"] = _member_to_ensemble(
            value, second, kind)
    return upgraded


def _upgrade_critic_optimizer(tensors: dict[str, torch.Tensor], meta: dict[str, Any],
                              encoder_parameters: int) -> dict[str, torch.Tensor]:
    """Adam's per-parameter slots follow their parameters into the ensemble's order: the
    encoder's first (unchanged), then each layer's weight and bias for both members at once."""
    prefix = "critic_optimizer.state."
    groups = meta["optimizer_param_groups"]["critic_optimizer"]
    old_count = sum(len(group["params"]) for group in groups)
    twin_parameters = old_count - encoder_parameters  # 2 members x (weight, bias) per layer
    per_member = twin_parameters // 2
    slots: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith(prefix):
            number, slot = key[len(prefix):].split(".", 1)
            slots.setdefault(int(number), {})[slot] = value
    upgraded = {key: value for key, value in tensors.items() if not key.startswith(prefix)}
    for index in range(encoder_parameters + per_member):
        if index not in slots:
            continue
        state = slots[index]
        if index >= encoder_parameters:
            second = slots[index + per_member]
            kind = "weight" if (index - encoder_parameters) % 2 == 0 else "bias"
            state = {slot: value if slot == "step" else
                     _member_to_ensemble(value, second[slot], kind)
                     for slot, value in state.items()}
        for slot, value in state.items():
            upgraded[f"{prefix}{index}.{slot}"] = value
    groups[0]["params"] = list(range(encoder_parameters + per_member))
    return upgraded


def upgrade(meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` of a checkpoint with ``meta`` in the current format (``meta`` is updated).

    :raises ValueError: when the format is unknown or the tensors do not fit it.
    """
    version = meta.get("format_version")
    if version == 2:
        return tensors
    if version != 1:
        raise ValueError(f"checkpoint format version {version!r} is not known to this rl_core "
                         "(it reads versions 1 and 2); use the rl_ros2 that wrote it")
    try:
        # The pixel encoder holds parameters only (convolutions, a linear layer, layer norm).
        encoder_parameters = sum(1 for key in tensors if key.startswith("critic.encoder."))
        tensors = _upgrade_critic_optimizer(_upgrade_twin_modules(tensors), meta,
                                            encoder_parameters)
    except (KeyError, IndexError, RuntimeError) as error:
        raise ValueError(f"format-1 checkpoint does not hold the twin critics it should "
                         f"({type(error).__name__}: {error})") from error
    meta["format_version"] = 2
    return tensors
