"""Soft Actor-Critic with twin critics, target networks and automatic entropy tuning.

Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications". The algorithm is split
SB3-style: construction builds the model, :meth:`SAC.update` does one gradient step on a batch and
returns scalar metrics; the collection loop (bare loop or ROS trainer node) lives elsewhere.
Everything lives on one torch device (:mod:`rl_core.learning.device`), and each batch crosses to
it once per update, so a GPU learner synchronises with the host a fixed, small number of times.

Image observations (:func:`rl_core.algorithms.encoders.is_image_shape`) select DrQ's pixel recipe
(Kostrikov, Yarats & Fergus 2021): a convolutional encoder shared by actor and critics, trained
by the critic loss only, a target encoder, and random-shift augmentation; frames cross to the
device as uint8. With demonstrations (rows whose ``indices`` are
:data:`rl_core.wire.messages.DEMO_SLOT`), ``demo_bc_weight`` > 0 adds behaviour cloning with a Q
filter to the actor's loss (Nair et al. 2018), scaled by the batch's mean ``|Q|`` as in TD3+BC.
How the update is built: docs/architecture.md, "Learning".
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np
import torch
import torch._dynamo
from torch import nn

from rl_core.algorithms.encoders import (
    EncodedActor,
    EncodedQ,
    PixelEncoder,
    image_to_tensor,
    is_image_shape,
    random_shift,
)
from rl_core.algorithms.graph_adam import AdamTensors, adam_step_, adam_tensors
from rl_core.algorithms.networks import EnsembleQ, SquashedGaussianActor
from rl_core.config import ConfigError, SACConfig
from rl_core.wire.image_codecs import as_shape
from rl_core.wire.messages import DEMO_SLOT, Batch

CRITIC_NOT_FINITE = ("critic loss is not finite; the batch or the networks hold NaN/inf (check "
                     "rewards and observations, lower the learning rates)")
ACTOR_NOT_FINITE = ("actor or temperature loss is not finite; neither was updated (check the "
                    "data, lower the learning rates)")
#: Keys of the metrics :meth:`SAC.update` returns, in order.
METRIC_NAMES = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy",
                "bc_loss")


class Draws(NamedTuple):
    """The random numbers of one gradient step, drawn before it from torch's generator
    (:meth:`SAC._draws`): the compiled step then draws none of its own, so it follows the
    eager step's random stream, and inductor's C++ generator (one number at a time, several
    times slower than torch's) is not used."""

    #: The policy's standard normal draw for the next observations, ``(batch, action_dim)``.
    next_noise: torch.Tensor
    #: The two critics whose minimum is the target (``critics`` > 2, REDQ/RLPD), else None.
    pair: torch.Tensor | None
    #: The policy's draw for the batch's observations (the actor's loss).
    noise: torch.Tensor


class SoftActorCritic:
    """What :class:`SAC` and SAC for a discrete action (rl_core.algorithms.discrete_sac) share:
    a temperature, the optimizers of actor, critics and temperature, the eager step of the
    actor and the targets, and the count of finished steps."""

    config: SACConfig
    device: torch.device
    log_alpha: torch.Tensor
    actor_optimizer: torch.optim.Adam
    critic_optimizer: torch.optim.Adam
    alpha_optimizer: torch.optim.Adam
    _actor_parameters: list[torch.Tensor]
    _critic_parameters: list[torch.Tensor]
    _target_parameters: list[torch.Tensor]
    update_step: int
    last_td_errors: np.ndarray

    def _start_optimizers(self, actor: nn.Module, critic: nn.Module, critic_target: nn.Module
                          ) -> None:
        """The temperature at ``init_alpha``, the optimizers of ``actor`` (the part its loss
        trains), ``critic`` and the temperature, and the tensors their steps and the Polyak
        update take."""
        self.log_alpha = torch.tensor(float(np.log(self.config.init_alpha)),
                                      device=self.device, requires_grad=True)
        self.actor_optimizer = new_adam(actor.parameters(), self.config.actor_lr)
        self.critic_optimizer = new_adam(critic.parameters(), self.config.critic_lr)
        self.alpha_optimizer = new_adam([self.log_alpha], self.config.alpha_lr)
        self._actor_parameters = list(actor.parameters())
        self._critic_parameters = list(critic.parameters())
        self._target_parameters = list(critic_target.parameters())

    def _step_actor(self, actor_loss: torch.Tensor, alpha_loss: torch.Tensor) -> None:
        """Step the actor and the temperature on their losses, then move the target critics
        towards the critics (after the critics' own step).

        :raises ValueError: when a loss is not finite (nothing stepped).
        """
        # One check (one host synchronisation on a GPU) for both losses, before either steps.
        if not bool(torch.isfinite(torch.stack([actor_loss.detach(), alpha_loss.detach()])).all()):
            raise ValueError(ACTOR_NOT_FINITE)
        if self.config.autotune_alpha:  # disjoint parameters: one backward pass for both
            gradient_step(self.actor_optimizer, self._actor_parameters, actor_loss + alpha_loss,
                          (self.alpha_optimizer, [self.log_alpha]))
        else:
            gradient_step(self.actor_optimizer, self._actor_parameters, actor_loss)
        with torch.no_grad():
            torch._foreach_lerp_(self._target_parameters, self._critic_parameters,
                                 self.config.tau)

    def _metrics(self, scalars: torch.Tensor, td_errors: torch.Tensor) -> dict[str, float]:
        """Count a finished gradient step; its metrics and TD errors back to the host."""
        self.last_td_errors = td_errors.cpu().numpy()
        self.update_step += 1
        return dict(zip(METRIC_NAMES, scalars.cpu().tolist()))

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

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Optimizers whose state makes up the learner's state."""
        return {"actor_optimizer": self.actor_optimizer, "critic_optimizer": self.critic_optimizer,
                "alpha_optimizer": self.alpha_optimizer}


class SAC(SoftActorCritic):
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
        self.critic: EnsembleQ | EncodedQ
        if self.pixels:
            encoder = PixelEncoder(obs_shape, config.feature_dim, config.encoder_channels)
            self.critic = EncodedQ(encoder, EnsembleQ(
                config.feature_dim, action_dim, config.hidden_sizes, config.critics,
                config.critic_layer_norm)).to(self.device)
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
            self.critic = EnsembleQ(self.obs_dim, action_dim, config.hidden_sizes, config.critics,
                                    config.critic_layer_norm).to(self.device)
            self._encode = nn.Identity()
            self._actor_head, self._critic_heads = self.actor, self.critic
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.target_entropy = -config.target_entropy_scale * action_dim
        self._start_optimizers(self._actor_head, self.critic, self.critic_target)
        #: The whole gradient step compiled into one graph (``compile_update``), else None.
        self._compiled_update: Callable[..., tuple[torch.Tensor, ...]] | None = None
        if config.compile_update:
            if self.pixels:
                raise ConfigError("compile_update compiles the update of state-vector "
                                  "observations only; set compile_update: false for image "
                                  "tasks")
            # Shapes are fixed (a batch size per learner): no dynamic-shape graphs. Parameters,
            # optimizer state and learning rates are the graph's inputs, so optimizer steps,
            # resumed checkpoints and new learning rates reach it without recompiling. The
            # gradients are taken inside the graph (dynamo's ``trace_autograd_ops``).
            self._compiled_update = torch._dynamo.config.patch(trace_autograd_ops=True)(
                torch.compile(self._update_graph, dynamic=False))
        self.update_step = 0
        #: |TD error| of the last batch, for prioritised replay (float32, (batch,)).
        self.last_td_errors = np.zeros(0, dtype=np.float32)

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
        inputs = (obs, next_obs, actions, rewards, 1.0 - terminated, weights,
                  self._demo_mask(batch.indices, always=self._compiled_update is not None),
                  self._draws(actions.shape))
        # Mixed precision (update_precision): the products in bfloat16, the rest in float32.
        # No cache of the parameters' bfloat16 copies: the critics step between their loss and
        # the actor's, so a cached copy would be stale.
        with torch.autocast(self.device.type, torch.bfloat16, cache_enabled=False,
                            enabled=self.config.update_precision == "bfloat16"):
            if self._compiled_update is not None:
                return self._update_compiled(*inputs)
            return self._update_eager(*inputs)

    def _update_eager(self, obs: torch.Tensor, next_obs: torch.Tensor, actions: torch.Tensor,
                      rewards: torch.Tensor, not_done: torch.Tensor, weights: torch.Tensor,
                      demo_mask: torch.Tensor | None, draws: Draws) -> dict[str, float]:
        """:meth:`update` step by step, its checks on the host."""
        alpha = self.log_alpha.detach().exp()
        critic_loss, td, q, features = self._critic_loss(obs, next_obs, actions, rewards,
                                                         not_done, weights, alpha, draws)
        if not torch.isfinite(critic_loss):
            raise ValueError(CRITIC_NOT_FINITE)
        gradient_step(self.critic_optimizer, self._critic_parameters, critic_loss)

        # The actor's gradient comes through the critics to its actions but is taken for the
        # actor's parameters only (no critic gradients computed, none to clear), and the
        # encoder (identity for flat observations) learns from the critic loss only.
        features = features.detach()
        actor_loss, alpha_loss, log_prob, q_new = self._actor_losses(features, alpha,
                                                                     draws.noise)
        bc_loss = self._cloning_loss(demo_mask, features, actions, q_new)
        actor_loss = actor_loss + bc_loss
        self._step_actor(actor_loss, alpha_loss)
        with torch.no_grad():
            scalars = _metric_tensor(critic_loss, actor_loss, alpha_loss, alpha, q, log_prob,
                                     bc_loss)
        return self._metrics(scalars, td.detach().abs().mean(dim=0))

    def _draws(self, action_shape: torch.Size) -> Draws:
        """The step's random numbers, in the order the step uses them."""
        next_noise = torch.randn(action_shape, device=self.device)
        pair = (torch.randperm(self.config.critics, device=self.device)[:2]
                if self.config.critics > 2 else None)
        return Draws(next_noise, pair, torch.randn(action_shape, device=self.device))

    def _update_compiled(self, *inputs: torch.Tensor | Draws | None) -> dict[str, float]:
        """:meth:`update` as one compiled graph, its checks read back after it ran."""
        optimizers = (self.critic_optimizer, self.actor_optimizer, self.alpha_optimizer)
        learning_rates = torch.tensor([optimizer.param_groups[0]["lr"] for optimizer in optimizers],
                                      device=self.device)
        assert self._compiled_update is not None
        scalars, td_errors, finite = self._compiled_update(
            *inputs, learning_rates, *(adam_tensors(optimizer) for optimizer in optimizers))
        critic_finite, actor_finite = finite.tolist()
        if not critic_finite:
            raise ValueError(CRITIC_NOT_FINITE)
        if not actor_finite:
            raise ValueError(ACTOR_NOT_FINITE)
        return self._metrics(scalars, td_errors)

    def _update_graph(self, obs: torch.Tensor, next_obs: torch.Tensor, actions: torch.Tensor,
                      rewards: torch.Tensor, not_done: torch.Tensor, weights: torch.Tensor,
                      demo_mask: torch.Tensor | None, draws: Draws,
                      learning_rates: torch.Tensor,
                      critic_adam: AdamTensors, actor_adam: AdamTensors,
                      alpha_adam: AdamTensors) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The gradient step of :meth:`update` with its checks inside: where a loss is not
        finite, the step changes only what the eager step changes before it raises (nothing
        for the critic loss, the critics for the actor's). Returns the metrics, the TD errors
        and whether the critic and the actor losses were finite."""
        alpha = self.log_alpha.detach().exp()
        critic_loss, td, q, features = self._critic_loss(obs, next_obs, actions, rewards,
                                                         not_done, weights, alpha, draws)
        critic_finite = torch.isfinite(critic_loss)
        adam_step_(critic_adam, torch.autograd.grad(critic_loss, critic_adam.params),
                   learning_rates[0], critic_finite)
        features = features.detach()
        actor_loss, alpha_loss, log_prob, q_new = self._actor_losses(features, alpha,
                                                                     draws.noise)
        bc_loss = self._cloning_loss(demo_mask, features, actions, q_new)
        actor_loss = actor_loss + bc_loss
        actor_finite = critic_finite & torch.isfinite(actor_loss) & torch.isfinite(alpha_loss)
        if self.config.autotune_alpha:
            *actor_grads, alpha_grad = torch.autograd.grad(
                actor_loss + alpha_loss, [*actor_adam.params, self.log_alpha])
            adam_step_(alpha_adam, [alpha_grad], learning_rates[2], actor_finite)
        else:
            actor_grads = list(torch.autograd.grad(actor_loss, actor_adam.params))
        adam_step_(actor_adam, actor_grads, learning_rates[1], actor_finite)
        with torch.no_grad():
            for target, online in zip(self._target_parameters, self._critic_parameters):
                target.copy_(torch.where(actor_finite, target.lerp(online, self.config.tau),
                                         target))
            scalars = _metric_tensor(critic_loss, actor_loss, alpha_loss, alpha, q, log_prob,
                                     bc_loss)
        return scalars, td.detach().abs().mean(dim=0), torch.stack([critic_finite, actor_finite])

    def _critic_loss(self, obs: torch.Tensor, next_obs: torch.Tensor, actions: torch.Tensor,
                     rewards: torch.Tensor, not_done: torch.Tensor, weights: torch.Tensor,
                     alpha: torch.Tensor, draws: Draws
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The critics' loss on a batch: ``(loss, TD errors (members, batch), Q (members,
        batch), the observations' features)``; compiled with ``compile_update``."""
        with torch.no_grad():
            next_actions, next_log_prob = self.actor(next_obs, noise=draws.next_noise)
            next_q = self.critic_target(next_obs, next_actions)
            if self.config.critics > 2:  # REDQ/RLPD: the minimum of a random pair
                next_q = next_q[draws.pair]
            soft_value = next_q.min(dim=0).values - alpha * next_log_prob
            q_target = rewards + self.config.bootstrap_discount * not_done * soft_value
        features = self._encode(obs)
        q = self._critic_heads(features, actions)  # (members, batch)
        td = q - q_target
        # Each member's weighted mean squared TD error, halved and summed over the members.
        return 0.5 * (weights * td.pow(2)).mean(dim=1).sum(), td, q, features

    def _actor_losses(self, features: torch.Tensor, alpha: torch.Tensor,
                      noise: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The actor's loss (without cloning) and the temperature's on a batch's detached
        features: ``(actor loss, temperature loss, log-probabilities, the value of the
        policy's actions)``; compiled with ``compile_update``. ``noise``: the policy's draw
        (:class:`Draws`)."""
        new_actions, log_prob = self._actor_head(features, noise=noise)
        q_new = self._value(self._critic_heads(features, new_actions))
        alpha_loss = torch.zeros((), device=self.device)
        if self.config.autotune_alpha:
            alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
        return (alpha * log_prob - q_new).mean(), alpha_loss, log_prob, q_new

    def _value(self, q: torch.Tensor) -> torch.Tensor:
        """What the actor maximises of the critics' ``(members, batch)`` estimates: their
        minimum (twin critics) or their mean (an ensemble)."""
        return q.mean(dim=0) if self.config.critics > 2 else q.min(dim=0).values

    def _demo_mask(self, indices: np.ndarray, always: bool = False) -> torch.Tensor | None:
        """Which rows of a batch are demonstrations, as 1.0 and 0.0, where behaviour cloning
        needs it: None without cloning (``demo_bc_weight`` 0) and, unless ``always`` (a
        compiled graph keeps its inputs), for a batch without demonstrations."""
        if not self.config.demo_bc_weight:
            return None
        demo_rows = indices == DEMO_SLOT
        if not (always or demo_rows.any()):
            return None
        return torch.as_tensor(demo_rows, dtype=torch.float32, device=self.device)

    def _cloning_loss(self, demo_mask: torch.Tensor | None, features: torch.Tensor,
                      actions: torch.Tensor, q_new: torch.Tensor) -> torch.Tensor:
        """Behaviour cloning of the policy's deterministic action on the batch's demonstration
        rows, with a Q filter (zero without a ``demo_mask`` or a demonstration row).

        :param demo_mask: 1.0 on the demonstration rows, 0.0 elsewhere (:meth:`_demo_mask`).
        :param features: the batch's observations as the actor takes them (detached).
        :param q_new: the value of the policy's sampled action per row.
        """
        if demo_mask is None:
            return torch.zeros((), device=self.device)
        with torch.no_grad():
            # Clone only where the critics value the demonstrated action above the policy's.
            better = (self._value(self._critic_heads(features, actions)) > q_new).float()
            scale = q_new.abs().mean()
        policy_actions, _ = self._actor_head(features, deterministic=True)
        distance = (policy_actions - actions).pow(2).mean(dim=1)
        # The mean over the demonstration rows (none: zero).
        row_weights = demo_mask / demo_mask.sum().clamp(min=1.0)
        return self.config.demo_bc_weight * scale * (row_weights * better * distance).sum()

    def modules(self) -> dict[str, nn.Module]:
        """Networks whose parameters make up the learner's state."""
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}



def _metric_tensor(critic_loss: torch.Tensor, actor_loss: torch.Tensor,
                   alpha_loss: torch.Tensor, alpha: torch.Tensor, q: torch.Tensor,
                   log_prob: torch.Tensor, bc_loss: torch.Tensor) -> torch.Tensor:
    """A gradient step's metrics in the order of :data:`METRIC_NAMES`, as one tensor (one
    transfer to the host)."""
    return torch.stack([critic_loss, actor_loss, alpha_loss, alpha, q[0].mean(),
                        -log_prob.mean(), bc_loss]).detach()


def new_adam(parameters: Iterable[torch.Tensor], lr: float) -> torch.optim.Adam:
    """Adam stepping all its tensors at once: the fused kernel where this torch has one for
    the parameters' device, else the multi-tensor (foreach) path; never a loop per tensor."""
    parameters = list(parameters)
    try:
        return torch.optim.Adam(parameters, lr=lr, fused=True)
    except RuntimeError:  # no fused Adam for this device or dtype
        return torch.optim.Adam(parameters, lr=lr, foreach=True)


def gradient_step(optimizer: torch.optim.Optimizer, parameters: list[torch.Tensor],
                  loss: torch.Tensor, *others: tuple[torch.optim.Optimizer, list[torch.Tensor]]
                  ) -> None:
    """Step ``optimizer`` (and ``others``) on the gradient of ``loss`` for their parameters
    only: one backward pass, nothing accumulated into other tensors, nothing to clear first."""
    everything = [(optimizer, parameters), *others]
    tensors = [tensor for _, group in everything for tensor in group]
    for tensor, gradient in zip(tensors, torch.autograd.grad(loss, tensors)):
        # autograd.grad keeps no layout contract (backward() does): a batched product's weight
        # gradient can come transposed, and torch 2.13's fused CPU Adam steps a non-contiguous
        # gradient wrongly (tests/unit/test_checkpoint_upgrade.py caught it).
        tensor.grad = gradient.contiguous()
    for each, _ in everything:
        each.step()
