"""A pybullet robot driven the way ros2_control drives hardware: joint commands in, joint states
out, one control period at a time.

``rl_nodes.sim_robot`` puts it behind ros2_control's topics, so the boundary trains it exactly
as it would train a robot under gz_ros2_control or real hardware. The physics world is the
in-process environments' own (:class:`~rl_core.envs.base.PybulletRobotEnv`), so commanding the
robot with ``action * scale`` gives the same trajectories as stepping
:class:`~rl_core.envs.cartpole.CartPoleBalanceEnv` (effort) or
:class:`~rl_core.envs.kuka_reach.KukaReachEnv` (velocity) with ``action``.

Motors, in REP-103 units: ``position`` (``POSITION_CONTROL``) and ``velocity``
(``VELOCITY_CONTROL``), force limited to ``max_motor_force``; ``effort`` (``TORQUE_CONTROL``,
clipped to ``+-max_motor_force``, the joint's velocity motor switched off, since pybullet's
default velocity motor would brake it). Joints that are not commanded are passive (velocity motor
off), like joints without a command interface in gz_ros2_control. Nothing here imports rclpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pybullet

from rl_core.envs.base import PybulletRobotEnv
from rl_core.robot import COMMAND_INTERFACES

__all__ = ["PybulletRobot"]

_CONTROL_MODES = {"position": pybullet.POSITION_CONTROL, "velocity": pybullet.VELOCITY_CONTROL,
                  "effort": pybullet.TORQUE_CONTROL}


class _PhysicsWorld(PybulletRobotEnv):
    """The in-process environments' physics world without a task.

    Subclassing (rather than repeating the client set-up) keeps every physics setting of the
    robot identical to the environments', including any the base class gains later.
    """

    def movable_joints(self) -> tuple[list[str], list[int]]:
        """Names and pybullet indices of the movable joints, in joint-index order."""
        return list(self._movable_joint_names), list(self._movable_joint_indices)

    def reset_joints(self, indices: Sequence[int], positions: Sequence[float] | np.ndarray,
                     velocities: Sequence[float] | np.ndarray) -> None:
        p = self.bullet_client
        for index, position, velocity in zip(indices, positions, velocities, strict=True):
            p.resetJointState(self.robot_id, index, float(position), targetVelocity=float(velocity))

    def joint_states(self, indices: Sequence[int]) -> list[tuple]:
        """Pybullet's ``(position, velocity, reaction forces, applied motor torque)`` per joint."""
        return self._get_joint_states(self.robot_id, indices)

    def motor_control(self, indices: Sequence[int], mode: int, values: Sequence[float] | np.ndarray,
                      forces: Sequence[float]) -> None:
        """One ``setJointMotorControlArray`` call; ``values`` are targets or, for
        ``TORQUE_CONTROL``, the torques (``forces`` is then unused)."""
        if mode == pybullet.TORQUE_CONTROL:
            self._set_joint_motor_control_array(self.robot_id, indices, mode, forces=list(values))
        elif mode == pybullet.POSITION_CONTROL:
            self._set_joint_motor_control_array(self.robot_id, indices, mode,
                                                targetPositions=list(values), forces=list(forces))
        else:
            self._set_joint_motor_control_array(self.robot_id, indices, mode,
                                                targetVelocities=list(values), forces=list(forces))

    def step_simulation(self) -> None:
        self._step_simulation()


class PybulletRobot:
    """One robot in its own DIRECT pybullet client, stepped one control period at a time.

    :param urdf_path: the robot's URDF file.
    :param joint_names: joints whose state :meth:`state` reports, in that order; ``None``: every
        movable (revolute, prismatic, continuous) joint in URDF order.
    :param command_interface: one of ``position``, ``velocity``, ``effort``
        (:data:`rl_core.robot.COMMAND_INTERFACES`).
    :param control_period: simulated seconds per :meth:`step`.
    :param physics_substeps: physics steps per control period (pybullet's time step is
        ``control_period / physics_substeps``).
    :param command_joints: joints :meth:`command` drives, in command order (a forward command
        controller's ``joints``); a subset of ``joint_names``; ``None``: all of them.
    :param max_motor_force: N m or N: the force limit of position and velocity motors and the
        clip of effort commands.
    :param seed: recorded with the run for reproducibility; pybullet's dynamics are
        deterministic and nothing here draws random numbers.
    :param gripper_joints: a gripper's finger joints (among ``joint_names``, not commanded):
        position motors whose targets :meth:`grip` sets; they start where the URDF puts them.
    :raises ValueError: for a missing URDF, an unknown joint or interface, or a value out of range.
    """

    def __init__(self, urdf_path: str | Path, joint_names: Sequence[str] | None = None,
                 command_interface: str = "velocity", control_period: float = 0.05,
                 physics_substeps: int = 10, *, command_joints: Sequence[str] | None = None,
                 max_motor_force: float = 200.0, seed: int | None = None,
                 gripper_joints: Sequence[str] = ()) -> None:
        if command_interface not in COMMAND_INTERFACES:
            raise ValueError(f"unknown command interface {command_interface!r}; one of "
                             f"{', '.join(COMMAND_INTERFACES)}")
        if not (math.isfinite(max_motor_force) and max_motor_force > 0.0):
            raise ValueError(f"max_motor_force must be a positive number, got {max_motor_force}")
        # The world checks the URDF, period and substeps with the environments' own messages.
        try:
            world = _PhysicsWorld(urdf_path, control_period=control_period,
                                  physics_substeps=physics_substeps)
        except pybullet.error as error:  # a file pybullet cannot parse
            raise ValueError(f"pybullet cannot load {urdf_path}: {error}") from error
        try:
            movable_names, movable_indices = world.movable_joints()
            index_of = dict(zip(movable_names, movable_indices))
            names = tuple(movable_names if joint_names is None else joint_names)
            commanded = names if command_joints is None else tuple(command_joints)
            _check_joints("joint_names", names, movable_names, f"movable joints of {urdf_path}")
            _check_joints("command_joints", commanded, names, "joint_names")
            if gripper_joints:
                _check_joints("gripper_joints", gripper_joints,
                              [n for n in names if n not in commanded], "uncommanded joints")
        except ValueError:
            world.close()
            raise
        self._world = world
        self.urdf_path: str = world.urdf_path
        self.joint_names: tuple[str, ...] = names
        self.command_joints: tuple[str, ...] = commanded
        self.command_interface = command_interface
        self.control_period = world.control_period
        self.physics_substeps = world.physics_substeps
        self.max_motor_force = float(max_motor_force)
        self.seed = seed
        #: Control periods stepped since construction (resets do not rewind it).
        self.step_count = 0
        self._period_ns = round(self.control_period * 1e9)
        self._state_indices = [index_of[name] for name in names]
        self._command_indices = [index_of[name] for name in commanded]
        self._mode = _CONTROL_MODES[command_interface]
        self._forces = [self.max_motor_force] * len(commanded)
        # Where each commanded joint sits among the state joints (its effort is the command).
        self._command_slots = [names.index(name) for name in commanded]
        self._command = np.zeros(len(commanded))
        self.gripper_joints = tuple(gripper_joints)
        self._gripper_indices = [index_of[name] for name in self.gripper_joints]
        self._gripper = np.asarray([state[0] for state in world.joint_states(
            self._gripper_indices)]) if self._gripper_indices else np.zeros(0)
        passive = [index for index in movable_indices
                   if index not in self._command_indices + self._gripper_indices]
        world.motor_control(passive, pybullet.VELOCITY_CONTROL, [0.0] * len(passive),
                            [0.0] * len(passive))
        if self._mode == pybullet.TORQUE_CONTROL:
            world.motor_control(self._command_indices, pybullet.VELOCITY_CONTROL,
                                [0.0] * len(commanded), [0.0] * len(commanded))
        self._hold()

    # ------------------------------------------------------------------ commands and physics

    def command(self, values: Sequence[float] | np.ndarray) -> None:
        """Set the command of every commanded joint (in :attr:`command_joints` order); it holds
        for every following :meth:`step` until the next command or reset.

        :raises ValueError: for a wrong number of values or a value that is not finite; the
            previous command then stays.
        """
        command = np.asarray(values, dtype=np.float64).reshape(-1)
        if command.shape != self._command.shape:
            raise ValueError(f"expected {len(self.command_joints)} {self.command_interface} "
                             f"command(s), one per joint of {list(self.command_joints)}, "
                             f"got {command.size}")
        if not np.all(np.isfinite(command)):
            raise ValueError(f"commands must be finite numbers, got {command.tolist()}")
        if self._mode == pybullet.TORQUE_CONTROL:
            command = np.clip(command, -self.max_motor_force, self.max_motor_force)
        self._command = command

    def grip(self, values: Sequence[float] | np.ndarray) -> None:
        """Set the gripper's finger targets (:attr:`gripper_joints` order), held until the next.

        :raises ValueError: without a gripper, for a wrong number of values or one not finite.
        """
        targets = np.asarray(values, dtype=np.float64).reshape(-1)
        if not self.gripper_joints or targets.shape != (len(self.gripper_joints),) \
                or not np.all(np.isfinite(targets)):
            raise ValueError(f"expected {len(self.gripper_joints)} finite finger position(s) "
                             f"for the gripper joints {list(self.gripper_joints)}, got "
                             f"{targets.tolist()}")
        self._gripper = targets

    def step(self) -> None:
        """Advance one control period under the current command."""
        # pybullet clears joint torques after every stepSimulation, so the command is applied
        # again each period (for position and velocity motors this changes nothing).
        self._world.motor_control(self._command_indices, self._mode, self._command, self._forces)
        if self.gripper_joints:
            self._world.motor_control(self._gripper_indices, pybullet.POSITION_CONTROL,
                                      self._gripper, [self.max_motor_force] * len(self._gripper))
        self._world.step_simulation()
        self.step_count += 1

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(position, velocity, effort)`` of :attr:`joint_names` (float64 arrays).

        Effort is the torque or force the joint's motor applied in the last step: the (clipped)
        command for effort-commanded joints (pybullet does not report torques it was given),
        0 for passive joints.
        """
        states = self._world.joint_states(self._state_indices)
        position = np.array([s[0] for s in states])
        velocity = np.array([s[1] for s in states])
        effort = np.array([s[3] for s in states])
        if self._mode == pybullet.TORQUE_CONTROL:
            effort[self._command_slots] = self._command
        return position, velocity, effort

    def reset(self, names: Sequence[str] = (), positions: Sequence[float] = (),
              velocities: Sequence[float] = ()) -> None:
        """Put joints at ``positions`` moving at ``velocities`` without stepping, and make every
        command "hold": velocity and effort 0, position the joint's new position.

        :param names: joints of :attr:`joint_names` to place; joints not named stay where they
            are. Empty: every joint at its home, position and velocity 0.
        :param positions: one per name.
        :param velocities: one per name; empty: zeros.
        :raises ValueError: for an unknown or repeated joint, a length mismatch or a value that
            is not finite; nothing is changed then.
        """
        names = tuple(names)
        if not names:
            names = self.joint_names
            positions = velocities = [0.0] * len(names)
        _check_joints("reset names", names, self.joint_names, "joint_names")
        position = np.asarray(positions, dtype=np.float64).reshape(-1)
        velocity = (np.zeros(len(names)) if len(velocities) == 0
                    else np.asarray(velocities, dtype=np.float64).reshape(-1))
        if position.size != len(names) or velocity.size != len(names):
            raise ValueError(f"reset needs one position and one velocity (or no velocities) per "
                             f"name: {len(names)} names, {position.size} positions, "
                             f"{velocity.size} velocities")
        if not (np.all(np.isfinite(position)) and np.all(np.isfinite(velocity))):
            raise ValueError("reset positions and velocities must be finite numbers")
        indices = [self._state_indices[self.joint_names.index(name)] for name in names]
        self._world.reset_joints(indices, position, velocity)
        self._hold()
        if self.gripper_joints:  # the fingers hold where they were placed, too
            self._gripper = np.asarray([state[0] for state in
                                        self._world.joint_states(self._gripper_indices)])

    def hold(self) -> None:
        """Command "hold": velocity and effort 0, position where each joint is now."""
        self._hold()

    def _hold(self) -> None:
        if self._mode == pybullet.POSITION_CONTROL:
            states = self._world.joint_states(self._command_indices)
            self._command = np.array([s[0] for s in states])
        else:
            self._command = np.zeros(len(self.command_joints))
        # Applied at once (not only at the next step), as KukaReachEnv clears its motor targets
        # when it resets: a reset robot does not keep moving towards an old target.
        self._world.motor_control(self._command_indices, self._mode, self._command, self._forces)

    # ------------------------------------------------------------------ time and lifetime

    @property
    def sim_time_ns(self) -> int:
        """Simulated time in integer nanoseconds: :attr:`step_count` control periods (integer,
        so stamps advance by exactly one period per step, with no floating-point drift)."""
        return self.step_count * self._period_ns

    @property
    def command_values(self) -> np.ndarray:
        """The command in force (a copy)."""
        return self._command.copy()

    def close(self) -> None:
        """Disconnect the pybullet client; calling it again is harmless."""
        self._world.close()


def _check_joints(what: str, names: Sequence[str], known: Sequence[str], where: str) -> None:
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"{what}: unknown joint(s) {unknown}; the {where} are {list(known)}")
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: a joint is named twice in {list(names)}")
    if not names:
        raise ValueError(f"{what}: no joints given")
