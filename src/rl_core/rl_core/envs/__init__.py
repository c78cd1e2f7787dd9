"""Gymnasium environments on pybullet, registered under the ``rl_ros2/`` namespace.

Importing this package registers the environments (repeated imports or calls
to :func:`register_envs` are harmless), so ``gymnasium.make(CARTPOLE_ID)``
works once ``rl_core.envs`` has been imported.
"""

from __future__ import annotations

from typing import Any

import gymnasium

from rl_core.envs.base import PybulletRobotEnv
from rl_core.envs.cartpole import CartPoleBalanceEnv
from rl_core.envs.kuka_reach import KukaReachEnv
from rl_core.envs.pixels import CARTPOLE_ACTION_REPEAT, KUKA_REACH_ACTION_REPEAT
from rl_core.envs.vector import EpisodeRecord, VectorEnv, VectorStep

__all__ = [
    "CARTPOLE_ID",
    "CARTPOLE_PIXELS_ID",
    "KUKA_REACH_GOAL_ID",
    "KUKA_REACH_ID",
    "KUKA_REACH_PIXELS_ID",
    "CartPoleBalanceEnv",
    "EpisodeRecord",
    "KukaReachEnv",
    "PybulletRobotEnv",
    "VectorEnv",
    "VectorStep",
    "make_env",
    "register_envs",
]

CARTPOLE_ID = "rl_ros2/CartPoleBalance-v0"
KUKA_REACH_ID = "rl_ros2/KukaReach-v0"
#: KukaReach goal-conditioned (rl_core.envs.kuka_reach_goal): Dict observations, sparse reward.
KUKA_REACH_GOAL_ID = "rl_ros2/KukaReachGoal-v0"
#: Pixel variants (rl_core.envs.pixels): the same tasks seen through stacked rendered frames.
CARTPOLE_PIXELS_ID = "rl_ros2/CartPoleBalancePixels-v0"
KUKA_REACH_PIXELS_ID = "rl_ros2/KukaReachPixels-v0"

#: id -> (entry point, max_episode_steps)
_REGISTRATIONS: dict[str, tuple[str, int]] = {
    CARTPOLE_ID: ("rl_core.envs.cartpole:CartPoleBalanceEnv", 200),
    KUKA_REACH_ID: ("rl_core.envs.kuka_reach:KukaReachEnv", 100),
    KUKA_REACH_GOAL_ID: ("rl_core.envs.kuka_reach_goal:KukaReachGoalEnv", 100),
    # Agent steps: the state task's limit over the pixel variant's action repeat.
    CARTPOLE_PIXELS_ID: ("rl_core.envs.pixels:cartpole_pixels", 200 // CARTPOLE_ACTION_REPEAT),
    KUKA_REACH_PIXELS_ID: ("rl_core.envs.pixels:kuka_reach_pixels",
                           100 // KUKA_REACH_ACTION_REPEAT),
}


def register_envs() -> None:
    """Registers the environments with gymnasium unless they already are."""
    for env_id, (entry_point, max_episode_steps) in _REGISTRATIONS.items():
        # gymnasium warns when an id is registered twice, hence the check.
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id, entry_point=entry_point, max_episode_steps=max_episode_steps
            )


def make_env(env_id: str, **kwargs: Any) -> gymnasium.Env:
    """Creates a registered environment, wrapped as ``gymnasium.make`` does.

    :param env_id: ``CARTPOLE_ID``, ``KUKA_REACH_ID`` or any other registered id.
    :param **kwargs: Passed to ``gymnasium.make`` (e.g. ``render_mode``,
        ``max_episode_steps`` or constructor arguments).
    :returns: The environment, with the registered TimeLimit wrapper, its observations flattened
        where they are a Dict of vector Boxes (rl_core.envs.spaces).
    """
    from rl_core.envs.spaces import with_rl_spaces

    register_envs()
    return with_rl_spaces(gymnasium.make(env_id, **kwargs))


register_envs()
