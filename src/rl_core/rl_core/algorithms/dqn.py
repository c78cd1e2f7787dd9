"""Double DQN for a ``Discrete(n)`` action (Mnih et al. 2015; van Hasselt et al. 2016), the
cheaper learner of a discrete action: one Q network and one backward pass per update, against
discrete SAC's twin critics and actor (docs/results.md#discrete-actions).

The Q network is a :class:`~rl_core.algorithms.discrete_sac.CategoricalActor` whose head gives
each choice's value: what travels to the policies, what checkpoints and ONNX export hold (the
most valuable choice, the head's argmax), is that actor's shape. :class:`GreedyActor` acts
epsilon-greedily on it (``exploration_epsilon``; the simulators' ``random_steps`` explore at
first). The target is double DQN's, with the n-step discount (``n_step``), the loss Huber's,
and the target network follows by Polyak averaging (``tau``) after every update.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from rl_core.algorithms.discrete_sac import CategoricalActor, DiscreteLearner
from rl_core.algorithms.sac import CRITIC_NOT_FINITE, gradient_step, new_adam
from rl_core.config import ConfigError, SACConfig
from rl_core.wire.messages import Batch


class GreedyActor(CategoricalActor):
    """A Q network over ``choices`` actions that acts epsilon-greedily: the most valuable
    choice, or with probability :attr:`epsilon` a uniformly random one (``deterministic``:
    always the most valuable)."""

    def __init__(self, obs_dim: int, choices: int, hidden_sizes: Sequence[int],
                 epsilon: float = 0.05) -> None:
        super().__init__(obs_dim, choices, hidden_sizes)
        #: The chance of a random choice; not a parameter (it is the policy's setting).
        self.epsilon = float(epsilon)

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """The value of every choice, ``(N, choices)``."""
        return self.forward_logits(obs)

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        obs_tensor = torch.as_tensor(obs, dtype=torch.float32, device=self.logits.weight.device)
        chosen = self.values(obs_tensor).argmax(-1)
        if not deterministic and self.epsilon > 0:
            explore = torch.rand(chosen.shape, device=chosen.device) < self.epsilon
            random = torch.randint(0, self.choices, chosen.shape, device=chosen.device)
            chosen = torch.where(explore, random, chosen)
        return chosen.to(torch.float32).unsqueeze(-1).cpu().numpy()

    def architecture(self) -> dict[str, object]:
        return {**super().architecture(), "kind": "greedy_q_actor"}


class DQN(DiscreteLearner):
    """Double DQN learner for flat observations and one ``Discrete(choices)`` action, with the
    surface the learner, the periodic evaluation, the bare loop and checkpoints drive.

    :raises ConfigError: for a setting only SAC has (compile_update, demo_bc_weight).
    """

    #: Checkpoints name the algorithm that wrote them (rl_core.runs.checkpoint).
    ALGORITHM = "dqn"

    def __init__(self, obs_dim: int | Sequence[int], choices: int, config: SACConfig,
                 seed: int = 0, device: torch.device | str = "cpu") -> None:
        self._start("DQN", obs_dim, choices, config, seed, device)
        refused = [setting for setting, used in (
            ("compile_update: true", config.compile_update),
            ("demo_bc_weight above 0", config.demo_bc_weight > 0)) if used]
        if refused:
            raise ConfigError(f"{', '.join(refused)}: algorithm dqn has an eager update without "
                              "behaviour cloning; set compile_update: false and demo_bc_weight: "
                              "0.0, or algorithm: sac")
        self.actor = GreedyActor(self.obs_dim, choices, config.hidden_sizes).to(self.device)
        self.target = copy.deepcopy(self.actor).requires_grad_(False)
        self.optimizer = new_adam(self.actor.parameters(), config.critic_lr)
        self._parameters: list[torch.Tensor] = list(self.actor.parameters())
        self._target_parameters: list[torch.Tensor] = list(self.target.parameters())
        self.update_step = 0
        #: |TD error| of the last batch, for prioritised replay (float32, (batch,)).
        self.last_td_errors = np.zeros(0, dtype=np.float32)

    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Chosen indices for observations ``(N, obs_dim)`` as float32 ``(N, 1)``."""
        return self.actor.act(obs, deterministic=deterministic)

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step on ``batch`` (its actions are the chosen indices, ``(batch, 1)``).

        :raises ValueError: when the batch holds an index that is no choice, or the loss is not
            finite (nothing stepped).
        """
        obs, next_obs, index, rewards, terminated, weights = self._tensors(batch)
        with torch.autocast(self.device.type, torch.bfloat16, cache_enabled=False,
                            enabled=self.config.update_precision == "bfloat16"):
            with torch.no_grad():  # double DQN: the online network chooses, the target values
                chosen_next = self.actor.values(next_obs).argmax(-1, keepdim=True)
                next_value = self.target.values(next_obs).gather(-1, chosen_next).squeeze(-1)
                q_target = rewards + self.config.bootstrap_discount * (1.0 - terminated) * \
                    next_value
            q = self.actor.values(obs).gather(-1, index.view(-1, 1)).squeeze(-1)
            td = q - q_target
            loss = (weights * nn.functional.huber_loss(q, q_target, reduction="none")).mean()
        if not torch.isfinite(loss):
            raise ValueError(CRITIC_NOT_FINITE)
        gradient_step(self.optimizer, self._parameters, loss)
        with torch.no_grad():
            torch._foreach_lerp_(self._target_parameters, self._parameters, self.config.tau)
        self.last_td_errors = td.detach().abs().cpu().numpy()
        self.update_step += 1
        # SAC's names for what DQN has: its TD loss as the critics' (progress lines, /trainer's
        # ~/critic_loss), the mean value of the chosen actions as Q's.
        return {"critic_loss": float(loss.detach()), "q_mean": float(q.detach().mean())}

    def set_learning_rates(self, actor_lr: float | None = None, critic_lr: float | None = None,
                           alpha_lr: float | None = None) -> None:
        """Change the learning rate of a running learner (``critic_lr``: the Q network's)."""
        if critic_lr is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = critic_lr

    def modules(self) -> dict[str, nn.Module]:
        """Networks whose parameters make up the learner's state."""
        return {"actor": self.actor, "target": self.target}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Optimizers whose state makes up the learner's state."""
        return {"optimizer": self.optimizer}
