"""sim_robot's robot (rl_core.robot.sim_robot): a command steps it in lockstep and not in
free_run, a trajectory's first point is a command, resets say what they did, the description
declares the commanded joints, and free_run's rate report."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_core.config import ConfigError
from rl_core.robot.sim_robot import SimRobot
from rl_core.robot.sim_robot_config import PARAMETERS, SimRobotConfig, sim_robot_config

pytestmark = pytest.mark.unit


def config(**given: object) -> SimRobotConfig:
    """The configuration of the node's defaults with ``given`` changed."""
    values = {name: [] if default is None else default
              for name, (default, _, _) in PARAMETERS.items()}
    return sim_robot_config({**values, **given})


@pytest.fixture
def clock() -> list[float]:
    """A steady clock moved by hand: ``clock[0]`` seconds."""
    return [10.0]


def make(clock: list[float], **given: object) -> SimRobot:
    return SimRobot(config(**given), lambda: clock[0])


def test_a_lockstep_command_steps_one_period_and_free_run_waits_for_its_timer(clock) -> None:
    robot = make(clock)
    try:
        assert robot.joint_names == ["slider_to_cart", "cart_to_pole"]
        assert robot.sim_time_ns == 0 and robot.trajectory_field == "effort"
        assert robot.command([1.0]) is True
        assert robot.sim_time_ns == round(robot.physics.control_period * 1e9)
        with pytest.raises(ValueError, match="expected 1 effort"):
            robot.command([1.0, 2.0])
    finally:
        robot.close()
    robot = make(clock, mode="free_run")
    try:
        assert robot.command([1.0]) is False and robot.sim_time_ns == 0
        robot.step()
        assert robot.sim_time_ns > 0
    finally:
        robot.close()


def test_a_trajectory_point_is_a_command_of_the_joints_it_names(clock) -> None:
    robot = make(clock)
    try:
        assert robot.command_trajectory(["slider_to_cart"], [2.0]) is True
        assert list(robot.physics.command_values) == [2.0]
        with pytest.raises(ValueError, match="no points"):
            robot.command_trajectory(["slider_to_cart"], None)
    finally:
        robot.close()


def test_a_reset_says_what_it_did(clock) -> None:
    robot = make(clock)
    try:
        assert robot.reset([], [], []) == "reset every joint to its home"
        assert robot.reset(["cart_to_pole"], [0.1], [0.0]) == "reset 1 joint(s)"
        position, _, _ = robot.state()
        assert position[1] == pytest.approx(0.1)
        with pytest.raises(ValueError):
            robot.reset(["elbow"], [0.1], [0.0])
    finally:
        robot.close()


def test_the_description_carries_the_ros2_control_block(clock) -> None:
    robot = make(clock)
    try:
        description = robot.description()
        assert "<ros2_control" in description and "mock_components/GenericSystem" in description
    finally:
        robot.close()


def test_free_run_reports_its_rate_per_window_and_whether_it_is_slow(clock) -> None:
    robot = make(clock, mode="free_run", control_period=0.1)
    try:
        for _ in range(10):
            robot.step()
        clock[0] += 1.0
        text, slow = robot.rate_report()
        assert text == ("free_run: 10.0 steps/s over the last 1.0 s (target 10.0, real-time "
                        "factor 1.00)") and not slow
        robot.step()
        clock[0] += 1.0
        text, slow = robot.rate_report()
        assert text.startswith("free_run: 1.0 steps/s") and slow
    finally:
        robot.close()


def test_a_robot_that_cannot_be_built_is_a_configuration_error(tmp_path: Path) -> None:
    urdf = tmp_path / "broken.urdf"
    urdf.write_text("not a urdf")
    with pytest.raises(ConfigError, match="robot '.*broken.urdf'"):
        SimRobot(config(robot=str(urdf)))


def test_free_run_holds_once_no_command_came_within_its_timeout(clock) -> None:
    robot = make(clock, mode="free_run", command_timeout=0.5)
    try:
        robot.command([1.0])
        clock[0] += 0.4
        robot.step()
        assert robot.timeouts == 0 and robot.physics.command_values[0] == 1.0
        clock[0] += 0.2  # the boundary fell silent: the robot side's own deadline holds
        robot.step()
        robot.step()
        assert robot.timeouts == 1 and robot.physics.command_values[0] == 0.0
        robot.command([0.5])  # a new command drives it again
        robot.step()
        assert robot.timeouts == 1 and robot.physics.command_values[0] == 0.5
    finally:
        robot.close()
