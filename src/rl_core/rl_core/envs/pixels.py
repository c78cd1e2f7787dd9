"""Pixel-observation variants of the tasks: the agent sees rendered RGB frames, not the state.

Each variant is the state task with its observation replaced by the last ``frame_stack`` frames
of pybullet's CPU TinyRenderer (the environment's own DIRECT client, so it runs headless and in
parallel), ``uint8`` of shape ``(frame_stack, height, width, 3)``.

The agent acts every ``action_repeat`` control periods, as in the published pixel benchmarks
(PlaNet, DrQ): frames one control period apart barely differ at this resolution, so velocities
could not be seen. Rewards are summed over the repeats and the registered time limits count
agent steps (``state limit / action_repeat``), so dynamics, rewards, terminations and the
largest return are those of the state task and returns compare directly.

Gymnasium's own wrappers do the rest (``AddRenderObservation``, ``FrameStackObservation``);
gymnasium has no general action-repeat wrapper, hence :class:`ActionRepeat`.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium.wrappers import AddRenderObservation, FrameStackObservation

from rl_core.envs.base import PybulletRobotEnv
from rl_core.envs.cartpole import CartPoleBalanceEnv
from rl_core.envs.kuka_reach import KukaReachEnv

__all__ = ["CARTPOLE_ACTION_REPEAT", "DEFAULT_FRAME_STACK", "DEFAULT_RESOLUTION",
           "KUKA_REACH_ACTION_REPEAT", "ActionRepeat", "cartpole_pixels", "kuka_reach_pixels",
           "make_pixel_env"]

#: Width and height of a frame: small enough for a CPU learner, large enough to see the pole.
DEFAULT_RESOLUTION = 64
#: Frames per observation; three let a convolutional encoder infer velocities.
DEFAULT_FRAME_STACK = 3
#: Control periods per agent step: 4 x 0.02 s, DrQ's 0.08 s for cart-pole.
CARTPOLE_ACTION_REPEAT = 4
#: 2 x 0.05 s, PlaNet's default repeat for arm-like tasks.
KUKA_REACH_ACTION_REPEAT = 2
#: Camera distance (m) of the pixel cart-pole: the state task's render camera frames the whole
#: +-2.4 m rail, where the 5 cm pole is under one pixel wide at 64x64; this one frames +-1.2 m
#: (the cart leaves the picture only shortly before it would leave the rail anyway).
CARTPOLE_CAMERA_DISTANCE = 2.2


class ActionRepeat(gymnasium.Wrapper[np.ndarray, np.ndarray, np.ndarray, np.ndarray]):
    """Applies each action for ``repeat`` steps of the wrapped env and sums their rewards.

    Stops early when the episode ends; the info dict is that of the last inner step.

    :param env: the environment.
    :param repeat: inner steps per step; at least 1.
    """

    def __init__(self, env: gymnasium.Env, repeat: int) -> None:
        if repeat < 1:
            raise ValueError(f"action_repeat must be >= 1, got {repeat}")
        super().__init__(env)
        self.repeat = int(repeat)

    def step(self, action: np.ndarray
             ) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        total = 0.0
        for _ in range(self.repeat):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


def make_pixel_env(env_class: type[PybulletRobotEnv], *, width: int = DEFAULT_RESOLUTION,
                   height: int = DEFAULT_RESOLUTION, frame_stack: int = DEFAULT_FRAME_STACK,
                   action_repeat: int = 1, camera_distance: float | None = None,
                   render_mode: str | None = None, **env_kwargs: Any) -> gymnasium.Env:
    """A task whose observation is a stack of rendered frames.

    :param env_class: the state task.
    :param width: frame width in pixels.
    :param height: frame height in pixels.
    :param frame_stack: frames per observation, newest last.
    :param action_repeat: control periods per step (rewards summed).
    :param camera_distance: distance in m of the camera from its target (None: the task's).
    :param render_mode: accepted for ``gymnasium.make``; frames are always rendered as
        ``"rgb_array"``, which is the only mode there is.
    :param env_kwargs: passed to ``env_class``.
    :raises ValueError: when the resolution, the stack size or the repeat is not positive, or
        the render mode is not ``None``/``"rgb_array"``.
    """
    if width < 1 or height < 1 or frame_stack < 1:
        raise ValueError(f"width, height and frame_stack must be positive, got {width}, "
                         f"{height}, {frame_stack}")
    if render_mode not in (None, "rgb_array"):
        raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
    env = env_class(render_mode="rgb_array", render_width=width, render_height=height,
                    **env_kwargs)
    if camera_distance is not None:
        if not camera_distance > 0.0:
            raise ValueError(f"camera_distance must be positive, got {camera_distance}")
        env.camera_distance = float(camera_distance)
    repeated = ActionRepeat(env, action_repeat)
    return FrameStackObservation(AddRenderObservation(repeated, render_only=True), frame_stack)


def cartpole_pixels(action_repeat: int = CARTPOLE_ACTION_REPEAT,
                    camera_distance: float = CARTPOLE_CAMERA_DISTANCE, **kwargs: Any
                    ) -> gymnasium.Env:
    """Entry point of ``rl_ros2/CartPoleBalancePixels-v0`` (arguments as :func:`make_pixel_env`)."""
    return make_pixel_env(CartPoleBalanceEnv, action_repeat=action_repeat,
                          camera_distance=camera_distance, **kwargs)


def kuka_reach_pixels(action_repeat: int = KUKA_REACH_ACTION_REPEAT, **kwargs: Any
                      ) -> gymnasium.Env:
    """Entry point of ``rl_ros2/KukaReachPixels-v0`` (arguments as :func:`make_pixel_env`)."""
    return make_pixel_env(KukaReachEnv, action_repeat=action_repeat, **kwargs)

