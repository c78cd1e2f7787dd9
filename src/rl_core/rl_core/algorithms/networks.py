"""Policy and value networks shared by the trainer and the policy (inference) node."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0


def mlp(in_size: int, hidden_sizes: Sequence[int], out_size: int) -> nn.Sequential:
    """Build a ReLU multilayer perceptron ``in -> hidden... -> out`` with a linear output."""
    layers: list[nn.Module] = []
    size = in_size
    for hidden in hidden_sizes:
        layers += [nn.Linear(size, hidden), nn.ReLU()]
        size = hidden
    layers.append(nn.Linear(size, out_size))
    return nn.Sequential(*layers)


class SquashedGaussianActor(nn.Module):
    """Tanh-squashed diagonal Gaussian policy; actions lie in [-1, 1].

    :param obs_dim: size of a flat observation.
    :param action_dim: size of a flat action.
    :param hidden_sizes: widths of the hidden layers.
    """

    def __init__(self, obs_dim: int, action_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.body = mlp(obs_dim, self.hidden_sizes[:-1], self.hidden_sizes[-1])
        self.mean = nn.Linear(self.hidden_sizes[-1], action_dim)
        self.log_std = nn.Linear(self.hidden_sizes[-1], action_dim)

    def forward(
        self, obs: torch.Tensor, deterministic: bool = False, with_log_prob: bool = True,
        noise: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Return ``(action, log_prob)``; ``log_prob`` is None when not requested.

        :param noise: the standard normal draw of the sampled action, ``(N, action_dim)``;
            drawn here when None (the learner draws it before its step: ``sac.Draws``).
        """
        features = torch.relu(self.body(obs))
        mean = float32_head(self.mean, features)
        if deterministic:
            return torch.tanh(mean), None
        log_std = float32_head(self.log_std, features).clamp(LOG_STD_MIN, LOG_STD_MAX)
        std = log_std.exp()
        pre_tanh = mean + std * (torch.randn_like(mean) if noise is None else noise)
        action = torch.tanh(pre_tanh)
        if not with_log_prob:
            return action, None
        # Gaussian log-density minus the log-determinant of the tanh squashing, written in the
        # numerically stable form log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)).
        gaussian = -0.5 * (((pre_tanh - mean) / std) ** 2 + 2 * log_std + math.log(2 * math.pi))
        correction = 2 * (math.log(2) - pre_tanh - nn.functional.softplus(-2 * pre_tanh))
        return action, (gaussian - correction).sum(dim=-1)

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Actions for observations ``(N, obs_dim)`` as a float32 numpy ``(N, action_dim)``.

        The observations go to the actor's device and the actions come back to the host, one
        transfer each way (none on the CPU).
        """
        obs_tensor = torch.as_tensor(obs, dtype=torch.float32, device=self.mean.weight.device)
        action, _ = self.forward(obs_tensor, deterministic=deterministic, with_log_prob=False)
        return action.cpu().numpy()

    def architecture(self) -> dict[str, object]:
        """Description of the network that receivers check before loading weights."""
        return {
            "kind": "squashed_gaussian_actor",
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "hidden_sizes": list(self.hidden_sizes),
        }


def float32_head(layer: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """``layer(inputs)`` in float32 also under mixed precision (``update_precision``): the
    networks' outputs (Q values, the policy's mean and log std) keep float32's resolution,
    which bfloat16's 8 bits would round to about 0.4 % (a Q value of 100 to steps of 0.5)."""
    if not torch.is_autocast_enabled(inputs.device.type):
        return layer(inputs)
    with torch.autocast(inputs.device.type, enabled=False):
        return layer(inputs.float())


class EnsembleLinear(nn.Module):
    """``members`` independent linear layers applied as one batched matrix product.

    Weights are ``(members, in, out)`` and biases ``(members, 1, out)``, each member initialised
    like :class:`torch.nn.Linear` (uniform in +-1/sqrt(in)). Input ``(N, in)`` (the same for every
    member) or ``(members, N, in)``; output ``(members, N, out)``.
    """

    def __init__(self, members: int, in_size: int, out_size: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_size)
        self.weight = nn.Parameter(torch.empty(members, in_size, out_size).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, out_size).uniform_(-bound, bound))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if inputs.dim() == 2:  # shared by all members: one broadcast product
            return torch.matmul(inputs, self.weight).add_(self.bias)
        return torch.baddbmm(self.bias, inputs, self.weight)


class EnsembleLayerNorm(nn.Module):
    """Layer normalisation over the last dimension with a gain and a bias per member
    (``(members, 1, size)``, initialised to 1 and 0 like :class:`torch.nn.LayerNorm`)."""

    def __init__(self, members: int, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(members, 1, size))
        self.bias = nn.Parameter(torch.zeros(members, 1, size))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        normalised = nn.functional.layer_norm(inputs, inputs.shape[-1:])
        return torch.addcmul(self.bias, normalised, self.weight)


class EnsembleQ(nn.Module):
    """An ensemble of ``members`` independent Q networks ``Q(s, a)`` evaluated as one network.

    Every layer is an :class:`EnsembleLinear`, so the members cost one batched product per layer
    instead of one product each: the twin critics of clipped double-Q learning (``members=2``,
    SAC's default) take the per-call overhead of a single network. With ``layer_norm`` every
    hidden layer is normalised before its ReLU (:class:`EnsembleLayerNorm`), as the critics of
    RLPD and DroQ are.
    """

    def __init__(self, obs_dim: int, action_dim: int, hidden_sizes: Sequence[int],
                 members: int = 2, layer_norm: bool = False) -> None:
        super().__init__()
        self.members = members
        widths = [obs_dim + action_dim, *hidden_sizes, 1]
        self.layers = nn.ModuleList(EnsembleLinear(members, a, b)
                                    for a, b in zip(widths, widths[1:]))
        self.norms = nn.ModuleList(EnsembleLayerNorm(members, size) for size in hidden_sizes) \
            if layer_norm else None

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The members' Q estimates, shape ``(members, N)``."""
        hidden = torch.cat([obs, action], dim=-1)
        for index, layer in enumerate(self.layers[:-1]):
            hidden = layer(hidden)
            if self.norms is not None:
                hidden = self.norms[index](hidden)
            hidden = torch.relu(hidden)
        return float32_head(self.layers[-1], hidden).squeeze(-1)
