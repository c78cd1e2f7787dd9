"""Which observation and action spaces rl_ros2 learns, and the one message refusing the rest.

SAC, the replay rows and the messages take one ``Box`` observation (a flat vector or a
``uint8`` image) and one ``Box`` action. The bare loop also learns one ``Discrete(n)`` action
(rl_core.algorithms.discrete_sac), carried as one float, the choice's index. The deployment
plan checks a task's spaces before any process starts
(``rl_bringup.plan.parameter_overrides.check_task``), and
:class:`~rl_core.envs.vector.VectorEnv` where an env is made, with the same words.
"""

from __future__ import annotations

import gymnasium

__all__ = ["SUPPORTED_SPACES", "action_row_shape", "unsupported_spaces"]

SUPPORTED_SPACES = ("a Box observation (a vector or a uint8 image) and a Box action "
                    "(continuous)")
#: Said where a Discrete action is refused.
DISCRETE_NOTE = "a Discrete action with a vector observation trains in the bare loop (rl-train-bare)"


def unsupported_spaces(env_id: str, observation_space: gymnasium.Space,
                       action_space: gymnasium.Space, discrete_actions: bool = False
                       ) -> str | None:
    """One line naming the spaces of ``env_id`` that rl_ros2 cannot learn, what it learns, and
    how to get there; None where both are supported.

    :param discrete_actions: a ``Discrete`` action with a vector observation is supported too
        (the bare loop).
    """
    discrete = isinstance(action_space, gymnasium.spaces.Discrete)
    vector = isinstance(observation_space, gymnasium.spaces.Box) and \
        len(observation_space.shape) == 1
    if discrete and discrete_actions and vector:
        return None
    unsupported = [f"{what} {space}" for what, space in (("observations", observation_space),
                                                       ("actions", action_space))
                   if not isinstance(space, gymnasium.spaces.Box)]
    if not unsupported:
        return None
    return (f"env_id {env_id!r} has {' and '.join(unsupported)}: rl_ros2 learns "
            f"{SUPPORTED_SPACES}{'' if discrete_actions else '; ' + DISCRETE_NOTE}; give "
            "the env Box spaces with a gymnasium wrapper (FlattenObservation flattens a Dict "
            "of Boxes) and register it, or choose another env_id")


def action_row_shape(action_space: gymnasium.Space) -> tuple[int, ...]:
    """Shape of one action as the replay and the messages carry it: a ``Box``'s own shape, or
    ``(1,)`` for a ``Discrete`` choice (its index as a float)."""
    if isinstance(action_space, gymnasium.spaces.Discrete):
        return (1,)
    return tuple(action_space.shape or ())
