"""One robot's control loop across the ros2_control boundary, as a plain state machine.

The simulator node (``robot_interface: ros2_control``) feeds :class:`RobotLoop` what arrives
(joint states, actions, reset answers, e-stop, the clock) and does what it returns (publish an
observation, send a command, publish a transition, reset the robot). The loop never waits:
a robot runs at its own rate, and a policy that is late only makes the loop skip joint states.

One control period::

    joint state s ──observe──▶ observation ──policy──▶ action a ──safety──▶ command ──▶ robot
                                                                                           │
    transition (s, a, reward, s') ◀──outcome── next joint state s' (newer than s) ◀────────┘

Episodes end by the task or after its ``max_episode_steps``; a new one starts from the task's
reset target, reached through the robot's reset service or homing commands (docs/robots.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_core.robot import JointSample, JointTarget
from rl_core.robot.gripper import Gripper, check_choice
from rl_core.robot.safety import ESTOP, TIMEOUT, SafetyLayer
from rl_core.robot.task import Outcome, Task

#: How a new episode's start state is put in place.
RESET_MODES = ("service", "homing")

#: Phases of the loop.
RESETTING = "resetting"  # waiting for the robot's reset (service answer or homing)
WAITING = "waiting"  # waiting for a fresh joint state to observe
ACTING = "acting"  # an observation is out, waiting for the policy's action
STEPPING = "stepping"  # a command is out, waiting for the joint state it led to


@dataclass(frozen=True)
class Transition:
    """One control period, as the learner stores it (actions normalised to [-1, 1])."""

    obs: np.ndarray
    action: np.ndarray
    reward: float
    next_obs: np.ndarray
    terminated: bool
    truncated: bool
    success: bool | None
    #: An operator's command drove this period instead of the policy's.
    intervened: bool = False


@dataclass(frozen=True)
class EpisodeEnd:
    """A finished episode's statistics."""

    episode_return: float
    length: int
    success: bool | None


class RobotLoop:
    """The control loop of one robot for one task.

    :param task: what is learned (observation, reward, start state).
    :param safety: the safety layer every command passes.
    :param rng: the task's random stream (start states, goals).
    :param reset_mode: one of :data:`RESET_MODES`.
    :param homing_tolerance: homing ends when every joint is this close to the target (rad, m).
    :param homing_gain: proportional gain (1/s) of velocity homing.
    :param max_homing_periods: homing gives up (and starts anyway) after this many periods.
    :param action_scale: command for an action of 1, per commanded joint (default: the task's).
    :param gripper: the task's gripper (rl_core.robot.gripper), None for none: an action row
        then ends with its choice, and :attr:`gripper_command` holds the fingers' targets.
    """

    def __init__(self, task: Task, safety: SafetyLayer, rng: np.random.Generator,
                 reset_mode: str = "service", homing_tolerance: float = 0.02,
                 homing_gain: float = 2.0, max_homing_periods: int = 200,
                 action_scale: np.ndarray | None = None, gripper: Gripper | None = None) -> None:
        if reset_mode not in RESET_MODES:
            raise ValueError(f"reset must be one of {', '.join(RESET_MODES)}, got {reset_mode!r}")
        if reset_mode == "homing" and task.command_interface == "effort":
            raise ValueError(f"task {type(task).__name__} commands efforts, which cannot home a "
                             "robot: use reset: service (a robot or simulator that can be put "
                             "back) or a position/velocity interface")
        self.task = task
        self.safety = safety
        self.rng = rng
        self.reset_mode = reset_mode
        self.homing_tolerance = float(homing_tolerance)
        self.homing_gain = float(homing_gain)
        self.max_homing_periods = int(max_homing_periods)
        self.scale = np.asarray(task.action_scale if action_scale is None else action_scale,
                                dtype=np.float64)
        self.commanded = np.asarray([task.joint_names.index(name) for name in task.commanded])
        self.gripper = gripper
        #: The fingers' targets for the last action taken (None without a gripper).
        self.gripper_command: np.ndarray | None = None
        self.phase = RESETTING
        self.estopped = False
        self.latest: JointSample | None = None  # the newest joint state
        self.target: JointTarget | None = None
        self.homing_periods = 0
        self._observed: JointSample | None = None  # the state of the observation in flight
        self._obs: np.ndarray | None = None
        self._action: np.ndarray | None = None
        self._intervened = False  # an operator's command drives the period in flight
        self._fresh_after_reset = False  # a joint state came after the reset was asked for
        self._operator_success = False  # an operator declared the episode in flight solved
        self.episode_steps = 0
        self.episode_return = 0.0
        self.steps = 0
        self.episodes = 0

    # --- episodes ---------------------------------------------------------------------------

    def begin_episode(self) -> JointTarget:
        """Start a new episode: the target the robot must be put in (by service or homing)."""
        self.target = self.task.reset(self.rng)
        self.phase = RESETTING
        self.homing_periods = 0
        self._fresh_after_reset = False
        self._operator_success = False
        self.episode_steps, self.episode_return = 0, 0.0
        if self.gripper is not None:
            self.gripper.begin_episode()
        # The safety layer keeps its last command: the change limit holds across episode
        # starts, whatever puts the robot at its start state.
        return self.target

    def declare_success(self) -> bool:
        """An operator says the task is solved: the control period in flight (or the next one)
        ends the episode as a success, with the task's ``success_reward`` (or its own reward
        of that period). False, and nothing changes, between episodes (while resetting)."""
        if self.phase == RESETTING:
            return False
        self._operator_success = True
        return True

    def reset_done(self) -> np.ndarray | None:
        """The robot's reset service answered: the episode's first observation, when a joint
        state came since the reset was asked for (else the next one gives it)."""
        self.phase = WAITING
        if self._fresh_after_reset and self.latest is not None and not self.estopped:
            return self._observe(self.latest)
        return None

    def homing_command(self) -> np.ndarray | None:
        """The next homing command (physical units) towards the target, or ``None`` when the
        robot is there (or homing gave up): then the episode's observation follows."""
        assert self.target is not None and self.latest is not None
        position = np.asarray(self.latest.position, dtype=np.float64)
        error = (np.asarray(self.target.position, dtype=np.float64) - position)[self.commanded]
        if (np.all(np.abs(error) <= self.homing_tolerance)
                or self.homing_periods >= self.max_homing_periods):
            return None
        self.homing_periods += 1
        if self.task.command_interface == "position":
            command = np.asarray(self.target.position, dtype=np.float64)[self.commanded]
        else:
            command = self.homing_gain * error
        return self.safety.filter(command, self.latest)

    # --- inputs -----------------------------------------------------------------------------

    def on_state(self, state: JointSample) -> tuple[np.ndarray | None, Transition | None,
                                                    EpisodeEnd | None]:
        """A joint state arrived: ``(observation to publish, transition, finished episode)``,
        each ``None`` when there is none."""
        self.latest = state
        if self.phase == RESETTING:
            self._fresh_after_reset = True
            return None, None, None
        if self.phase == WAITING and not self.estopped:
            return self._observe(state), None, None
        if self.phase != STEPPING or self._observed is None or state.stamp < self._observed.stamp:
            return None, None, None
        if state.stamp == self._observed.stamp and state is not self._observed:
            # The same instant again (a robot that republishes); the command has not acted yet.
            return None, None, None
        assert self._obs is not None and self._action is not None
        outcome = self.task.outcome(self._action, state)
        if self._operator_success:
            self._operator_success = False
            reward = self.task.success_reward
            outcome = Outcome(outcome.reward if reward is None else reward, True, True)
        next_obs = self.task.observe(state)
        self.episode_steps += 1
        self.steps += 1
        self.episode_return += outcome.reward
        truncated = not outcome.terminated and self.episode_steps >= self.task.max_episode_steps
        transition = Transition(self._obs, self._action, float(outcome.reward), next_obs,
                                bool(outcome.terminated), truncated, outcome.success,
                                self._intervened)
        if outcome.terminated or truncated:
            self.episodes += 1
            end = EpisodeEnd(self.episode_return, self.episode_steps, outcome.success)
            self.phase = RESETTING
            self._observed = None
            return None, transition, end
        if self.estopped:
            self.phase = WAITING
            return None, transition, None
        self._observed, self._obs, self.phase = state, next_obs, ACTING
        return next_obs, transition, None

    def on_action(self, action: np.ndarray, intervened: bool = False) -> np.ndarray | None:
        """The policy's action for the observation in flight (an operator's, ``intervened``):
        the command to send (physical units, command order), or ``None`` when no observation is
        waiting for it. The safety layer filters an operator's command like any other."""
        if self.phase != ACTING or self.estopped or self._observed is None:
            return None
        self._intervened = intervened
        row = np.asarray(action, dtype=np.float64).reshape(-1)
        state = self.latest or self._observed
        choice = int(round(float(row[-1]))) if self.gripper is not None else None
        if choice is not None:
            check_choice(choice)  # before anything moves
        arm = np.clip(row[:-1] if self.gripper is not None else row, -1.0, 1.0)
        command = self.safety.filter(arm * self.scale, state)
        # Learn from what the robot executed, after the safety layer.
        executed = np.clip(command / self.scale, -1.0, 1.0)
        if self.gripper is not None and choice is not None:  # the fingers head for the choice
            self.gripper_command = self.gripper.command(choice, state)
            executed = np.append(executed, choice)
        self._action = executed.astype(np.float32)
        self.phase = STEPPING
        return command

    def timed_out(self) -> np.ndarray | None:
        """No action came within the command deadline, or no joint state answered a command:
        the hold command to send; the step in flight is dropped (the next fresh joint state is
        observed again)."""
        if self.latest is None or self.phase not in (ACTING, STEPPING, WAITING):
            return None
        self.safety.count(TIMEOUT)
        self.phase = WAITING
        return self.safety.hold(self.latest)

    def set_estop(self, engaged: bool) -> np.ndarray | None:
        """E-stop engaged: the hold command to send now (acting pauses); released: ``None``,
        and the next fresh joint state is observed again."""
        if engaged == self.estopped:
            return None
        self.estopped = engaged
        if not engaged:
            return None
        self.safety.count(ESTOP)
        if self.phase in (ACTING, STEPPING):
            self.phase = WAITING
        return self.safety.hold(self.latest) if self.latest is not None else None

    def resume_observation(self) -> np.ndarray | None:
        """After an e-stop release or a pause: the observation of the newest state, when the
        loop waits for one."""
        if self.phase == WAITING and not self.estopped and self.latest is not None:
            return self._observe(self.latest)
        return None

    def _observe(self, state: JointSample) -> np.ndarray:
        self._observed, self._obs = state, self.task.observe(state)
        self.phase = ACTING
        return self._obs
