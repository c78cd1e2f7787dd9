"""Demonstrations from a robot's own topics (rl_core.robot.recorded, rl_core.replay.demos): joint
states and controller commands, as ros2 bag records them while an operator drives, become the
transitions the boundary would have learned from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mcap_ros2.writer import Writer

from rl_bringup.tools.operate.message_types import full_message_definition
from rl_core.config import ConfigError
from rl_core.replay.demos import COMMAND_SCHEMA, JOINT_STATE_SCHEMA, load_demonstrations
from rl_core.robot import JointSample
from rl_core.robot.recorded import PAUSE_PERIODS, TimedCommand, TimedState, operator_transitions
from rl_core.robot.tasks import CartPoleBalanceTask

pytestmark = pytest.mark.unit
CARTPOLE = "rl_ros2/CartPoleBalance-v0"
PERIOD = CartPoleBalanceTask.control_period


def state(at: float, angle: float, x: float = 0.0) -> TimedState:
    """Cart-pole joints: cart at ``x``, pole at ``angle`` (velocities 0.1 and -0.2)."""
    return TimedState(at, JointSample(at, np.array([x, angle]), np.array([0.1, -0.2]),
                                      np.zeros(2)))


def test_each_command_is_a_control_period_from_the_state_it_was_sent_in() -> None:
    task = CartPoleBalanceTask()
    states = [state(k * PERIOD, 0.01 * k) for k in range(6)]
    # Commands (N) halfway between states; the third one past max_force is clipped.
    commands = [TimedCommand((k + 0.5) * PERIOD, np.array([force]))
                for k, force in enumerate([5.0, -2.5, 30.0])]
    rows = operator_transitions(task, states, commands)
    np.testing.assert_allclose(rows["actions"][:, 0], [0.5, -0.25, 1.0])
    # The first command was sent in state 0 and the next one in state 1: the period ended there.
    np.testing.assert_allclose(rows["obs"][0], [0.0, 0.1, 0.0, -0.2], atol=1e-7)
    np.testing.assert_allclose(rows["next_obs"][0], [0.0, 0.1, 0.01, -0.2], atol=1e-7)
    np.testing.assert_allclose(rows["obs"][1], rows["next_obs"][0])
    assert rows["rewards"].tolist() == [1.0, 1.0, 1.0]
    # The last one ends the recording: truncated, one period after it was sent.
    assert rows["terminated"].tolist() == [False] * 3
    assert rows["truncated"].tolist() == [False, False, True]
    np.testing.assert_allclose(rows["next_obs"][2][2], 0.03, atol=1e-7)


def test_the_task_ends_episodes_and_pauses_split_them() -> None:
    task = CartPoleBalanceTask()
    # The pole falls past 0.2 rad in the fourth period; then the operator pauses and drives
    # again later.
    angles = [0.0, 0.05, 0.1, 0.15, 0.25, 0.0, 0.0, 0.0, 0.0]
    late = 100 * PERIOD
    states = [state(k * PERIOD, angle) for k, angle in enumerate(angles[:5])] + \
        [state(late + k * PERIOD, angle) for k, angle in enumerate(angles[5:])]
    commands = [TimedCommand((k + 0.5) * PERIOD, np.array([1.0])) for k in range(5)] + \
        [TimedCommand(late + (k + 0.5) * PERIOD, np.array([1.0])) for k in range(3)]
    rows = operator_transitions(task, states, commands)
    # Period 4 ends past the limit: terminated. The fifth command has no later state before
    # the pause: nothing to learn from it. After the pause, a new episode of 3 periods.
    assert rows["terminated"].tolist() == [False, False, False, True, False, False, False]
    assert rows["truncated"].tolist() == [False] * 6 + [True]
    assert PAUSE_PERIODS * PERIOD < late


def test_a_command_of_another_size_says_what_the_task_commands() -> None:
    with pytest.raises(ValueError, match=r"2 values, but the task commands 1 joints"):
        operator_transitions(CartPoleBalanceTask(), [state(0.0, 0.0), state(PERIOD, 0.0)],
                             [TimedCommand(0.001, np.array([1.0, 2.0]))])


def write_bag(path: Path, topics: dict[str, list[tuple[float, dict]]]) -> Path:
    """An MCAP file as ``ros2 bag record -s mcap`` writes one: ``topic -> (time, message)``."""
    types = {"joint_states": JOINT_STATE_SCHEMA}
    with open(path, "wb") as stream:
        writer = Writer(stream)
        schemas = {}
        for topic, messages in topics.items():
            name = types.get(topic.rsplit("/", 1)[-1], COMMAND_SCHEMA)
            if name not in schemas:
                schemas[name] = writer.register_msgdef(name, full_message_definition(name))
            for at, message in messages:
                writer.write_message(topic, schemas[name], message, log_time=int(at * 1e9),
                                     publish_time=int(at * 1e9))
        writer.finish()
    return path


def joint_state(at: float, angle: float) -> tuple[float, dict]:
    seconds = int(at)
    return at, dict(header=dict(stamp=dict(sec=seconds, nanosec=int((at - seconds) * 1e9)),
                                frame_id=""),
                    name=["cart_to_pole", "slider_to_cart"], position=[angle, 0.0],
                    velocity=[0.0, 0.0], effort=[])


def command(at: float, force: float) -> tuple[float, dict]:
    return at, dict(layout=dict(dim=[], data_offset=0), data=[force])


def test_a_bag_of_joint_states_and_commands_loads_as_demonstrations(tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "teleop.mcap", {
        "/robot_0/joint_states": [joint_state(1.0 + k * PERIOD, 0.01 * k) for k in range(11)],
        "/robot_0/effort_controller/commands": [command(1.0 + (k + 0.5) * PERIOD, 2.0)
                                                for k in range(10)],
        "/robot_0/other/commands_not": [command(1.0, 0.0)]})
    demos = load_demonstrations(str(bag), (4,), (1,), CARTPOLE)
    assert len(demos) == 10 and demos.episodes == 1 and demos.truncated[-1]
    np.testing.assert_allclose(demos.actions[:, 0], 0.2)
    # Joints are matched by name, not by order: the pole angle is the observation's third value.
    np.testing.assert_allclose(demos.obs[:, 2], 0.01 * np.arange(10), atol=1e-6)
    with pytest.raises(ConfigError, match="need the task of the run"):
        load_demonstrations(str(bag), (4,), (1,), "no_such_task")
    with pytest.raises(ConfigError, match=r"observes \(4,\).*this run \(23,\)"):
        load_demonstrations(str(bag), (23,), (7,), CARTPOLE)


def test_bags_of_several_robots_or_commands_are_refused_with_the_fix(tmp_path: Path) -> None:
    two = write_bag(tmp_path / "two.mcap", {
        "/robot_0/joint_states": [joint_state(1.0, 0.0)],
        "/robot_1/joint_states": [joint_state(1.0, 0.0)],
        "/robot_0/effort_controller/commands": [command(1.01, 1.0)]})
    with pytest.raises(ConfigError, match="several robots.*one robot per file"):
        load_demonstrations(str(two), (4,), (1,), CARTPOLE)
    both = write_bag(tmp_path / "both.mcap", {
        "/robot_0/joint_states": [joint_state(1.0, 0.0)],
        "/robot_0/effort_controller/commands": [command(1.01, 1.0)],
        "/robot_0/velocity_controller/commands": [command(1.01, 1.0)]})
    with pytest.raises(ConfigError, match="several command topics"):
        load_demonstrations(str(both), (4,), (1,), CARTPOLE)
    silent = write_bag(tmp_path / "silent.mcap", {
        "/robot_0/joint_states": [joint_state(1.0, 0.0)],
        "/robot_0/effort_controller/commands": [command(0.5, 1.0)]})
    with pytest.raises(ConfigError, match="no command was answered by a joint state"):
        load_demonstrations(str(silent), (4,), (1,), CARTPOLE)
