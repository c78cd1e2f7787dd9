"""A robot's TF tree as robot_state_publisher builds it (REP-105), in plain Python.

Every URDF joint is one transform from its parent link's frame to its child link's frame, so
every link has exactly one parent (:class:`~rl_core.robot.urdf.UrdfModel` refuses a URDF that is
not a tree). Fixed joints (and, as robot_state_publisher does, floating and planar ones, at their
``<origin>``) never move: :meth:`TfTree.static_transforms`, sent once on ``/tf_static``.
Revolute, continuous and prismatic joints move: :meth:`TfTree.moving_transforms` computes them
from ``joint_states``, sent on ``/tf``. The root link hangs from a world frame by the robot's
base pose (:meth:`TfTree.root_transform`).

Every link frame is ``frame_prefix + link`` (``robot_k/lbr_iiwa_link_0``), so several robots share
one TF tree. Written here rather than taken from robot_state_publisher because that is a C++
node without Python bindings; the geometry is :mod:`rl_core.robot.urdf`'s.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rl_core.robot.urdf import UrdfJoint, UrdfModel

__all__ = ["MOVING_JOINT_TYPES", "FrameTransform", "TfTree", "matrix_from_quaternion",
           "parents_of", "quaternion_from_matrix"]

#: Joint types whose transform follows a joint position (the others are static).
MOVING_JOINT_TYPES = ("revolute", "continuous", "prismatic")

Translation = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]


@dataclass(frozen=True)
class FrameTransform:
    """The pose of frame ``child`` in frame ``parent`` (what one TransformStamped carries).

    :param parent: the parent frame's name (``header.frame_id``).
    :param child: the child frame's name (``child_frame_id``).
    :param translation: the child's origin in the parent frame (m).
    :param rotation: the child's orientation as a unit quaternion ``(x, y, z, w)``.
    """

    parent: str
    child: str
    translation: Translation
    rotation: Quaternion

    @classmethod
    def from_matrix(cls, parent: str, child: str, matrix: np.ndarray) -> FrameTransform:
        """The transform of a 4x4 homogeneous matrix (child frame in parent frame)."""
        x, y, z = (float(value) for value in matrix[:3, 3])
        return cls(parent, child, (x, y, z), quaternion_from_matrix(matrix[:3, :3]))

    def matrix(self) -> np.ndarray:
        """The 4x4 homogeneous matrix of this transform."""
        transform = np.eye(4)
        transform[:3, :3] = matrix_from_quaternion(self.rotation)
        transform[:3, 3] = self.translation
        return transform


class TfTree:
    """The transforms of one robot's links, named with ``frame_prefix``.

    :param model: the robot's kinematic tree.
    :param frame_prefix: prepended to every link name (``robot_0/``; empty: the bare names).
    :param world_frame: the frame the root link hangs from (not prefixed).
    :param root_inertial: the root link's ``<inertial><origin>`` (4x4, default identity), used
        by :meth:`root_transform` for a base pose of the centre of mass.
    :raises ValueError: when the prefixed root link would be ``world_frame`` itself.
    """

    def __init__(self, model: UrdfModel, frame_prefix: str = "", *, world_frame: str = "world",
                 root_inertial: np.ndarray | None = None) -> None:
        self.model = model
        self.frame_prefix = frame_prefix
        self.world_frame = world_frame
        if self.frame(model.root_link) == world_frame:
            raise ValueError(f"the root link {model.root_link!r} with frame_prefix "
                             f"{frame_prefix!r} is the world frame {world_frame!r}: give a "
                             "frame_prefix, or another world frame")
        self._root_inertial = np.eye(4) if root_inertial is None else np.asarray(root_inertial)
        self.moving_joints: tuple[UrdfJoint, ...] = tuple(
            joint for joint in model.joints if joint.type in MOVING_JOINT_TYPES)
        self.static_joints: tuple[UrdfJoint, ...] = tuple(
            joint for joint in model.joints if joint.type not in MOVING_JOINT_TYPES)
        self._moving_by_name = {joint.name: joint for joint in self.moving_joints}
        # Origins are constant: computed once, the moving transforms are built at the TF rate.
        self._origins = {joint.name: joint.origin_transform() for joint in model.joints}

    @classmethod
    def from_urdf(cls, text: str, frame_prefix: str = "", *, world_frame: str = "world",
                  source: str = "<string>") -> TfTree:
        """The tree of a URDF document (see :meth:`UrdfModel.from_string`).

        :raises ValueError: for a malformed URDF (naming ``source``).
        """
        model = UrdfModel.from_string(text, source=source)
        return cls(model, frame_prefix, world_frame=world_frame,
                   root_inertial=_inertial_origin(text, model.root_link))

    @classmethod
    def from_file(cls, path: str | Path, frame_prefix: str = "", *,
                  world_frame: str = "world") -> TfTree:
        """The tree of a URDF file.

        :raises ValueError: when the file is missing, unreadable or not a valid URDF.
        """
        UrdfModel.from_file(path)  # the file checks, with their messages
        return cls.from_urdf(Path(path).read_text(encoding="utf-8"), frame_prefix,
                             world_frame=world_frame, source=str(path))

    def frame(self, link: str) -> str:
        """The TF frame of ``link``: ``frame_prefix + link``."""
        return self.frame_prefix + link

    @property
    def root_frame(self) -> str:
        return self.frame(self.model.root_link)

    def static_transforms(self) -> list[FrameTransform]:
        """One transform per fixed (floating, planar) joint, at its origin, in file order."""
        return [FrameTransform.from_matrix(self.frame(joint.parent), self.frame(joint.child),
                                           self._origins[joint.name])
                for joint in self.static_joints]

    def moving_transforms(self, names: Sequence[str], positions: Iterable[float]
                          ) -> list[FrameTransform]:
        """One transform per moving joint of ``names`` (a ``joint_states`` message's), at its
        position (rad or m): ``<origin>`` times the motion about or along ``<axis>``.

        As robot_state_publisher does, names that are no moving joint of the robot are ignored
        (another publisher may report them) and moving joints not named get no transform.

        :raises ValueError: when ``names`` and ``positions`` differ in length or a position is
            not finite.
        """
        values = [float(value) for value in positions]
        if len(values) != len(names):
            raise ValueError(f"{len(names)} joint names but {len(values)} positions")
        transforms = []
        for name, value in zip(names, values):
            joint = self._moving_by_name.get(name)
            if joint is None:
                continue
            if not math.isfinite(value):
                raise ValueError(f"joint {name!r}: position {value} is not finite")
            matrix = self._origins[name] @ joint.motion_transform(value)
            transforms.append(FrameTransform.from_matrix(self.frame(joint.parent),
                                                         self.frame(joint.child), matrix))
        return transforms

    def root_transform(self, position: Sequence[float], rotation: Sequence[float], *,
                       of_inertial_frame: bool = False) -> FrameTransform:
        """``world_frame -> root link``: the robot's base pose.

        :param position: the base's position in the world frame (m).
        :param rotation: the base's orientation, quaternion ``(x, y, z, w)``.
        :param of_inertial_frame: the pose is that of the root link's centre of mass (its
            ``<inertial><origin>``, what pybullet reports for a base), not of its link frame.
        """
        pose = FrameTransform("", "", (float(position[0]), float(position[1]),
                                       float(position[2])),
                              _unit(rotation)).matrix()
        if of_inertial_frame:
            pose = pose @ np.linalg.inv(self._root_inertial)
        return FrameTransform.from_matrix(self.world_frame, self.root_frame, pose)


def parents_of(transforms: Iterable[FrameTransform]) -> dict[str, str]:
    """Each child frame's parent.

    :raises ValueError: when a frame has two parents, or is its own parent.
    """
    parents: dict[str, str] = {}
    for transform in transforms:
        if transform.child == transform.parent:
            raise ValueError(f"frame {transform.child!r} is its own parent")
        known = parents.setdefault(transform.child, transform.parent)
        if known != transform.parent:
            raise ValueError(f"frame {transform.child!r} has two parents, {known!r} and "
                             f"{transform.parent!r}")
    return parents


def quaternion_from_matrix(rotation: np.ndarray) -> Quaternion:
    """The unit quaternion ``(x, y, z, w)`` of a 3x3 rotation matrix, with ``w >= 0``."""
    m = np.asarray(rotation, dtype=np.float64)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    # Shepperd's method: divide by the largest of the four candidates, for accuracy.
    if trace > 0.0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4)
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = (s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s)
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = ((m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = ((m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4, (m[1, 0] - m[0, 1]) / s)
    sign = -1.0 if q[3] < 0.0 else 1.0
    return _unit([sign * float(value) for value in q])


def matrix_from_quaternion(rotation: Sequence[float]) -> np.ndarray:
    """The 3x3 rotation matrix of a quaternion ``(x, y, z, w)`` (normalised first)."""
    x, y, z, w = _unit(rotation)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _unit(rotation: Sequence[float]) -> Quaternion:
    x, y, z, w = (float(value) for value in rotation)
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if not math.isfinite(norm) or norm == 0.0:
        raise ValueError(f"quaternion {tuple(rotation)} has no direction")
    return (x / norm, y / norm, z / norm, w / norm)


def _inertial_origin(text: str, link: str) -> np.ndarray:
    """The 4x4 ``<inertial><origin>`` of ``link`` in URDF ``text`` (identity when absent)."""
    element = next((e for e in ElementTree.fromstring(text).findall("link")
                    if e.get("name") == link), None)
    origin = None if element is None else element.find("inertial/origin")
    if origin is None:
        return np.eye(4)
    joint = UrdfJoint(name=f"{link} inertial", type="fixed", parent=link, child=link,
                      origin_xyz=_triple(origin.get("xyz")), origin_rpy=_triple(origin.get("rpy")))
    return joint.origin_transform()


def _triple(text: str | None) -> Translation:
    values = [float(part) for part in (text or "0 0 0").split()]
    if len(values) != 3 or not all(math.isfinite(value) for value in values):
        raise ValueError(f"an <inertial><origin> value {text!r} must be three finite numbers")
    return (values[0], values[1], values[2])
