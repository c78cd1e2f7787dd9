"""SAC for an arm and a choice: a ``Dict`` action of one vector ``Box`` and discrete parts (an
arm and its gripper), learned as HIL-SERL learns a grasp.

The arm's :class:`~rl_core.algorithms.sac.SAC` learns from the rows' arm values alone, its critics
not conditioned on the choice. Beside it a twin critic values every choice at once and learns by
double Q-learning on the same rewards: the online critic picks the next choice, the target
critics' minimum values it. The policy acts with the SAC actor's arm values and the choice this
critic values most, a uniformly random one with probability :data:`CHOICE_EXPLORATION` while it
trains. An action row is the arm's values, then the choice's index
(:class:`rl_core.envs.spaces.ArmAndChoice`). Flat observations only.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from rl_core.algorithms.discrete_sac import DiscreteQ, chosen_td
from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.algorithms.sac import SAC, gradient_step, new_adam
from rl_core.config import ConfigError, SACConfig
from rl_core.wire.image_codecs import as_shape
from rl_core.wire.messages import Batch, choice_indices

#: How often a training policy takes a uniformly random choice instead of the best valued one.
CHOICE_EXPLORATION = 0.1


class HybridActor(nn.Module):
    """The arm's squashed Gaussian actor and the choice critic, acting together; :meth:`act`
    gives rows of the arm's values and the chosen index (a float)."""

    def __init__(self, arm: SquashedGaussianActor, choice_critic: DiscreteQ, choices: int
                 ) -> None:
        super().__init__()
        self.arm = arm
        self.choice_critic = choice_critic
        self.choices = choices
        self.obs_dim = arm.obs_dim
        self.arm_dim = arm.action_dim
        #: Width of an action row: the arm's values and the chosen index.
        self.action_dim = arm.action_dim + 1
        self.hidden_sizes = arm.hidden_sizes

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(the arm's deterministic action, the best valued choice)`` for ``obs``."""
        arm, _ = self.arm(obs, deterministic=True, with_log_prob=False)
        return arm, self.choice_critic(obs).mean(dim=0).argmax(dim=-1)

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Action rows ``(N, arm_dim + 1)`` float32 for observations ``(N, obs_dim)``."""
        obs_tensor = torch.as_tensor(obs, dtype=torch.float32, device=self.arm.mean.weight.device)
        arm, _ = self.arm(obs_tensor, deterministic=deterministic, with_log_prob=False)
        choice = self.choice_critic(obs_tensor).mean(dim=0).argmax(dim=-1)
        if not deterministic:
            explore = torch.rand(choice.shape, device=choice.device) < CHOICE_EXPLORATION
            choice = torch.where(explore, torch.randint_like(choice, self.choices), choice)
        return torch.cat([arm, choice.to(arm.dtype).unsqueeze(-1)], dim=-1).cpu().numpy()

    def architecture(self) -> dict[str, object]:
        """Description of the network that receivers check before loading weights."""
        return {"kind": "hybrid_actor", "obs_dim": self.obs_dim, "action_dim": self.action_dim,
                "arm_dim": self.arm_dim, "choices": self.choices,
                "hidden_sizes": list(self.hidden_sizes)}


class HybridSAC:
    """The arm-and-choice learner, with :class:`~rl_core.algorithms.sac.SAC`'s surface
    (``update``, ``act``, ``modules``, ``optimizers``, checkpoints).

    :param obs_dim: size of a flat observation (or its one-dimensional shape).
    :param arm_dim: the arm's values per action.
    :param choices: the combinations of the discrete parts.
    :raises ConfigError: for ``compile_update``, which compiles SAC's update alone.
    """

    #: Checkpoints name the algorithm that wrote them (rl_core.runs.checkpoint).
    ALGORITHM = "hybrid_sac"

    def __init__(self, obs_dim: int | Sequence[int], arm_dim: int, choices: int,
                 config: SACConfig, seed: int = 0, device: torch.device | str = "cpu") -> None:
        obs_shape = as_shape(obs_dim)
        if len(obs_shape) != 1 or obs_shape[0] <= 0 or arm_dim < 1 or choices < 2:
            raise ValueError(f"the arm-and-choice learner takes a flat observation, an arm of at "
                             f"least 1 value and at least 2 choices, got observations "
                             f"{obs_shape}, an arm of {arm_dim} and {choices} choices")
        if config.compile_update:
            raise ConfigError("compile_update: true compiles SAC's update of a Box action; an "
                              "arm-and-choice action steps eagerly, so set compile_update: false")
        self.arm = SAC(obs_shape, arm_dim, config, seed=seed, device=device)
        self.config, self.seed, self.device = config, seed, self.arm.device
        self.obs_shape, self.obs_dim, self.pixels = obs_shape, obs_shape[0], False
        self.choices = choices
        #: Width of an action row: the arm's values and the chosen index.
        self.action_dim = arm_dim + 1
        # Without layer norm whatever critic_layer_norm says (it is the arm's critics'): the
        # choice critic acts, so a policy rebuilds it from the actor's architecture alone.
        self.choice_critic = DiscreteQ(self.obs_dim, choices, config.hidden_sizes,
                                       2).to(self.device)
        self.choice_critic_target = copy.deepcopy(self.choice_critic).requires_grad_(False)
        self.choice_optimizer = new_adam(self.choice_critic.parameters(), config.critic_lr)
        self._choice_parameters: list[torch.Tensor] = list(self.choice_critic.parameters())
        self._choice_target_parameters: list[torch.Tensor] = list(
            self.choice_critic_target.parameters())
        assert isinstance(self.arm.actor, SquashedGaussianActor)
        self.actor = HybridActor(self.arm.actor, self.choice_critic, choices)
        #: |TD error| of the last batch, for prioritised replay: the larger of the two critics'.
        self.last_td_errors = np.zeros(0, dtype=np.float32)

    @property
    def update_step(self) -> int:
        return self.arm.update_step

    @update_step.setter
    def update_step(self, value: int) -> None:
        self.arm.update_step = value

    @property
    def log_alpha(self) -> torch.Tensor:
        return self.arm.log_alpha

    @property
    def alpha(self) -> float:
        """The arm's entropy temperature."""
        return self.arm.alpha

    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Action rows ``(N, arm_dim + 1)`` for observations ``(N, obs_dim)``."""
        return self.actor.act(obs, deterministic=deterministic)

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step of the arm's SAC and of the choice critic on ``batch``.

        :raises ValueError: when the batch holds an index that is no choice, or a loss is not
            finite.
        """
        index = torch.as_tensor(choice_indices(batch.actions, self.choices), device=self.device)
        metrics = self.arm.update(batch._replace(actions=batch.actions[:, :-1]))
        obs, next_obs, rewards, terminated, weights = (
            torch.as_tensor(array, dtype=torch.float32, device=self.device)
            for array in (batch.obs, batch.next_obs, batch.rewards, batch.terminated,
                          batch.weights))
        with torch.autocast(self.device.type, torch.bfloat16, cache_enabled=False,
                            enabled=self.config.update_precision == "bfloat16"):
            loss, td = self._update_choice(obs, next_obs, index, rewards, 1.0 - terminated,
                                           weights)
        self.last_td_errors = np.maximum(self.arm.last_td_errors, td.cpu().numpy())
        metrics["choice_critic_loss"] = float(loss)
        return metrics

    def _update_choice(self, obs: torch.Tensor, next_obs: torch.Tensor, index: torch.Tensor,
                       rewards: torch.Tensor, not_done: torch.Tensor, weights: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            best = self.choice_critic(next_obs).mean(dim=0).argmax(dim=-1, keepdim=True)
            next_q = self.choice_critic_target(next_obs).min(dim=0).values
            q_target = rewards + self.config.bootstrap_discount * not_done * next_q.gather(
                -1, best).squeeze(-1)
        _, td, loss = chosen_td(self.choice_critic(obs), index, q_target, weights)
        gradient_step(self.choice_optimizer, self._choice_parameters, loss)
        with torch.no_grad():
            torch._foreach_lerp_(self._choice_target_parameters, self._choice_parameters,
                                 self.config.tau)
        return loss.detach(), td.detach().abs().mean(dim=0)

    def set_learning_rates(self, actor_lr: float | None = None, critic_lr: float | None = None,
                           alpha_lr: float | None = None) -> None:
        """Change learning rates of a running learner (the choice critic's is ``critic_lr``)."""
        self.arm.set_learning_rates(actor_lr, critic_lr, alpha_lr)
        if critic_lr is not None:
            for group in self.choice_optimizer.param_groups:
                group["lr"] = critic_lr

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Optimizers whose state makes up the learner's state."""
        return {**self.arm.optimizers(), "choice_optimizer": self.choice_optimizer}

    def modules(self) -> dict[str, nn.Module]:
        """Networks whose parameters make up the learner's state (the actor holds the choice
        critic, which acts)."""
        return {"actor": self.actor, "critic": self.arm.critic,
                "critic_target": self.arm.critic_target,
                "choice_critic_target": self.choice_critic_target}
