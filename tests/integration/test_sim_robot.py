"""The ``sim_robot`` executable in its own process, seen from a test node over DDS: joint_states
with ros2_control's names and types, one control period per command in lockstep mode, /clock,
the reset service, rejected commands, free_run's wall-clock stepping and exit code 2 for bad
configuration."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pybullet_data
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from rl_core.names.variables import HEARTBEAT_FILE
from rl_core.robot.description import parse_ros2_control
from rl_interfaces.srv import ResetRobot
from rl_nodes import graph
from tests.processes import Child

pytestmark = pytest.mark.integration
SIM_ROBOT = str(Path(sys.executable).parent / "sim_robot")
#: This module's own domain: outside the 1..100 that conftest draws per run and the fixed ids
#: other tests use (101 and the small ones of the CLI tests); 215-232 are valid on Linux.
DOMAIN_ID = 230
TIMEOUT_S = 30.0
CARTPOLE_JOINTS = ["slider_to_cart", "cart_to_pole"]
KUKA_JOINTS = [f"lbr_iiwa_joint_{i}" for i in range(1, 8)]


def robot_env() -> dict[str, str]:
    """Loopback-only discovery and this module's domain, set explicitly (network-safety rule)."""
    return {**os.environ, "ROS_DOMAIN_ID": str(DOMAIN_ID), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}


def heartbeat_file(namespace: str) -> Path:
    """Where the sim_robot of ``namespace`` started by this test process beats."""
    return Path(tempfile.gettempdir()) / f"sim_robot_beat_{os.getpid()}_{namespace.strip('/')}"


def start(namespace: str, *parameters: str) -> Child:
    arguments = [argument for parameter in parameters for argument in ("-p", parameter)]
    heartbeat_file(namespace).unlink(missing_ok=True)
    return Child([SIM_ROBOT, "--ros-args", "-r", f"__ns:={namespace}", *arguments],
                 env={**robot_env(), HEARTBEAT_FILE: str(heartbeat_file(namespace))})


def stamp_ns(msg: JointState | Clock) -> int:
    stamp = msg.header.stamp if isinstance(msg, JointState) else msg.clock
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Probe:
    """A test node on the robot's topics, in a context of its own on :data:`DOMAIN_ID`."""

    def __init__(self, namespace: str, controller: str, child: Child) -> None:
        assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
        self.child, self.namespace = child, namespace
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, domain_id=DOMAIN_ID)
        self.node = rclpy.create_node("sim_robot_probe", namespace=namespace,
                                      context=self.context)
        self.states: list[JointState] = []
        self.clocks: list[Clock] = []
        self.descriptions: list[str] = []
        node = self.node
        node.create_subscription(JointState, graph.ROBOT_JOINT_STATES.name, self.states.append,
                                 graph.ROBOT_JOINT_STATES.qos.profile())
        node.create_subscription(Clock, graph.CLOCK.name, self.clocks.append,
                                 graph.CLOCK.qos.profile())
        node.create_subscription(String, graph.ROBOT_DESCRIPTION.name,
                                 lambda msg: self.descriptions.append(msg.data),
                                 graph.ROBOT_DESCRIPTION.qos.profile())
        commands = graph.command_topic(controller, "commands")
        trajectory = graph.command_topic(controller, "joint_trajectory")
        self.commands = node.create_publisher(Float64MultiArray, commands.name,
                                              commands.qos.profile())
        self.trajectory = node.create_publisher(JointTrajectory, trajectory.name,
                                                trajectory.qos.profile())
        self.reset_client = node.create_client(ResetRobot, f"{graph.SIM_ROBOT}/reset")
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(node)

    def spin_until(self, predicate: Callable[[], object], what: str,
                   timeout_s: float = TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert self.child.process.poll() is None, f"sim_robot ended:\n{self.child.output()}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n" \
                                                f"{self.child.output()[-3000:]}"
            self.executor.spin_once(timeout_sec=0.05)

    def wait_ready(self) -> None:
        """The robot's endpoints matched ours (its description arrived: it is up)."""
        self.spin_until(lambda: self.descriptions and self.reset_client.service_is_ready()
                        and self.commands.get_subscription_count() > 0
                        and self.trajectory.get_subscription_count() > 0
                        and self.node.count_publishers(graph.ROBOT_JOINT_STATES.name) > 0,
                        "the robot's topics and reset service")

    def reset(self, names: list[str], position: list[float],
              velocity: list[float] | None = None) -> ResetRobot.Response:
        request = ResetRobot.Request(name=names, position=position, velocity=velocity or [])
        future = self.reset_client.call_async(request)
        self.spin_until(future.done, "the reset response")
        return future.result()

    def command(self, values: list[float]) -> None:
        self.commands.publish(Float64MultiArray(data=values))

    def state_where(self, predicate: Callable[[JointState], bool], what: str) -> JointState:
        """The first joint state received (so far or from now) that satisfies ``predicate``."""
        found: list[JointState] = []

        def search() -> bool:
            found.extend(msg for msg in self.states if predicate(msg))
            return bool(found)

        self.spin_until(search, what)
        return found[0]

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def robot(request: pytest.FixtureRequest) -> Iterator[Probe]:
    """sim_robot started with ``request.param = (namespace, controller, *parameters)`` and a
    ready probe; the process is stopped (SIGINT, then SIGKILL) in any case."""
    namespace, controller, *parameters = request.param
    child = start(namespace, *parameters)
    probe: Probe | None = None
    try:
        probe = Probe(namespace, controller, child)
        probe.wait_ready()
        yield probe
    finally:
        if probe is not None:
            probe.close()
        code = child.stop()
    assert code == 0, child.output()[-3000:]  # SIGINT ends it cleanly


@pytest.mark.parametrize("robot", [("/robot_0", "effort_controller", "robot:=cartpole",
                                    "publish_clock:=true")], indirect=True)
def test_cartpole_effort_lockstep_steps_once_per_command(robot: Probe) -> None:
    assert "<ros2_control" in robot.descriptions[-1]
    assert "mock_components/GenericSystem" in robot.descriptions[-1]
    response = robot.reset(CARTPOLE_JOINTS, [0.1, 0.05], [0.0, 0.0])
    assert response.success, response.message
    placed = robot.state_where(lambda m: list(m.position) == [0.1, 0.05], "the reset's state")
    assert stamp_ns(placed) == 0  # a reset does not step
    assert list(placed.name) == CARTPOLE_JOINTS and placed.header.frame_id == ""
    assert len(placed.velocity) == len(placed.effort) == 2

    robot.command([3.0])
    stepped = robot.state_where(lambda m: m.effort[0] == 3.0, "the state after a command")
    assert stamp_ns(stepped) == 20_000_000  # exactly one control period of 0.02 s
    assert stepped.velocity[0] > 0.0 and stepped.effort[1] == 0.0  # pushed; the pole is passive
    robot.spin_until(lambda: any(stamp_ns(c) == 20_000_000 for c in robot.clocks), "/clock 0.02")

    robot.command([1.0, 2.0])  # one value per commanded joint: this is one too many
    assert robot.child.wait_for_line(lambda line: "rejected commands" in line, TIMEOUT_S)
    robot.command([-2.0])
    after = robot.state_where(lambda m: m.effort[0] == -2.0, "the state after the next command")
    assert stamp_ns(after) == 40_000_000  # the rejected command did not step
    assert max(stamp_ns(m) for m in robot.states) == 40_000_000

    home = robot.reset([], [])
    assert home.success, home.message
    at_home = robot.state_where(lambda m: not any(m.position) and stamp_ns(m) == 40_000_000,
                                "the state at home")
    assert not any(at_home.velocity) and not any(at_home.effort)  # commands zeroed

    refused = robot.reset(["elbow"], [1.0])
    assert not refused.success and "elbow" in refused.message


@pytest.mark.parametrize("robot", [("/robot_1", "velocity_controller", "robot:=kuka_iiwa")],
                         indirect=True)
def test_kuka_velocity_lockstep_takes_commands_and_trajectories(robot: Probe) -> None:
    assert robot.descriptions[-1].count("<command_interface name=\"velocity\"") == 7
    assert robot.reset([], []).success
    robot.command([0.5] * 7)
    moving = robot.state_where(lambda m: stamp_ns(m) == 50_000_000, "the first step")
    assert list(moving.name) == KUKA_JOINTS
    assert all(v > 0.25 for v in moving.velocity), moving.velocity
    # joint_trajectory: the first point's velocities for the joints it names; the others hold.
    robot.trajectory.publish(JointTrajectory(
        joint_names=["lbr_iiwa_joint_1"],
        points=[JointTrajectoryPoint(velocities=[-0.3])]))
    turned = robot.state_where(lambda m: stamp_ns(m) == 100_000_000, "the trajectory's step")
    assert turned.velocity[0] < 0.0 and all(v > 0.25 for v in turned.velocity[1:])
    robot.trajectory.publish(JointTrajectory(joint_names=["elbow"], points=[
        JointTrajectoryPoint(velocities=[1.0])]))
    assert robot.child.wait_for_line(lambda line: "rejected joint_trajectory" in line, TIMEOUT_S)
    assert not robot.clocks  # publish_clock is off by default


@pytest.mark.parametrize("robot", [("/robot_2", "effort_controller", "robot:=cartpole",
                                    "mode:=free_run", "publish_clock:=true",
                                    "use_sim_time:=true", "rate_report_period:=1.0")],
                         indirect=True)
def test_free_run_steps_on_the_wall_clock_under_the_latest_command(robot: Probe) -> None:
    # use_sim_time:=true too: the node's own /clock must not stall its wall-clock stepping.
    robot.spin_until(lambda: len(robot.states) >= 10, "ten joint states")
    stamps = [stamp_ns(m) for m in robot.states]
    # Every step is published: consecutive stamps one period apart (reliable, in order).
    assert all(b - a == 20_000_000 for a, b in zip(stamps, stamps[1:])), stamps
    robot.command([5.0])
    first = robot.state_where(lambda m: m.effort[0] == 5.0, "a state under the command")
    # The command holds: later steps, with no new command, still apply it.
    robot.spin_until(lambda: stamp_ns(robot.states[-1]) >= stamp_ns(first) + 60_000_000,
                     "three more steps")
    later = [m for m in robot.states if stamp_ns(m) > stamp_ns(first)]
    assert later and all(m.effort[0] == 5.0 for m in later)
    robot.spin_until(lambda: robot.clocks and stamp_ns(robot.clocks[-1]) >= stamp_ns(first),
                     "/clock following the steps")
    report = robot.child.wait_for_line(lambda line: "free_run:" in line, TIMEOUT_S)
    assert report is not None and "target 50.0" in report, robot.child.output()
    # No command for command_timeout (0.5 s): the robot side holds by itself.
    held = robot.state_where(lambda m: m.effort[0] == 0.0 and stamp_ns(m) > stamp_ns(first),
                             "a hold once no command came within command_timeout")
    assert stamp_ns(held) - stamp_ns(first) >= 400_000_000, "held before the command timeout"
    # It beats its heartbeat file, so the supervisor would notice a hang (rl_core.monitoring.heartbeat).
    beat = heartbeat_file(robot.namespace)
    assert beat.is_file() and time.time() - beat.stat().st_mtime < 3.0


CARTPOLE_URDF = os.path.join(pybullet_data.getDataPath(), "cartpole.urdf")


@pytest.mark.parametrize("robot", [("/robot_3", "velocity_controller", f"robot:={CARTPOLE_URDF}",
                                    "control_period:=0.01")], indirect=True)
def test_a_urdf_path_runs_with_every_joint_commanded_and_describes_that(robot: Probe) -> None:
    block = parse_ros2_control(robot.descriptions[-1])
    assert [(joint.name, joint.command) for joint in block] == \
        [(name, ("velocity",)) for name in CARTPOLE_JOINTS]
    assert robot.reset([], []).success
    robot.command([0.2, -0.1])
    stepped = robot.state_where(lambda m: stamp_ns(m) == 10_000_000, "one 0.01 s step")
    assert stepped.velocity[0] > 0.0 and stepped.velocity[1] < 0.0


@pytest.mark.parametrize(("parameters", "reason"), [
    (["robot:=ur5"], "parameter 'robot': 'ur5' is neither a known robot"),
    (["robot:=cartpole", "command_interface:=velocity"], "cartpole offers no velocity command"),
    (["robot:=kuka_iiwa", "mode:=realtime"], "parameter 'mode': 'realtime' is not one of"),
    (["robot:=kuka_iiwa", "control_period:=1"], "parameter 'control_period'"),
    (["robot:=kuka_iiwa", "controller:=my arm"], "parameter 'controller': 'my arm' makes"),
])
def test_bad_configuration_ends_with_exit_code_2_and_the_reason(parameters: list[str],
                                                                reason: str) -> None:
    child = start("/robot_9", *parameters)
    try:
        code = child.wait(TIMEOUT_S)
    finally:
        child.stop()
    assert code == 2, child.output()
    assert reason in child.output()
