"""Soft Actor-Critic for a ``Discrete(n)`` action (Christodoulou 2019, "Soft Actor-Critic for
Discrete Action Settings").

The policy is a categorical distribution over the ``n`` choices and the critics give the value of
every choice at once, so the soft state value and the actor's loss are exact sums over the
choices instead of sampled estimates. The target entropy is a fraction of the largest possible
one, ``log n`` (Christodoulou's 0.98 keeps a policy near uniform; Zhou et al. 2022 lower it).

It has :class:`~rl_core.algorithms.sac.SAC`'s surface (``update``, ``act``, ``modules``,
checkpoints), so the learner, the periodic evaluation and the bare loop drive either. An action
travels as one float, the choice's index (``rl_core.envs.spaces.action_width``). Flat
observations only; the compiled update, behaviour cloning and critic ensembles are SAC's.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from rl_core.algorithms.networks import EnsembleLayerNorm, EnsembleLinear, float32_head, mlp
from rl_core.algorithms.sac import (
    CRITIC_NOT_FINITE,
    SoftActorCritic,
    gradient_step,
)
from rl_core.config import ConfigError, SACConfig
from rl_core.wire.image_codecs import as_shape
from rl_core.wire.messages import Batch, choice_indices

#: The target entropy as a fraction of the largest, ``log n``.
TARGET_ENTROPY_FRACTION = 0.5


class CategoricalActor(nn.Module):
    """A categorical policy over ``choices`` actions; :meth:`act` gives each chosen index as a
    float (the action row of the replay and the messages)."""

    def __init__(self, obs_dim: int, choices: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.choices = choices
        #: Width of an action row: the chosen index.
        self.action_dim = 1
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.body = mlp(obs_dim, self.hidden_sizes[:-1], self.hidden_sizes[-1])
        self.logits = nn.Linear(self.hidden_sizes[-1], choices)

    def forward_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """The head's output for every choice, ``(N, choices)``."""
        return float32_head(self.logits, torch.relu(self.body(obs)))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(probabilities, log-probabilities)`` of every choice, ``(N, choices)`` each."""
        log_probs = torch.log_softmax(self.forward_logits(obs), -1)
        return log_probs.exp(), log_probs

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Chosen indices for observations ``(N, obs_dim)`` as float32 ``(N, 1)``: the most
        probable choice when ``deterministic``, else a draw."""
        obs_tensor = torch.as_tensor(obs, dtype=torch.float32, device=self.logits.weight.device)
        probs, _ = self.forward(obs_tensor)
        chosen = probs.argmax(-1) if deterministic else torch.multinomial(probs, 1).squeeze(-1)
        return chosen.to(torch.float32).unsqueeze(-1).cpu().numpy()

    def architecture(self) -> dict[str, object]:
        """Description of the network that receivers check before loading weights."""
        return {"kind": "categorical_actor", "obs_dim": self.obs_dim, "choices": self.choices,
                "hidden_sizes": list(self.hidden_sizes)}


class DiscreteQ(nn.Module):
    """``members`` Q networks giving the value of every choice, ``(members, N, choices)``, as
    one batched network (:class:`~rl_core.algorithms.networks.EnsembleQ`'s layers)."""

    def __init__(self, obs_dim: int, choices: int, hidden_sizes: Sequence[int],
                 members: int = 2, layer_norm: bool = False) -> None:
        super().__init__()
        widths = [obs_dim, *hidden_sizes, choices]
        self.layers = nn.ModuleList(EnsembleLinear(members, a, b)
                                    for a, b in zip(widths, widths[1:]))
        self.norms = nn.ModuleList(EnsembleLayerNorm(members, size) for size in hidden_sizes) \
            if layer_norm else None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        hidden = obs
        for index, layer in enumerate(self.layers[:-1]):
            hidden = layer(hidden)
            if self.norms is not None:
                hidden = self.norms[index](hidden)
            hidden = torch.relu(hidden)
        return float32_head(self.layers[-1], hidden)


def chosen_td(values: torch.Tensor, index: torch.Tensor, q_target: torch.Tensor,
              weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each member's value of the chosen ``index`` from ``values`` ``(members, batch,
    choices)``, its TD error against ``q_target`` and the critics' loss (the weighted squared
    errors, averaged over the batch and summed over the members).

    :raises ValueError: when the loss is not finite.
    """
    q = values.gather(-1, index.view(1, -1, 1).expand(values.shape[0], -1, 1)).squeeze(-1)
    td = q - q_target
    loss = 0.5 * (weights * td.pow(2)).mean(dim=1).sum()
    if not torch.isfinite(loss):
        raise ValueError(CRITIC_NOT_FINITE)
    return q, td, loss


class DiscreteLearner:
    """What the learners of one ``Discrete(choices)`` action share: their sizes, checked, and
    a batch on the device with each row's chosen index."""

    def _start(self, kind: str, obs_dim: int | Sequence[int], choices: int, config: SACConfig,
               seed: int, device: torch.device | str) -> None:
        obs_shape = as_shape(obs_dim)
        if len(obs_shape) != 1 or obs_shape[0] <= 0 or choices < 2:
            raise ValueError(f"{kind} takes a flat observation and at least 2 choices, "
                             f"got observations {obs_shape} and {choices} choices")
        self.obs_shape = obs_shape
        self.obs_dim = obs_shape[0]
        #: Width of an action row: the chosen index.
        self.action_dim = 1
        self.choices = choices
        self.config = config
        self.seed = seed
        self.device = torch.device(device)
        self.pixels = False
        torch.manual_seed(seed)

    def _tensors(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """``(obs, next_obs, index, rewards, terminated, weights)`` of ``batch`` on the device.

        :raises ValueError: when the batch holds an index that is no choice.
        """
        obs, next_obs, rewards, terminated, weights = (
            torch.as_tensor(array, dtype=torch.float32, device=self.device)
            for array in (batch.obs, batch.next_obs, batch.rewards, batch.terminated,
                          batch.weights))
        index = torch.as_tensor(choice_indices(batch.actions, self.choices), device=self.device)
        return obs, next_obs, index, rewards, terminated, weights


class DiscreteSAC(DiscreteLearner, SoftActorCritic):
    """Discrete SAC learner for flat observations and one ``Discrete(choices)`` action.

    :param obs_dim: size of a flat observation (or its one-dimensional shape).
    :param choices: the number of actions, ``n`` of ``Discrete(n)``.
    :raises ConfigError: for a setting only :class:`~rl_core.algorithms.sac.SAC` has.
    """

    #: Checkpoints name the algorithm that wrote them (rl_core.runs.checkpoint).
    ALGORITHM = "discrete_sac"

    def __init__(self, obs_dim: int | Sequence[int], choices: int, config: SACConfig,
                 seed: int = 0, device: torch.device | str = "cpu") -> None:
        self._start("discrete SAC", obs_dim, choices, config, seed, device)
        refused = [setting for setting, used in (
            ("compile_update: true", config.compile_update),
            ("demo_bc_weight above 0", config.demo_bc_weight > 0),
            (f"critics: {config.critics}", config.critics != 2)) if used]
        if refused:
            raise ConfigError(f"{', '.join(refused)}: SAC for discrete actions has twin critics "
                              "and an eager update without behaviour cloning; set compile_update:"
                              " false, demo_bc_weight: 0.0 and critics: 2")
        self.actor = CategoricalActor(self.obs_dim, choices, config.hidden_sizes).to(self.device)
        self.critic = DiscreteQ(self.obs_dim, choices, config.hidden_sizes, 2,
                                config.critic_layer_norm).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.target_entropy = TARGET_ENTROPY_FRACTION * math.log(choices)
        self._start_optimizers(self.actor, self.critic, self.critic_target)
        self.update_step = 0
        #: |TD error| of the last batch, for prioritised replay (float32, (batch,)).
        self.last_td_errors = np.zeros(0, dtype=np.float32)

    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Chosen indices for observations ``(N, obs_dim)`` as float32 ``(N, 1)``."""
        return self.actor.act(obs, deterministic=deterministic)

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step of critics, actor and temperature on ``batch`` (its actions are
        the chosen indices, ``(batch, 1)``).

        :raises ValueError: when the batch holds an index that is no choice, or a loss is not
            finite.
        """
        obs, next_obs, index, rewards, terminated, weights = self._tensors(batch)
        with torch.autocast(self.device.type, torch.bfloat16, cache_enabled=False,
                            enabled=self.config.update_precision == "bfloat16"):
            return self._update(obs, next_obs, index, rewards, 1.0 - terminated, weights)

    def _update(self, obs: torch.Tensor, next_obs: torch.Tensor, index: torch.Tensor,
                rewards: torch.Tensor, not_done: torch.Tensor, weights: torch.Tensor
                ) -> dict[str, float]:
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_probs, next_log_probs = self.actor(next_obs)
            next_q = self.critic_target(next_obs).min(dim=0).values
            soft_value = (next_probs * (next_q - alpha * next_log_probs)).sum(-1)
            q_target = rewards + self.config.bootstrap_discount * not_done * soft_value
        q, td, critic_loss = chosen_td(self.critic(obs), index, q_target, weights)
        gradient_step(self.critic_optimizer, self._critic_parameters, critic_loss)

        probs, log_probs = self.actor(obs)
        with torch.no_grad():
            q_policy = self.critic(obs).min(dim=0).values
        actor_loss = (probs * (alpha * log_probs - q_policy)).sum(-1).mean()
        entropy = -(probs * log_probs).sum(-1)
        alpha_loss = torch.zeros((), device=self.device)
        if self.config.autotune_alpha:
            alpha_loss = (self.log_alpha * (entropy.detach() - self.target_entropy)).mean()
        self._step_actor(actor_loss, alpha_loss)
        scalars = torch.stack([critic_loss, actor_loss, alpha_loss, alpha, q[0].mean(),
                               entropy.mean(), torch.zeros((), device=self.device)]).detach()
        return self._metrics(scalars, td.detach().abs().mean(dim=0))

    def modules(self) -> dict[str, nn.Module]:
        """Networks whose parameters make up the learner's state."""
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}
