"""A small URDF reader: joints, joint limits and forward kinematics, in plain Python.

Written here rather than taken from a library on purpose: ``urdf_parser_py`` comes with ROS
packaging, ``yourdfpy`` / ``urdfpy`` bring mesh and graph dependencies, and the robot boundary
needs only the kinematic tree. This reads ``<link>`` and ``<joint>`` elements with
:mod:`xml.etree.ElementTree` (visuals, collisions, inertias, transmissions and gazebo tags are
ignored) and computes link frames as the URDF specification defines them: a child link's frame
is its parent's frame times the joint's ``<origin>`` times the joint's motion (a rotation about
``<axis>`` for revolute and continuous joints, a translation along it for prismatic ones).
Mimic joints are read as independent joints.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rl_core.robot import JointLimits

__all__ = ["JOINT_TYPES", "UrdfJoint", "UrdfModel"]

#: The joint types of the URDF specification.
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
#: Joint types whose motion is one scalar about or along the axis (the ones FK supports).
_ONE_DOF_TYPES = ("revolute", "continuous", "prismatic")

Vector3 = tuple[float, float, float]
#: Joint positions: by joint name, or an array in the order of ``joint_names``.
JointPositions = Mapping[str, float] | Sequence[float] | npt.NDArray[np.floating]


@dataclass(frozen=True)
class UrdfJoint:
    """One ``<joint>`` element, with the URDF's defaults filled in.

    :param name: the joint's name.
    :param type: one of :data:`JOINT_TYPES`.
    :param parent: the parent link's name.
    :param child: the child link's name.
    :param origin_xyz: the child frame's offset in the parent frame (m); default zeros.
    :param origin_rpy: the child frame's fixed-axis roll, pitch, yaw (rad); default zeros.
    :param axis: the joint axis in the joint frame, a unit vector; default ``(1, 0, 0)``.
    :param lower: ``<limit lower>`` as written (rad or m); None when absent.
    :param upper: ``<limit upper>`` as written; None when absent.
    :param velocity: ``<limit velocity>`` as written (rad/s or m/s); None when absent.
    :param effort: ``<limit effort>`` as written (N m or N); None when absent.
    """

    name: str
    type: str
    parent: str
    child: str
    origin_xyz: Vector3 = (0.0, 0.0, 0.0)
    origin_rpy: Vector3 = (0.0, 0.0, 0.0)
    axis: Vector3 = (1.0, 0.0, 0.0)
    lower: float | None = None
    upper: float | None = None
    velocity: float | None = None
    effort: float | None = None

    @property
    def movable(self) -> bool:
        """Whether the joint has a state (every type but ``fixed``)."""
        return self.type != "fixed"

    def origin_transform(self) -> np.ndarray:
        """The 4x4 transform from the child's joint frame at zero motion to the parent frame."""
        transform = np.eye(4)
        transform[:3, :3] = _rpy_matrix(self.origin_rpy)
        transform[:3, 3] = self.origin_xyz
        return transform

    def motion_transform(self, position: float) -> np.ndarray:
        """The 4x4 transform of the joint's motion at ``position`` (rad or m).

        :raises ValueError: for floating and planar joints, which have more than one degree of
            freedom.
        """
        transform = np.eye(4)
        if self.type in ("revolute", "continuous"):
            transform[:3, :3] = _axis_angle_matrix(self.axis, position)
        elif self.type == "prismatic":
            transform[:3, 3] = np.asarray(self.axis) * position
        elif self.type != "fixed":
            raise ValueError(f"joint {self.name!r} is {self.type}: forward kinematics supports "
                             f"only {', '.join(_ONE_DOF_TYPES)} and fixed joints")
        return transform


class UrdfModel:
    """The kinematic tree of a URDF robot: links, joints, limits and link frames.

    :param name: the robot's name.
    :param links: the link names, in file order.
    :param joints: the joints, in file order; they must form one tree over ``links``.
    :raises ValueError: when the joints do not form one tree (a link with two parents, a joint
        naming an undeclared link, a loop, several roots) or a name is repeated.
    """

    def __init__(self, name: str, links: Sequence[str], joints: Sequence[UrdfJoint]) -> None:
        self.name = name
        self.links: tuple[str, ...] = tuple(links)
        self.joints: tuple[UrdfJoint, ...] = tuple(joints)
        _require_unique("link", self.links)
        _require_unique("joint", [joint.name for joint in self.joints])
        if not self.links:
            raise ValueError(f"robot {name!r} has no <link>")
        known = set(self.links)
        self._joint_by_name = {joint.name: joint for joint in self.joints}
        self._parent_joint: dict[str, UrdfJoint] = {}
        for joint in self.joints:
            for role, link in (("parent", joint.parent), ("child", joint.child)):
                if link not in known:
                    raise ValueError(f"joint {joint.name!r}: {role} link {link!r} is not a "
                                     "<link> of the robot")
            if joint.child in self._parent_joint:
                raise ValueError(f"link {joint.child!r} is the child of two joints, "
                                 f"{self._parent_joint[joint.child].name!r} and {joint.name!r}: "
                                 "a URDF must be a tree")
            self._parent_joint[joint.child] = joint
        roots = [link for link in self.links if link not in self._parent_joint]
        if len(roots) != 1:
            raise ValueError(f"robot {name!r} must have exactly one root link (a link that is "
                             f"no joint's child), found {roots or 'none (a loop)'}")
        self.root_link: str = roots[0]
        # Walking up from every link must end at the root; it loops forever on a cycle
        # that does not include the root, hence the check here and not in chain().
        self._chains: dict[str, tuple[UrdfJoint, ...]] = {}
        for link in self.links:
            self._chains[link] = self._walk_to_root(link)
        # Origins are constant: compute their transforms once, FK runs every control period.
        self._origins = {joint.name: joint.origin_transform() for joint in self.joints}

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_file(cls, path: str | Path) -> UrdfModel:
        """Read a URDF file.

        :param path: the file's path.
        :raises ValueError: when the file is missing, unreadable or not a valid URDF.
        """
        file = Path(path)
        if not file.is_file():
            raise ValueError(f"URDF file not found: {file}")
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read URDF file {file}: {error}") from error
        return cls.from_string(text, source=str(file))

    @classmethod
    def from_string(cls, text: str, *, source: str = "<string>") -> UrdfModel:
        """Read a URDF document.

        :param text: the XML text (``<robot>`` root element).
        :param source: where the text came from, for error messages.
        :raises ValueError: when the text is not XML or not a valid URDF; the message names
            ``source`` and the element at fault.
        """
        try:
            root = ElementTree.fromstring(text)
        except ElementTree.ParseError as error:
            raise ValueError(f"malformed URDF {source}: not valid XML ({error})") from error
        if root.tag != "robot":
            raise ValueError(f"malformed URDF {source}: the root element must be <robot>, "
                             f"got <{root.tag}>")
        try:
            # Direct children only: <transmission> and <gazebo> nest <joint> tags of their own.
            links = [_required(element, "name", "<link>") for element in root.findall("link")]
            joints = [_parse_joint(element) for element in root.findall("joint")]
            return cls(root.get("name", ""), links, joints)
        except ValueError as error:
            raise ValueError(f"malformed URDF {source}: {error}") from error

    # ------------------------------------------------------------------ queries

    def joint(self, name: str) -> UrdfJoint:
        """The joint called ``name``.

        :raises ValueError: when there is none; the message lists the robot's joints.
        """
        try:
            return self._joint_by_name[name]
        except KeyError:
            raise ValueError(f"robot {self.name!r} has no joint {name!r}; its joints are "
                             f"{', '.join(self._joint_by_name) or 'none'}") from None

    def movable_joints(self) -> tuple[UrdfJoint, ...]:
        """The joints that have a state (all but fixed ones), in file order."""
        return tuple(joint for joint in self.joints if joint.movable)

    def movable_joint_names(self) -> tuple[str, ...]:
        """The names of :meth:`movable_joints`, in file order."""
        return tuple(joint.name for joint in self.joints if joint.movable)

    def limits(self, names: Sequence[str] | None = None) -> JointLimits:
        """The limits of the joints ``names`` (default: every movable joint), in that order.

        Follows :class:`~rl_core.robot.JointLimits`: a missing or non-positive velocity or effort
        limit is ``inf``; continuous (and floating, planar) joints, and revolute or prismatic
        joints without ``lower``/``upper`` (or with both 0, the URDF's defaults), have no
        position limit (``-inf`` .. ``inf``); a missing ``lower`` or ``upper`` alone leaves that
        side unbounded.

        :param names: joint names; None: :meth:`movable_joint_names`.
        :raises ValueError: for an unknown or a fixed joint.
        """
        names = self.movable_joint_names() if names is None else tuple(names)
        joints = [self.joint(name) for name in names]
        fixed = [joint.name for joint in joints if not joint.movable]
        if fixed:
            raise ValueError(f"joints {fixed} are fixed: they have no state and no limits")
        lower, upper, velocity, effort = (np.empty(len(joints)) for _ in range(4))
        for index, joint in enumerate(joints):
            lower[index], upper[index] = _position_limits(joint)
            velocity[index] = _positive_or_inf(joint.velocity)
            effort[index] = _positive_or_inf(joint.effort)
        return JointLimits(names=tuple(names), lower=lower, upper=upper, velocity=velocity,
                           effort=effort)

    def chain(self, link: str) -> tuple[UrdfJoint, ...]:
        """The joints from the root link down to ``link`` (empty for the root).

        :raises ValueError: for an unknown link.
        """
        try:
            return self._chains[link]
        except KeyError:
            raise ValueError(f"robot {self.name!r} has no link {link!r}; its links are "
                             f"{', '.join(self.links)}") from None

    def forward_kinematics(self, link: str, positions: JointPositions,
                           joint_names: Sequence[str] | None = None) -> np.ndarray:
        """The 4x4 homogeneous transform of ``link``'s frame in the root link's frame.

        :param link: the link's name.
        :param positions: joint positions (rad or m): a mapping from joint name, or an array in
            the order of ``joint_names``. It must give every movable joint between the root and
            ``link``; others are ignored.
        :param joint_names: the order of an array ``positions``; None: :meth:`movable_joint_names`.
            Not used with a mapping.
        :raises ValueError: for an unknown link or joint, a wrong number of positions, a joint of
            the chain without a position, or a floating or planar joint in the chain.
        """
        by_name = self._positions_by_name(positions, joint_names)
        chain = self.chain(link)
        missing = [joint.name for joint in chain if joint.movable and joint.name not in by_name]
        if missing:
            raise ValueError(f"forward kinematics of {link!r} needs the positions of {missing}")
        transform = np.eye(4)
        for joint in chain:
            transform = transform @ self._origins[joint.name]
            if joint.movable:
                transform = transform @ joint.motion_transform(by_name[joint.name])
        return transform

    def link_position(self, link: str, positions: JointPositions,
                      joint_names: Sequence[str] | None = None) -> np.ndarray:
        """The origin (m, shape (3,)) of ``link``'s frame in the root frame; see
        :meth:`forward_kinematics` for the arguments."""
        return self.forward_kinematics(link, positions, joint_names)[:3, 3].copy()

    def position_jacobian(self, link: str, positions: Sequence[float] | npt.NDArray[np.floating],
                          joint_names: Sequence[str]) -> np.ndarray:
        """The geometric Jacobian of ``link``'s origin, shape ``(3, len(joint_names))``: how fast
        the origin moves (m/s, root frame) per unit of each joint's velocity.

        A revolute or continuous joint's column is its world axis crossed with the arm from the
        joint to the origin; a prismatic joint's is its world axis; a joint off ``link``'s chain
        gives a zero column.

        :param positions: the positions of ``joint_names``, in that order.
        :raises ValueError: as :meth:`forward_kinematics`.
        """
        by_name = self._positions_by_name(positions, joint_names)
        frames: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # joint -> (axis, point), world
        transform = np.eye(4)
        for joint in self.chain(link):
            transform = transform @ self._origins[joint.name]
            if joint.movable:
                if joint.name not in by_name:
                    raise ValueError(f"the Jacobian of {link!r} needs the position of "
                                     f"{joint.name!r}")
                frames[joint.name] = (transform[:3, :3] @ np.asarray(joint.axis),
                                      transform[:3, 3].copy())
                transform = transform @ joint.motion_transform(by_name[joint.name])
        origin = transform[:3, 3]
        jacobian = np.zeros((3, len(joint_names)))
        for column, name in enumerate(joint_names):
            if name in frames:
                axis, point = frames[name]
                prismatic = self._joint_by_name[name].type == "prismatic"
                jacobian[:, column] = axis if prismatic else np.cross(axis, origin - point)
        return jacobian

    # ---------------------------------------------------------------- internals

    def _walk_to_root(self, link: str) -> tuple[UrdfJoint, ...]:
        chain: list[UrdfJoint] = []
        while link in self._parent_joint:
            joint = self._parent_joint[link]
            chain.append(joint)
            if len(chain) > len(self.joints):
                raise ValueError(f"joints {[j.name for j in chain]} form a loop")
            link = joint.parent
        return tuple(reversed(chain))

    def _positions_by_name(self, positions: JointPositions,
                           joint_names: Sequence[str] | None) -> dict[str, float]:
        if isinstance(positions, Mapping):
            by_name = {str(name): float(value) for name, value in positions.items()}
        else:
            names = self.movable_joint_names() if joint_names is None else tuple(joint_names)
            values = np.asarray(positions, dtype=np.float64).reshape(-1)
            if values.shape != (len(names),):
                raise ValueError(f"expected {len(names)} joint positions (for {list(names)}), "
                                 f"got {values.size}")
            by_name = dict(zip(names, values.tolist(), strict=True))
        unknown = [name for name in by_name if name not in self._joint_by_name]
        if unknown:
            raise ValueError(f"robot {self.name!r} has no joints {unknown}")
        return by_name


# -------------------------------------------------------------------- parsing helpers


def _parse_joint(element: ElementTree.Element) -> UrdfJoint:
    name = _required(element, "name", "<joint>")
    where = f"joint {name!r}"
    joint_type = _required(element, "type", where)
    if joint_type not in JOINT_TYPES:
        raise ValueError(f"{where}: type must be one of {', '.join(JOINT_TYPES)}, "
                         f"got {joint_type!r}")
    parent = _required_child_attribute(element, "parent", "link", where)
    child = _required_child_attribute(element, "child", "link", where)
    origin = element.find("origin")
    xyz = _vector(origin, "xyz", (0.0, 0.0, 0.0), where)
    rpy = _vector(origin, "rpy", (0.0, 0.0, 0.0), where)
    axis = _vector(element.find("axis"), "xyz", (1.0, 0.0, 0.0), where)
    norm = math.sqrt(sum(value * value for value in axis))
    if joint_type in _ONE_DOF_TYPES and norm == 0.0:
        raise ValueError(f"{where}: the axis must not be zero")
    if norm > 0.0:
        axis = (axis[0] / norm, axis[1] / norm, axis[2] / norm)
    limit = element.find("limit")
    lower, upper, velocity, effort = (_number(limit, key, where)
                                      for key in ("lower", "upper", "velocity", "effort"))
    if lower is not None and upper is not None and lower > upper:
        raise ValueError(f"{where}: limit lower {lower} is above upper {upper}")
    return UrdfJoint(name=name, type=joint_type, parent=parent, child=child, origin_xyz=xyz,
                     origin_rpy=rpy, axis=axis, lower=lower, upper=upper, velocity=velocity,
                     effort=effort)


def _required(element: ElementTree.Element, attribute: str, where: str) -> str:
    value = element.get(attribute)
    if not value:
        raise ValueError(f"{where} has no {attribute!r} attribute")
    return value


def _required_child_attribute(element: ElementTree.Element, tag: str, attribute: str,
                              where: str) -> str:
    child = element.find(tag)
    if child is None:
        raise ValueError(f"{where} has no <{tag}>")
    return _required(child, attribute, f"{where}: <{tag}>")


def _vector(element: ElementTree.Element | None, attribute: str, default: Vector3,
            where: str) -> Vector3:
    text = None if element is None else element.get(attribute)
    if text is None:
        return default
    try:
        values = [float(part) for part in text.split()]
    except ValueError:
        values = []
    if len(values) != 3 or not all(math.isfinite(value) for value in values):
        raise ValueError(f"{where}: {attribute}={text!r} must be three finite numbers")
    return (values[0], values[1], values[2])


def _number(element: ElementTree.Element | None, attribute: str, where: str) -> float | None:
    text = None if element is None else element.get(attribute)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{where}: limit {attribute}={text!r} must be a finite number")
    return value


def _require_unique(kind: str, names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{kind} name {name!r} appears twice")
        seen.add(name)


# ---------------------------------------------------------------------- limit helpers


def _positive_or_inf(value: float | None) -> float:
    return math.inf if value is None or value <= 0.0 else value


def _position_limits(joint: UrdfJoint) -> tuple[float, float]:
    if joint.type not in ("revolute", "prismatic"):
        return -math.inf, math.inf
    if joint.lower in (None, 0.0) and joint.upper in (None, 0.0):
        # Both absent or both at the URDF's default 0: the file gives no range.
        return -math.inf, math.inf
    lower = -math.inf if joint.lower is None else joint.lower
    upper = math.inf if joint.upper is None else joint.upper
    return lower, upper


# ------------------------------------------------------------------- rotation helpers


def _rpy_matrix(rpy: Vector3) -> np.ndarray:
    """URDF's fixed-axis roll (x), pitch (y), yaw (z): ``Rz(yaw) @ Ry(pitch) @ Rx(roll)``."""
    roll, pitch, yaw = rpy
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def _axis_angle_matrix(axis: Vector3, angle: float) -> np.ndarray:
    """Rodrigues' rotation by ``angle`` about the unit vector ``axis``."""
    x, y, z = axis
    skew = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    rotation: np.ndarray = np.eye(3) + math.sin(angle) * skew + (1.0 - math.cos(angle)) * (
        skew @ skew)
    return rotation
