"""The robot behind ``sim_robot`` (rl_nodes.sim_robot): pybullet physics run the way the node's
parameters say, in plain Python.

:class:`SimRobot` holds a :class:`rl_core.robot.pybullet_robot.PybulletRobot` built from a
:class:`rl_core.robot.sim_robot_config.SimRobotConfig` and what the node does with it besides
messages: a command (forward or a trajectory's first point) steps the robot in ``lockstep``
mode, a reset answers with what it did, the published ``robot_description`` declares the
commanded joints' interface, and ``free_run`` reports the step rate it achieves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from rl_core.config import ConfigError
from rl_core.robot.description import JointInterfaces, describe_urdf, robot_description
from rl_core.robot.pybullet_robot import PybulletRobot
from rl_core.robot.sim_robot_config import TRAJECTORY_FIELDS, SimRobotConfig, trajectory_command

#: free_run's rate report is a warning below this fraction of the target rate.
SLOW_RATE_FRACTION = 0.9


class SimRobot:
    """A pybullet robot as ``sim_robot`` runs it.

    :param config: the node's validated configuration.
    :param clock: a steady clock, seconds (the rate report's windows).
    :raises ConfigError: when the robot cannot be built (the message names the robot).
    """

    def __init__(self, config: SimRobotConfig, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        try:
            self.physics = PybulletRobot(config.urdf_path, config.joints, config.command_interface,
                                         config.control_period, config.physics_substeps,
                                         command_joints=config.command_joints,
                                         max_motor_force=config.max_motor_force,
                                         seed=config.seed, gripper_joints=config.gripper_joints)
        except ValueError as error:
            raise ConfigError(f"robot {config.robot!r}: {error}") from error
        self.config = config
        self.clock = clock
        self.joint_names = list(self.physics.joint_names)
        #: Each commanded joint's index in a command.
        self.commanded = {name: i for i, name in enumerate(self.physics.command_joints)}
        #: The JointTrajectoryPoint field a trajectory's values are read from.
        self.trajectory_field = TRAJECTORY_FIELDS[config.command_interface]
        self._rate_steps, self._rate_since = 0, clock()
        self._commanded_at = clock()
        #: Times the command timeout held the robot (free_run).
        self.timeouts = 0

    # --- inputs -------------------------------------------------------------------------------

    def command(self, values: Sequence[float]) -> bool:
        """Set the command of every commanded joint; True when the robot stepped (lockstep).

        :raises ValueError: for a wrong number of values or non-finite ones.
        """
        self.physics.command(values)
        self._commanded_at = self.clock()
        if self.config.mode != "lockstep":
            return False
        self.step()
        return True

    def grip(self, values: Sequence[float]) -> None:
        """Set the gripper's finger targets; they act from the next step on.

        :raises ValueError: without a gripper, or for values that do not fit its joints.
        """
        self.physics.grip(values)

    def command_trajectory(self, joint_names: Sequence[str], values: Sequence[float] | None
                           ) -> bool:
        """A trajectory's first point as a forward command (see :func:`trajectory_command`);
        True when the robot stepped.

        :param values: the point's :attr:`trajectory_field` (None: the trajectory has no point).
        :raises ValueError: for a trajectory that cannot be a command.
        """
        return self.command(trajectory_command(self.physics.command_values, self.commanded,
                                               self.config.command_interface, joint_names, values))

    def reset(self, names: Sequence[str], position: Sequence[float],
              velocity: Sequence[float]) -> str:
        """Place joints (no names: every joint at its home) and hold: what was done.

        :raises ValueError: for unknown joints or values that do not match the names.
        """
        self.physics.reset(list(names), list(position), list(velocity))
        return f"reset {len(names)} joint(s)" if names else "reset every joint to its home"

    def step(self) -> None:
        """One control period under the current command; in free_run, a command older than
        ``command_timeout`` is replaced by a hold first (the robot side's own deadline, as a
        real robot's driver should have: the boundary's may be dead)."""
        timeout = self.config.command_timeout
        if (self.config.mode != "lockstep" and timeout > 0
                and self.clock() - self._commanded_at > timeout):
            self.physics.hold()
            self.timeouts += 1
            self._commanded_at = float("inf")  # held until the next command
        self.physics.step()
        self._rate_steps += 1

    # --- outputs ------------------------------------------------------------------------------

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(position, velocity, effort)`` of :attr:`joint_names`."""
        return self.physics.state()

    @property
    def sim_time_ns(self) -> int:
        """Simulated time: 0 at the start, one control period per step."""
        return self.physics.sim_time_ns

    def description(self) -> str:
        """The ``robot_description``: a known robot's own, or the URDF with a ros2_control block
        that lets the command interface drive the commanded joints (hardware: mock)."""
        config = self.config
        if config.model is not None:
            return robot_description(config.model.name, "mock")
        return describe_urdf(config.urdf_path, [
            JointInterfaces(name, (config.command_interface,) if name in self.commanded else ())
            for name in self.joint_names], "mock")

    def rate_report(self) -> tuple[str, bool]:
        """free_run: the step rate since the last report, and whether it falls short of the
        target (below :data:`SLOW_RATE_FRACTION` of ``1 / control_period``)."""
        now = self.clock()
        window = now - self._rate_since
        rate = self._rate_steps / max(window, 1e-9)
        target = 1.0 / self.physics.control_period
        text = (f"free_run: {rate:.1f} steps/s over the last {window:.1f} s "
                f"(target {target:.1f}, real-time factor {rate / target:.2f})")
        self._rate_steps, self._rate_since = 0, now
        return text, rate < SLOW_RATE_FRACTION * target

    def close(self) -> None:
        self.physics.close()


__all__ = ["SimRobot"]
