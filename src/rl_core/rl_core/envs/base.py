"""Shared base class for the pybullet robot environments.

Each environment owns a private pybullet physics server in DIRECT mode, so many
environments (for example the members of a :class:`~rl_core.envs.vector.VectorEnv`)
can live in one process without sharing state. The base class also offers the
introspection a visualiser needs (URDF, joint names and states, link poses,
task target) so that nothing outside this package has to talk to pybullet.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar, Sequence

import gymnasium
import numpy as np
import pybullet
from pybullet_utils.bullet_client import BulletClient

__all__ = ["PybulletRobotEnv"]

#: Joint types that a policy can move; fixed joints are only kinematic glue.
_MOVABLE_JOINT_TYPES = (pybullet.JOINT_REVOLUTE, pybullet.JOINT_PRISMATIC)


class PybulletRobotEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """Base class for a single-robot task simulated in its own pybullet client.

    Subclasses load their robot through :meth:`__init__`, define
    ``observation_space`` / ``action_space`` and implement ``reset`` and
    ``step``. Physics runs with a fixed time step of
    ``control_period / physics_substeps``; one call to ``stepSimulation``
    advances a whole control period, because pybullet then performs the
    substeps in C++ and keeps a torque command applied across all of them.

    :ivar urdf_path: Absolute path of the robot's URDF file.
    :ivar control_period: Simulated seconds per ``step()``.
    :ivar physics_substeps: Physics steps per control period.
    :ivar render_width: Width in pixels of :meth:`render` images.
    :ivar render_height: Height in pixels of :meth:`render` images.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    #: Camera used by :meth:`render`; subclasses point it at their robot.
    camera_target: ClassVar[tuple[float, float, float]] = (0.0, 0.0, 0.5)
    camera_distance: float = 2.0  # an instance may move its camera (pixel observations)
    camera_yaw: ClassVar[float] = 30.0
    camera_pitch: ClassVar[float] = -20.0

    #: Joint speed limit (rad/s or m/s) that pybullet enforces on every joint.
    #: Set explicitly (it equals pybullet's default) because the observation
    #: spaces use it as the bound of the joint velocities.
    MAX_JOINT_SPEED: ClassVar[float] = 100.0

    def __init__(
        self,
        urdf_path: str | Path,
        *,
        control_period: float,
        physics_substeps: int,
        render_mode: str | None = None,
        render_width: int = 320,
        render_height: int = 240,
        base_position: Sequence[float] = (0.0, 0.0, 0.0),
        gravity: float = -9.81,
    ) -> None:
        """Connects a DIRECT pybullet client and loads the robot.

        :param urdf_path: Path of the robot's URDF file.
        :param control_period: Simulated seconds per ``step()``; must be positive.
        :param physics_substeps: Physics steps per control period; at least 1.
        :param render_mode: ``None`` or ``"rgb_array"``.
        :param render_width: Width in pixels of rendered images.
        :param render_height: Height in pixels of rendered images.
        :param base_position: World position of the (fixed) robot base.
        :param gravity: Gravity along world z in m/s^2.
        :raises ValueError: If an argument is out of range or the URDF is missing.
        """
        path = self._checked_urdf(urdf_path, control_period, physics_substeps,
                                  render_mode, render_width, render_height)
        self.render_mode = render_mode
        self.urdf_path: str = str(path)
        self.control_period = float(control_period)
        self.physics_substeps = int(physics_substeps)
        self.render_width = int(render_width)
        self.render_height = int(render_height)

        self._client: BulletClient | None = BulletClient(connection_mode=pybullet.DIRECT)
        p = self._client
        p.setGravity(0.0, 0.0, gravity)
        p.setTimeStep(self.control_period)
        # pybullet subdivides one stepSimulation() call into numSubSteps equal
        # steps in C++, which is cheaper than a Python loop and keeps a
        # TORQUE_CONTROL command active for the whole control period.
        p.setPhysicsEngineParameter(numSubSteps=self.physics_substeps)
        self.robot_id: int = p.loadURDF(
            self.urdf_path, basePosition=list(base_position), useFixedBase=True
        )

        self._base_link_name: str = p.getBodyInfo(self.robot_id)[0].decode("utf-8")
        self._link_names: list[str] = []
        self._movable_joint_indices: list[int] = []
        self._movable_joint_names: list[str] = []
        for joint_index in range(p.getNumJoints(self.robot_id)):
            info = p.getJointInfo(self.robot_id, joint_index)
            self._link_names.append(info[12].decode("utf-8"))
            p.changeDynamics(self.robot_id, joint_index, maxJointVelocity=self.MAX_JOINT_SPEED)
            if info[2] in _MOVABLE_JOINT_TYPES:
                self._movable_joint_indices.append(joint_index)
                self._movable_joint_names.append(info[1].decode("utf-8"))

        # BulletClient.__getattr__ builds a new functools.partial on every
        # attribute access; binding the hot-path calls once saves that
        # overhead in step(), which runs tens of thousands of times a second.
        self._step_simulation = p.stepSimulation
        self._get_joint_states = p.getJointStates
        self._set_joint_motor_control_array = p.setJointMotorControlArray

    def _checked_urdf(self, urdf_path: str | Path, control_period: float,
                      physics_substeps: int, render_mode: str | None, render_width: int,
                      render_height: int) -> Path:
        """The URDF's resolved path, once every argument of ``__init__`` is in range."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, "
                f"got {render_mode!r}"
            )
        if not (math.isfinite(control_period) and control_period > 0.0):
            raise ValueError(f"control_period must be a positive number, got {control_period}")
        if physics_substeps < 1:
            raise ValueError(f"physics_substeps must be >= 1, got {physics_substeps}")
        if render_width < 1 or render_height < 1:
            raise ValueError(
                f"render size must be positive, got {render_width}x{render_height}"
            )
        path = Path(urdf_path).resolve()
        if not path.is_file():
            raise ValueError(f"URDF file not found: {path}")
        return path

    # ------------------------------------------------------------------ physics

    @property
    def bullet_client(self) -> BulletClient:
        """The pybullet client of this environment.

        :raises RuntimeError: If the environment has been closed.
        """
        if self._client is None:
            raise RuntimeError("environment is closed")
        return self._client

    def _read_joint_states(self) -> tuple[np.ndarray, np.ndarray]:
        """Returns positions and velocities of the movable joints (float64)."""
        states = self._get_joint_states(self.robot_id, self._movable_joint_indices)
        positions = np.fromiter((s[0] for s in states), dtype=np.float64, count=len(states))
        velocities = np.fromiter((s[1] for s in states), dtype=np.float64, count=len(states))
        return positions, velocities

    def _reset_joints(self, positions: Sequence[float] | np.ndarray,
                      velocities: Sequence[float] | np.ndarray) -> None:
        """Teleports the movable joints to the given positions and velocities."""
        p = self.bullet_client
        for joint_index, position, velocity in zip(
            self._movable_joint_indices, positions, velocities, strict=True
        ):
            p.resetJointState(
                self.robot_id, joint_index, float(position), targetVelocity=float(velocity)
            )

    # ------------------------------------------------------------ introspection

    def urdf_text(self) -> str:
        """Returns the content of the robot's URDF file."""
        return Path(self.urdf_path).read_text(encoding="utf-8")

    def joint_names(self) -> list[str]:
        """Returns the names of the movable joints, in joint-index order, as in the URDF."""
        return list(self._movable_joint_names)

    def joint_positions(self) -> np.ndarray:
        """Returns the movable joints' positions (rad or m), float64, shape (n_joints,)."""
        return self._read_joint_states()[0]

    def joint_velocities(self) -> np.ndarray:
        """Returns the movable joints' velocities (rad/s or m/s), float64, shape (n_joints,)."""
        return self._read_joint_states()[1]

    def link_world_poses(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Returns the world pose of the base link and of every link.

        The poses are those of the URDF link frames (not of the centres of
        mass), which is what a URDF-driven visualiser needs.

        :returns: Mapping from URDF link name to ``(position (3,), quaternion (4,) xyzw)``.
        """
        p = self.bullet_client
        base_position, base_orientation = p.getBasePositionAndOrientation(self.robot_id)
        poses = {
            self._base_link_name: (
                np.asarray(base_position, dtype=np.float64),
                np.asarray(base_orientation, dtype=np.float64),
            )
        }
        if self._link_names:
            link_states = p.getLinkStates(
                self.robot_id,
                list(range(len(self._link_names))),
                computeForwardKinematics=True,
            )
            for name, state in zip(self._link_names, link_states, strict=True):
                # Indices 4 and 5 are the URDF link frame; 0 and 1 the inertial frame.
                poses[name] = (
                    np.asarray(state[4], dtype=np.float64),
                    np.asarray(state[5], dtype=np.float64),
                )
        return poses

    def target_position(self) -> np.ndarray | None:
        """Returns the task's target position in world coordinates, or None if it has none."""
        return None

    # ---------------------------------------------------------------- rendering

    def render(self) -> np.ndarray | None:
        """Renders the scene with pybullet's CPU tiny renderer.

        :returns: An ``(render_height, render_width, 3)`` uint8 RGB image when
            ``render_mode == "rgb_array"``, otherwise None.
        """
        if self.render_mode != "rgb_array":
            return None
        p = self.bullet_client
        view = p.computeViewMatrixFromYawPitchRoll(
            cameraTargetPosition=list(self.camera_target),
            distance=self.camera_distance,
            yaw=self.camera_yaw,
            pitch=self.camera_pitch,
            roll=0.0,
            upAxisIndex=2,
        )
        projection = p.computeProjectionMatrixFOV(
            fov=60.0,
            aspect=self.render_width / self.render_height,
            nearVal=0.05,
            farVal=20.0,
        )
        _, _, rgba, _, _ = p.getCameraImage(
            self.render_width,
            self.render_height,
            viewMatrix=view,
            projectionMatrix=projection,
            renderer=pybullet.ER_TINY_RENDERER,
        )
        # pybullet returns a flat sequence or an array depending on its build.
        image = np.asarray(rgba, dtype=np.uint8).reshape(self.render_height, self.render_width, 4)
        return np.ascontiguousarray(image[:, :, :3])

    def close(self) -> None:
        """Disconnects the pybullet client; calling it again is harmless."""
        if self._client is not None:
            self._client.disconnect()
            self._client = None
        super().close()
