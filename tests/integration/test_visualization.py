"""Subscribe as rviz and rqt_robot_monitor would: URDF, joint states, markers, diagnostics."""

from __future__ import annotations

import math
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from rl_nodes.base import LATCHED_QOS
from tests.processes import REPO, Child

pytestmark = pytest.mark.integration


def test_robot_is_visible_the_way_rviz_reads_it(ros_env, tmp_path: Path) -> None:
    overrides = tmp_path / "o.yaml"
    overrides.write_text("/**/simulator:\n  ros__parameters:\n    num_envs: 1\n"
                         "    visualization_rate_hz: 20.0\n")
    robot = Child([str(Path(sys.executable).parent / "container"), "--node", "simulator@/robot_1",
                   "--node", "policy@/robot_1", "--ros-args", "--params-file",
                   str(REPO / "config" / "kuka_reach.yaml"), "--params-file", str(overrides)],
                  env=ros_env)
    rclpy.init(args=[])
    viewer = rclpy.create_node("rviz_like")
    got: dict[str, list] = {"description": [], "joints": [], "markers": [], "diagnostics": []}
    viewer.create_subscription(String, "/robot_1/robot_description", got["description"].append,
                               LATCHED_QOS)
    viewer.create_subscription(JointState, "/robot_1/joint_states", got["joints"].append, 10)
    viewer.create_subscription(MarkerArray, "/robot_1/markers", got["markers"].append, 10)
    viewer.create_subscription(DiagnosticArray, "/diagnostics", got["diagnostics"].append, 10)
    executor = SingleThreadedExecutor()
    executor.add_node(viewer)
    try:
        deadline = time.monotonic() + 60.0
        names = {"/robot_1/simulator", "/robot_1/policy"}
        while time.monotonic() < deadline and not (
                got["description"] and len(got["joints"]) > 2 and got["markers"]
                and names <= {s.name for d in got["diagnostics"] for s in d.status}):
            executor.spin_once(timeout_sec=0.1)
            assert robot.process.poll() is None, robot.output()
    finally:
        viewer.destroy_node()
        rclpy.try_shutdown()
        robot.stop()
    assert got["description"], robot.output()[-2000:]
    urdf = ET.fromstring(got["description"][0].data)
    movable = [j.get("name") for j in urdf.iter("joint") if j.get("type") != "fixed"]
    links = {link.get("name") for link in urdf.iter("link")}
    meshes = [m.get("filename") for m in urdf.iter("mesh")]
    assert meshes and all(m.startswith("file:///") and Path(m[7:]).is_file() for m in meshes)
    joints = got["joints"][-1]
    assert list(joints.name) == movable and len(joints.position) == 7
    assert all(math.isfinite(v) for v in joints.position)
    markers = got["markers"][-1].markers
    assert all(m.header.frame_id == "world" for m in markers)
    link_markers = [m for m in markers if m.ns == "robot_1/links"]
    assert {m.text for m in link_markers} <= links and len(link_markers) == len(links)
    for marker in markers:
        q = marker.pose.orientation
        assert math.isclose(q.x**2 + q.y**2 + q.z**2 + q.w**2, 1.0, rel_tol=1e-3)
        p = marker.pose.position
        assert all(math.isfinite(v) for v in (p.x, p.y, p.z))
    assert any(m.ns == "robot_1/target" for m in markers), "the task target is drawn"
    # robot 1 is drawn beside robot 0 (y offset), so several robots do not overlap.
    assert all(m.pose.position.y > 1.0 for m in link_markers)
    levels = {s.name: s.level for d in got["diagnostics"] for s in d.status}
    assert levels["/robot_1/simulator"] in (b"\x00", b"\x01")
