"""What rviz needs from a simulator: URDF text, joint states, link/target markers and TF.

Pure conversions from an environment's introspection (``rl_core.envs.PybulletRobotEnv``) to
messages; the simulator node publishes them at a limited rate. Robot ``k`` is drawn shifted by
``ROBOT_SPACING_M * k`` along y so several robots sit side by side in the fixed frame. TF is
rl_core.robot.tf_tree's (REP-105, as robot_state_publisher publishes it): ``world ->
robot_k/<root link>`` and the fixed joints static, the moving joints from the joint positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3
from sensor_msgs.msg import JointState
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from rl_core.robot.description import urdf_with_absolute_meshes
from rl_core.robot.tf_tree import FrameTransform, TfTree

try:  # TF exists in a full ROS 2 install; the PyPI wheels lack tf2_msgs.
    from geometry_msgs.msg import TransformStamped
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - depends on the install
    TFMessage = None

FIXED_FRAME = "world"
ROBOT_SPACING_M = 1.5


def robot_offset(robot_id: int) -> np.ndarray:
    return np.array([0.0, ROBOT_SPACING_M * robot_id, 0.0])


def frame_prefix(robot_id: int) -> str:
    """TF prefix of robot ``k``'s links (``robot_k/``), as rviz's RobotModel expects."""
    return f"robot_{robot_id}/"


def urdf_for_rviz(urdf_path: str) -> str:
    """URDF text with relative mesh file names made absolute ``file://`` URIs for rviz."""
    return urdf_with_absolute_meshes(urdf_path)


def joint_state(env: Any, stamp: Time) -> JointState:
    """Environment ``env``'s movable joints (their positions also drive :func:`tf_message`)."""
    msg = JointState()
    msg.header.stamp = stamp
    msg.name = env.joint_names()
    msg.position = [float(v) for v in env.joint_positions()]
    msg.velocity = [float(v) for v in env.joint_velocities()]
    return msg


def _pose(position: np.ndarray, quaternion: np.ndarray) -> Pose:
    return Pose(position=Point(x=float(position[0]), y=float(position[1]), z=float(position[2])),
                orientation=Quaternion(x=float(quaternion[0]), y=float(quaternion[1]),
                                       z=float(quaternion[2]), w=float(quaternion[3])))


def markers(env: Any, robot_id: int, stamp: Time) -> MarkerArray:
    """A small sphere per link frame, a line strip through them and the task target."""
    offset = robot_offset(robot_id)
    namespace = f"robot_{robot_id}"
    poses = env.link_world_poses()
    array = MarkerArray()
    for index, (link, (position, quaternion)) in enumerate(poses.items()):
        marker = Marker(ns=f"{namespace}/links", id=index, type=Marker.SPHERE, action=Marker.ADD)
        marker.header.frame_id, marker.header.stamp = FIXED_FRAME, stamp
        marker.pose = _pose(position + offset, quaternion)
        marker.scale = Vector3(x=0.06, y=0.06, z=0.06)
        marker.color = ColorRGBA(r=0.2, g=0.4, b=1.0, a=0.9)
        marker.text = link
        array.markers.append(marker)
    chain = Marker(ns=f"{namespace}/chain", id=0, type=Marker.LINE_STRIP, action=Marker.ADD)
    chain.header.frame_id, chain.header.stamp = FIXED_FRAME, stamp
    chain.pose.orientation.w = 1.0
    chain.scale.x = 0.02
    chain.color = ColorRGBA(r=0.9, g=0.9, b=0.9, a=0.8)
    chain.points = [Point(x=float(p[0] + offset[0]), y=float(p[1] + offset[1]),
                          z=float(p[2] + offset[2])) for p, _ in poses.values()]
    array.markers.append(chain)
    target = env.target_position()
    if target is not None:
        marker = Marker(ns=f"{namespace}/target", id=0, type=Marker.SPHERE, action=Marker.ADD)
        marker.header.frame_id, marker.header.stamp = FIXED_FRAME, stamp
        marker.pose = _pose(np.asarray(target) + offset, np.array([0.0, 0.0, 0.0, 1.0]))
        marker.scale = Vector3(x=0.08, y=0.08, z=0.08)
        marker.color = ColorRGBA(r=1.0, g=0.1, b=0.1, a=0.9)
        array.markers.append(marker)
    return array


def robot_tf_tree(env: Any, robot_id: int) -> TfTree:
    """The TF tree of ``env``'s URDF, frames prefixed ``robot_k/``, hanging from ``world``."""
    return TfTree.from_file(env.urdf_path, frame_prefix(robot_id), world_frame=FIXED_FRAME)


def static_transforms(env: Any, tree: TfTree, robot_id: int) -> list[FrameTransform]:
    """What ``/tf_static`` carries for robot ``k``: ``world -> robot_k/<root link>`` at the
    environment's (fixed) base pose, shifted by :func:`robot_offset`, and every fixed joint."""
    # pybullet reports a base's centre of mass, the other links' URDF frames.
    position, quaternion = env.link_world_poses()[tree.model.root_link]
    root = tree.root_transform(np.asarray(position) + robot_offset(robot_id), quaternion,
                               of_inertial_frame=True)
    return [root, *tree.static_transforms()]


def tf_message(transforms: Sequence[FrameTransform], stamp: Time) -> Any:
    """A ``TFMessage`` of ``transforms``, all stamped ``stamp`` (None without tf2_msgs)."""
    if TFMessage is None:
        return None
    message = TFMessage()
    for frame in transforms:
        transform = TransformStamped()
        transform.header.frame_id, transform.header.stamp = frame.parent, stamp
        transform.child_frame_id = frame.child
        x, y, z = frame.translation
        transform.transform.translation = Vector3(x=x, y=y, z=z)
        qx, qy, qz, qw = frame.rotation
        transform.transform.rotation = Quaternion(x=qx, y=qy, z=qz, w=qw)
        message.transforms.append(transform)
    return message
