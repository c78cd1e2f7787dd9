"""The diagnostics_aggregator process over DDS, read the way rqt_robot_monitor reads it:
``/diagnostics_agg`` carries the tree of the shipped analyzer file, a node that falls silent
turns Stale, and ``/diagnostics_toplevel_state`` follows."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor

from tests.processes import Child

pytestmark = pytest.mark.integration
OK, ERROR, STALE = 0, 2, 3
PUBLISHED = ["/robot_0/simulator", "/robot_0/policy", "/robot_1/simulator", "/replay_buffer",
             "/trainer"]


def aggregator(env: dict[str, str], *ros_args: str) -> Child:
    return Child([sys.executable, "-m", "rl_nodes.diagnostics_aggregator", "--ros-args",
                  *ros_args], env=env)


def level(status: DiagnosticStatus) -> int:
    return status.level[0] if isinstance(status.level, bytes) else int(status.level)


def test_diagnostics_agg_carries_the_tree_and_a_silent_node_turns_stale(ros_env) -> None:
    process = aggregator(ros_env)
    rclpy.init(args=[])
    node = rclpy.create_node("fake_nodes_and_monitor")
    silent: set[str] = set()

    def publish() -> None:  # the nodes' 1 Hz /diagnostics, faster to keep the test short
        array = DiagnosticArray(status=[DiagnosticStatus(name=name, level=bytes([OK]),
                                                         message="running")
                                        for name in PUBLISHED if name not in silent])
        array.header.stamp = node.get_clock().now().to_msg()
        publisher.publish(array)

    publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
    node.create_timer(0.2, publish)
    trees: list[dict[str, int]] = []
    toplevel: list[int] = []
    node.create_subscription(DiagnosticArray, "/diagnostics_agg",
                             lambda msg: trees.append({s.name: level(s) for s in msg.status}), 10)
    node.create_subscription(DiagnosticStatus, "/diagnostics_toplevel_state",
                             lambda msg: toplevel.append(level(msg)), 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin_until(condition: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not condition():
            executor.spin_once(timeout_sec=0.1)
            assert process.process.poll() is None, process.output()
        return condition()

    try:
        policy = "/rl_ros2/Robots/robot_0/policy"
        assert spin_until(lambda: bool(trees) and trees[-1].get(policy) == OK
                          and toplevel[-1:] == [OK], 60.0), (trees[-1:], process.output())
        tree = trees[-1]
        assert {name: tree.get(name) for name in (
            "/rl_ros2", "/rl_ros2/Robots", "/rl_ros2/Robots/robot_0",
            "/rl_ros2/Robots/robot_0/simulator", "/rl_ros2/Robots/robot_1/simulator",
            "/rl_ros2/Learner", "/rl_ros2/Learner/replay_buffer", "/rl_ros2/Learner/trainer")
        } == dict.fromkeys((
            "/rl_ros2", "/rl_ros2/Robots", "/rl_ros2/Robots/robot_0",
            "/rl_ros2/Robots/robot_0/simulator", "/rl_ros2/Robots/robot_1/simulator",
            "/rl_ros2/Learner", "/rl_ros2/Learner/replay_buffer", "/rl_ros2/Learner/trainer"), OK)
        silent.add("/robot_0/policy")  # the policy stops; its timeout in the file is 5 s
        started = time.monotonic()
        assert spin_until(lambda: trees[-1].get(policy) == STALE, 30.0), trees[-1]
        assert time.monotonic() - started > 4.0, "stale only after the analyzer's timeout"
        assert spin_until(lambda: toplevel[-1] == ERROR, 5.0), toplevel[-3:]
        tree = trees[-1]
        assert tree["/rl_ros2/Robots/robot_0"] == tree["/rl_ros2"] == ERROR
        assert tree["/rl_ros2/Robots/robot_0/simulator"] == tree["/rl_ros2/Robots/robot_1"] == OK
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        process.stop()


def test_a_bad_analyzer_file_stops_it_with_the_reason(ros_env, tmp_path: Path) -> None:
    bad = tmp_path / "analyzers.yaml"
    bad.write_text("analyzers:\n  ros__parameters:\n    path: x\n    a:\n"
                   "      type: diagnostic_aggregator/GenericAnalyzer\n      path: A\n")
    process = aggregator(ros_env, "-p", f"analyzers_file:={bad}")
    try:
        assert process.wait(60.0) == 2, process.output()
        assert process.wait_for_line(lambda line: "no way to pick statuses" in line, 5.0)
    finally:
        process.stop()
