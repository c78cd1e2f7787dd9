"""Reaching a random target with the KUKA iiwa arm, simulated in pybullet."""

from __future__ import annotations

import math
import os
from typing import Any, ClassVar, Sequence

import gymnasium
import numpy as np
import pybullet
import pybullet_data

from rl_core.envs.base import PybulletRobotEnv

__all__ = ["KukaReachEnv"]


class KukaReachEnv(PybulletRobotEnv):
    """Move the end effector of a 7-joint KUKA iiwa to a random target point.

    Uses pybullet_data's ``kuka_iiwa/model.urdf`` with a fixed base at the
    origin; the end effector is the frame of the last link, ``lbr_iiwa_link_7``.

    * Action: ``Box(-1, 1, (7,), float32)``, joint velocity commands as a
      fraction of ``max_joint_velocity``; values outside [-1, 1] are clipped.
      Each joint's velocity motor is limited to ``max_joint_force``.
    * Observation (float32, 23): joint positions (7), joint velocities (7),
      end-effector position (3), target position (3), target minus
      end-effector position (3).
    * Reward: ``-distance - action_penalty * mean(action**2)``.
    * Termination: distance below ``success_distance``, with
      ``info["is_success"] = True``. ``info["is_success"]`` is present on
      every step so that time-limit truncations count as failures.

    The target is sampled uniformly in an axis-aligned box in front of the
    robot (``target_low`` .. ``target_high``) that lies inside the arm's
    reach; ``reset(options={"target_position": xyz})`` overrides it.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    # Looks at the arm and the target region from the front left.
    camera_target = (0.3, 0.0, 0.45)
    camera_distance = 1.5
    camera_yaw = 50.0
    camera_pitch = -25.0

    #: Joint angles (rad) with the end effector at about (0.58, 0.0, 0.48) m,
    #: in the middle of the target region, elbow bent, well inside the limits.
    HOME_POSITIONS: ClassVar[tuple[float, ...]] = (0.0, 0.5, 0.0, -1.5, 0.0, 1.0, 0.0)
    END_EFFECTOR_LINK: ClassVar[str] = "lbr_iiwa_link_7"
    #: Half-width in m of the cube, centred on the base, that holds every
    #: end-effector and target position (the arm's reach is about 1.3 m).
    WORKSPACE_BOUND: ClassVar[float] = 2.0

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        max_joint_velocity: float = 1.0,
        max_joint_force: float = 200.0,
        control_period: float = 0.05,
        physics_substeps: int = 10,
        success_distance: float = 0.05,
        action_penalty: float = 0.01,
        home_noise: float = 0.05,
        target_low: Sequence[float] = (0.35, -0.3, 0.2),
        target_high: Sequence[float] = (0.7, 0.3, 0.7),
        render_width: int = 320,
        render_height: int = 240,
    ) -> None:
        """Creates the environment.

        :param render_mode: ``None`` or ``"rgb_array"``.
        :param max_joint_velocity: Joint speed in rad/s for an action of magnitude 1.
        :param max_joint_force: Torque limit in N m of each joint's velocity motor.
        :param control_period: Simulated seconds per step.
        :param physics_substeps: Physics steps per control period.
        :param success_distance: Distance in m below which the target counts as reached.
        :param action_penalty: Weight of the mean squared action in the reward.
        :param home_noise: Half-width in rad of the uniform noise on the home pose.
        :param target_low: Lower corner (x, y, z) in m of the target sampling box.
        :param target_high: Upper corner (x, y, z) in m of the target sampling box.
        :param render_width: Width in pixels of rendered images.
        :param render_height: Height in pixels of rendered images.
        :raises ValueError: If an argument is out of range.
        """
        low, high = self._checked_arguments(max_joint_velocity, max_joint_force, success_distance,
                                            action_penalty, home_noise, target_low, target_high)
        super().__init__(
            os.path.join(pybullet_data.getDataPath(), "kuka_iiwa", "model.urdf"),
            control_period=control_period,
            physics_substeps=physics_substeps,
            render_mode=render_mode,
            render_width=render_width,
            render_height=render_height,
        )
        if len(self._movable_joint_indices) != len(self.HOME_POSITIONS):
            raise ValueError(
                f"expected {len(self.HOME_POSITIONS)} movable joints in {self.urdf_path}, "
                f"found {len(self._movable_joint_indices)}"
            )
        self.max_joint_velocity = float(max_joint_velocity)
        self.max_joint_force = float(max_joint_force)
        self.success_distance = float(success_distance)
        self.action_penalty = float(action_penalty)
        self.home_noise = float(home_noise)
        self.target_low = low
        self.target_high = high
        self._end_effector_index = self._link_names.index(self.END_EFFECTOR_LINK)
        self._motor_forces = [self.max_joint_force] * len(self._movable_joint_indices)
        self._target = np.zeros(3, dtype=np.float64)
        self._get_link_state = self.bullet_client.getLinkState

        # A collision-free, massless sphere shows the target in rendered images;
        # it does not take part in the dynamics.
        p = self.bullet_client
        marker_shape = p.createVisualShape(
            pybullet.GEOM_SPHERE, radius=self.success_distance, rgbaColor=[1.0, 0.2, 0.2, 0.8]
        )
        self._marker_id = p.createMultiBody(
            baseMass=0.0, baseVisualShapeIndex=marker_shape, basePosition=self._target.tolist()
        )

        n_joints = len(self._movable_joint_indices)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(n_joints,), dtype=np.float32)
        self.observation_space = self._observation_space(n_joints)

    @classmethod
    def _checked_arguments(cls, max_joint_velocity: float, max_joint_force: float,
                           success_distance: float, action_penalty: float, home_noise: float,
                           target_low: Sequence[float], target_high: Sequence[float]
                           ) -> tuple[np.ndarray, np.ndarray]:
        """The target box's corners, once every argument is in range (ValueError if not)."""
        for name, value in (
            ("max_joint_velocity", max_joint_velocity),
            ("max_joint_force", max_joint_force),
            ("success_distance", success_distance),
        ):
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive number, got {value}")
        for name, value in (("action_penalty", action_penalty), ("home_noise", home_noise)):
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a non-negative number, got {value}")
        low = np.asarray(target_low, dtype=np.float64)
        high = np.asarray(target_high, dtype=np.float64)
        if (
            low.shape != (3,)
            or high.shape != (3,)
            or not np.all(low <= high)
            or not np.all(np.abs(np.concatenate((low, high))) <= cls.WORKSPACE_BOUND)
        ):
            raise ValueError(
                f"target_low and target_high must be 3-vectors with low <= high within "
                f"+-{cls.WORKSPACE_BOUND} m, got {target_low} and {target_high}"
            )
        return low, high

    @classmethod
    def _observation_space(cls, n_joints: int) -> gymnasium.spaces.Box:
        # Finite bounds that the state cannot leave: every joint limit of the
        # iiwa lies within +-3.06 rad, pybullet caps joint speeds, the arm
        # reaches 1.3 m from its base and targets are kept within the workspace.
        bound = cls.WORKSPACE_BOUND
        high = np.concatenate(
            (
                np.full(n_joints, 2.0 * math.pi),
                np.full(n_joints, cls.MAX_JOINT_SPEED),
                np.full(6, bound),
                np.full(3, 2.0 * bound),
            )
        ).astype(np.float32)
        return gymnasium.spaces.Box(-high, high, dtype=np.float32)

    # ---------------------------------------------------------------- helpers

    def _end_effector_position(self) -> np.ndarray:
        state = self._get_link_state(
            self.robot_id, self._end_effector_index, computeForwardKinematics=True
        )
        return np.asarray(state[4], dtype=np.float64)

    def _observe(self) -> tuple[np.ndarray, float]:
        """Returns the observation and the end-effector-to-target distance."""
        positions, velocities = self._read_joint_states()
        end_effector = self._end_effector_position()
        offset = self._target - end_effector
        observation = np.concatenate(
            (positions, velocities, end_effector, self._target, offset)
        ).astype(np.float32)
        return observation, float(np.linalg.norm(offset))

    def _command_velocities(self, velocities: Sequence[float] | np.ndarray) -> None:
        self._set_joint_motor_control_array(
            self.robot_id,
            self._movable_joint_indices,
            pybullet.VELOCITY_CONTROL,
            targetVelocities=list(velocities),
            forces=self._motor_forces,
        )

    # -------------------------------------------------------------------- API

    def target_position(self) -> np.ndarray:
        """Returns the current target position in world coordinates (m)."""
        return self._target.copy()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Puts the arm at the home pose plus noise and draws a new target.

        :param seed: Seed for ``self.np_random``; None keeps the current generator.
        :param options: Optional ``{"target_position": (x, y, z)}`` to place the
            target instead of sampling it. The random draws are made
            either way, so the arm's start pose for a seed does not
            depend on this option.
        :returns: The first observation and ``{"is_success": bool, "distance": float}``.
        :raises ValueError: If the given target position is not 3 numbers within
            ``WORKSPACE_BOUND``.
        """
        super().reset(seed=seed)
        noise = self.np_random.uniform(-self.home_noise, self.home_noise, size=len(self.HOME_POSITIONS))
        sampled_target = self.np_random.uniform(self.target_low, self.target_high)
        if options is not None and options.get("target_position") is not None:
            target = np.asarray(options["target_position"], dtype=np.float64)
            if target.shape != (3,) or not np.all(np.abs(target) <= self.WORKSPACE_BOUND):
                raise ValueError(
                    f"options['target_position'] must be 3 numbers within "
                    f"+-{self.WORKSPACE_BOUND} m, got {options['target_position']!r}"
                )
            sampled_target = target
        self._target = sampled_target
        self.bullet_client.resetBasePositionAndOrientation(
            self._marker_id, self._target.tolist(), [0.0, 0.0, 0.0, 1.0]
        )
        self._reset_joints(np.asarray(self.HOME_POSITIONS) + noise, [0.0] * len(noise))
        # Motor targets persist across resets; clear the previous episode's.
        self._command_velocities([0.0] * len(noise))
        observation, distance = self._observe()
        return observation, {"is_success": distance < self.success_distance, "distance": distance}

    def step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Drives the joints at the commanded velocities for one control period.

        :param action: Array of shape (7,) in [-1, 1].
        :returns: ``(observation, reward, terminated, truncated, info)`` with
            ``info = {"is_success": bool, "distance": float}``; truncation
            is left to the TimeLimit wrapper added at registration.
        :raises ValueError: If the action has the wrong size or is not finite.
        """
        command = np.asarray(action, dtype=np.float64).reshape(-1)
        if command.shape != self.action_space.shape:
            raise ValueError(
                f"action must have shape {self.action_space.shape}, got {np.shape(action)}"
            )
        if not np.all(np.isfinite(command)):
            raise ValueError(f"action must be finite, got {action!r}")
        command = np.clip(command, -1.0, 1.0)
        self._command_velocities(command * self.max_joint_velocity)
        self._step_simulation()
        observation, distance = self._observe()
        reward = -distance - self.action_penalty * float(np.mean(command**2))
        success = distance < self.success_distance
        return observation, reward, success, False, {"is_success": success, "distance": distance}
