"""The configuration of ``sim_robot`` (rl_nodes.sim_robot), validated in plain Python.

The node declares the parameters of :data:`PARAMETERS` and hands their values to
:func:`sim_robot_config`, which fills in the robot's own settings where a value is left at 0 or
empty and checks the joints and the command interface against the robot's ros2_control block.
:func:`trajectory_command` turns a joint trajectory's first point into a forward command.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rl_core.config import ConfigError
from rl_core.robot import COMMAND_INTERFACES
from rl_core.robot.description import ROBOTS, RobotModel, ros2_control_joints

MODES = ("lockstep", "free_run")
#: Settings of a robot given as a URDF path, where a parameter is left at 0 or empty (those of
#: KukaReachEnv: velocity commands at 20 Hz).
URDF_DEFAULTS: dict[str, Any] = {"command_interface": "velocity", "control_period": 0.05,
                                 "physics_substeps": 10, "max_motor_force": 200.0}
#: The JointTrajectoryPoint field that carries each command interface's values.
TRAJECTORY_FIELDS = {"position": "positions", "velocity": "velocities", "effort": "effort"}

#: The node's parameters: name -> (default, description, (low, high) or None). A default of
#: None declares a string array, unset. All are read-only: a robot does not change its joints
#: or physics while it runs.
PARAMETERS: dict[str, tuple[object, str, tuple[float, float] | None]] = {
    "robot": ("cartpole", f"The robot: {' or '.join(ROBOTS)} (pybullet_data's URDF with the "
              "settings of its in-process environment) or the path of a URDF file.", None),
    "joints": (None, "Joints reported in joint_states, in that order; unset: every movable "
               "joint of the robot.", None),
    "command_joints": (None, "Joints commanded, in the order of the command values (the "
                       "controller's joints); unset: the reported joints that the robot's "
                       "ros2_control block lets command_interface drive (a URDF path: all of "
                       "them).", None),
    "controller": ("", "Controller whose topics are served (<controller>/commands, "
                   "<controller>/joint_trajectory); empty: <command_interface>_controller, as in "
                   "config/robots/controllers.yaml.", None),
    "command_interface": ("", f"What commands mean: {', '.join(COMMAND_INTERFACES)}; empty: the "
                          "robot's own (cartpole effort, kuka_iiwa velocity, a URDF path "
                          "velocity).", None),
    "control_period": (0.0, "Simulated seconds per step (0: the robot's own, cartpole 0.02, "
                       "kuka_iiwa and URDF paths 0.05).", (0.0, 10.0)),
    "physics_substeps": (0, "Physics steps per control period (0: the robot's own, cartpole 4, "
                         "kuka_iiwa and URDF paths 10).", (0, 10000)),
    "max_motor_force": (0.0, "N or N m: force limit of position and velocity motors and clip of "
                        "effort commands (0: the robot's own, cartpole 10, kuka_iiwa and URDF "
                        "paths 200).", (0.0, 1.0e6)),
    "mode": ("lockstep", "lockstep: one step per command received (fast training); free_run: "
             "steps on a wall-clock timer at 1/control_period under the latest command.", None),
    "publish_clock": (False, "Publish the simulated time on /clock (one robot of a graph).", None),
    "seed": (0, "Seed of the run (recorded; pybullet's dynamics are deterministic).",
             (0, 2**31 - 1)),
    "command_timeout": (0.5, "free_run: seconds without a command after which the robot holds "
                        "(ros2_control's forward controllers keep the last command; a real "
                        "robot's side needs its own timeout; 0: none).", (0.0, 60.0)),
    "rate_report_period": (10.0, "free_run: seconds between reports of the achieved step rate "
                           "(0: none).", (0.0, 3600.0)),
    "gripper_joints": (None, "A gripper's finger joints, position-controlled through "
                       "<gripper_controller>/commands (a task's gripper, rl_core.robot.gripper); "
                       "unset: none.", None),
    "gripper_controller": ("gripper_controller", "The gripper's forward position controller.",
                           None),
}


@dataclass(frozen=True)
class SimRobotConfig:
    """The node's parameters, validated and with the robot's defaults filled in.

    :param robot: ``cartpole``, ``kuka_iiwa`` or a URDF file path.
    :param urdf_path: the URDF the robot loads.
    :param model: the known robot, or None for a URDF path.
    :param joints: joints reported in ``joint_states`` (None: every movable joint).
    :param command_joints: joints commanded, in command order (None: every reported joint).
    :param controller: the controller whose topics the node serves.
    :param command_interface: position, velocity or effort.
    :param control_period: simulated seconds per step.
    :param physics_substeps: physics steps per control period.
    :param max_motor_force: N or N m.
    :param mode: lockstep or free_run.
    :param publish_clock: whether to publish ``/clock``.
    :param seed: the run's seed (the physics is deterministic).
    :param rate_report_period: seconds between free_run rate reports (0: none).
    :param gripper_joints: a gripper's finger joints (position targets on their own topic).
    :param gripper_controller: the gripper's controller.
    """

    robot: str
    urdf_path: str
    model: RobotModel | None
    joints: tuple[str, ...] | None
    command_joints: tuple[str, ...] | None
    controller: str
    command_interface: str
    control_period: float
    physics_substeps: int
    max_motor_force: float
    mode: str
    publish_clock: bool
    seed: int
    rate_report_period: float
    command_timeout: float = 0.5
    gripper_joints: tuple[str, ...] = ()
    gripper_controller: str = "gripper_controller"


def sim_robot_config(values: Mapping[str, Any]) -> SimRobotConfig:
    """The configuration of the parameter ``values`` (name -> value, as declared).

    :raises ConfigError: naming the parameter and what it accepts.
    """
    robot = values["robot"]
    model = ROBOTS.get(robot)
    if model is None and not os.path.isfile(robot):
        raise ConfigError(f"parameter 'robot': {robot!r} is neither a known robot "
                          f"({', '.join(ROBOTS)}) nor a URDF file")

    def given_or_default(name: str) -> Any:
        return values[name] or (getattr(model, name) if model else URDF_DEFAULTS[name])

    interface = given_or_default("command_interface")
    if interface not in COMMAND_INTERFACES:
        raise ConfigError(f"parameter 'command_interface': {interface!r} is not one of "
                          f"{', '.join(COMMAND_INTERFACES)}")
    if values["mode"] not in MODES:
        raise ConfigError(f"parameter 'mode': {values['mode']!r} is not one of "
                          f"{', '.join(MODES)}")
    joints = tuple(values["joints"]) if values["joints"] else None
    command_joints = tuple(values["command_joints"]) if values["command_joints"] else None
    if model is not None:
        try:
            joints, command_joints = known_robot_joints(model, joints, command_joints,
                                                        interface)
        except ConfigError:
            raise
        except (FileNotFoundError, ValueError) as error:  # config/robots missing or broken
            raise ConfigError(f"robot {robot!r}: {error}") from error
    controller = values["controller"] or f"{interface}_controller"
    return SimRobotConfig(
        robot=robot, urdf_path=model.urdf_path if model else os.path.abspath(robot),
        model=model, joints=joints, command_joints=command_joints,
        controller=controller,
        command_interface=interface,
        control_period=given_or_default("control_period"),
        physics_substeps=given_or_default("physics_substeps"),
        max_motor_force=given_or_default("max_motor_force"),
        mode=values["mode"], publish_clock=values["publish_clock"], seed=values["seed"],
        rate_report_period=values["rate_report_period"],
        command_timeout=values["command_timeout"],
        gripper_joints=tuple(values.get("gripper_joints") or ()),
        gripper_controller=values.get("gripper_controller") or "gripper_controller")


def known_robot_joints(model: RobotModel, joints: tuple[str, ...] | None,
                       command_joints: tuple[str, ...] | None, interface: str
                       ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Joints and commanded joints of a known robot, checked against its ros2_control block
    (config/robots/<robot>.ros2_control.xml), which the published description carries: the robot
    offers nothing its description does not declare.

    :raises ConfigError: for a joint the block lacks or an interface it does not offer.
    """
    block = {joint.name: joint for joint in ros2_control_joints(model.name)}
    joints = joints or tuple(block)
    unknown = [name for name in joints if name not in block]
    if unknown:
        raise ConfigError(f"parameter 'joints': {model.name} has no joint(s) {unknown}; its "
                          f"joints are {list(block)}")
    offered = [name for name in joints if interface in block[name].command]
    command_joints = command_joints or tuple(offered)
    refused = [name for name in command_joints if name not in offered]
    if refused or not command_joints:
        offers = {name: list(joint.command) for name, joint in block.items() if joint.command}
        raise ConfigError(f"parameter 'command_interface'/'command_joints': {model.name} offers "
                          f"no {interface} command on {refused or list(joints)}; its command "
                          f"interfaces are {offers} (config/robots/{model.name}.ros2_control.xml)")
    return joints, command_joints


def trajectory_point(command: Sequence[float], interface: str, period: float
                     ) -> tuple[str, list[float], tuple[int, int]]:
    """What the one point of a ``JointTrajectory`` carrying ``command`` holds (the reverse of
    :func:`trajectory_command`): the point's field for ``interface``, the values, and its
    ``time_from_start`` one control ``period`` ahead as ``(sec, nanosec)``."""
    sec, nanosec = divmod(round(period * 1e9), 1_000_000_000)
    return TRAJECTORY_FIELDS[interface], [float(v) for v in command], (sec, nanosec)


def trajectory_command(current: np.ndarray, commanded: Mapping[str, int], interface: str,
                       joint_names: Sequence[str], values: Sequence[float] | None) -> list[float]:
    """The command a trajectory's first point makes: its values for the joints it names, the
    ``current`` command for the others (a trajectory is not followed in time).

    :param commanded: each commanded joint's index in the command.
    :param values: the first point's field of ``interface`` (None: the trajectory has no point).
    :raises ValueError: when it has no point, names a joint that is not commanded, or lacks the
        command interface's values.
    """
    if values is None:
        raise ValueError("the trajectory has no points")
    unknown = [name for name in joint_names if name not in commanded]
    if unknown or len(set(joint_names)) != len(joint_names):
        raise ValueError(f"joint_names {list(joint_names)} must name each of "
                         f"{list(commanded)} at most once")
    if len(values) != len(joint_names):
        raise ValueError(f"the first point has {len(values)} {TRAJECTORY_FIELDS[interface]} for "
                         f"{len(joint_names)} joint_names")
    command = [float(v) for v in current]
    for name, value in zip(joint_names, values):
        command[commanded[name]] = float(value)
    return command
