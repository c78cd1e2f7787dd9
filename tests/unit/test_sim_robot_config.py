"""sim_robot's configuration: the robot's own settings filled in, bad values named, and the
forward command a joint trajectory makes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rl_core.config import ConfigError
from rl_core.robot.description import ROBOTS
from rl_core.robot.sim_robot_config import (
    PARAMETERS,
    URDF_DEFAULTS,
    sim_robot_config,
    trajectory_command,
    trajectory_point,
)

pytestmark = pytest.mark.unit


def values(**given: object) -> dict[str, object]:
    """The node's parameter values as declared (defaults: zeros and empties)."""
    defaults: dict[str, object] = {
        "robot": "cartpole", "joints": [], "command_joints": [], "controller": "",
        "command_interface": "", "control_period": 0.0, "physics_substeps": 0,
        "max_motor_force": 0.0, "mode": "lockstep", "publish_clock": False, "seed": 0,
        "rate_report_period": 10.0, "command_timeout": 0.5, "gripper_joints": [],
        "gripper_controller": "gripper_controller"}
    return {**defaults, **given}


def test_the_declared_parameters_are_these_and_their_defaults_are_valid() -> None:
    declared = {name: [] if default is None else default
                for name, (default, _, _) in PARAMETERS.items()}
    assert declared == values()
    assert sim_robot_config(declared).robot == "cartpole"
    assert all(description.endswith(".") for _, description, _ in PARAMETERS.values())


def test_a_known_robot_gets_its_own_settings() -> None:
    config = sim_robot_config(values(robot="kuka_iiwa"))
    model = ROBOTS["kuka_iiwa"]
    assert config.model is model and config.urdf_path == model.urdf_path
    assert config.command_interface == "velocity" and config.controller == "velocity_controller"
    assert config.control_period == model.control_period
    assert config.joints and config.command_joints == config.joints


def test_given_values_win_over_the_robot_defaults() -> None:
    config = sim_robot_config(values(robot="cartpole", control_period=0.01, physics_substeps=2,
                                     controller="my_controller", mode="free_run"))
    assert (config.control_period, config.physics_substeps) == (0.01, 2)
    assert config.controller == "my_controller" and config.mode == "free_run"


def test_a_urdf_path_takes_the_urdf_defaults(tmp_path: Path) -> None:
    urdf = tmp_path / "arm.urdf"
    urdf.write_text("<robot name='arm'/>")
    config = sim_robot_config(values(robot=str(urdf)))
    assert config.model is None and config.urdf_path == str(urdf)
    assert config.command_interface == URDF_DEFAULTS["command_interface"]
    assert config.joints is None and config.command_joints is None


@pytest.mark.parametrize(("given", "named"), [
    ({"robot": "no_such_robot"}, "parameter 'robot'"),
    ({"command_interface": "torque"}, "parameter 'command_interface'"),
    ({"mode": "realtime"}, "parameter 'mode'"),
    ({"joints": ["slider_to_cart", "elbow"]}, "parameter 'joints'"),
    ({"command_interface": "position"}, "offers no position command"),
])
def test_bad_values_are_refused_naming_the_parameter(given, named) -> None:
    with pytest.raises(ConfigError, match=named):
        sim_robot_config(values(**given))


def test_a_trajectory_point_commands_the_joints_it_names() -> None:
    commanded = {"a": 0, "b": 1, "c": 2}
    current = np.array([1.0, 2.0, 3.0])
    assert trajectory_command(current, commanded, "velocity", ["c", "a"], [30.0, 10.0]) == \
        [10.0, 2.0, 30.0]
    with pytest.raises(ValueError, match="no points"):
        trajectory_command(current, commanded, "velocity", ["a"], None)
    with pytest.raises(ValueError, match="at most once"):
        trajectory_command(current, commanded, "velocity", ["a", "a"], [1.0, 2.0])
    with pytest.raises(ValueError, match="at most once"):
        trajectory_command(current, commanded, "velocity", ["z"], [1.0])
    with pytest.raises(ValueError, match="1 velocities for 2 joint_names"):
        trajectory_command(current, commanded, "velocity", ["a", "b"], [1.0])


def test_a_trajectory_point_carries_the_command_one_period_ahead_and_reads_back() -> None:
    field, values, ahead = trajectory_point(np.array([0.5, -1.0]), "velocity", 0.02)
    assert (field, values, ahead) == ("velocities", [0.5, -1.0], (0, 20_000_000))
    assert trajectory_point([1.0], "position", 1.25)[2] == (1, 250_000_000)
    assert trajectory_command(np.zeros(2), {"a": 0, "b": 1}, "velocity", ["a", "b"],
                              values) == [0.5, -1.0]
