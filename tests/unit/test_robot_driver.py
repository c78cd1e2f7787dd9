"""The boundary's driver (rl_core.robot.driver) against a recording host and a hand-driven clock:
resets by service, the command deadline, the e-stop, the learner's pause, a robot that restarts,
and the warnings /diagnostics shows."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest

from rl_core.config import BoundaryConfig, ConfigError
from rl_core.robot import JointTarget
from rl_core.robot.boundary import ACTING, RESETTING, STEPPING, WAITING
from rl_core.robot.driver import RESET_TIMEOUT_S, RobotDriver
from rl_core.robot.safety import ESTOP, TIMEOUT
from tests.unit import test_robot_boundary as robot_boundary_tests

pytestmark = pytest.mark.unit
JOINTS = ["a", "b"]


class ReachZero(robot_boundary_tests.ReachZero):
    """The boundary tests' task, with episodes of three steps."""

    max_episode_steps: ClassVar[int] = 3


class Clock:
    """A steady clock moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Host:
    """Records what the driver asks for, in order, as ``(kind, value)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.service_ready = True
        self.paused = False
        self.requests: list[Future[Any]] = []

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def of(self, kind: str) -> list[Any]:
        return [value for event, value in self.events if event == kind]

    def send(self, command: np.ndarray) -> None:
        self.events.append(("send", np.asarray(command).copy()))

    def request_reset(self, target: JointTarget) -> Future[Any] | None:
        self.events.append(("reset", target))
        if not self.service_ready:
            return None
        self.requests.append(Future())
        return self.requests[-1]

    def publish_observation(self, obs: np.ndarray, step: int) -> None:
        self.events.append(("observation", (step, obs.copy())))

    def publish_transition(self, transition: Any) -> None:
        self.events.append(("transition", transition))

    def publish_episode(self, episode: Any) -> None:
        self.events.append(("episode", episode))

    def acting_paused(self) -> bool:
        return self.paused

    def reject(self, what: str, reason: str) -> None:
        self.events.append(("reject", f"{what}: {reason}"))

    def warn(self, text: str, throttle_s: float = 0.0) -> None:
        self.events.append(("warn", (text, throttle_s)))

    def info(self, text: str) -> None:
        self.events.append(("info", text))


def make(**config: Any) -> tuple[RobotDriver, Host, Clock]:
    host, clock = Host(), Clock()
    driver = RobotDriver(ReachZero(), BoundaryConfig(**config), 0, host, clock)
    return driver, host, clock


def state(driver: RobotDriver, stamp: float, position: list[float]) -> None:
    driver.on_joint_state(stamp, JOINTS, position, [0.0, 0.0], [])


def answer(host: Host, success: bool = True, message: str = "") -> Future[Any]:
    request = host.requests[-1]
    request.set_result(SimpleNamespace(success=success, message=message))
    return request


def started(**config: Any) -> tuple[RobotDriver, Host, Clock]:
    """A driver whose first episode's observation is out (step 0)."""
    driver, host, clock = make(**config)
    driver.start()
    state(driver, 0.0, [1.0, -1.0])
    driver.reset_answered(answer(host))
    assert driver.loop.phase == ACTING and host.of("observation")[-1][0] == 0
    host.events.clear()
    return driver, host, clock


def test_a_service_reset_then_each_period_sends_the_command_before_the_transition() -> None:
    driver, host, clock = make()
    state(driver, 0.0, [5.0, 5.0])
    assert host.events == [] and driver.loop.latest is None  # not started: not acted on
    driver.start()
    assert host.kinds() == ["reset"] and driver.loop.phase == RESETTING
    state(driver, 0.0, [1.0, -1.0])
    assert host.kinds() == ["reset"]  # the reset's state; observed once the service answers
    driver.reset_answered(answer(host))
    step, obs = host.of("observation")[0]
    assert step == 0 and driver.observation_step == 1
    np.testing.assert_allclose(obs, [1.0, -1.0])
    clock.now += 0.004
    driver.on_action(np.array([-1.0, 1.0]))
    np.testing.assert_allclose(host.of("send")[0], [-1.0, 1.0])
    assert driver.loop.phase == STEPPING
    assert driver.stats.latencies[-1] == pytest.approx(0.004)
    state(driver, 0.1, [0.9, -0.9])
    assert host.kinds()[-1] == "observation" and not host.of("transition")
    driver.on_action(np.zeros(2))
    assert host.kinds()[-2:] == ["send", "transition"]  # held back until the command is out
    assert host.of("transition")[0].reward == pytest.approx(-np.hypot(0.9, 0.9))


def test_an_episode_ends_after_max_episode_steps_and_a_new_reset_is_asked() -> None:
    driver, host, _ = started()
    for stamp in (0.1, 0.2, 0.3):
        driver.on_action(np.zeros(2))
        state(driver, stamp, [1.0, -1.0])
    assert host.kinds()[-3:] == ["transition", "episode", "reset"]
    assert host.of("transition")[-1].truncated and host.of("episode")[0].length == 3
    assert driver.loop.phase == RESETTING


def test_a_reset_is_asked_again_when_the_service_is_missing_refuses_or_is_silent() -> None:
    driver, host, clock = make()
    host.service_ready = False
    driver.start()
    assert driver.warning("/robot_0") == "no joint_states from the robot yet (is it running in /robot_0?)"
    state(driver, 0.0, [1.0, -1.0])
    assert driver.warning("/robot_0") == "waiting for the robot's reset service sim_robot/reset"
    host.service_ready = True
    driver.check_deadline()
    assert host.kinds() == ["reset", "reset"] and len(host.requests) == 1
    stale = host.requests[0]
    driver.reset_answered(answer(host, False, "busy"))
    assert host.of("reject") == ["robot reset: sim_robot/reset refused: busy; asking again"]
    assert len(host.requests) == 2
    driver.reset_answered(stale)  # an answer given up on changes nothing
    assert not host.of("observation")
    clock.now += RESET_TIMEOUT_S + 0.1
    driver.check_deadline()
    assert "did not answer within 5 s; asking again" in host.of("reject")[-1]
    state(driver, 0.1, [1.0, -1.0])  # the state the reset made
    driver.reset_answered(answer(host))
    assert [step for step, _ in host.of("observation")] == [0]


def test_no_action_within_the_deadline_holds_the_robot_and_observes_afresh() -> None:
    driver, host, clock = started(command_timeout=0.5)
    clock.now += 0.4
    driver.check_deadline()
    assert host.events == []
    clock.now += 0.2
    driver.check_deadline()
    np.testing.assert_allclose(host.of("send")[0], [0.0, 0.0])  # velocity hold
    text, throttle_s = host.of("warn")[0]
    assert text.startswith("no action within command_timeout 0.5 s: robot held")
    assert throttle_s > 0 and driver.loop.phase == WAITING
    assert driver.safety.interventions[TIMEOUT] == 1
    state(driver, 0.1, [1.0, -1.0])
    assert host.of("observation")[-1][0] == 1


def test_a_lost_joint_state_after_a_command_holds_the_robot() -> None:
    driver, host, clock = started(command_timeout=0.5)
    driver.on_action(np.ones(2))
    clock.now += 0.6
    driver.check_deadline()
    assert host.of("warn")[0][0].startswith("no joint state after the last command")


def test_the_estop_holds_at_once_and_a_release_resumes_acting() -> None:
    driver, host, _ = started()
    assert driver.on_estop(True) is False
    np.testing.assert_allclose(host.of("send")[0], [0.0, 0.0])
    assert host.of("warn")[0][0] == "e-stop: robot held, acting paused until released"
    assert driver.warning("/robot_0") == "e-stop engaged: robot held, acting paused"
    assert driver.safety.interventions[ESTOP] == 1
    assert driver.on_estop(True) is False and len(host.of("send")) == 1
    driver.on_action(np.ones(2))
    state(driver, 0.1, [1.0, -1.0])
    assert len(host.of("send")) == 1 and len(host.of("observation")) == 0
    assert driver.on_estop(False) is True
    assert host.of("info") == ["e-stop released: acting resumes"]
    driver.resume()
    assert host.of("observation")[-1][0] == 1 and driver.loop.phase == ACTING


def test_a_pause_withholds_observations_and_holds_the_robot_once_past_the_deadline() -> None:
    driver, host, clock = started(command_timeout=0.5)
    host.paused = True
    driver.on_action(np.ones(2))
    state(driver, 0.1, [1.0, -1.0])
    assert host.kinds() == ["send", "transition"]  # the observation is withheld
    clock.now += 0.6
    driver.check_deadline()
    driver.check_deadline()
    assert len(host.of("send")) == 2 and not host.of("warn")  # one hold
    host.paused = False
    driver.resume()
    assert host.of("observation")[-1][0] == 1


def test_a_robot_clock_that_goes_back_ends_the_episode() -> None:
    driver, host, _ = started()
    driver.on_action(np.zeros(2))
    state(driver, 5.0, [1.0, -1.0])
    host.events.clear()
    state(driver, 0.0, [1.0, -1.0])
    text, _ = host.of("warn")[0]
    assert text.startswith("the robot's clock went back (5.000 -> 0.000 s: restarted?)")
    assert "reset" in host.kinds() and driver.loop.phase == RESETTING


def test_a_frozen_robot_clock_is_reported() -> None:
    driver, host, clock = started()
    driver.on_action(np.zeros(2))
    clock.now += 3.0
    state(driver, 0.0, [1.0, -1.0])  # the same stamp: the robot's clock stands still
    assert driver.warning("/robot_0") == ("the robot's clock is frozen: joint_states stamps "
                                          "have not moved for 3 s")


def test_an_unreadable_joint_state_is_rejected() -> None:
    driver, host, _ = make()
    driver.on_joint_state(0.0, ["a"], [1.0], [], [])
    assert host.of("reject")[0].startswith("joint states: joint_states lacks ['b']")


def test_homing_commands_the_start_state_then_observes() -> None:
    driver, host, _ = make(reset="homing")
    driver.start()
    assert host.events == []  # no reset service
    state(driver, 0.0, [0.0, 0.0])
    np.testing.assert_allclose(host.of("send")[0], [2.0, -2.0])  # gain 2 towards (1, -1)
    state(driver, 0.1, [1.0, -1.0])
    assert host.of("observation")[0][0] == 0


def test_a_command_interface_other_than_the_tasks_is_refused() -> None:
    with pytest.raises(ConfigError, match="acts through the velocity interface"):
        make(command_interface="position")


def test_the_robots_joint_names_and_the_control_rate_come_from_the_config() -> None:
    driver, _, _ = make(joints="j1, j2", control_rate_hz=50.0)
    assert driver.robot_joints == ("j1", "j2") and driver.command_joints == ["j1", "j2"]
    assert driver.period == pytest.approx(0.02)


def test_an_operators_success_ends_the_episode_in_flight_and_starts_the_next() -> None:
    driver, host, _ = started(operator_success=True)
    driver.on_operator_success(False)  # "not yet" changes nothing
    driver.on_operator_success(True)
    assert host.of("info") == ["operator: episode 1 counts as a success"]
    driver.on_action(np.zeros(2))
    state(driver, 0.1, [1.0, -1.0])
    episode = host.of("episode")[0]
    assert episode.success and episode.length == 1 and host.kinds()[-1] == "reset"
    driver.on_operator_success(True)  # while resetting: nothing to end
    assert host.of("warn")[-1][0].startswith("operator success between episodes")


def test_a_lost_first_joint_state_asks_for_the_reset_again() -> None:
    driver, host, clock = make()
    driver.start()
    driver.reset_answered(answer(host))  # answered, but the state it published never came
    assert driver.loop.latest is None and not host.of("observation")
    driver.check_deadline()
    assert host.kinds() == ["reset"]  # within the command deadline: wait
    clock.now += 0.6
    driver.check_deadline()
    assert host.kinds()[-1] == "reset" and len(host.of("reset")) == 2
    assert host.of("warn")[0][0].startswith("no joint state from the robot since its reset")
    state(driver, 0.0, [1.0, -1.0])
    driver.reset_answered(answer(host))
    assert host.of("observation")[0][0] == 0  # the robot acts
