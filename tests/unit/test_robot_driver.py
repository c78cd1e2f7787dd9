"""The boundary's driver (rl_core.robot.driver) against a recording host and a hand-driven clock:
resets by service, the command deadline, the e-stop (signed release, latched on disk), the
learner's pause and every end of acting, implausible states, the velocity envelope, a robot that
restarts, and the warnings /diagnostics shows."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest

from rl_core.config import BoundaryConfig, ConfigError
from rl_core.robot import JointTarget, estop
from rl_core.robot.boundary import ACTING, RESETTING, STEPPING, WAITING
from rl_core.robot.driver import RATE_CHECK_TRANSITIONS, RESET_TIMEOUT_S, RobotDriver
from rl_core.robot.safety import ENVELOPE, ESTOP, IMPLAUSIBLE, STOPPED, TIMEOUT
from rl_core.security.weights_auth import SigningKey
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

    def send_gripper(self, command: np.ndarray) -> None:
        self.events.append(("grip", np.asarray(command).copy()))

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

    def warn(self, text: str) -> None:
        self.events.append(("warn", (text, 0.0)))

    def info(self, text: str) -> None:
        self.events.append(("info", text))

    def publish_estop(self, engaged: bool, challenge: str, reason: str) -> None:
        self.events.append(("estop", (engaged, challenge, reason)))


#: The run's key: what signs e-stop releases.
RUN_KEY = SigningKey(bytes(range(32)))


def make(latch: estop.EStopLatch | None = None, **config: Any
         ) -> tuple[RobotDriver, Host, Clock]:
    host, clock = Host(), Clock()
    config.setdefault("ramp_in_time", 0.0)
    driver = RobotDriver(ReachZero(), BoundaryConfig(**config), 0, host, clock,
                         release=estop.ReleaseCheck("/robot_0", RUN_KEY.public), latch=latch)
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
    assert [kind for kind in host.kinds() if kind != "warn"] == ["reset", "reset"]
    assert "a robot without one needs reset:=homing" in host.of("warn")[0][0]
    assert len(host.requests) == 1
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
    text, _ = host.of("warn")[0]
    assert text.startswith("no action within command_timeout 0.5 s: robot held")
    assert driver.loop.phase == WAITING
    assert driver.safety.interventions[TIMEOUT] == 1
    state(driver, 0.1, [1.0, -1.0])
    assert host.of("observation")[-1][0] == 1
    # The warning is throttled: a second deadline within 5 s holds again without repeating it.
    clock.now += 0.6
    driver.check_deadline()
    assert driver.safety.interventions[TIMEOUT] == 2 and len(host.of("warn")) == 1


def test_a_lost_joint_state_after_a_command_holds_the_robot() -> None:
    driver, host, clock = started(command_timeout=0.5)
    driver.on_action(np.ones(2))
    clock.now += 0.6
    driver.check_deadline()
    assert host.of("warn")[0][0].startswith("no joint state after the last command")


def test_the_estop_holds_at_once_and_only_a_signed_release_resumes_acting() -> None:
    driver, host, _ = started()
    assert driver.on_estop(True) is False
    np.testing.assert_allclose(host.of("send")[0], [0.0, 0.0])
    assert host.of("warn")[0][0].startswith("e-stop (engaged by an operator): robot held")
    assert driver.warning("/robot_0") == ("e-stop engaged (engaged by an operator): robot held, "
                                          "acting paused")
    assert driver.safety.interventions[ESTOP] == 1
    engaged, challenge, _ = host.of("estop")[-1]
    assert engaged and len(challenge) == 2 * estop.CHALLENGE_BYTES
    assert driver.on_estop(True) is False and len(host.of("send")) == 1
    driver.on_action(np.ones(2))
    state(driver, 0.1, [1.0, -1.0])
    assert len(host.of("send")) == 1 and len(host.of("observation")) == 0
    # Anyone may engage; nobody releases without the run's key.
    assert driver.on_estop(False) is False
    forged = estop.release_text(SigningKey(bytes(32)), "/robot_0", challenge)
    other_robot = estop.release_text(RUN_KEY, "/robot_1", challenge)
    assert not driver.release(forged) and not driver.release(other_robot)
    assert not driver.release("{not json")
    assert len(host.of("reject")) == 4 and driver.loop.estopped
    signed = estop.release_text(RUN_KEY, "/robot_0", challenge)
    assert driver.release(signed) is True
    assert host.of("info") == ["e-stop released: acting resumes"]
    assert host.of("estop")[-1] == (False, "", "")
    driver.resume()
    assert host.of("observation")[-1][0] == 1 and driver.loop.phase == ACTING
    # A recorded release answers its own engagement only.
    driver.on_estop(True)
    assert driver.release(signed) is False and driver.loop.estopped
    assert "stale or replayed" in host.of("reject")[-1]


def test_an_engaged_estop_latches_across_a_kill_and_a_fault_restart_waits_for_release(
        tmp_path: Path) -> None:
    latch = estop.EStopLatch.for_robot(str(tmp_path), "/robot_0")
    driver, host, _ = make(latch=latch)
    driver.start()
    assert not driver.loop.estopped  # a first start: nothing latched
    driver.on_estop(True)
    # SIGKILL: close() never runs. The respawn starts engaged and holds at its first state.
    respawn, host, _ = make(latch=estop.EStopLatch.for_robot(str(tmp_path), "/robot_0"))
    respawn.start()
    assert respawn.loop.estopped and respawn.estop_reason == estop.BY_OPERATOR
    state(respawn, 0.0, [1.0, -1.0])
    np.testing.assert_allclose(host.of("send")[0], [0.0, 0.0])
    respawn.reset_answered(answer(host))
    assert not host.of("observation")
    _, challenge, _ = host.of("estop")[-1]
    assert respawn.release(estop.release_text(RUN_KEY, "/robot_0", challenge))
    # Released, then killed again while running: the next start is a restart after a fault.
    after_fault, host, _ = make(latch=estop.EStopLatch.for_robot(str(tmp_path), "/robot_0"))
    after_fault.start()
    assert after_fault.loop.estopped and after_fault.estop_reason == estop.AFTER_FAULT
    _, challenge, _ = host.of("estop")[-1]
    assert after_fault.release(estop.release_text(RUN_KEY, "/robot_0", challenge))
    after_fault.close()  # a clean end: the next start acts at once
    clean, _, _ = make(latch=estop.EStopLatch.for_robot(str(tmp_path), "/robot_0"))
    clean.start()
    assert not clean.loop.estopped


def test_every_end_of_acting_holds_the_robot_at_once() -> None:
    driver, host, _ = started()
    driver.on_action(np.ones(2))
    driver.stop_acting()  # the run's end, a lost learner, a deactivation
    driver.stop_acting()
    np.testing.assert_allclose(host.of("send")[-1], [0.0, 0.0])
    assert len(host.of("send")) == 2 and driver.safety.interventions[STOPPED] == 1
    driver.close()  # the process ends
    np.testing.assert_allclose(host.of("send")[-1], [0.0, 0.0])


def test_an_implausible_joint_state_is_refused_and_holds_the_robot() -> None:
    driver, host, clock = started()
    driver.on_action(np.ones(2))
    host.events.clear()
    # Outside the URDF's limits (+-10), a jump faster than 10 m/s, a stamp from the future.
    driver.on_joint_state(0.1, JOINTS, [50.0, 0.0], [0.0, 0.0], [], clock_now=0.1)
    driver.on_joint_state(0.1, JOINTS, [9.0, -1.0], [0.0, 0.0], [], clock_now=0.1)
    driver.on_joint_state(500.0, JOINTS, [1.0, -1.0], [0.0, 0.0], [], clock_now=0.1)
    assert [kind for kind in host.kinds() if kind != "send"] == ["reject"] * 3
    assert "outside the URDF limits" in host.of("reject")[0]
    assert "faster than the velocity limits" in host.of("reject")[1]
    assert "ahead of this clock" in host.of("reject")[2]
    np.testing.assert_allclose(host.of("send")[0], [0.0, 0.0])
    assert driver.safety.interventions[IMPLAUSIBLE] >= 1 and driver.loop.phase == WAITING
    driver.on_joint_state(0.1, JOINTS, [1.01, -1.0], [0.1, 0.0], [], clock_now=0.1)
    assert host.of("observation")  # a plausible state is acted on again


def test_a_joint_beyond_the_velocity_envelope_engages_the_estop() -> None:
    driver, host, _ = started(velocity_envelope=1.5)  # 10 m/s: the envelope is 15 m/s
    driver.on_action(np.ones(2))
    driver.on_joint_state(0.1, JOINTS, [1.1, -1.0], [16.0, 0.0], [])
    assert driver.loop.estopped and driver.estop_reason == estop.BY_ENVELOPE
    assert driver.safety.interventions[ENVELOPE] == 1
    np.testing.assert_allclose(host.of("send")[-1], [0.0, 0.0])


def test_the_change_limit_holds_across_episode_starts() -> None:
    driver, host, _ = started(max_command_change=0.5)
    for step in range(ReachZero.max_episode_steps):
        driver.on_action(np.full(2, 1.0 if step % 2 else -1.0) * min(1.0, 0.5 * (step + 1)))
        state(driver, 0.1 * (step + 1), [1.0, -1.0])
    assert host.of("episode")
    driver.reset_answered(answer(host))
    driver.on_action(-np.ones(2))  # the first command of the next episode
    sent = np.asarray(host.of("send"))
    assert np.max(np.abs(np.diff(sent, axis=0))) <= 0.5 + 1e-9


def test_a_pause_withholds_observations_and_holds_the_robot_at_once() -> None:
    driver, host, clock = started(command_timeout=0.5)
    host.paused = True
    driver.on_action(np.ones(2))
    state(driver, 0.1, [1.0, -1.0])
    assert host.kinds() == ["send", "transition", "send"]  # withheld, and held
    np.testing.assert_allclose(host.of("send")[-1], [0.0, 0.0])
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


def test_homing_starts_from_the_state_that_ends_an_episode() -> None:
    """The episode's last (moving) command does not stand until another state comes: a
    lockstep robot answers only commands (issue 41: a user's robot stood 0.14-0.63 s)."""
    driver, host, _ = make(reset="homing", operator_success=True)
    driver.start()
    state(driver, 0.0, [1.0, -1.0])  # at the start state: observed at once
    assert host.of("observation")[0][0] == 0
    driver.on_operator_success(True)
    driver.on_action(np.ones(2))
    moving = host.of("send")[-1]
    host.events.clear()
    state(driver, 0.1, [1.2, -0.8])  # the state that ends the episode
    assert host.kinds() == ["transition", "episode", "send"], host.kinds()
    homing = host.of("send")[-1]
    assert np.all(np.abs(homing) < np.abs(moving)), (moving, homing)  # change-limited


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


def test_homing_stops_while_acting_is_paused_and_goes_on_after() -> None:
    driver, host, _ = make(reset="homing")
    driver.start()
    state(driver, 0.0, [0.0, 0.0])  # homing towards (1, -1) begins
    assert host.of("send") and np.any(host.of("send")[-1] != 0.0)
    host.paused = True  # e.g. the run's end
    state(driver, 0.1, [0.1, -0.1])
    np.testing.assert_allclose(host.of("send")[-1], [0.0, 0.0])
    count = len(host.of("send"))
    state(driver, 0.2, [0.1, -0.1])  # a lockstep robot answers the hold: no homing command
    assert len(host.of("send")) == count
    host.paused = False
    driver.resume()
    assert len(host.of("send")) == count + 1 and np.any(host.of("send")[-1] != 0.0)


def test_a_control_rate_off_the_tasks_is_warned_about_once() -> None:
    driver, host, clock = started()  # ReachZero: 0.1 s, 10 Hz
    for step in range(2 * RATE_CHECK_TRANSITIONS):
        driver.on_action(np.zeros(2))
        state(driver, 0.05 * (step + 1), [1.0, -1.0])  # states every 0.05 s of the robot's clock
        if driver.loop.phase == RESETTING:  # an episode ended: its reset is answered at once
            driver.reset_answered(answer(host))
    warnings = [text for text, _ in host.of("warn") if "the task's control period" in text]
    assert len(warnings) == 1 and warnings[0].startswith("the robot's joint states come every 50 ms")
    # A lockstep robot (one period of its clock per command) runs as fast as it is driven: no
    # warning, however many commands a second.
    driver, host, clock = started()
    for step in range(2 * RATE_CHECK_TRANSITIONS):
        driver.on_action(np.zeros(2))
        state(driver, 0.1 * (step + 1), [1.0, -1.0])
        if driver.loop.phase == RESETTING:
            driver.reset_answered(answer(host))
    assert not [text for text, _ in host.of("warn") if "the task's control period" in text]


def test_a_joint_state_the_loop_does_not_take_holds_the_robot_within_a_period() -> None:
    """The deadline's thread sees each state before the loop does: a stalled loop (a learner's
    work on its thread, a blocked publish) must not leave the last command standing for longer
    than a control period (ReachZero: 0.1 s; held after STALL_PERIODS of it)."""
    driver, host, clock = started()
    driver.on_action(np.ones(2))  # a moving command
    driver.state_seen(0.1)  # the robot's answer, not yet taken by the stalled loop
    clock.now += 0.07
    driver.check_deadline()
    assert len(host.of("send")) == 1
    clock.now += 0.01
    driver.check_deadline()
    np.testing.assert_allclose(host.of("send")[-1], [0.0, 0.0])
    assert driver.safety.interventions[TIMEOUT] == 1 and driver.loop.phase == WAITING
    # Taken in time, nothing happens, however slow the policy (command_timeout covers it).
    state(driver, 0.1, [1.0, -1.0])
    driver.state_seen(0.2)
    state(driver, 0.2, [1.0, -1.0])
    clock.now += 0.3
    driver.check_deadline()
    assert driver.safety.interventions[TIMEOUT] == 1


def test_a_reset_service_may_move_the_joints_at_once() -> None:
    """sim_robot's reset places the joints without stepping: the same stamp, other positions.
    That is no implausible state; after the reset, the motion check applies again."""
    driver, host, _ = started()
    driver.on_action(np.ones(2))
    state(driver, 0.1, [0.0, 0.0])
    for step in range(2, 5):  # to the end of the episode (three steps)
        driver.on_action(np.ones(2))
        state(driver, 0.1 * step, [0.0, 0.0])
    assert driver.loop.phase == RESETTING
    state(driver, 0.4, [9.0, -9.0])  # the reset's state: joints moved at once
    driver.reset_answered(answer(host))
    assert not [r for r in host.of("reject") if "implausible" in r]
    driver.on_action(np.ones(2))
    state(driver, 0.5, [-9.0, 9.0])  # 18 m in 0.1 s while acting: refused
    assert "faster than the velocity limits" in host.of("reject")[-1]
