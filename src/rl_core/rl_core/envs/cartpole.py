"""Cart-pole balancing with a continuous force, simulated in pybullet."""

from __future__ import annotations

import math
import os
from typing import Any

import gymnasium
import numpy as np
import pybullet
import pybullet_data

from rl_core.envs.base import PybulletRobotEnv

__all__ = ["CartPoleBalanceEnv"]


class CartPoleBalanceEnv(PybulletRobotEnv):
    """Keep a pole upright by pushing its cart along a rail.

    Uses pybullet_data's ``cartpole.urdf`` (joints ``slider_to_cart``,
    prismatic, and ``cart_to_pole``, continuous). pybullet derives the link
    inertias from the collision boxes (it ignores the URDF's placeholder
    values), which makes the pole a uniform 1 m rod of 0.1 kg on a 1 kg cart:
    with a 10 N force limit, a 0.02 s period and the 0.2 rad / 2.4 m limits
    this is the classic control cart-pole, known to be learnable.

    * Action: ``Box(-1, 1, (1,), float32)``, the force on the cart as a
      fraction of ``max_force``; values outside [-1, 1] are clipped.
    * Observation (float32): cart position (m), cart velocity (m/s), pole
      angle (rad, 0 = upright, positive = leaning towards +x), pole angular
      velocity (rad/s).
    * Reward: +1 for every step, including the one that ends the episode.
    * Termination: ``|angle| > angle_limit`` or ``|x| > position_limit``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    # Frames the whole +-2.4 m track with the upright pole.
    camera_target = (0.0, 0.0, 0.3)
    camera_distance = 3.2
    camera_yaw = 0.0
    camera_pitch = -5.0

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        max_force: float = 10.0,
        control_period: float = 0.02,
        physics_substeps: int = 4,
        angle_limit: float = 0.2,
        position_limit: float = 2.4,
        reset_noise: float = 0.05,
        render_width: int = 320,
        render_height: int = 240,
    ) -> None:
        """Creates the environment.

        :param render_mode: ``None`` or ``"rgb_array"``.
        :param max_force: Force in N applied for an action of magnitude 1.
        :param control_period: Simulated seconds per step.
        :param physics_substeps: Physics steps per control period.
        :param angle_limit: Pole angle in rad beyond which the episode terminates.
        :param position_limit: Cart position in m beyond which the episode terminates.
        :param reset_noise: Half-width of the uniform noise on every state
            variable at reset.
        :param render_width: Width in pixels of rendered images.
        :param render_height: Height in pixels of rendered images.
        :raises ValueError: If a limit or the force is not positive, or the noise is negative.
        """
        for name, value in (
            ("max_force", max_force),
            ("angle_limit", angle_limit),
            ("position_limit", position_limit),
        ):
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive number, got {value}")
        if not (math.isfinite(reset_noise) and reset_noise >= 0.0):
            raise ValueError(f"reset_noise must be a non-negative number, got {reset_noise}")
        super().__init__(
            os.path.join(pybullet_data.getDataPath(), "cartpole.urdf"),
            control_period=control_period,
            physics_substeps=physics_substeps,
            render_mode=render_mode,
            render_width=render_width,
            render_height=render_height,
        )
        self.max_force = float(max_force)
        self.angle_limit = float(angle_limit)
        self.position_limit = float(position_limit)
        self.reset_noise = float(reset_noise)

        p = self.bullet_client
        names = self.joint_names()
        self._slider_joint = self._movable_joint_indices[names.index("slider_to_cart")]
        self._pole_joint = self._movable_joint_indices[names.index("cart_to_pole")]
        self._joint_pair = [self._slider_joint, self._pole_joint]
        # pybullet drives every joint with a velocity motor towards 0 by
        # default; it would act as a brake, so switch it off and use torques.
        for joint_index in self._joint_pair:
            p.setJointMotorControl2(self.robot_id, joint_index, pybullet.VELOCITY_CONTROL, force=0.0)
        self._set_joint_motor_control = p.setJointMotorControl2

        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        # Positions are bounded at twice the termination limits (as in the
        # classic cart-pole), a margin one control period does not cross in practice;
        # velocities by the speed limit that pybullet enforces on every joint.
        speed = self.MAX_JOINT_SPEED
        high = np.array(
            [2.0 * self.position_limit, speed, 2.0 * self.angle_limit, speed], dtype=np.float32
        )
        self.observation_space = gymnasium.spaces.Box(-high, high, dtype=np.float32)

    def _observation(self) -> np.ndarray:
        (x, x_dot, *_), (theta, theta_dot, *_) = self._get_joint_states(
            self.robot_id, self._joint_pair
        )
        return np.array([x, x_dot, theta, theta_dot], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Places the cart near the centre with the pole nearly upright.

        :param seed: Seed for ``self.np_random``; None keeps the current generator.
        :param options: Unused.
        :returns: The first observation and an empty info dict.
        """
        super().reset(seed=seed)
        x, x_dot, theta, theta_dot = self.np_random.uniform(
            -self.reset_noise, self.reset_noise, size=4
        )
        self._reset_joints((x, theta), (x_dot, theta_dot))
        return self._observation(), {}

    def step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Applies the force for one control period.

        :param action: Array of shape (1,) in [-1, 1].
        :returns: ``(observation, reward, terminated, truncated, info)``; truncation
            is left to the TimeLimit wrapper added at registration.
        :raises ValueError: If the action is not finite.
        """
        command = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
        if not math.isfinite(command):
            raise ValueError(f"action must be finite, got {action!r}")
        force = self.max_force * min(1.0, max(-1.0, command))
        self._set_joint_motor_control(
            self.robot_id, self._slider_joint, pybullet.TORQUE_CONTROL, force=force
        )
        self._step_simulation()
        observation = self._observation()
        terminated = bool(
            abs(observation[0]) > self.position_limit or abs(observation[2]) > self.angle_limit
        )
        return observation, 1.0, terminated, False, {}
