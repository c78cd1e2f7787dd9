"""Which observation and action spaces rl_ros2 learns, and the one message refusing the rest.

SAC, the replay rows and the messages take one ``Box`` observation (a flat vector or a ``uint8``
image) and one ``Box`` action, or a flat vector observation and one ``Discrete(n)`` action
(rl_core.algorithms.discrete_sac), which travels as one float, the choice's index. A ``Dict`` of
vector ``Box``es (a goal-conditioned env's ``observation``, ``achieved_goal`` and
``desired_goal``) is flattened into one vector where an env is made (gymnasium's
``FlattenObservation``, keys sorted), as SB3's ``CombinedExtractor`` concatenates vector keys. A
``MultiDiscrete`` or ``MultiBinary`` action of at most :data:`MAX_JOINT_CHOICES` combinations is
learned as one ``Discrete`` over them, so the critics value each exactly. A ``Dict`` action of one
vector ``Box`` (an arm) and such discrete parts (a gripper) travels as :class:`ArmAndChoice`: the
arm's values, then the combination's index (rl_core.algorithms.hybrid_sac). The plan checks a
task's spaces before any process starts (``rl_bringup.plan.parameter_overrides.check_task``), and
:class:`~rl_core.envs.vector.VectorEnv` where an env is made, with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import gymnasium
import numpy as np
from gymnasium.wrappers import FlattenObservation

__all__ = ["MAX_JOINT_CHOICES", "SUPPORTED_SPACES", "ArmAndChoice", "HybridBox",
           "action_choices", "action_row_shape", "arm_and_choice_parts",
           "flattened_observations", "learned_action_space", "random_actions",
           "unsupported_spaces", "with_rl_spaces"]

#: The most combinations of a MultiDiscrete or MultiBinary action learned as one Discrete.
MAX_JOINT_CHOICES = 64
SUPPORTED_SPACES = ("a Box observation (a vector or a uint8 image; a Dict of vector Boxes is "
                    "flattened) with a Box action (continuous), or a vector observation with a "
                    f"Discrete action (or a MultiDiscrete or MultiBinary one of at most "
                    f"{MAX_JOINT_CHOICES} combinations) or a Dict action of one vector Box and "
                    "such discrete parts (an arm and a gripper)")


def joint_choices(space: gymnasium.Space) -> int:
    """The combinations of a ``MultiDiscrete`` or ``MultiBinary`` action (0 for any other)."""
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return int(2 ** int(np.prod(space.shape)))
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return int(np.prod(space.nvec, dtype=np.int64))
    return 0


def _sizes(space: gymnasium.Space) -> tuple[int, ...]:
    """The number of values of each discrete component of ``space`` (one per ``Discrete``)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return (int(space.n),)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return tuple(int(n) for n in np.ravel(space.nvec))
    return (2,) * int(np.prod(space.shape or ()))


def _combination(space: gymnasium.Space, values: Sequence[int]) -> Any:
    """The value of discrete ``space`` whose components are ``values`` (from :func:`_sizes`)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(space.start) + int(values[0])
    return np.asarray(values, dtype=space.dtype).reshape(space.shape)


class JointChoice(gymnasium.ActionWrapper):
    """A ``MultiDiscrete`` or ``MultiBinary`` action as one ``Discrete`` over its combinations
    (choice ``i`` is the combination ``numpy.unravel_index(i, sizes)``)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self._space = env.action_space
        self._sizes = _sizes(self._space)
        self.action_space = gymnasium.spaces.Discrete(joint_choices(self._space))

    def action(self, action: int) -> np.ndarray:
        return _combination(self._space,
                            [int(v) for v in np.unravel_index(int(action), self._sizes)])


class HybridBox(gymnasium.spaces.Box):
    """An arm-and-choice action row: ``arm_dim`` values in [-1, 1], then the index of one of
    ``choices`` (a float; ``rl_core.wire.messages.choice_indices`` checks it)."""

    def __init__(self, arm_dim: int, choices: int) -> None:
        low = np.append(-np.ones(arm_dim), 0.0).astype(np.float32)
        high = np.append(np.ones(arm_dim), choices - 1).astype(np.float32)
        super().__init__(low, high, dtype=np.float32)
        self.choices = int(choices)


def arm_and_choice_parts(space: gymnasium.Space) -> tuple[str, list[str], int] | None:
    """``(the Box part's key, the discrete parts' keys, their combinations)`` of a ``Dict``
    action of exactly one vector ``Box`` and at least one ``Discrete``, ``MultiDiscrete`` or
    ``MultiBinary`` part; None for any other space."""
    if not isinstance(space, gymnasium.spaces.Dict):
        return None
    boxes = [key for key, part in space.spaces.items()
             if isinstance(part, gymnasium.spaces.Box) and len(part.shape) == 1]
    discrete = [key for key, part in space.spaces.items()
                if isinstance(part, gymnasium.spaces.Discrete) or joint_choices(part)]
    if len(boxes) != 1 or not discrete or len(boxes) + len(discrete) != len(space.spaces):
        return None
    combinations = math.prod(math.prod(_sizes(space[key])) for key in discrete)
    return boxes[0], discrete, combinations


class ArmAndChoice(gymnasium.ActionWrapper):
    """A ``Dict`` action of an arm (one vector ``Box``) and discrete parts as one
    :class:`HybridBox` row: the arm's values as they are, then the index of the discrete parts'
    combination (``numpy.unravel_index`` over every part's components, in the Dict's order)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        parts = arm_and_choice_parts(env.action_space)
        assert parts is not None
        self._arm, self._discrete, choices = parts
        self._space = cast(gymnasium.spaces.Dict, env.action_space)
        self._arm_dim = int(cast(gymnasium.spaces.Box, self._space[self._arm]).shape[0])
        self._sizes = [_sizes(self._space[key]) for key in self._discrete]
        self.action_space = HybridBox(self._arm_dim, choices)

    def action(self, action: np.ndarray) -> dict[str, Any]:
        row = np.asarray(action, dtype=np.float32)
        values = [int(v) for v in np.unravel_index(int(round(float(row[-1]))),
                                                     [n for sizes in self._sizes for n in sizes])]
        out: dict[str, Any] = {self._arm: row[:self._arm_dim].astype(self._space[self._arm].dtype)}
        start = 0
        for key, sizes in zip(self._discrete, self._sizes):
            out[key] = _combination(self._space[key], values[start:start + len(sizes)])
            start += len(sizes)
        return out


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
    parts = arm_and_choice_parts(env.action_space)
    if parts is not None and parts[2] <= MAX_JOINT_CHOICES:
        env = ArmAndChoice(env)
    return env


def learned_action_space(action_space: gymnasium.Space) -> gymnasium.Space:
    """``action_space`` as :func:`with_rl_spaces` hands it to the learner."""
    if 0 < joint_choices(action_space) <= MAX_JOINT_CHOICES:
        return gymnasium.spaces.Discrete(joint_choices(action_space))
    parts = arm_and_choice_parts(action_space)
    if parts is not None and parts[2] <= MAX_JOINT_CHOICES:
        arm = cast(gymnasium.spaces.Box, cast(gymnasium.spaces.Dict, action_space)[parts[0]])
        return HybridBox(int(arm.shape[0]), parts[2])
    return action_space


def unsupported_spaces(env_id: str, observation_space: gymnasium.Space,
                       action_space: gymnasium.Space) -> str | None:
    """One line naming the spaces of ``env_id`` that rl_ros2 cannot learn, what it learns, and
    how to get there; None where both are supported."""
    if flattened_observations(observation_space):
        observation_space = gymnasium.spaces.flatten_space(observation_space)
    action_space = learned_action_space(action_space)
    unsupported = []
    if not isinstance(observation_space, gymnasium.spaces.Box):
        unsupported.append(f"observations {observation_space}")
    if not isinstance(action_space, gymnasium.spaces.Box | gymnasium.spaces.Discrete):
        unsupported.append(f"actions {action_space}")
    elif (not unsupported and action_choices(action_space)
          and len(observation_space.shape or ()) != 1):
        unsupported.append(f"observations {observation_space} with actions {action_space}")
    if not unsupported:
        return None
    return (f"env_id {env_id!r} has {' and '.join(unsupported)}: rl_ros2 learns "
            f"{SUPPORTED_SPACES}; give the env such spaces with a gymnasium wrapper and "
            "register it, or choose another env_id")


def action_choices(action_space: gymnasium.Space) -> int:
    """The number of choices of a ``Discrete`` action or of an arm-and-choice one
    (:class:`HybridBox`, the last value of its rows); 0 for a ``Box`` (continuous)."""
    if isinstance(action_space, gymnasium.spaces.Discrete):
        return int(action_space.n)
    return action_space.choices if isinstance(action_space, HybridBox) else 0


def action_row_shape(action_space: gymnasium.Space) -> tuple[int, ...]:
    """Shape of one action as the replay and the messages carry it: a ``Box``'s own shape, or
    ``(1,)`` for a ``Discrete`` choice (its index as a float)."""
    if isinstance(action_space, gymnasium.spaces.Discrete):
        return (1,)
    return tuple(action_space.shape or ())


def random_actions(rng: np.random.Generator, shape: tuple[int, ...], choices: int) -> np.ndarray:
    """float32 random actions of ``shape``: uniform in [-1, 1] for a ``Box`` action (the scale
    the policies act in), and with ``choices`` the last value of each row a uniform index (a
    ``Discrete`` action's rows hold only that)."""
    if choices and shape[-1] == 1:
        return rng.integers(0, choices, shape).astype(np.float32)
    actions = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    if choices:
        actions[..., -1] = rng.integers(0, choices, shape[:-1])
    return actions
