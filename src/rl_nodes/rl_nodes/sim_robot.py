"""``sim_robot``: a pybullet robot behind the topics that gz_ros2_control with
joint_state_broadcaster and a forward command controller expose, so the boundary (the simulator
node with ``robot_interface: ros2_control``) trains it exactly as it would train Gazebo or a real
robot. The physics is :class:`rl_core.robot.pybullet_robot.PybulletRobot`; this node only wires
it to ROS.

In the robot's namespace (``/robot_k``; names from :mod:`rl_nodes.graph`):

* publishes ``joint_states`` (sensor_msgs/JointState; stamp = simulated time, empty frame_id,
  name/position/velocity/effort; reliable, volatile, depth 10) once at start, after every step
  and after every reset;
* subscribes ``<controller>/commands`` (std_msgs/Float64MultiArray, one value per commanded
  joint, in ``command_joints`` order) and ``<controller>/joint_trajectory``
  (trajectory_msgs/JointTrajectory). Simplification: a trajectory is not followed in time; its
  first point's values for the command interface (positions, velocities or effort) become the
  command of the joints it names (others keep theirs), as if it were a forward command. Wrong
  lengths, unknown joints and NaN are rejected: logged, counted, ignored;
* publishes ``robot_description`` (std_msgs/String, transient local) with ros2_control tags
  (rl_core.robot.description; hardware plugin mock_components, the stand-in a URDF needs);
* publishes ``/clock`` (rosgraph_msgs/Clock, simulated time) with ``publish_clock`` (one robot
  per ROS graph should, as one Gazebo does);
* serves ``~/reset`` (rl_interfaces/srv/ResetRobot): places joints (no names: every joint at 0),
  makes the commands "hold" and publishes a joint state, without stepping.

Modes: ``lockstep`` (default, fastest training) steps one control period per command received
(a "hold" command is just a command), then publishes the joint state; ``free_run`` steps on a
wall-clock timer at ``1 / control_period`` under the latest command, like real hardware, and
logs the rate it achieves. Simulated time starts at 0 and advances ``control_period`` per step.
Bad configuration ends the process with exit code 2 and a message naming the parameter.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import rclpy
from builtin_interfaces.msg import Time
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.clock import Clock as RosClock
from rclpy.clock import ClockType
from rclpy.exceptions import InvalidTopicNameException, ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.validate_topic_name import validate_topic_name
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from rl_core.config import ConfigError
from rl_core.robot import COMMAND_INTERFACES
from rl_core.robot.description import ROBOTS, JointInterfaces, describe_urdf, robot_description
from rl_core.robot.pybullet_robot import PybulletRobot
from rl_core.robot.sim_robot_config import (
    TRAJECTORY_FIELDS,
    SimRobotConfig,
    sim_robot_config,
    trajectory_command,
)
from rl_interfaces.srv import ResetRobot
from rl_nodes import graph
from rl_nodes.runtime import ensure_network_defaults

#: The reset service (type graph.RESET_ROBOT_TYPE), under the node: /robot_k/sim_robot/reset.
RESET_SERVICE = graph.RESET_ROBOT.name


def _float_range(low: float, high: float) -> list[FloatingPointRange]:
    return [FloatingPointRange(from_value=low, to_value=high, step=0.0)]


def _int_range(low: int, high: int) -> list[IntegerRange]:
    return [IntegerRange(from_value=low, to_value=high, step=1)]


#: name -> (default or type, description, descriptor extras). Read-only: a robot does not
#: change its joints or physics while it runs.
PARAMETERS: dict[str, tuple[object, str, dict[str, object]]] = {
    "robot": ("cartpole", f"The robot: {' or '.join(ROBOTS)} (pybullet_data's URDF with the "
              "settings of its in-process environment) or the path of a URDF file.", {}),
    "joints": (Parameter.Type.STRING_ARRAY, "Joints reported in joint_states, in that order; "
               "unset: every movable joint of the robot.", {}),
    "command_joints": (Parameter.Type.STRING_ARRAY, "Joints commanded, in the order of the "
                       "command values (the controller's joints); unset: the reported joints "
                       "that the robot's ros2_control block lets command_interface drive "
                       "(a URDF path: all of them).", {}),
    "controller": ("", "Controller whose topics are served (<controller>/commands, "
                   "<controller>/joint_trajectory); empty: <command_interface>_controller, as in "
                   "config/robots/controllers.yaml.", {}),
    "command_interface": ("", f"What commands mean: {', '.join(COMMAND_INTERFACES)}; empty: the "
                          "robot's own (cartpole effort, kuka_iiwa velocity, a URDF path "
                          "velocity).", {}),
    "control_period": (0.0, "Simulated seconds per step (0: the robot's own, cartpole 0.02, "
                       "kuka_iiwa and URDF paths 0.05).",
                       {"floating_point_range": _float_range(0.0, 10.0)}),
    "physics_substeps": (0, "Physics steps per control period (0: the robot's own, cartpole 4, "
                         "kuka_iiwa and URDF paths 10).",
                         {"integer_range": _int_range(0, 10000)}),
    "max_motor_force": (0.0, "N or N m: force limit of position and velocity motors and clip of "
                        "effort commands (0: the robot's own, cartpole 10, kuka_iiwa and URDF "
                        "paths 200).", {"floating_point_range": _float_range(0.0, 1.0e6)}),
    "mode": ("lockstep", "lockstep: one step per command received (fast training); free_run: "
             "steps on a wall-clock timer at 1/control_period under the latest command.", {}),
    "publish_clock": (False, "Publish the simulated time on /clock (one robot of a graph).", {}),
    "seed": (0, "Seed of the run (recorded; pybullet's dynamics are deterministic).",
             {"integer_range": _int_range(0, 2**31 - 1)}),
    "rate_report_period": (10.0, "free_run: seconds between reports of the achieved step rate "
                           "(0: none).", {"floating_point_range": _float_range(0.0, 3600.0)}),
}


def _stamp(nanoseconds: int) -> Time:
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


class SimRobotNode(Node):
    """A pybullet robot behind ros2_control's topics (see the module docstring).

    :raises ConfigError: for invalid parameters (the message names the parameter).
    """

    def __init__(self, namespace: str = "") -> None:
        super().__init__(graph.SIM_ROBOT, namespace=namespace)
        self.config = self._read_configuration()
        config = self.config
        try:
            self.robot = PybulletRobot(config.urdf_path, config.joints, config.command_interface,
                                       config.control_period, config.physics_substeps,
                                       command_joints=config.command_joints,
                                       max_motor_force=config.max_motor_force, seed=config.seed)
        except ValueError as error:
            raise ConfigError(f"robot {config.robot!r}: {error}") from error
        self.rejections: dict[str, int] = {}
        self._joint_names = list(self.robot.joint_names)
        self._commanded = {name: i for i, name in enumerate(self.robot.command_joints)}
        self._state_pub = self.create_publisher(JointState, graph.ROBOT_JOINT_STATES.name,
                                                graph.ROBOT_JOINT_STATES.qos.profile())
        self._clock_pub = (self.create_publisher(Clock, graph.CLOCK.name, graph.CLOCK.qos.profile())
                           if config.publish_clock else None)
        description_pub = self.create_publisher(String, graph.ROBOT_DESCRIPTION.name,
                                                graph.ROBOT_DESCRIPTION.qos.profile())
        description_pub.publish(String(data=self._description()))
        commands = graph.command_topic(config.controller, "commands")
        trajectory = graph.command_topic(config.controller, "joint_trajectory")
        self.create_subscription(Float64MultiArray, commands.name, self._on_command,
                                 commands.qos.profile())
        self.create_subscription(JointTrajectory, trajectory.name, self._on_trajectory,
                                 trajectory.qos.profile())
        self.create_service(ResetRobot, RESET_SERVICE, self._on_reset)
        self._rate_steps, self._rate_since = 0, time.monotonic()
        if config.mode == "free_run":
            # Wall-clock timers even with use_sim_time: this node makes the simulated time, so
            # a timer on /clock would wait for a step that only it could make.
            wall = RosClock(clock_type=ClockType.STEADY_TIME)
            self.create_timer(config.control_period, self._on_timer, clock=wall)
            if config.rate_report_period > 0.0:
                self.create_timer(config.rate_report_period, self._report_rate, clock=wall)
        self._publish_state()
        self.get_logger().info(
            f"{config.robot} ({config.mode}, {config.command_interface} on "
            f"{list(self.robot.command_joints)} via {self.resolve_topic_name(commands.name)}, "
            f"{self.robot.control_period} s per step, {self.robot.physics_substeps} substeps, "
            f"seed {config.seed}): ready")

    # ------------------------------------------------------------------ configuration

    def _read_configuration(self) -> SimRobotConfig:
        """Declare every parameter and validate them in one place.

        :raises ConfigError: naming the parameter and what it accepts.
        """
        values: dict[str, Any] = {}
        for name, (default, description, extras) in PARAMETERS.items():
            descriptor = ParameterDescriptor(description=description, read_only=True, **extras)
            try:
                values[name] = self.declare_parameter(name, default, descriptor).value
            except ParameterException as error:
                raise ConfigError(f"parameter {name!r}: {error}") from error
        config = sim_robot_config(values)
        try:
            validate_topic_name(graph.command_topic(config.controller).name)
        except InvalidTopicNameException as error:
            raise ConfigError(f"parameter 'controller': {config.controller!r} makes an invalid "
                              f"topic name: {error}") from error
        return config

    def _description(self) -> str:
        if self.config.model is not None:
            return robot_description(self.config.model.name, "mock")
        return describe_urdf(self.config.urdf_path, [
            JointInterfaces(name, (self.config.command_interface,) if name in self._commanded
                            else ()) for name in self._joint_names], "mock")

    # ------------------------------------------------------------------ callbacks

    def _on_command(self, msg: Float64MultiArray) -> None:
        try:
            self.robot.command(msg.data)
        except ValueError as error:
            self._reject("commands", str(error))
            return
        self._after_command()

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            point = msg.points[0] if msg.points else None
            self.robot.command(trajectory_command(
                self.robot.command_values, self._commanded, self.config.command_interface,
                list(msg.joint_names), None if point is None else list(getattr(
                    point, TRAJECTORY_FIELDS[self.config.command_interface]))))
        except ValueError as error:
            self._reject("joint_trajectory", str(error))
            return
        self._after_command()

    def _on_reset(self, request: ResetRobot.Request, response: ResetRobot.Response
                  ) -> ResetRobot.Response:
        try:
            self.robot.reset(list(request.name), list(request.position), list(request.velocity))
        except ValueError as error:
            self._reject("reset", str(error))
            response.success, response.message = False, str(error)
            return response
        self._publish_state()
        response.success = True
        response.message = (f"reset {len(request.name)} joint(s)" if request.name
                            else "reset every joint to its home")
        return response

    def _on_timer(self) -> None:
        self._step()

    # ------------------------------------------------------------------ helpers

    def _after_command(self) -> None:
        if self.config.mode == "lockstep":
            self._step()

    def _step(self) -> None:
        self.robot.step()
        self._rate_steps += 1
        self._publish_state()

    def _publish_state(self) -> None:
        position, velocity, effort = self.robot.state()
        msg = JointState(name=self._joint_names, position=position.tolist(),
                         velocity=velocity.tolist(), effort=effort.tolist())
        msg.header.stamp = _stamp(self.robot.sim_time_ns)
        self._state_pub.publish(msg)
        if self._clock_pub is not None:
            self._clock_pub.publish(Clock(clock=msg.header.stamp))

    def _report_rate(self) -> None:
        now = time.monotonic()
        rate = self._rate_steps / max(now - self._rate_since, 1e-9)
        target = 1.0 / self.robot.control_period
        text = (f"free_run: {rate:.1f} steps/s over the last {now - self._rate_since:.1f} s "
                f"(target {target:.1f}, real-time factor {rate / target:.2f})")
        (self.get_logger().warning if rate < 0.9 * target else self.get_logger().info)(text)
        self._rate_steps, self._rate_since = 0, now

    def _reject(self, what: str, reason: str) -> None:
        """Count a rejected input per source and log why (at most once a second)."""
        self.rejections[what] = self.rejections.get(what, 0) + 1
        self.get_logger().error(f"rejected {what} ({self.rejections[what]} so far): {reason}",
                                throttle_duration_sec=1.0)

    def close(self) -> None:
        self.robot.close()


def main(args: list[str] | None = None) -> int:
    """Run one sim_robot until shutdown; exit code 0, or 2 for bad configuration."""
    ensure_network_defaults()
    rclpy.init(args=args if args is not None else sys.argv)
    node: SimRobotNode | None = None
    try:
        node = SimRobotNode()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except ConfigError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
