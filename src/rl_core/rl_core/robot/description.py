"""Robot descriptions with ros2_control tags: the URDF that a controller manager, Gazebo, rviz and
sim_robot's ``robot_description`` topic carry.

:func:`robot_description` takes pybullet_data's URDF of a known robot, makes its mesh file names
absolute ``file://`` URIs (pybullet, rviz and Gazebo all read them; the relative names only
resolve next to pybullet_data's file), and appends the robot's ``<ros2_control>`` block from
``config/robots/<robot>.ros2_control.xml`` with the hardware plugin chosen by ``hardware``:
``mock`` (``mock_components/GenericSystem``), ``gazebo`` (``gz_ros2_control/GazeboSimSystem``,
plus the ``<gazebo>`` tag that loads its system plugin with ``config/robots/controllers.yaml``),
or anything else as a real robot's plugin name (``package/Class`` or ``namespace::Class``).

For a URDF of the user's, :func:`describe_urdf` writes the block from a joint list. Nothing here
imports rclpy; rl_nodes.visualization's ``urdf_for_rviz`` uses its mesh rewrite.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pybullet_data

from rl_core.robot import COMMAND_INTERFACES

__all__ = ["GAZEBO_SYSTEM_PLUGIN", "HARDWARE_PLUGINS", "JointInterfaces", "ROBOTS", "RobotModel",
           "describe_urdf", "parse_ros2_control", "robot_description", "robot_model",
           "robots_config_directory", "ros2_control_joints", "urdf_with_absolute_meshes"]

#: ``hardware`` shorthands and the ros2_control plugins they stand for.
HARDWARE_PLUGINS = {"mock": "mock_components/GenericSystem",
                    "gazebo": "gz_ros2_control/GazeboSimSystem"}
#: gz_ros2_control's Gazebo system plugin: ``(filename, name)`` of its ``<plugin>`` tag.
GAZEBO_SYSTEM_PLUGIN = ("gz_ros2_control-system", "gz_ros2_control::GazeboSimROS2ControlPlugin")
#: The controller manager's parameter file (in :func:`robots_config_directory`).
CONTROLLERS_FILE = "controllers.yaml"
#: The state interfaces every joint reports (joint_state_broadcaster publishes both).
STATE_INTERFACES = ("position", "velocity")
_PLUGIN_NAME = re.compile(r"[A-Za-z_]\w*((::|/)\w+)+")


@dataclass(frozen=True)
class RobotModel:
    """A known robot and the settings under which it behaves as its in-process environment.

    :param name: the robot's name (``cartpole``, ``kuka_iiwa``), also its ros2_control name.
    :param urdf: path of the URDF inside pybullet_data.
    :param command_interface: the interface its task commands.
    :param control_period: seconds per control period of its task.
    :param physics_substeps: physics steps per control period of its environment.
    :param max_motor_force: N or N m: the environment's force limit (cart-pole: the largest
        push; KUKA: each velocity motor's torque limit).
    """

    name: str
    urdf: str
    command_interface: str
    control_period: float
    physics_substeps: int
    max_motor_force: float

    @property
    def urdf_path(self) -> str:
        return os.path.join(pybullet_data.getDataPath(), self.urdf)


#: The robots of rl_core.envs: CartPoleBalanceEnv's and KukaReachEnv's defaults.
ROBOTS: dict[str, RobotModel] = {
    "cartpole": RobotModel("cartpole", "cartpole.urdf", "effort", 0.02, 4, 10.0),
    "kuka_iiwa": RobotModel("kuka_iiwa", os.path.join("kuka_iiwa", "model.urdf"), "velocity",
                            0.05, 10, 200.0),
}


@dataclass(frozen=True)
class JointInterfaces:
    """One ``<joint>`` of a ``<ros2_control>`` block: its command and state interfaces."""

    name: str
    command: tuple[str, ...]
    state: tuple[str, ...] = STATE_INTERFACES


def robot_model(robot: str) -> RobotModel:
    """The known robot ``robot``.

    :raises ValueError: for an unknown name, listing the known ones.
    """
    if robot not in ROBOTS:
        raise ValueError(f"unknown robot {robot!r}; known robots: {', '.join(ROBOTS)}")
    return ROBOTS[robot]


def robots_config_directory() -> Path:
    """``config/robots``: of the source checkout this module runs from, else of rl_bringup's
    share folder in an ament prefix (``$AMENT_PREFIX_PATH/share/rl_bringup/config/robots``;
    read directly because rl_core depends on no ROS package, ament_index_python included).

    :raises FileNotFoundError: when neither holds it.
    """
    checkout = Path(__file__).resolve().parents[4] / "config" / "robots"
    if checkout.is_dir():
        return checkout
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        installed = Path(prefix) / "share" / "rl_bringup" / "config" / "robots"
        if installed.is_dir():
            return installed
    raise FileNotFoundError(
        f"cannot find config/robots: not running from a source checkout ({checkout}) and no "
        f"AMENT_PREFIX_PATH entry holds share/rl_bringup/config/robots (source the install's "
        f"setup file, or build rl_bringup)")


def urdf_with_absolute_meshes(urdf_path: str | Path) -> str:
    """The URDF's text with every relative ``filename="..."`` made an absolute ``file://`` URI
    (URIs and absolute paths are kept)."""
    path = Path(urdf_path).resolve()
    text = path.read_text(encoding="utf-8")

    def absolute(match: re.Match[str]) -> str:
        name = match.group(2)
        if "://" in name or name.startswith("/"):
            return match.group(0)
        return f'{match.group(1)}"file://{(path.parent / name).resolve()}"'

    return re.sub(r'(filename=)"([^"]+)"', absolute, text)


def ros2_control_joints(robot: str, config_directory: Path | None = None
                        ) -> tuple[JointInterfaces, ...]:
    """The joints and interfaces of known robot ``robot``'s ros2_control block
    (``config/robots/<robot>.ros2_control.xml``)."""
    return parse_ros2_control(_block_file(robot, config_directory).read_text(encoding="utf-8"))


def parse_ros2_control(text: str) -> tuple[JointInterfaces, ...]:
    """The ``<joint>`` entries of the (first) ``<ros2_control>`` block in ``text`` (a block or a
    whole robot description).

    :raises ValueError: when ``text`` is not XML or holds no ros2_control block.
    """
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as error:
        raise ValueError(f"not valid XML: {error}") from error
    block = root if root.tag == "ros2_control" else root.find("ros2_control")
    if block is None:
        raise ValueError("no <ros2_control> block")
    return tuple(JointInterfaces(
        joint.get("name", ""),
        tuple(i.get("name", "") for i in joint.findall("command_interface")),
        tuple(i.get("name", "") for i in joint.findall("state_interface")))
        for joint in block.findall("joint"))


def robot_description(robot: str, hardware: str = "mock", *, namespace: str = "",
                      config_directory: Path | None = None) -> str:
    """The URDF of known robot ``robot`` (``cartpole``, ``kuka_iiwa``) with absolute mesh URIs
    and its ros2_control block.

    :param hardware: ``mock``, ``gazebo`` or a real robot's ros2_control plugin name.
    :param namespace: ROS namespace of gz_ros2_control's controller manager (``/robot_0``);
        used with ``hardware="gazebo"`` only (others take the namespace they are launched in).
    :param config_directory: where the ros2_control blocks and controllers.yaml lie (default:
        :func:`robots_config_directory`).
    :raises ValueError: for an unknown robot or an invalid hardware name.
    """
    model = robot_model(robot)
    directory = config_directory or robots_config_directory()
    block = ElementTree.fromstring(_block_file(robot, directory).read_text(encoding="utf-8"))
    return _compose(urdf_with_absolute_meshes(model.urdf_path), block, hardware, namespace,
                    directory / CONTROLLERS_FILE)


def describe_urdf(urdf_path: str | Path, joints: Sequence[JointInterfaces], hardware: str = "mock",
                  *, name: str | None = None, namespace: str = "",
                  controllers_file: str | Path | None = None) -> str:
    """Any URDF with absolute mesh URIs and a ros2_control block written from ``joints``.

    :param name: the block's name (default: the URDF's robot name).
    :param controllers_file: the controller manager's parameters for ``hardware="gazebo"``
        (default: config/robots/controllers.yaml).
    :raises ValueError: for an unknown interface or an invalid hardware name.
    """
    text = urdf_with_absolute_meshes(urdf_path)
    block = ElementTree.Element("ros2_control", name=name or _robot_name(text), type="system")
    for joint in joints:
        unknown = set(joint.command) - set(COMMAND_INTERFACES)
        if unknown:
            raise ValueError(f"joint {joint.name}: unknown command interface(s) {sorted(unknown)};"
                             f" one of {', '.join(COMMAND_INTERFACES)}")
        element = ElementTree.SubElement(block, "joint", name=joint.name)
        for interface in joint.command:
            ElementTree.SubElement(element, "command_interface", name=interface)
        for interface in joint.state:
            state = ElementTree.SubElement(element, "state_interface", name=interface)
            ElementTree.SubElement(state, "param", name="initial_value").text = "0.0"
    if hardware == "gazebo" and controllers_file is None:
        controllers_file = robots_config_directory() / CONTROLLERS_FILE
    return _compose(text, block, hardware, namespace, controllers_file)


def _block_file(robot: str, config_directory: Path | None) -> Path:
    model = robot_model(robot)
    path = (config_directory or robots_config_directory()) / f"{model.name}.ros2_control.xml"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the ros2_control block of {robot}")
    return path


def _robot_name(urdf_text: str) -> str:
    return ElementTree.fromstring(urdf_text).get("name", "robot")


def _hardware_plugin(hardware: str) -> str:
    plugin = HARDWARE_PLUGINS.get(hardware, hardware)
    if not _PLUGIN_NAME.fullmatch(plugin):
        raise ValueError(f"hardware must be one of {', '.join(HARDWARE_PLUGINS)} or a ros2_control "
                         f"plugin name such as my_robot_driver/MyRobotHardware, got {hardware!r}")
    return plugin


def _compose(urdf_text: str, block: ElementTree.Element, hardware: str, namespace: str,
             controllers_file: str | Path | None) -> str:
    """``urdf_text`` with ``block`` (given its ``<hardware>``) and, for Gazebo, the ``<gazebo>``
    plugin tag inserted before ``</robot>``; the URDF's own text (comments included) is kept."""
    plugin = _hardware_plugin(hardware)
    for old in block.findall("hardware"):
        block.remove(old)
    element = ElementTree.Element("hardware")
    ElementTree.SubElement(element, "plugin").text = plugin
    if hardware == "mock":
        # Without it the mock only mirrors commands to states: velocity commands would never
        # move the reported positions.
        ElementTree.SubElement(element, "param", name="calculate_dynamics").text = "true"
    block.insert(0, element)
    extra = [block]
    if hardware == "gazebo":
        gazebo = ElementTree.Element("gazebo")
        filename, name = GAZEBO_SYSTEM_PLUGIN
        system = ElementTree.SubElement(gazebo, "plugin", filename=filename, name=name)
        ElementTree.SubElement(system, "parameters").text = str(controllers_file)
        if namespace:
            ros = ElementTree.SubElement(system, "ros")
            ElementTree.SubElement(ros, "namespace").text = namespace
        extra.append(gazebo)
    inserted = ""
    for element in extra:
        ElementTree.indent(element, space="  ", level=1)
        inserted += "  " + ElementTree.tostring(element, encoding="unicode").rstrip() + "\n"
    end = urdf_text.rfind("</robot>")
    if end < 0:
        raise ValueError("the URDF has no closing </robot> tag")
    return urdf_text[:end] + inserted + urdf_text[end:]
