"""Soft Actor-Critic with twin critics, target networks and automatic entropy tuning.

Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications". The algorithm is split
SB3-style: construction builds the model, :meth:`SAC.update` does one gradient step on a batch and
returns scalar metrics; the collection loop (bare loop or ROS trainer node) lives elsewhere.

Networks, temperature and optimiser state live on one torch device (``device``; see
:mod:`rl_core.device`). Each batch crosses to it once per update, as six tensors built straight
from its numpy arrays; what comes back (TD errors, metrics) comes in one transfer each, so a GPU
learner synchronises with the host a fixed, small number of times per gradient step.

Image observations (stacked frames, :func:`rl_core.encoders.is_image_shape`) select the pixel
recipe of DrQ (Kostrikov, Yarats & Fergus 2021) automatically: a convolutional encoder shared by
actor and critics, trained by the critic loss only (the actor loss sees detached features), a
target encoder inside the target critics, and random-shift augmentation of every batch. Frames
cross to the device as uint8 (a quarter of the bytes) and are scaled there.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from rl_core.config import SACConfig
from rl_core.encoders import (
    EncodedActor,
    EncodedTwinQ,
    PixelEncoder,
    image_to_tensor,
    is_image_shape,
    random_shift,
)
from rl_core.image_codecs import as_shape
from rl_core.networks import SquashedGaussianActor, TwinQ
from rl_core.replay import Batch

#: Keys of the metrics :meth:`SAC.update` returns, in order.
METRIC_NAMES = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy")


class SAC:
    """SAC learner for flat or image observations and flat actions (actions in [-1, 1]).

    :param obs_dim: size of a flat observation, or the shape of an observation; an image shape
        ``(stack, h, w, 3)`` (uint8 frames) selects the convolutional encoder.
    :param action_dim: size of a flat action.
    :param config: hyperparameters.
    :param seed: seed of network initialisation and of the sampling noise in updates.
    :param device: torch device of networks, temperature and updates (CPU by default).
    """

    def __init__(self, obs_dim: int | Sequence[int], action_dim: int, config: SACConfig,
                 seed: int = 0, device: torch.device | str = "cpu") -> None:
        obs_shape = as_shape(obs_dim)
        if min(obs_shape, default=0) <= 0 or action_dim <= 0:
            raise ValueError(f"observation and action sizes must be positive, got {obs_dim}, "
                             f"{action_dim}")
        self.obs_shape = obs_shape
        self.obs_dim = int(np.prod(obs_shape))
        self.action_dim = action_dim
        self.config = config
        self.seed = seed
        self.device = torch.device(device)
        #: Whether observations are images (encoder, augmentation) rather than flat vectors.
        self.pixels = is_image_shape(obs_shape)
        torch.manual_seed(seed)
        # Built on the CPU and then moved, so a seed gives the same initial weights on any device.
        self.actor: SquashedGaussianActor | EncodedActor
        self.critic: TwinQ | EncodedTwinQ
        if self.pixels:
            encoder = PixelEncoder(obs_shape, config.feature_dim, config.encoder_channels)
            self.critic = EncodedTwinQ(encoder, TwinQ(config.feature_dim, action_dim,
                                                       config.hidden_sizes)).to(self.device)
            self.actor = EncodedActor(encoder, SquashedGaussianActor(
                config.feature_dim, action_dim, config.hidden_sizes)).to(self.device)
            # The actor's loss trains its head only; the encoder belongs to the critic.
            self._encode: nn.Module = encoder
            self._actor_head: nn.Module = self.actor.head
            self._critic_heads: nn.Module = self.critic.heads
        else:
            if len(obs_shape) != 1:
                raise ValueError(f"observations must be flat vectors or stacked RGB frames "
                                 f"(stack, h, w, 3), got shape {obs_shape}")
            self.actor = SquashedGaussianActor(self.obs_dim, action_dim,
                                               config.hidden_sizes).to(self.device)
            self.critic = TwinQ(self.obs_dim, action_dim, config.hidden_sizes).to(self.device)
            self._encode = nn.Identity()
            self._actor_head, self._critic_heads = self.actor, self.critic
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(float(np.log(config.init_alpha)), device=self.device,
                                      requires_grad=True)
        self.target_entropy = -config.target_entropy_scale * action_dim
        self.actor_optimizer = torch.optim.Adam(self._actor_head.parameters(), lr=config.actor_lr)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=config.critic_lr)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=config.alpha_lr)
        self.update_step = 0
        #: |TD error| of the last batch, for prioritised replay (float32, (batch,)).
        self.last_td_errors = np.zeros(0, dtype=np.float32)

    @property
    def alpha(self) -> float:
        """Current entropy temperature."""
        return float(self.log_alpha.detach().exp())

    def set_learning_rates(self, actor_lr: float | None = None, critic_lr: float | None = None,
                           alpha_lr: float | None = None) -> None:
        """Change learning rates of a running learner (live parameter updates)."""
        for optimizer, lr in ((self.actor_optimizer, actor_lr), (self.critic_optimizer, critic_lr),
                              (self.alpha_optimizer, alpha_lr)):
            if lr is not None:
                for group in optimizer.param_groups:
                    group["lr"] = lr

    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Actions for observations ``(N, obs_dim)`` (or ``(N, *obs_shape)`` images) ->
        ``(N, action_dim)`` float32 in [-1, 1]."""
        return self.actor.act(obs, deterministic=deterministic)

    def _observations(self, obs: np.ndarray) -> torch.Tensor:
        """A batch's observations on the device as the networks take them (images folded,
        scaled and augmented)."""
        if self.pixels:
            frames = torch.as_tensor(obs, device=self.device)
            return random_shift(image_to_tensor(frames), self.config.image_shift)
        return torch.as_tensor(obs, dtype=torch.float32, device=self.device)

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step of critics, actor and temperature on ``batch``.

        :returns: scalar metrics (losses, temperature, mean Q, entropy estimate).
        :raises ValueError: when the batch holds non-finite values.
        """
        obs, next_obs = self._observations(batch.obs), self._observations(batch.next_obs)
        actions, rewards, terminated, weights = (
            torch.as_tensor(array, dtype=torch.float32, device=self.device)
            for array in (batch.actions, batch.rewards, batch.terminated, batch.weights))
        not_done = 1.0 - terminated
        alpha = self.log_alpha.detach().exp()

        with torch.no_grad():
            next_actions, next_log_prob = self.actor(next_obs)
            target_q1, target_q2 = self.critic_target(next_obs, next_actions)
            soft_value = torch.min(target_q1, target_q2) - alpha * next_log_prob
            q_target = rewards + self.config.gamma * not_done * soft_value
        features = self._encode(obs)
        q1, q2 = self._critic_heads(features, actions)
        td1, td2 = q1 - q_target, q2 - q_target
        critic_loss = 0.5 * ((weights * td1.pow(2)).mean() + (weights * td2.pow(2)).mean())
        if not torch.isfinite(critic_loss):
            raise ValueError("critic loss is not finite; the batch or the networks hold NaN/inf "
                             "(check rewards and observations, lower the learning rates)")
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_optimizer.step()

        # Critic parameters need no gradient through the actor loss, and the encoder (identity
        # for flat observations) learns from the critic loss only.
        self.critic.requires_grad_(False)
        features = features.detach()
        new_actions, log_prob = self._actor_head(features)
        q1_pi, q2_pi = self._critic_heads(features, new_actions)
        actor_loss = (alpha * log_prob - torch.min(q1_pi, q2_pi)).mean()
        if not torch.isfinite(actor_loss):
            self.critic.requires_grad_(True)
            raise ValueError("actor loss is not finite; the actor was not updated (check the "
                             "data, lower the learning rates)")
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_optimizer.step()
        self.critic.requires_grad_(True)

        alpha_loss = torch.zeros((), device=self.device)
        if self.config.autotune_alpha:
            alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
            if not torch.isfinite(alpha_loss):
                raise ValueError("temperature loss is not finite; alpha was not updated")
            self.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_optimizer.step()

        with torch.no_grad():
            tau = self.config.tau
            for param, target in zip(self.critic.parameters(), self.critic_target.parameters()):
                target.mul_(1.0 - tau).add_(param, alpha=tau)
            self.last_td_errors = (0.5 * (td1.abs() + td2.abs())).cpu().numpy()
            scalars = torch.stack([critic_loss, actor_loss, alpha_loss, alpha, q1.mean(),
                                   -log_prob.mean()]).cpu().tolist()
        self.update_step += 1
        return dict(zip(METRIC_NAMES, scalars))

    def modules(self) -> dict[str, nn.Module]:
        """Networks whose parameters make up the learner's state."""
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Optimizers whose state makes up the learner's state."""
        return {"actor_optimizer": self.actor_optimizer, "critic_optimizer": self.critic_optimizer,
                "alpha_optimizer": self.alpha_optimizer}
