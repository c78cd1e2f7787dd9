"""What a deployment with ``robot_interface:=ros2_control`` adds to the plan.

Each robot's simulator node then drives a robot through ros2_control's topics. With
``sim_robot:=true`` (the default) the plan starts, per robot, a ``sim_robot`` process in the
robot's namespace: a pybullet robot behind those topics, set up from the task (its URDF, joints,
command interface and control period). With ``sim_robot:=false`` the robots come from elsewhere:
ros2_control's mock hardware, Gazebo (gz_ros2_control) or real arms (docs/robots.md).

Leaf module: imports neither the plan nor launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl_core.config import ROBOT_INTERFACES, BoundaryConfig, ConfigError, load_yaml, node_parameters

#: sim_robot's built-in robot models, by the URDF file a task names (rl_core.robot.tasks).
_BUILT_IN_MODELS = {"cartpole.urdf": "cartpole", "kuka_iiwa/model.urdf": "kuka_iiwa"}
DEFAULT_ROBOT_INTERFACE = ROBOT_INTERFACES[0]
#: sim_robot's reset service, the boundary's default.
DEFAULT_RESET_SERVICE = BoundaryConfig().reset_service
#: How sim_robot advances: one control period per command (as fast as the learner acts).
SIM_ROBOT_MODE = "lockstep"


def effective_parameter(name: str, config_file: str, overrides: Mapping[str, Any], default: Any,
                        kind: str = "simulator") -> Any:
    """A parameter of node ``kind`` as the node will see it: the override, else the scenario
    file's block for the node, else ``default``."""
    if name in overrides:
        return overrides[name]
    try:
        return node_parameters(load_yaml(config_file), kind).get(name, default)
    except ConfigError:
        return default


def sim_robot_parameters(env_id: str, robot: int, publish_clock: bool) -> dict[str, Any]:
    """The parameters of robot ``robot``'s sim_robot for the task ``env_id``.

    :raises ConfigError: when ``env_id`` names no task, or a task without a URDF.
    """
    from rl_core.robot.tasks import load_task

    try:
        task = load_task(env_id)
    except ValueError as error:
        raise ConfigError(f"robot_interface:=ros2_control needs a task: {error}") from error
    if not task.urdf_path:
        raise ConfigError(f"task {type(task).__name__} has no URDF, so sim_robot cannot simulate "
                          "it; start your robot yourself and pass sim_robot:=false")
    path = task.urdf_path.replace("\\", "/")
    model = next((name for suffix, name in _BUILT_IN_MODELS.items() if path.endswith(suffix)),
                 task.urdf_path)
    return {
        "robot": model,
        "joints": list(task.joint_names),
        "command_joints": list(task.commanded),
        "controller": f"{task.command_interface}_controller",
        "command_interface": task.command_interface,
        "control_period": float(task.control_period),
        "mode": SIM_ROBOT_MODE,
        "publish_clock": publish_clock,
        "seed": robot,
        **({} if task.gripper is None else {"gripper_joints": list(task.gripper.joints),
                                            "gripper_controller": task.gripper.controller}),
    }


def parse_flag(name: str, value: Any) -> bool:
    """``true``/``false`` (any case, or a YAML boolean) as a bool; ConfigError otherwise."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def shared_overrides(robot_interface: str | None, task: str | None,
                     use_sim_time: bool | str) -> dict[str, Any]:
    """The parameters ``robot_interface:=``, ``task:=`` and ``use_sim_time:=`` set on every
    node (nothing for those not given).

    :raises ConfigError: for an unknown interface or a flag that is not true or false.
    """
    overrides: dict[str, Any] = {}
    if task is not None and str(task).strip():
        overrides["env_id"] = str(task).strip()
    if robot_interface is not None and str(robot_interface).strip():
        interface = str(robot_interface).strip()
        if interface not in ROBOT_INTERFACES:
            raise ConfigError(f"unknown robot_interface {robot_interface!r}; valid: "
                              f"{', '.join(ROBOT_INTERFACES)}")
        overrides["robot_interface"] = interface
    if parse_flag("use_sim_time", use_sim_time):
        overrides["use_sim_time"] = True
    return overrides


def sim_robots(config_file: str, shared_parameters: Mapping[str, Any], robots: int,
               start: bool | str) -> list[dict[str, Any]]:
    """The parameters of each robot's sim_robot process, or none (in-process robots, or
    ``sim_robot:=false``: the robots come from elsewhere). Robot 0's publishes ``/clock``.

    :raises ConfigError: for a bad ``sim_robot`` flag or a task sim_robot cannot simulate.
    """
    interface = effective_parameter("robot_interface", config_file, shared_parameters,
                                    DEFAULT_ROBOT_INTERFACE)
    if interface != "ros2_control":
        return []
    if not parse_flag("sim_robot", start):
        check_own_robots(config_file, shared_parameters)
        return []
    env_id = effective_parameter("env_id", config_file, shared_parameters, "")
    return [sim_robot_parameters(env_id, robot, publish_clock=robot == 0)
            for robot in range(robots)]


def check_own_robots(config_file: str, shared_parameters: Mapping[str, Any]) -> None:
    """Robots of the user's own (``sim_robot:=false``) must say how an episode starts (the
    default reset service is sim_robot's, which such a robot does not serve: the run would wait
    for it at "steps 0" for good) and must have joint limits (a task without a URDF needs
    ``limits_urdf``), checked here once rather than by simulators that fail at every respawn.

    :raises ConfigError: with the arguments that fix it.
    """
    reset = effective_parameter("reset", config_file, shared_parameters, "service")
    service = effective_parameter("reset_service", config_file, shared_parameters,
                                  DEFAULT_RESET_SERVICE)
    if reset == "service" and service == DEFAULT_RESET_SERVICE:
        raise ConfigError(
            f"sim_robot:=false: your robots serve no {DEFAULT_RESET_SERVICE}, the default reset "
            "service; pass reset:=homing (the boundary commands each robot to its start state) "
            "or reset_service:=NAME (your robot's rl_interfaces/srv/ResetRobot service)")
    if effective_parameter("limits_urdf", config_file, shared_parameters, ""):
        return
    from rl_core.robot.tasks import load_task

    env_id = effective_parameter("env_id", config_file, shared_parameters, "")
    try:
        task = load_task(env_id)
    except (ValueError, ImportError):
        return  # each simulator reports a task it cannot load
    if not task.urdf_path:
        raise ConfigError(f"task {type(task).__name__} names no URDF, so the safety layer would "
                          "have no joint limits for your robot: pass limits_urdf:=FILE (your "
                          "robot's URDF)")
