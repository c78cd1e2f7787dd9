"""``sim_robot``: a pybullet robot behind the topics that gz_ros2_control with
joint_state_broadcaster and a forward command controller expose, so the boundary (the simulator
node with ``robot_interface: ros2_control``) trains it exactly as it would train Gazebo or a real
robot. The robot is :class:`rl_core.robot.sim_robot.SimRobot`; this node only wires it to ROS.

In the robot's namespace (names from :mod:`rl_nodes.graph`) it publishes ``joint_states``,
``robot_description`` (with ros2_control tags, rl_core.robot.description) and, with
``publish_clock``, ``/clock``; it takes ``<controller>/commands`` and
``<controller>/joint_trajectory`` (simplified: a trajectory's first point becomes the command;
bad commands are logged, counted and ignored) and serves ``~/reset``. It beats its heartbeat file
so that the supervisor kills and respawns a hung one. Modes: ``lockstep`` (default) steps one
control period per command received; ``free_run`` steps on a wall-clock timer like real
hardware, and holds once no command came within ``command_timeout``. Bad configuration ends the
process with exit code 2. Topics, QoS and modes: docs/robots.md, "sim_robot".
"""

from __future__ import annotations

import sys
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.clock import Clock as RosClock
from rclpy.clock import ClockType
from rclpy.exceptions import InvalidTopicNameException, ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.validate_topic_name import validate_topic_name
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from rl_core.config import ConfigError
from rl_core.monitoring import heartbeat
from rl_core.robot.sim_robot import SimRobot
from rl_core.robot.sim_robot_config import PARAMETERS, SimRobotConfig, sim_robot_config
from rl_interfaces.srv import ResetRobot
from rl_nodes import graph
from rl_nodes.messages import ns_to_stamp
from rl_nodes.runtime import end_process, spin_plain_node

#: The reset service (type graph.RESET_ROBOT_TYPE), under the node: /robot_k/sim_robot/reset.
RESET_SERVICE = graph.RESET_ROBOT.name
#: Seconds between heartbeats (the nodes beat with their diagnostics, every second).
HEARTBEAT_PERIOD_S = 1.0


def _descriptor(description: str, default: object, bounds: tuple[float, float] | None
                ) -> ParameterDescriptor:
    """A read-only parameter's descriptor, with its range when it has one."""
    descriptor = ParameterDescriptor(description=description, read_only=True)
    if bounds is not None and isinstance(default, int):
        descriptor.integer_range = [IntegerRange(from_value=int(bounds[0]),
                                                 to_value=int(bounds[1]), step=1)]
    elif bounds is not None:
        descriptor.floating_point_range = [FloatingPointRange(
            from_value=float(bounds[0]), to_value=float(bounds[1]), step=0.0)]
    return descriptor


class SimRobotNode(Node):
    """A pybullet robot behind ros2_control's topics (see the module docstring).

    :raises ConfigError: for invalid parameters (the message names the parameter).
    """

    def __init__(self, namespace: str = "") -> None:
        super().__init__(graph.SIM_ROBOT, namespace=namespace)
        self.config = self._read_configuration()
        config = self.config
        self.robot = SimRobot(config)
        self.rejections: dict[str, int] = {}
        self._state_pub = self.create_publisher(JointState, graph.ROBOT_JOINT_STATES.name,
                                                graph.ROBOT_JOINT_STATES.qos.profile())
        self._clock_pub = (self.create_publisher(Clock, graph.CLOCK.name, graph.CLOCK.qos.profile())
                           if config.publish_clock else None)
        description_pub = self.create_publisher(String, graph.ROBOT_DESCRIPTION.name,
                                                graph.ROBOT_DESCRIPTION.qos.profile())
        description_pub.publish(String(data=self.robot.description()))
        commands = graph.command_topic(config.controller, "commands")
        trajectory = graph.command_topic(config.controller, "joint_trajectory")
        self.create_subscription(Float64MultiArray, commands.name, self._on_command,
                                 commands.qos.profile())
        self.create_subscription(JointTrajectory, trajectory.name, self._on_trajectory,
                                 trajectory.qos.profile())
        if config.gripper_joints:
            gripper = graph.command_topic(config.gripper_controller)
            self.create_subscription(Float64MultiArray, gripper.name, self._on_gripper,
                                     gripper.qos.profile())
        self.create_service(ResetRobot, RESET_SERVICE, self._on_reset)
        # Wall-clock timers even with use_sim_time: this node makes the simulated time, so a
        # timer on /clock would wait for a step that only it could make.
        wall = RosClock(clock_type=ClockType.STEADY_TIME)
        # The supervisor watches this thread's heartbeat file, as it does the nodes': a hung
        # sim_robot is killed and respawned (rl_core.monitoring.heartbeat).
        self.create_timer(HEARTBEAT_PERIOD_S, heartbeat.beat_from_here, clock=wall)
        if config.mode == "free_run":
            self.create_timer(config.control_period, self._on_timer, clock=wall)
            if config.rate_report_period > 0.0:
                self.create_timer(config.rate_report_period, self._report_rate, clock=wall)
        self._publish_state()
        physics = self.robot.physics
        self.get_logger().info(
            f"{config.robot} ({config.mode}, {config.command_interface} on "
            f"{list(physics.command_joints)} via {self.resolve_topic_name(commands.name)}, "
            f"{physics.control_period} s per step, {physics.physics_substeps} substeps, "
            f"seed {config.seed}): ready")

    def _read_configuration(self) -> SimRobotConfig:
        """Declare every parameter and validate them in one place.

        :raises ConfigError: naming the parameter and what it accepts.
        """
        values: dict[str, Any] = {}
        for name, (default, description, bounds) in PARAMETERS.items():
            declared = Parameter.Type.STRING_ARRAY if default is None else default
            try:
                values[name] = self.declare_parameter(
                    name, declared, _descriptor(description, default, bounds)).value
            except ParameterException as error:
                raise ConfigError(f"parameter {name!r}: {error}") from error
        config = sim_robot_config(values)
        try:
            validate_topic_name(graph.command_topic(config.controller).name)
        except InvalidTopicNameException as error:
            raise ConfigError(f"parameter 'controller': {config.controller!r} makes an invalid "
                              f"topic name: {error}") from error
        return config

    # ------------------------------------------------------------------ callbacks

    def _on_command(self, msg: Float64MultiArray) -> None:
        try:
            stepped = self.robot.command(msg.data)
        except ValueError as error:
            self._reject("commands", str(error))
            return
        if stepped:
            self._publish_state()

    def _on_gripper(self, msg: Float64MultiArray) -> None:
        try:
            self.robot.grip(msg.data)
        except ValueError as error:
            self._reject("gripper commands", str(error))

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        values = list(getattr(msg.points[0], self.robot.trajectory_field)) if msg.points else None
        try:
            stepped = self.robot.command_trajectory(list(msg.joint_names), values)
        except ValueError as error:
            self._reject("joint_trajectory", str(error))
            return
        if stepped:
            self._publish_state()

    def _on_reset(self, request: ResetRobot.Request, response: ResetRobot.Response
                  ) -> ResetRobot.Response:
        try:
            response.message = self.robot.reset(request.name, request.position, request.velocity)
        except ValueError as error:
            self._reject("reset", str(error))
            response.success, response.message = False, str(error)
            return response
        self._publish_state()
        response.success = True
        return response

    def _on_timer(self) -> None:
        self.robot.step()
        self._publish_state()

    def _report_rate(self) -> None:
        text, slow = self.robot.rate_report()
        # Two call sites: rclpy refuses a severity change at one ("Logger severity cannot be
        # changed between calls"), which killed the report once a slow spell ended.
        if slow:
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)

    # ------------------------------------------------------------------ helpers

    def _publish_state(self) -> None:
        position, velocity, effort = self.robot.state()
        msg = JointState(name=self.robot.joint_names, position=position.tolist(),
                         velocity=velocity.tolist(), effort=effort.tolist())
        msg.header.stamp = ns_to_stamp(self.robot.sim_time_ns)
        self._state_pub.publish(msg)
        if self._clock_pub is not None:
            self._clock_pub.publish(Clock(clock=msg.header.stamp))

    def _reject(self, what: str, reason: str) -> None:
        """Count a rejected input per source and log why (at most once a second)."""
        self.rejections[what] = self.rejections.get(what, 0) + 1
        self.get_logger().error(f"rejected {what} ({self.rejections[what]} so far): {reason}",
                                throttle_duration_sec=1.0)

    def close(self) -> None:
        self.robot.close()


def main(args: list[str] | None = None) -> int:
    """Run one sim_robot until shutdown; exit code 0, or 2 for bad configuration."""
    return end_process(spin_plain_node(SimRobotNode, (ConfigError,), args))


if __name__ == "__main__":
    sys.exit(main())
