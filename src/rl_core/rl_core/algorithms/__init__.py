"""Learning algorithms of rl_core and the networks they share with the policy side: SAC
(``sac``), SAC for a discrete action (``discrete_sac``), double DQN for one (``dqn``), SAC for an
arm and a choice (``hybrid_sac``), the actor and critics (``networks``), the image encoder and
the pixel actor and critics built on it (``encoders``)."""

from collections.abc import Sequence

import numpy as np
import torch

from rl_core.algorithms.discrete_sac import CategoricalActor, DiscreteQ, DiscreteSAC
from rl_core.algorithms.dqn import DQN, GreedyActor
from rl_core.algorithms.encoders import EncodedActor, make_actor
from rl_core.algorithms.hybrid_sac import HybridActor, HybridSAC
from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.algorithms.sac import SAC
from rl_core.config import ConfigError, SACConfig, algorithm_refusal
from rl_core.wire.image_codecs import as_shape, is_image_shape

#: A learner's algorithm: what the learner, its periodic evaluation and checkpoints drive.
Algorithm = SAC | DiscreteSAC | DQN | HybridSAC
#: What a policy acts with: a continuous actor (for vectors or images), a categorical one (a
#: greedy one for DQN's), or an arm-and-choice one.
Actor = SquashedGaussianActor | EncodedActor | CategoricalActor | HybridActor
#: Learners of a ``Discrete`` action (or an arm and a choice): they have ``choices``.
WITH_CHOICES = (DiscreteSAC, DQN, HybridSAC)

__all__ = ["DQN", "SAC", "WITH_CHOICES", "Actor", "Algorithm",
           "DiscreteSAC", "HybridSAC", "new_actor", "new_algorithm"]


def new_algorithm(obs_shape: int | Sequence[int], action_shape: Sequence[int], choices: int,
                  config: SACConfig, seed: int, device: torch.device | str = "cpu"
                  ) -> Algorithm:
    """The learner of a task: where it has ``choices``, SAC for discrete actions (rows of one
    value, a ``Discrete`` action) or for an arm and a choice (wider rows, the index last), else
    SAC for its ``action_shape``.

    :raises ConfigError: for a setting the algorithm does not have, and ``algorithm: dqn``
        for an action that is not one ``Discrete``.
    """
    shape = as_shape(obs_shape)
    obs = shape if is_image_shape(shape) else int(np.prod(shape))
    width = int(np.prod(action_shape))
    if (refusal := algorithm_refusal(config.algorithm, choices, width)) is not None:
        raise ConfigError(refusal)
    if config.algorithm == "dqn":
        return DQN(obs, choices, config, seed=seed, device=device)
    if choices and width > 1:
        return HybridSAC(obs, width - 1, choices, config, seed=seed, device=device)
    if choices:
        return DiscreteSAC(obs, choices, config, seed=seed, device=device)
    return SAC(obs, int(np.prod(action_shape)), config, seed=seed, device=device)


def new_actor(obs_shape: int | Sequence[int], action_shape: Sequence[int], choices: int,
              hidden_sizes: Sequence[int], feature_dim: int, encoder_channels: int,
              algorithm: str = "sac") -> Actor:
    """A stand-alone actor of the kind :func:`new_algorithm` trains (inference: checkpoints,
    policy nodes)."""
    obs_dim, width = int(np.prod(as_shape(obs_shape))), int(np.prod(action_shape))
    if algorithm == "dqn" and choices and width == 1:
        return GreedyActor(obs_dim, choices, hidden_sizes)
    if choices and width > 1:
        return HybridActor(SquashedGaussianActor(obs_dim, width - 1, hidden_sizes),
                           DiscreteQ(obs_dim, choices, hidden_sizes), choices)
    if choices:
        return CategoricalActor(obs_dim, choices, hidden_sizes)
    return make_actor(obs_shape, int(np.prod(action_shape)), hidden_sizes, feature_dim,
                      encoder_channels)
