"""Driving one robot across the ros2_control boundary: when to observe, command, hold and reset.

:class:`rl_core.robot.boundary.RobotLoop` says what a joint state or an action means;
:class:`RobotDriver` adds what depends on time and on the node around it, in plain Python: the
command deadlines (a stalled loop thread, :data:`STALL_PERIODS`, or a missing action or joint
state within ``command_timeout`` holds the robot); resets through the robot's reset service,
asked again until it answers (:data:`RESET_TIMEOUT_S`); the e-stop (rl_core.robot.estop), the
learner's pause and every other end of acting, which hold the robot at once; the velocity
envelope; the robot's state from one plausible publisher (rl_core.robot.joint_io); a robot whose
clock goes back ends its episode; and the figures and warnings on ``/diagnostics``. A transition
is published only once the next command is out, so the learner's work cannot delay a command.

The driver acts through its host (:class:`DriverHost`, rl_nodes.robot_boundary). Times are seconds
of ``clock``, a steady clock, so that the deadline holds when simulated time stops. The rules in
full: docs/robots.md, "Safety at the boundary".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from rl_core.config import BoundaryConfig, ConfigError
from rl_core.robot import JointSample, JointTarget, estop
from rl_core.robot.boundary import ACTING, RESETTING, STEPPING, WAITING, EpisodeEnd, RobotLoop, Transition
from rl_core.robot.gripper import Gripper
from rl_core.robot.joint_io import (
    ControlStats,
    JointStateError,
    JointStateReader,
    StateCheck,
    command_limits,
    joint_limits,
    task_limits,
)
from rl_core.robot.safety import ENVELOPE, IMPLAUSIBLE, STOPPED, SafetyLayer
from rl_core.robot.task import Task

#: A reset service call unanswered this long is made again (the robot may have restarted).
RESET_TIMEOUT_S = 5.0
#: A robot whose clock (joint state stamps) has not moved for this long while the boundary
#: waits for it is reported on /diagnostics.
FROZEN_CLOCK_S = 2.0
#: The reset asked for while the reset service is not there: the deadline check asks again.
WAITING_FOR_SERVICE = "waiting"
#: A joint state the loop has not taken this many control periods after it came holds the
#: robot: with the hold's delivery, within one period of the last command (a stalled loop).
STALL_PERIODS = 0.75
#: Bounds of the deadline checks' period (seconds).
DEADLINE_TICK_S = (0.005, 0.05)
#: Transitions after which the robot time they span is compared with the control period.
RATE_CHECK_TRANSITIONS = 100
#: The achieved control rate may differ from the task's by this fraction without a warning.
RATE_TOLERANCE = 0.2


class ResetRequest(Protocol):
    """A reset service call in flight (an rclpy or concurrent.futures future)."""

    def result(self) -> Any:
        """The service's response (``success``, ``message``), or None when it gave none."""


class DriverHost(Protocol):
    """What the driver asks of the node it runs in."""

    def send(self, command: np.ndarray) -> None:
        """Send a command (physical units, command joint order) to the robot's controller."""

    def send_gripper(self, command: np.ndarray) -> None:
        """Send the fingers' position targets (the task's gripper joints' order) to the
        gripper's controller."""

    def request_reset(self, target: JointTarget) -> ResetRequest | None:
        """Ask the robot's reset service for ``target``; None when the service is not there.
        The host hands the answered request to :meth:`RobotDriver.reset_answered`."""

    def publish_observation(self, obs: np.ndarray, step: int) -> None: ...

    def publish_transition(self, transition: Transition) -> None: ...

    def publish_episode(self, episode: EpisodeEnd) -> None: ...

    def acting_paused(self) -> bool:
        """Whether the learner pauses acting (its rate limiter)."""

    def reject(self, what: str, reason: str) -> None:
        """Count and log a rejected input."""

    def warn(self, text: str) -> None:
        """Log a warning (the driver throttles repeated ones itself)."""

    def info(self, text: str) -> None: ...

    def publish_estop(self, engaged: bool, challenge: str, reason: str) -> None:
        """Publish the e-stop's state (latched): what a release must answer."""


class RobotDriver:
    """One robot driven for one task (see the module docstring).

    :param task: the task (rl_core.robot.tasks.load_task of the simulator's env_id).
    :param config: the boundary parameters; the host replaces it when a parameter changes
        (``command_timeout`` is read at every check).
    :param seed: the robot's seed (start states and goals).
    :param host: the node the driver acts through.
    :param clock: a steady clock, seconds.
    :param release: checks e-stop releases (the robot's namespace and the run's public key).
    :param latch: the e-stop's state on disk (default: none).
    :raises ConfigError: when ``command_interface`` is not the task's, or the task has no URDF.
    """

    def __init__(self, task: Task, config: BoundaryConfig, seed: int, host: DriverHost,
                 clock: Callable[[], float] = time.monotonic,
                 release: estop.ReleaseCheck | None = None,
                 latch: estop.EStopLatch | None = None) -> None:
        self.task, self.config, self.host, self.clock = task, config, host, clock
        self.interface = config.command_interface or task.command_interface
        if self.interface != task.command_interface:
            raise ConfigError(f"task {type(task).__name__} acts through the "
                              f"{task.command_interface} interface, command_interface is "
                              f"{self.interface!r}; a task's actions mean one interface")
        #: The robot's names of the task's joints, and of the commanded ones in command order.
        self.robot_joints = config.joint_names(task.joint_names)
        to_robot = dict(zip(task.joint_names, self.robot_joints))
        self.command_joints = [to_robot[name] for name in task.commanded]
        self.period = 1.0 / config.control_rate_hz if config.control_rate_hz else task.control_period
        scale = (np.full(len(task.commanded), config.action_scale) if config.action_scale
                 else np.asarray(task.action_scale, dtype=np.float64))
        indices = np.asarray([task.joint_names.index(name) for name in task.commanded])
        limits = command_limits(task, config.limits_urdf)
        self.safety = SafetyLayer(self.interface, limits, indices, self.period,
                                  config.max_command_change * scale,
                                  task.end_effector if task.workspace else None, task.workspace,
                                  standing_time=config.command_timeout,
                                  ramp_periods=round(config.ramp_in_time / self.period),
                                  velocity_envelope=config.velocity_envelope)
        self.state_check = StateCheck(task_limits(task, config.limits_urdf))
        self.release_check = release or estop.ReleaseCheck("/", None)
        self.latch = latch or estop.EStopLatch(None)
        self.estop_reason = ""
        self._hold_due = False  # an e-stop engaged before any joint state: hold at the first
        self.gripper = None if task.gripper is None else Gripper(
            task.gripper, joint_limits(task_limits(task, config.limits_urdf), task.gripper.joints),
            np.asarray([task.joint_names.index(name) for name in task.gripper.joints]),
            self.period, round(config.ramp_in_time / self.period))
        self.loop = RobotLoop(task, self.safety, np.random.default_rng(seed), config.reset,
                              action_scale=scale, gripper=self.gripper)
        self.resets_by_service = config.reset == "service"
        self.stats = ControlStats(self.period)
        self.reader = JointStateReader(self.robot_joints)
        self.observation_step = 0  # the step number of the next observation
        now = clock()
        self._reset_pending: ResetRequest | str | None = None
        self._reset_asked_at = 0.0
        self._reset_answered_at = 0.0
        self._last_command_at = now
        self._observed_at = 0.0  # when the state of the observation in flight was received
        self._last_state_at: float | None = None
        self._last_stamp_change_at = now
        self._last_stamp = -1.0
        self._started = False
        self._pending_transition: Transition | None = None  # published once the command is out
        #: When a joint state newer than the loop's newest was first seen on the deadline's
        #: thread (None: the loop took every state seen), and the loop's newest stamp.
        self._untaken_since: float | None = None
        self._taken_stamp = -float("inf")
        self._answered_stamp = -float("inf")  # the state the last command answered
        self._withheld = False  # an observation held back while acting is paused
        self._held_for_pause = False
        self._rate_checked = False
        self._warned_at: dict[str, float] = {}  # when each throttled warning was last given
        self._spans: list[float] = []  # robot time each transition spans, until checked

    # --- episodes -----------------------------------------------------------------------------

    def start(self) -> None:
        """Begin the first episode; joint states before this are read, not acted on. An e-stop
        the latch kept (or a restart after a fault) is engaged before anything is sent."""
        latched = self.latch.start()
        if latched.engaged:
            self.engage(latched.reason)
        self._started = True
        self._begin_episode()

    def _begin_episode(self) -> None:
        target = self.loop.begin_episode()
        if not self.resets_by_service:
            return  # homing: driven by the joint states that come
        request = self.host.request_reset(target)
        if request is None:
            self._reset_pending = WAITING_FOR_SERVICE
            return
        self._reset_asked_at = self.clock()
        self._reset_pending = request

    def reset_answered(self, request: ResetRequest) -> None:
        """The reset service answered ``request`` (one of the host's :meth:`DriverHost.
        request_reset`); an answer to a request given up on is ignored."""
        if request is not self._reset_pending:
            return
        self._reset_pending = None
        self._reset_answered_at = self.clock()
        response = request.result()
        if response is None or not response.success:
            reason = getattr(response, "message", "no answer")
            self.host.reject("robot reset", f"{self.config.reset_service} refused: {reason}; "
                             "asking again")
            self._begin_episode()
            return
        self._publish_observation(self.loop.reset_done())

    def _home(self) -> None:
        command = self.loop.homing_command()
        if command is None:
            self._publish_observation(self.loop.reset_done())
        else:
            assert self.loop.latest is not None  # homing starts from a state
            self._send(command, None if self.gripper is None
                       else self.gripper.open(self.loop.latest))

    # --- inputs -------------------------------------------------------------------------------

    def on_joint_state(self, stamp: float, names: Sequence[str], position: Sequence[float],
                       velocity: Sequence[float], effort: Sequence[float],
                       clock_now: float = float("inf")) -> None:
        """A ``sensor_msgs/JointState`` of the robot's arrived (``stamp`` in seconds,
        ``clock_now`` the boundary's clock in the same base); one that cannot be read or is
        implausible is rejected, and an implausible one holds the robot."""
        try:
            sample = self.reader.read(stamp, names, position, velocity, effort)
        except JointStateError as error:
            self.host.reject("joint states", str(error))
            return
        if not self._started:
            return
        self._taken_stamp, self._untaken_since = max(self._taken_stamp, sample.stamp), None
        if not self._plausible(sample, clock_now):
            return
        now = self.clock()
        self._last_state_at = now
        if sample.stamp < self._last_stamp and self.loop.phase != RESETTING:
            self._warn(
                f"the robot's clock went back ({self._last_stamp:.3f} -> {sample.stamp:.3f} s: "
                "restarted?); the episode in progress ends here, a new one begins")
            self.state_check.restart()
            self._flush_transition()
            self._begin_episode()
        if sample.stamp != self._last_stamp:
            self._last_stamp, self._last_stamp_change_at = sample.stamp, now
        answered = self._answered_stamp
        obs, transition, episode = self.loop.on_state(sample)
        if transition is not None:
            self._check_rate(sample.stamp - answered)
        self._flush_transition()
        self._pending_transition = transition
        if episode is not None:
            self._flush_transition()
            self.host.publish_episode(episode)
            self._begin_episode()
        # Homing starts from the state that ended the episode: waiting for the next one left
        # the episode's last (moving) command standing, and a lockstep robot, which answers
        # only commands, stood still until its heartbeat (issue 41: 0.14-0.63 s).
        if (self.loop.phase == RESETTING and not self.resets_by_service
                and not self.loop.estopped):
            if self.host.acting_paused():
                self._withheld = True  # homing moves the robot too: resume() homes on
                self.stop_acting()
            else:
                self._home()
        self._publish_observation(obs, now)
        if self.loop.phase != ACTING:
            self._flush_transition()

    def on_action(self, action: np.ndarray, intervened: bool = False) -> None:
        """The policy's action (normalised) for the observation in flight (an operator's,
        ``intervened``)."""
        command = self.loop.on_action(action, intervened)
        if command is None:
            return
        self.stats.answered(self.clock() - self._observed_at)
        self._send(command, self.loop.gripper_command)
        self._flush_transition()

    def on_operator_success(self, success: bool) -> None:
        """The operator success topic said ``success``: true ends the episode in flight as a
        success (:meth:`RobotLoop.declare_success`); false means nothing."""
        if not success:
            return
        if self.loop.declare_success():
            self.host.info(f"operator: episode {self.loop.episodes + 1} counts as a success")
        else:
            self._warn("operator success between episodes (while resetting): ignored",
                           throttle_s=1.0)

    def on_estop(self, engaged: bool) -> bool:
        """The e-stop topic said ``engaged``: hold at once when it engages; ``false`` is an
        unsigned release (refused unless the run allows unsigned input). True when released:
        the host then calls :meth:`resume` (on the thread that acts)."""
        if engaged:
            self.engage(estop.BY_OPERATOR)
            return False
        return self.release(None)

    def engage(self, reason: str) -> None:
        """Engage the e-stop: hold at once (or at the first joint state), then latch it on
        disk and publish a fresh challenge for its release."""
        was = self.loop.estopped
        hold = self.loop.set_estop(True)
        if hold is not None:
            self._send(hold, self._fingers_held())
            self._flush_transition()
        elif self.loop.latest is None:
            self._hold_due = True
        if was:
            return
        self.estop_reason = reason
        self.latch.engaged(reason)
        self.host.publish_estop(True, self.release_check.new_challenge(), reason)
        self._warn(f"e-stop ({reason}): robot held, acting paused until a release signed "
                       "with the run's key (rl-bringup estop release)")

    def release(self, text: str | None) -> bool:
        """An e-stop release (the ``estop/release`` text; ``None``: a plain ``false``): True
        when it releases; a release that does not prove the operator is refused and counted."""
        if not self.loop.estopped:
            return False
        refusal = self.release_check.refusal(text)
        if refusal is not None:
            self.host.reject("e-stop release", refusal)
            return False
        self.loop.set_estop(False)
        self.estop_reason = ""
        self.latch.released()
        self.host.publish_estop(False, "", "")
        self.host.info("e-stop released: acting resumes")
        return True

    def stop_acting(self) -> None:
        """Acting ends or pauses (run end, budget, shutdown, a lost peer, a deactivation, the
        rate limiter): hold the robot now, unless it is held already."""
        if self._held_for_pause or self.loop.latest is None or self.loop.estopped:
            return
        self._held_for_pause = True
        self.safety.count(STOPPED)
        self._hold(self.loop.latest)
        self._flush_transition()

    def close(self) -> None:
        """The boundary closes (the process ends): hold the robot, keep the e-stop's state."""
        self._held_for_pause = False
        if self.loop.latest is not None:
            self.safety.count(STOPPED)
            self._hold(self.loop.latest)
        self.latch.close(self.loop.estopped, self.estop_reason)

    def _plausible(self, sample: JointSample, clock_now: float) -> bool:
        """Refuse (and hold for) an implausible state; engage the e-stop beyond the envelope."""
        if self.loop.phase == RESETTING and self.resets_by_service:
            self.state_check.restart()  # a reset service puts the joints anywhere, at once
        problem = self.state_check.problem(sample, clock_now)
        if problem is not None:
            self.host.reject("joint states", f"implausible: {problem}; robot held")
            if self.loop.latest is not None and not self.loop.estopped:
                self.safety.count(IMPLAUSIBLE)
                if self.loop.phase in (ACTING, STEPPING):
                    self.loop.phase = WAITING  # the step in flight is dropped
                self._hold(self.loop.latest)
                self._flush_transition()
            return False
        if self._hold_due:
            self._hold_due = False
            self._hold(sample)
        if self.safety.beyond_envelope(sample) and not self.loop.estopped:
            self.loop.latest = sample
            self.safety.count(ENVELOPE)
            self.engage(estop.BY_ENVELOPE)
        return True

    def resume(self) -> None:
        """Acting may go on (pause over, e-stop released): observe the newest state."""
        if self.loop.estopped:
            return
        if self.loop.phase == ACTING or (self._withheld and self.loop.phase != RESETTING):
            self.loop.phase = WAITING
        self._withheld = self._held_for_pause = False
        if self.loop.phase == RESETTING and not self.resets_by_service and self.loop.latest:
            self._home()  # homing stopped by the e-stop goes on
            return
        self._publish_observation(self.loop.resume_observation())

    # --- outputs ------------------------------------------------------------------------------

    def _flush_transition(self) -> None:
        """Publish the transition held back until the command for the next state went out: in
        one process the learner's work on it would otherwise delay that command."""
        if self._pending_transition is not None:
            transition, self._pending_transition = self._pending_transition, None
            self.host.publish_transition(transition)

    def _publish_observation(self, obs: np.ndarray | None, received_at: float | None = None
                             ) -> None:
        if obs is None:
            return
        if self.host.acting_paused():
            self._withheld = True  # resume() observes again when the pause ends
            self._flush_transition()
            self.stop_acting()
            return
        self._observed_at = received_at if received_at is not None else self.clock()
        self.host.publish_observation(obs, self.observation_step)
        self.observation_step += 1
        self._last_command_at = self.clock()  # the deadline runs from the observation

    def _hold(self, state: JointSample) -> None:
        """Hold the robot (and its gripper) where ``state`` has it."""
        self._send(self.safety.hold(state), self._fingers_held(state))

    def _fingers_held(self, state: JointSample | None = None) -> np.ndarray | None:
        """The gripper's hold beside an arm's (None without a gripper or a state)."""
        state = state or self.loop.latest
        return None if self.gripper is None or state is None else self.gripper.hold(state)

    def _send(self, command: np.ndarray, fingers: np.ndarray | None = None) -> None:
        """Send the arm's command, after the fingers' (a lockstep robot steps on the arm's)."""
        if fingers is not None:
            self.host.send_gripper(fingers)
        self.host.send(command)
        now = self.clock()
        if self.loop.latest is not None:
            self._answered_stamp = self.loop.latest.stamp
        self.stats.command_sent(now)
        self._last_command_at = now

    def _check_rate(self, span: float) -> None:
        """Warn once when transitions span another time of the robot's clock than the task's
        control period: the boundary acts on every new joint state, so a robot that publishes
        them faster (or slower) makes the task run at its rate."""
        if self._rate_checked:
            return
        self._spans.append(span)
        if len(self._spans) < RATE_CHECK_TRANSITIONS:
            return
        self._rate_checked = True
        median = float(np.median(self._spans))
        if abs(median / self.period - 1.0) > RATE_TOLERANCE:
            self._warn(f"the robot's joint states come every {1e3 * median:.0f} ms of its "
                           f"clock, the task's control period is {1e3 * self.period:.0f} ms: "
                           "the boundary acts on every new joint state, so set the robot's "
                           "joint_states rate to the task's control rate")

    def _warn(self, text: str, throttle_s: float = 0.0) -> None:
        """Warn through the host, one of the same text at most once per ``throttle_s`` of the
        steady clock (the host's logger keys its own throttle on the call site)."""
        now = self.clock()
        if throttle_s > 0 and now - self._warned_at.get(text, -float("inf")) < throttle_s:
            return
        self._warned_at[text] = now
        self.host.warn(text)

    # --- time ---------------------------------------------------------------------------------

    @property
    def deadline_tick(self) -> float:
        """How often :meth:`check_deadline` must run: four times a control period, within
        :data:`DEADLINE_TICK_S`."""
        return min(max(self.period / 4, DEADLINE_TICK_S[0]), DEADLINE_TICK_S[1])

    def state_seen(self, stamp: float) -> None:
        """The robot published a state stamped ``stamp`` (seen on the deadline's thread, before
        the loop may get to it): a newer one than the loop's newest must be taken soon."""
        if stamp > self._taken_stamp and self._untaken_since is None:
            self._untaken_since = self.clock()

    def check_deadline(self) -> None:
        """Called four times a control period (at most every 50 ms) on a steady clock, on a
        thread of its own: ask for a reset again when due, hold the robot while acting is
        paused, when the loop has not taken a joint state for :data:`STALL_PERIODS` periods, and
        when no action or no joint state came within ``command_timeout``."""
        now = self.clock()
        if self._reset_pending == WAITING_FOR_SERVICE:
            self._warn(f"no reset service {self.config.reset_service} yet: the robot waits "
                           "for it; a robot without one needs reset:=homing", throttle_s=10.0)
            self._begin_episode()
        elif (self._reset_pending is not None
              and now - self._reset_asked_at > RESET_TIMEOUT_S):
            self.host.reject("robot reset", f"{self.config.reset_service} did not answer within "
                             f"{RESET_TIMEOUT_S:.0f} s; asking again")
            self._begin_episode()
        timeout = self.config.command_timeout
        if (self.loop.latest is None and self._reset_pending is None and self._started
                and self.resets_by_service and now - self._reset_answered_at > timeout):
            # A lockstep robot publishes a state when reset or commanded: one lost on its way
            # (its first, before the subscription matched) would leave nothing to act on.
            self._warn("no joint state from the robot since its reset; asking for the "
                           "reset again (is joint_states published?)", throttle_s=5.0)
            self._begin_episode()
            return
        if self._withheld:
            return  # acting paused: the robot was held when it paused (stop_acting)
        if self.loop.estopped or self.loop.latest is None or self._held_for_pause:
            return  # held already
        if (self._untaken_since is not None
                and not (self.loop.phase == RESETTING and self.resets_by_service)
                and now - self._untaken_since > STALL_PERIODS * self.period):
            hold = self.loop.timed_out()  # None while homing: hold all the same
            self._send(self.safety.hold(self.loop.latest) if hold is None else hold,
                       self._fingers_held())
            self._flush_transition()
            self._warn("the loop has not taken the robot's newest joint state within "
                           f"{STALL_PERIODS:g} control periods: robot held (its thread is "
                           "stalled: a learner's work beside it, a blocked publish?)",
                           throttle_s=5.0)
            return
        if self.loop.phase == ACTING:
            late, what = now - self._last_command_at, "no action"
        elif self.loop.phase in (STEPPING, WAITING):
            # No joint state answered the last command (lost, or the robot restarted): the
            # hold makes a lockstep robot answer with a state, which is observed afresh.
            late = now - max(self._last_command_at, self._last_state_at or 0.0)
            what = "no joint state after the last command"
        else:
            return
        if late > timeout:
            hold = self.loop.timed_out()
            if hold is not None:
                self._send(hold, self._fingers_held())
                self._flush_transition()
                self._warn(f"{what} within command_timeout {timeout} s: robot held (are "
                               "the policy and the robot running?)", throttle_s=5.0)

    # --- reporting ----------------------------------------------------------------------------

    @property
    def interventions(self) -> dict[str, int]:
        """The safety layers' interventions by kind, the gripper's as ``gripper <kind>``."""
        counts = dict(self.safety.interventions)
        if self.gripper is not None:
            counts.update({f"gripper {kind}": count
                           for kind, count in self.gripper.safety.interventions.items()})
        return counts

    def warning(self, namespace: str) -> str | None:
        """What ``/diagnostics`` warns about (most urgent first), or None."""
        now = self.clock()
        if self.loop.estopped:
            return f"e-stop engaged ({self.estop_reason}): robot held, acting paused"
        if self._last_state_at is None:
            return f"no joint_states from the robot yet (is it running in {namespace}?)"
        if self._reset_pending == WAITING_FOR_SERVICE:
            return f"waiting for the robot's reset service {self.config.reset_service}"
        if (self.loop.phase in (STEPPING, WAITING)
                and now - self._last_stamp_change_at > FROZEN_CLOCK_S):
            return (f"the robot's clock is frozen: joint_states stamps have not moved for "
                    f"{now - self._last_stamp_change_at:.0f} s")
        return None


__all__ = ["FROZEN_CLOCK_S", "RESET_TIMEOUT_S", "DriverHost", "ResetRequest", "RobotDriver"]
