"""The parameter overrides a plan gives its nodes, on top of the scenario file.

Every node gets the ``NAME:=VALUE`` overrides of the command line (checked here: ROS 2 parameter
names and types only) and what ``robot_interface:=``, ``task:=`` and ``use_sim_time:=`` set
(:mod:`rl_bringup.plan.robot_plan`); the processes hosting the trainer or the replay buffer also get
``output_dir``. :class:`rl_bringup.plan.process_spec.ProcessSpec` writes them to a parameter file.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any

import yaml

from rl_bringup.plan import robot_plan
from rl_bringup.plan.process_spec import PlanError
from rl_core.config import (
    ConfigError,
    ReplayConfig,
    SACConfig,
    SimulatorConfig,
    algorithm_refusal,
    n_step_refusal,
)

_PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def format_parameter_value(value: Any) -> str:
    """Render a parameter value as ROS command-line text (the ``value`` of ``name:=value``); the
    plan also calls it to refuse values no ROS 2 parameter can hold.

    rcl parses the text after ``:=`` as YAML, so strings that YAML would read as another type
    (``"1"``, ``"true"``, ``"null"``) are quoted to stay strings.

    :param value: bool, int, float, str or a list of those.
    :raises PlanError: for other types (ROS 2 parameters cannot hold them).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, str) and parsed == value:
            return value
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_parameter_value(item) for item in value) + "]"
    raise PlanError(
        f"parameter value {value!r} of type {type(value).__name__} is not a ROS 2 parameter "
        f"type; use bool, int, float, str or a list of those"
    )


def check_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Validate parameter overrides (names and value types) before they reach a command line."""
    checked: dict[str, Any] = {}
    for name, value in parameters.items():
        if not isinstance(name, str) or not _PARAMETER_NAME.match(name):
            raise PlanError(
                f"bad parameter name {name!r}: use letters, digits, '_' and '.' separators, "
                f"starting with a letter or '_'"
            )
        format_parameter_value(value)  # raises PlanError for unsupported types
        checked[name] = value
    return checked


def node_overrides(
    config_file: str, extra_parameters: Mapping[str, Any] | None, robots: int,
    robot_interface: str | None, task: str | None, use_sim_time: bool | str, sim_robot: bool | str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The parameter overrides every node gets (the checked ``extra_parameters`` and what
    ``robot_interface:=``, ``task:=`` and ``use_sim_time:=`` set), and the parameters of each
    robot's sim_robot process (none without one)."""
    shared_parameters = check_parameters(extra_parameters or {})
    try:
        shared_parameters.update(robot_plan.shared_overrides(robot_interface, task, use_sim_time))
        sim_robots = robot_plan.sim_robots(config_file, shared_parameters, robots, sim_robot)
        check_task(config_file, shared_parameters)
        shared_parameters.update(n_step_overrides(config_file, shared_parameters))
    except ConfigError as error:
        raise PlanError(str(error)) from None
    return shared_parameters, sim_robots


#: Settings (node kind, parameter) that act with continuous actions only.
CONTINUOUS_ONLY = (("simulator", "teleop"), ("simulator", "expert_interventions"),
                   ("policy", "expert"))


def check_task(config_file: str, shared_parameters: Mapping[str, Any]) -> None:
    """The task every node learns exists and has spaces rl_ros2 learns, with settings it
    takes: refused here, once, rather than by node processes that would fail at every respawn.

    :raises ConfigError: naming the task, its spaces and what is supported; ``her_k`` for a
        task without goals; settings that act continuously for a ``Discrete`` action.
    """
    from rl_core.replay.build import HER_NEEDS_GOALS
    from rl_core.replay.hindsight import is_goal_env
    from rl_core.robot.tasks import check_spaces, space_shapes, task_choices

    env_id = robot_plan.effective_parameter("env_id", config_file, shared_parameters,
                                            SimulatorConfig().env_id)
    try:
        check_spaces(str(env_id))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    except Exception as error:  # noqa: BLE001 - the user's env may fail in any way
        raise ConfigError(f"env_id {env_id!r} cannot be made here ({type(error).__name__}: "
                          f"{error}); install what it needs, or choose another env_id") from None
    her_k = robot_plan.effective_parameter("her_k", config_file, shared_parameters, 0,
                                           "replay_buffer")
    if _is_set(her_k) and not is_goal_env(str(env_id)):
        raise ConfigError(HER_NEEDS_GOALS.format(k=her_k, env_id=env_id))
    algorithm = robot_plan.effective_parameter("algorithm", config_file, shared_parameters,
                                               SACConfig().algorithm, "trainer")
    refusal = algorithm_refusal(str(algorithm), task_choices(str(env_id)),
                                math.prod(space_shapes(str(env_id))[1]))
    if refusal is not None:
        raise ConfigError(refusal)
    if task_choices(str(env_id)):
        # A gamepad drives an arm, its gripper on buttons; a Discrete action alone it cannot.
        arm = space_shapes(str(env_id))[1] != (1,)
        continuous_only = [f"{name}:={value}" for kind, name in CONTINUOUS_ONLY
                           if not (arm and name == "teleop")
                           and _is_set(value := robot_plan.effective_parameter(
                               name, config_file, shared_parameters, None, kind))]
        if continuous_only:
            raise ConfigError(f"env_id {env_id!r} has a discrete action or part, which "
                              f"{', '.join(continuous_only)} cannot drive (a scripted expert acts "
                              "with continuous actions, a gamepad with an arm's); unset them, or "
                              "choose a task with a Box action")


def _is_set(value: Any) -> bool:
    """Whether a parameter's value turns its feature on (a launch argument is a string:
    ``false``, ``0.0`` and empty are off)."""
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            return float(text) != 0.0
        except ValueError:
            return text not in ("", "false", "no", "off")
    return bool(value)


def learning_overrides(shared_parameters: Mapping[str, Any],
                       output_dir: str | os.PathLike[str] | None) -> dict[str, Any]:
    """The overrides of the processes hosting the trainer or the replay buffer: the shared ones
    and ``output_dir`` when given, made absolute so that every process agrees on it."""
    parameters = dict(shared_parameters)
    if output_dir is not None and str(output_dir).strip() != "":
        parameters["output_dir"] = os.path.abspath(os.path.expanduser(os.fspath(output_dir)))
    return parameters


def n_step_overrides(config_file: str, shared_parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The trainer's ``n_step`` and ``gamma`` for every node, so the simulators sum the rewards
    the trainer bootstraps after (none for one-step returns).

    :raises ConfigError: n-step rows where replay stores one-step ones (her_k, demos).
    """
    def value(name: str, kind: str, default: Any) -> Any:
        return robot_plan.effective_parameter(name, config_file, shared_parameters, default, kind)

    sac, replay = SACConfig(), ReplayConfig()
    n_step = int(value("n_step", "trainer", sac.n_step))
    refusal = n_step_refusal(n_step, int(value("her_k", "replay_buffer", replay.her_k) or 0),
                             str(value("demos", "replay_buffer", replay.demos) or ""))
    if refusal is not None:
        raise ConfigError(refusal)
    if n_step == 1:
        return {}
    return {"n_step": n_step, "gamma": float(value("gamma", "trainer", sac.gamma))}
