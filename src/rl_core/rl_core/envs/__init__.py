"""Gymnasium environments on pybullet, registered under the ``rl_ros2/`` namespace.

Importing this package registers the environments (repeated imports or calls
to :func:`register_envs` are harmless), so ``gymnasium.make(CARTPOLE_ID)``
works once ``rl_core.envs`` has been imported.
"""

from __future__ import annotations

import importlib
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
    "space_shapes",
]

CARTPOLE_ID = "rl_ros2/CartPoleBalance-v0"
KUKA_REACH_ID = "rl_ros2/KukaReach-v0"
#: Pixel variants (rl_core.envs.pixels): the same tasks seen through stacked rendered frames.
CARTPOLE_PIXELS_ID = "rl_ros2/CartPoleBalancePixels-v0"
KUKA_REACH_PIXELS_ID = "rl_ros2/KukaReachPixels-v0"

#: id -> (entry point, max_episode_steps)
_REGISTRATIONS: dict[str, tuple[str, int]] = {
    CARTPOLE_ID: ("rl_core.envs.cartpole:CartPoleBalanceEnv", 200),
    KUKA_REACH_ID: ("rl_core.envs.kuka_reach:KukaReachEnv", 100),
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
    :returns: The environment, with the registered TimeLimit wrapper.
    """
    register_envs()
    return gymnasium.make(env_id, **kwargs)


def _registered(env_id: str) -> bool:
    """Whether gymnasium can make ``env_id``: a registered id, or ``module:Id`` whose module
    registers ``Id`` when imported (gymnasium's own convention for third-party envs)."""
    if env_id in gymnasium.registry:
        return True
    module, _, name = env_id.rpartition(":")
    if not module:
        return False
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return name in gymnasium.registry


def space_shapes(env_id: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(observation shape, action shape)`` of a task: a gymnasium id (registered, or
    ``module:Id``) or a robot task's entry point (``module:TaskClass``, rl_core.robot.tasks).

    :raises ValueError: when ``env_id`` names neither; the message lists the built-in ids.
    """
    register_envs()
    from rl_core.robot.tasks import is_task_name, load_task

    if not _registered(env_id):
        if is_task_name(env_id):
            task = load_task(env_id)
            return tuple(task.observation_space.shape), tuple(task.action_space.shape)
        known = ", ".join(sorted(k for k in gymnasium.registry if k.startswith("rl_ros2/")))
        raise ValueError(f"unknown env_id {env_id!r}: neither a registered gymnasium id, nor "
                         f"'module:Id' whose module registers Id, nor 'module:Task' naming a "
                         f"rl_core.robot.tasks.Task; rl_ros2 provides: {known}")
    env = gymnasium.make(env_id, disable_env_checker=True)
    try:
        return tuple(env.observation_space.shape or ()), tuple(env.action_space.shape or ())
    finally:
        env.close()


register_envs()
