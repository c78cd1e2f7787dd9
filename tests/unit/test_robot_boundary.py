"""The boundary's control loop (rl_core.robot.boundary) against a plain-Python robot."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import gymnasium
import numpy as np
import pytest

from rl_core.robot import JointLimits, JointSample, JointTarget
from rl_core.robot.boundary import ACTING, RESETTING, STEPPING, WAITING, RobotLoop
from rl_core.robot.safety import ESTOP, TIMEOUT, SafetyLayer
from rl_core.robot.task import Outcome, Task

pytestmark = pytest.mark.unit


class ReachZero(Task):
    """Two velocity-controlled joints; reward -|q|; success within 0.05 of zero."""

    joint_names: ClassVar[tuple[str, ...]] = ("a", "b")
    command_interface: ClassVar[str] = "velocity"
    control_period: ClassVar[float] = 0.1
    max_episode_steps: ClassVar[int] = 5
    urdf_path: ClassVar[str | None] = str(Path(__file__).parents[1] / "fixtures" /
                                          "two_joints.urdf")

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(-10, 10, (2,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)

    def reset(self, rng: np.random.Generator) -> JointTarget:
        return JointTarget(np.array([1.0, -1.0]), np.zeros(2))

    def observe(self, state: JointSample) -> np.ndarray:
        return state.position.astype(np.float32)

    def outcome(self, action: np.ndarray, state: JointSample) -> Outcome:
        distance = float(np.linalg.norm(state.position))
        return Outcome(-distance, distance < 0.05, distance < 0.05)


class Integrator:
    """A robot that integrates velocity commands, one control period per command (lockstep)."""

    def __init__(self) -> None:
        self.position, self.time = np.zeros(2), 0.0

    def state(self) -> JointSample:
        return JointSample(self.time, self.position.copy(), np.zeros(2), np.zeros(2))

    def command(self, velocity: np.ndarray) -> JointSample:
        self.position = self.position + 0.1 * velocity
        self.time += 0.1
        return self.state()


def _loop(reset: str = "service") -> RobotLoop:
    task = ReachZero()
    inf = np.full(2, np.inf)
    limits = JointLimits(task.joint_names, -inf, inf, inf, inf)
    safety = SafetyLayer("velocity", limits, np.arange(2), 0.1, np.full(2, np.inf))
    return RobotLoop(task, safety, np.random.default_rng(0), reset)


def _start(loop: RobotLoop, robot: Integrator) -> np.ndarray:
    target = loop.begin_episode()
    robot.position = target.position.copy()
    assert loop.on_state(robot.state()) == (None, None, None)  # the reset's joint state
    obs = loop.reset_done()
    assert obs is not None and loop.phase == ACTING
    return obs


def test_one_period_makes_one_transition_from_the_next_joint_state() -> None:
    loop, robot = _loop(), Integrator()
    obs = _start(loop, robot)
    np.testing.assert_allclose(obs, [1.0, -1.0])
    command = loop.on_action(np.array([-1.0, 1.0]))
    np.testing.assert_allclose(command, [-1.0, 1.0])
    assert loop.phase == STEPPING
    # A repeated joint state of the observed instant is not the step's result.
    assert loop.on_state(JointSample(0.0, np.array([1.0, -1.0]), np.zeros(2), np.zeros(2)))[1] \
        is None
    next_obs, transition, episode = loop.on_state(robot.command(command))
    assert transition is not None and episode is None
    np.testing.assert_allclose(transition.obs, [1.0, -1.0])
    np.testing.assert_allclose(transition.next_obs, [0.9, -0.9])
    np.testing.assert_allclose(next_obs, [0.9, -0.9])
    assert transition.reward == pytest.approx(-np.hypot(0.9, 0.9))
    assert not transition.terminated and not transition.truncated and loop.phase == ACTING


def test_an_action_without_an_observation_in_flight_sends_nothing() -> None:
    loop, robot = _loop(), Integrator()
    _start(loop, robot)
    assert loop.on_action(np.zeros(2)) is not None
    assert loop.on_action(np.zeros(2)) is None  # a duplicate answer


def test_episodes_end_by_the_time_limit_and_by_the_task() -> None:
    loop, robot = _loop(), Integrator()
    _start(loop, robot)
    for _ in range(5):
        _, transition, episode = loop.on_state(robot.command(loop.on_action(np.zeros(2))))
    assert transition.truncated and not transition.terminated
    assert episode is not None and episode.length == 5 and loop.phase == RESETTING
    _start(loop, robot)
    robot.position = np.array([0.01, 0.0])  # nearly there: the next step succeeds
    loop.on_state(robot.state())
    _, transition, episode = loop.on_state(robot.command(loop.on_action(np.zeros(2))))
    assert transition.terminated and transition.success and episode.success


def test_estop_holds_at_once_drops_the_step_in_flight_and_release_observes_again() -> None:
    loop, robot = _loop(), Integrator()
    _start(loop, robot)
    hold = loop.set_estop(True)
    np.testing.assert_allclose(hold, [0.0, 0.0])
    assert loop.safety.interventions[ESTOP] == 1 and loop.phase == WAITING
    assert loop.on_action(np.ones(2)) is None  # acting paused
    assert loop.on_state(robot.command(hold)) == (None, None, None)
    assert loop.set_estop(False) is None
    obs = loop.resume_observation()
    assert obs is not None and loop.phase == ACTING


def test_a_missed_deadline_holds_and_observes_the_next_state_again() -> None:
    loop, robot = _loop(), Integrator()
    _start(loop, robot)
    hold = loop.timed_out()
    np.testing.assert_allclose(hold, [0.0, 0.0])
    assert loop.safety.interventions[TIMEOUT] == 1 and loop.phase == WAITING
    obs, transition, _ = loop.on_state(robot.command(hold))
    assert obs is not None and transition is None and loop.phase == ACTING


def test_homing_drives_the_robot_to_the_start_state() -> None:
    loop, robot = _loop("homing"), Integrator()
    target = loop.begin_episode()
    loop.on_state(robot.state())
    for _ in range(200):
        command = loop.homing_command()
        if command is None:
            break
        loop.on_state(robot.command(command))
    assert command is None
    np.testing.assert_allclose(robot.position, target.position, atol=0.02)
    assert loop.reset_done() is not None


def test_effort_tasks_cannot_home() -> None:
    task = ReachZero()
    type(task).command_interface = "effort"
    try:
        limits = JointLimits(task.joint_names, *(np.full(2, v) for v in (-1, 1, 1, 1)))
        safety = SafetyLayer("effort", limits, np.arange(2), 0.1, np.ones(2))
        with pytest.raises(ValueError, match="homing|home"):
            RobotLoop(task, safety, np.random.default_rng(0), "homing")
    finally:
        type(task).command_interface = "velocity"


def test_an_operator_declares_the_episode_in_flight_a_success() -> None:
    loop, robot = _loop(), Integrator()
    assert not loop.declare_success()  # between episodes: nothing to end
    _start(loop, robot)
    _, transition, episode = loop.on_state(robot.command(loop.on_action(np.zeros(2))))
    assert episode is None and not transition.terminated
    assert loop.declare_success()  # while the next observation waits for its action
    _, transition, episode = loop.on_state(robot.command(loop.on_action(np.zeros(2))))
    assert transition.terminated and transition.success and not transition.truncated
    assert transition.reward == pytest.approx(-np.hypot(1.0, 1.0))  # the task's own reward
    assert episode is not None and episode.success and episode.length == 2
    # A task with a success reward pays it; the verdict does not outlive its episode.
    loop.task.success_reward = 10.0
    _start(loop, robot)
    loop.declare_success()
    _, transition, _ = loop.on_state(robot.command(loop.on_action(np.zeros(2))))
    assert transition.reward == 10.0 and transition.success
    _start(loop, robot)
    _, transition, _ = loop.on_state(robot.command(loop.on_action(np.zeros(2))))
    assert not transition.terminated and transition.reward < 0


def test_a_period_an_operator_drove_is_flagged_in_its_transition() -> None:
    loop, robot = _loop(), Integrator()
    _start(loop, robot)
    _, driven, _ = loop.on_state(robot.command(loop.on_action(np.zeros(2), intervened=True)))
    _, plain, _ = loop.on_state(robot.command(loop.on_action(np.zeros(2))))
    assert driven.intervened and not plain.intervened


def test_the_safety_layer_limits_an_operators_command_like_the_policys() -> None:
    task, inf = ReachZero(), np.full(2, np.inf)
    slow = JointLimits(task.joint_names, -inf, inf, np.full(2, 0.5), inf)
    safety = SafetyLayer("velocity", slow, np.arange(2), 0.1, np.full(2, np.inf))
    loop, robot = RobotLoop(task, safety, np.random.default_rng(0), "service"), Integrator()
    _start(loop, robot)
    command = loop.on_action(np.array([-1.0, 1.0]), intervened=True)
    np.testing.assert_allclose(command, [-0.5, 0.5])  # the joints' velocity limit, not 1 rad/s
    _, driven, _ = loop.on_state(robot.command(command))
    assert driven.intervened  # learned from what the robot executed, after the safety layer
    np.testing.assert_allclose(driven.action, [-0.5, 0.5])
