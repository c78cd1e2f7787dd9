"""Which observation and action spaces rl_ros2 learns, and the one message refusing the rest.

SAC, the replay rows and the messages take one ``Box`` observation (a flat vector or a
``uint8`` image) and one ``Box`` action. The deployment plan checks a task's spaces before any
process starts (``rl_bringup.plan.parameter_overrides.check_task``), and
:class:`~rl_core.envs.vector.VectorEnv` where an env is made, with the same words.
"""

from __future__ import annotations

import gymnasium

__all__ = ["SUPPORTED_SPACES", "unsupported_spaces"]

SUPPORTED_SPACES = ("a Box observation (a vector or a uint8 image) and a Box action "
                    "(continuous)")


def unsupported_spaces(env_id: str, observation_space: gymnasium.Space,
                       action_space: gymnasium.Space) -> str | None:
    """One line naming the spaces of ``env_id`` that rl_ros2 cannot learn, what it learns, and
    how to get there; None where both are supported."""
    unsupported = [f"{what} {space}" for what, space in (("observations", observation_space),
                                                       ("actions", action_space))
                   if not isinstance(space, gymnasium.spaces.Box)]
    if not unsupported:
        return None
    return (f"env_id {env_id!r} has {' and '.join(unsupported)}: rl_ros2 learns "
            f"{SUPPORTED_SPACES} only; give the env Box spaces with a gymnasium wrapper "
            "(FlattenObservation flattens a Dict of Boxes) and register it, or choose another "
            "env_id")
