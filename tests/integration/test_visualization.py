"""Subscribe as rviz and rqt_robot_monitor would: URDF, joint states, markers, diagnostics, and
TF as tf2 listens to it (REP-105: fixed joints on /tf_static, moving joints on /tf, one parent
per frame, none with ``publish_tf:=false``). The TF tests need tf2_msgs (a full ROS 2 install,
the docker image); the PyPI wheels lack it, so they skip there."""

from __future__ import annotations

import math
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from rl_core.config import SimulatorConfig
from rl_core.envs.base import PybulletRobotEnv
from rl_nodes.base import LATCHED_QOS, RLNode
from rl_nodes.rviz_display import RvizDisplay
from tests.integration.in_process import spinning
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


# --- TF ------------------------------------------------------------------------------------------

#: What a tf2 listener subscribes with: /tf_static reliable, transient local (tf2's
#: StaticListenerQoS), /tf reliable, volatile, depth 100.
STATIC_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                        reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)
DYNAMIC_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                         reliability=ReliabilityPolicy.RELIABLE)


def _tf_message() -> type:
    return pytest.importorskip("tf2_msgs.msg", reason="tf2_msgs: a full ROS 2 install").TFMessage


def _kuka(ros_env: dict[str, str], tmp_path: Path, extra: str = "") -> Child:
    """Robot 1's simulator and policy on the KUKA reach task, one env, TF at 20 Hz."""
    overrides = tmp_path / "tf.yaml"
    overrides.write_text("/**/simulator:\n  ros__parameters:\n    num_envs: 1\n"
                         "    visualization_rate_hz: 20.0\n" + extra)
    return Child([str(Path(sys.executable).parent / "container"), "--node", "simulator@/robot_1",
                  "--node", "policy@/robot_1", "--ros-args", "--params-file",
                  str(REPO / "config" / "kuka_reach.yaml"), "--params-file", str(overrides)],
                 env=ros_env)


def _tf_listener(tf_type: type) -> tuple[Node, dict[str, list]]:
    """A node subscribed to /tf_static, /tf, robot 1's description and joint states."""
    listener = rclpy.create_node("tf_listener")
    got: dict[str, list] = {"static": [], "tf": [], "description": [], "joints": []}
    listener.create_subscription(tf_type, "/tf_static", got["static"].append, STATIC_QOS)
    listener.create_subscription(tf_type, "/tf", got["tf"].append, DYNAMIC_QOS)
    listener.create_subscription(String, "/robot_1/robot_description", got["description"].append,
                                 LATCHED_QOS)
    listener.create_subscription(JointState, "/robot_1/joint_states", got["joints"].append, 10)
    return listener, got


def _spin_until(listener: Node, done: Callable[[], object], robot: Child,
                timeout_s: float = 60.0) -> None:
    executor = SingleThreadedExecutor()
    executor.add_node(listener)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done():
        executor.spin_once(timeout_sec=0.1)
        assert robot.process.poll() is None, robot.output()[-3000:]


def _link(joint: ET.Element, role: str) -> str:
    element = joint.find(role)
    assert element is not None, f"joint {joint.get('name')} has no <{role}>"
    return element.get("link", "")


def _one_parent_each(transforms: list) -> dict[str, str]:
    parents: dict[str, str] = {}
    for t in transforms:
        parent = parents.setdefault(t.child_frame_id, t.header.frame_id)
        assert parent == t.header.frame_id, f"{t.child_frame_id} has parents {parent} and " \
                                            f"{t.header.frame_id}"
    return parents


def test_tf_carries_the_urdf_tree_fixed_joints_static_moving_joints_on_tf(
        ros_env, tmp_path: Path) -> None:
    tf_type = _tf_message()
    robot = _kuka(ros_env, tmp_path)
    rclpy.init(args=[])
    listener, got = _tf_listener(tf_type)
    try:
        _spin_until(listener, lambda: got["static"] and len(got["tf"]) > 3 and got["description"],
                    robot)
    finally:
        listener.destroy_node()
        rclpy.try_shutdown()
        robot.stop()
    assert got["static"] and got["tf"] and got["description"], robot.output()[-3000:]
    urdf = ET.fromstring(got["description"][0].data)
    links = {link.get("name") for link in urdf.iter("link")}
    joints = {j.get("name"): (j.get("type"), _link(j, "parent"), _link(j, "child"))
              for j in urdf.iter("joint")}
    children = {child for _, _, child in joints.values()}
    (root,) = links - children
    static = [t for message in got["static"] for t in message.transforms]
    moving = [t for message in got["tf"] for t in message.transforms]
    expected_static = {f"robot_1/{child}": f"robot_1/{parent}"
                       for kind, parent, child in joints.values() if kind == "fixed"}
    expected_static[f"robot_1/{root}"] = "world"  # the base, where robot 1 stands
    expected_moving = {f"robot_1/{child}": f"robot_1/{parent}"
                       for kind, parent, child in joints.values() if kind != "fixed"}
    assert _one_parent_each(static) == expected_static
    assert _one_parent_each(moving) == expected_moving
    # Fixed joints (and the base) only on /tf_static; every frame one parent over both topics.
    assert not set(expected_static) & {t.child_frame_id for t in moving}
    parents = _one_parent_each(static + moving)
    assert set(parents) == {f"robot_1/{link}" for link in links}
    base = next(t for t in static if t.header.frame_id == "world").transform.translation
    assert base.y > 1.0, "robot 1 stands beside robot 0"
    for t in moving:  # a revolute joint turns about its origin: the translation is the origin
        q = t.transform.rotation
        assert math.isclose(q.x**2 + q.y**2 + q.z**2 + q.w**2, 1.0, rel_tol=1e-6)


def test_publish_tf_false_leaves_tf_to_robot_state_publisher(ros_env, tmp_path: Path) -> None:
    tf_type = _tf_message()
    robot = _kuka(ros_env, tmp_path, "    publish_tf: false\n")
    rclpy.init(args=[])
    listener, got = _tf_listener(tf_type)
    try:
        # joint_states flowing means the simulator runs with its display (and would send TF).
        _spin_until(listener, lambda: len(got["joints"]) > 5 and got["description"], robot)
        assert len(got["joints"]) > 5, robot.output()[-3000:]
        _spin_until(listener, lambda: False, robot, timeout_s=1.0)
        assert listener.count_publishers("/tf") == 0
        assert listener.count_publishers("/tf_static") == 0
    finally:
        listener.destroy_node()
        rclpy.try_shutdown()
        robot.stop()
    assert got["static"] == [] and got["tf"] == []


#: A user's robot with fixed joints: base -(fixed)-> mount -(revolute)-> arm -(fixed)-> tool.
FIXED_JOINTS_URDF = """<robot name="user_arm">
  <link name="base"><inertial><mass value="0"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0"
    izz="1"/></inertial></link>
  <link name="mount"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0"
    izz="1"/></inertial></link>
  <link name="arm"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0"
    izz="1"/></inertial></link>
  <link name="tool"><inertial><mass value="0.1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0"
    izz="1"/></inertial></link>
  <joint name="base_to_mount" type="fixed"><parent link="base"/><child link="mount"/>
    <origin xyz="0 0 0.1"/></joint>
  <joint name="shoulder" type="revolute"><parent link="mount"/><child link="arm"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="5"
    velocity="1"/></joint>
  <joint name="arm_to_tool" type="fixed"><parent link="arm"/><child link="tool"/>
    <origin xyz="0.4 0 0"/></joint>
</robot>"""


class _DisplayHost(RLNode):
    """The simulator's display without its environments: robot 3's RvizDisplay."""

    def __init__(self, urdf: Path) -> None:
        super().__init__("simulator", "/robot_3")
        self.config = SimulatorConfig()
        self.env = PybulletRobotEnv(urdf, control_period=0.05, physics_substeps=1)
        # Rate 0: no timer (its callbacks need the container's dispatch loop); the test publishes.
        self.display = RvizDisplay.of(self, self.env, 3, 0.0)

    def close(self) -> None:
        self.env.close()


def test_a_user_robots_fixed_joints_reach_tf_static_only(tmp_path: Path) -> None:
    tf_type = _tf_message()
    urdf = tmp_path / "user_arm.urdf"
    urdf.write_text(FIXED_JOINTS_URDF)
    rclpy.init(args=[])
    host = _DisplayHost(urdf)
    listener = rclpy.create_node("tf_listener")
    got: dict[str, list] = {"static": [], "tf": []}
    listener.create_subscription(tf_type, "/tf_static", got["static"].append, STATIC_QOS)
    listener.create_subscription(tf_type, "/tf", got["tf"].append, DYNAMIC_QOS)
    with spinning([host], listener):
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not (got["static"] and len(got["tf"]) > 2):
            assert host.display is not None
            host.display.publish()  # what its timer does: /tf only while someone listens
            time.sleep(0.05)
    static = {t.child_frame_id: t.header.frame_id for m in got["static"] for t in m.transforms}
    moving = [t for m in got["tf"] for t in m.transforms]
    assert static == {"robot_3/base": "world", "robot_3/mount": "robot_3/base",
                      "robot_3/tool": "robot_3/arm"}
    assert moving and {(t.header.frame_id, t.child_frame_id) for t in moving} == {
        ("robot_3/mount", "robot_3/arm")}
    (message,) = got["static"]  # sent once, all static transforms in one message
    tool = next(t for t in message.transforms if t.child_frame_id == "robot_3/tool")
    assert (tool.transform.translation.x, tool.transform.translation.z) == pytest.approx((0.4, 0))


@pytest.mark.parametrize("robot", ["kuka_iiwa", "cartpole", "user_arm"])
def test_tf_places_every_link_where_pybullet_has_it(robot: str, tmp_path: Path) -> None:
    """The transforms the simulator sends (static at start, moving from joint_states) chain from
    ``world`` to each link frame at pybullet's pose of it; runs without tf2_msgs."""
    import numpy as np
    from builtin_interfaces.msg import Time

    from rl_core.robot.description import robot_model
    from rl_core.robot.tf_tree import matrix_from_quaternion, parents_of
    from rl_nodes import visualization

    urdf = tmp_path / "user_arm.urdf"
    urdf.write_text(FIXED_JOINTS_URDF)
    env = PybulletRobotEnv(str(urdf) if robot == "user_arm" else robot_model(robot).urdf_path,
                           control_period=0.05, physics_substeps=1)
    try:
        client = env.bullet_client
        for index in range(client.getNumJoints(env.robot_id)):  # away from zero, and each other
            client.resetJointState(env.robot_id, index, 0.3 + 0.1 * index)
        tree = visualization.robot_tf_tree(env, 2)
        static = visualization.static_transforms(env, tree, 2)
        state = visualization.joint_state(env, Time())  # what /tf's transforms are built from
        moving = tree.moving_transforms(state.name, state.position)
        assert set(parents_of(static + moving)) == {f"robot_2/{link}" for link in tree.model.links}
        assert {t.child for t in static} == {"robot_2/" + tree.model.root_link} | {
            f"robot_2/{j.child}" for j in tree.model.joints if j.type == "fixed"}
        by_child = {t.child: t for t in static + moving}

        def in_world(frame: str) -> np.ndarray:
            transform = by_child[frame]
            parent = np.eye(4) if transform.parent == "world" else in_world(transform.parent)
            return parent @ transform.matrix()

        for link, (position, quaternion) in env.link_world_poses().items():
            if link == tree.model.root_link:  # pybullet gives the base's centre of mass
                continue
            pose = in_world(f"robot_2/{link}")
            expected = np.asarray(position) + visualization.robot_offset(2)
            np.testing.assert_allclose(pose[:3, 3], expected, atol=1e-6, err_msg=link)
            np.testing.assert_allclose(pose[:3, :3], matrix_from_quaternion(quaternion),
                                       atol=1e-6, err_msg=link)
    finally:
        env.close()

