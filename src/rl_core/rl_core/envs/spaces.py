"""Which observation and action spaces rl_ros2 learns, and the one message refusing the rest.

SAC, the replay rows and the messages take one ``Box`` observation (a flat vector or a
``uint8`` image) and one ``Box`` action, or a flat vector observation and one ``Discrete(n)``
action (rl_core.algorithms.discrete_sac), which travels as one float, the choice's index. A
``Dict`` of vector ``Box``es (a goal-conditioned env's ``observation``, ``achieved_goal`` and
``desired_goal``) is flattened into one vector where an env is made (gymnasium's
``FlattenObservation``, keys in sorted order), as SB3's ``CombinedExtractor`` concatenates
vector keys. A ``MultiDiscrete`` or ``MultiBinary`` action with at most
:data:`MAX_JOINT_CHOICES` combinations is learned as one ``Discrete`` action over them (every
combination one choice, so the critics value each exactly). The deployment plan checks a task's
spaces before any process starts
(``rl_bringup.plan.parameter_overrides.check_task``), and
:class:`~rl_core.envs.vector.VectorEnv` where an env is made, with the same words.
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium.wrappers import FlattenObservation

__all__ = ["MAX_JOINT_CHOICES", "SUPPORTED_SPACES", "action_choices", "action_row_shape",
           "flattened_observations", "random_actions", "unsupported_spaces",
           "with_rl_spaces"]

#: The most combinations of a MultiDiscrete or MultiBinary action learned as one Discrete.
MAX_JOINT_CHOICES = 64
SUPPORTED_SPACES = ("a Box observation (a vector or a uint8 image; a Dict of vector Boxes is "
                    "flattened) with a Box action (continuous), or a vector observation with a "
                    f"Discrete action (or a MultiDiscrete or MultiBinary one of at most "
                    f"{MAX_JOINT_CHOICES} combinations)")


def joint_choices(space: gymnasium.Space) -> int:
    """The combinations of a ``MultiDiscrete`` or ``MultiBinary`` action (0 for any other)."""
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return int(2 ** int(np.prod(space.shape)))
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return int(np.prod(space.nvec, dtype=np.int64))
    return 0


class JointChoice(gymnasium.ActionWrapper):
    """A ``MultiDiscrete`` or ``MultiBinary`` action as one ``Discrete`` over its combinations
    (choice ``i`` is the combination ``numpy.unravel_index(i, sizes)``)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        space = env.action_space
        self._sizes = (tuple(int(n) for n in np.ravel(space.nvec))
                       if isinstance(space, gymnasium.spaces.MultiDiscrete)
                       else (2,) * int(np.prod(space.shape or ())))
        self._shape = space.shape
        self._dtype = space.dtype
        self.action_space = gymnasium.spaces.Discrete(joint_choices(space))

    def action(self, action: int) -> np.ndarray:
        combination = np.unravel_index(int(action), self._sizes)
        return np.asarray(combination, dtype=self._dtype).reshape(self._shape)


def flattened_observations(space: gymnasium.Space) -> bool:
    """Whether observations of ``space`` are a ``Dict`` of vector (one-dimensional) ``Box``es,
    which rl_ros2 flattens into one vector (:func:`with_rl_spaces`); images stay out."""
    return isinstance(space, gymnasium.spaces.Dict) and len(space.spaces) > 0 and all(
        isinstance(part, gymnasium.spaces.Box) and len(part.shape) == 1
        for part in space.spaces.values())


def with_rl_spaces(env: gymnasium.Env) -> gymnasium.Env:
    """``env`` with the spaces every node sees: its observations flattened where they are a
    ``Dict`` of vector ``Box``es, and a ``MultiDiscrete`` or ``MultiBinary`` action of at most
    :data:`MAX_JOINT_CHOICES` combinations as one ``Discrete`` (the env's own methods, e.g. a
    goal-conditioned ``compute_reward``, stay on ``env.unwrapped``)."""
    if flattened_observations(env.observation_space):
        env = FlattenObservation(env)
    if 0 < joint_choices(env.action_space) <= MAX_JOINT_CHOICES:
        env = JointChoice(env)
    return env


def unsupported_spaces(env_id: str, observation_space: gymnasium.Space,
                       action_space: gymnasium.Space) -> str | None:
    """One line naming the spaces of ``env_id`` that rl_ros2 cannot learn, what it learns, and
    how to get there; None where both are supported."""
    if flattened_observations(observation_space):
        observation_space = gymnasium.spaces.flatten_space(observation_space)
    if 0 < joint_choices(action_space) <= MAX_JOINT_CHOICES:
        action_space = gymnasium.spaces.Discrete(joint_choices(action_space))
    unsupported = []
    if not isinstance(observation_space, gymnasium.spaces.Box):
        unsupported.append(f"observations {observation_space}")
    if not isinstance(action_space, gymnasium.spaces.Box | gymnasium.spaces.Discrete):
        unsupported.append(f"actions {action_space}")
    elif (not unsupported and isinstance(action_space, gymnasium.spaces.Discrete)
          and len(observation_space.shape or ()) != 1):
        unsupported.append(f"observations {observation_space} with actions {action_space}")
    if not unsupported:
        return None
    return (f"env_id {env_id!r} has {' and '.join(unsupported)}: rl_ros2 learns "
            f"{SUPPORTED_SPACES}; give the env such spaces with a gymnasium wrapper and "
            "register it, or choose another env_id")


def action_choices(action_space: gymnasium.Space) -> int:
    """The number of choices of a ``Discrete`` action; 0 for a ``Box`` (continuous)."""
    return int(action_space.n) if isinstance(action_space, gymnasium.spaces.Discrete) else 0


def action_row_shape(action_space: gymnasium.Space) -> tuple[int, ...]:
    """Shape of one action as the replay and the messages carry it: a ``Box``'s own shape, or
    ``(1,)`` for a ``Discrete`` choice (its index as a float)."""
    if isinstance(action_space, gymnasium.spaces.Discrete):
        return (1,)
    return tuple(action_space.shape or ())


def random_actions(rng: np.random.Generator, shape: tuple[int, ...], choices: int) -> np.ndarray:
    """float32 random actions of ``shape``: uniform in [-1, 1] for a ``Box`` action (the scale
    the policies act in), uniform indices for a ``Discrete`` one of ``choices``."""
    if choices:
        return rng.integers(0, choices, shape).astype(np.float32)
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)
