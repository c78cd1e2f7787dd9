"""A simulator's stepping in plain Python: lanes of vectorised environments, which action batch
answers which lane, random actions for the first steps, the counts of what was published, and
what the simulator's diagnostics say about acting.

The simulator node (``rl_nodes.simulator``) publishes what :class:`Stepper` returns and feeds
it the action batches it hears. With ``pipeline`` the environments form two *lanes* (halves)
with observation batches of their own (Sample Factory's double-buffered sampling): while one
lane waits for its actions the other steps. A lane's batches carry step numbers
``count * lanes + lane``, so an answer tells which lane it is for. A robot driven through
ros2_control (``rl_nodes.robot_boundary``) has no lanes; its transitions and episodes are
counted here all the same.

With an :class:`~rl_core.acting.teleop.Intervention` the operator's command replaces the policy's (and
the random) actions while one drives; those rows are flagged ``intervened`` in the experience.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from rl_core.acting.gate import ActingGate
from rl_core.acting.teleop import Intervention
from rl_core.envs import VectorEnv
from rl_core.envs.spaces import random_actions
from rl_core.names import variables
from rl_core.replay.n_step import NStepReturns
from rl_core.robot.boundary import EpisodeEnd, Transition
from rl_core.wire.messages import Episodes, Experience, choice_indices

#: Seed offset of each restart of a simulator, so a respawned one draws a fresh seed stream.
RESTART_SEED_STRIDE = 1_000_003
#: The robot-wide index of a robot driven through ros2_control: its only environment.
BOUNDARY_ENV_IDS = np.zeros(1, dtype=np.uint32)


def simulator_seed(seed: int, robot_id: int, restarts: int | None = None) -> int:
    """The seed of robot ``robot_id``'s environments. A respawned simulator (the supervisor
    counts ``restarts``; ``None``: its ``RL_ROS2_RESTART_COUNT`` in this process' environment)
    continues with a fresh seed stream instead of repeating the data of its first run."""
    if restarts is None:
        restarts = int(os.environ.get(variables.RESTART_COUNT, "0") or 0)
    return seed + 1000 * robot_id + RESTART_SEED_STRIDE * restarts


def lane_sizes(num_envs: int, pipeline: bool) -> list[int]:
    """Environments per lane: two halves with ``pipeline`` (given at least two), else one."""
    return [num_envs // 2, num_envs - num_envs // 2] if pipeline and num_envs >= 2 \
        else [num_envs]


@dataclass
class Lane:
    """A group of environments stepped together, with its own observation batch in flight."""

    index: int
    envs: VectorEnv
    env_ids: np.ndarray  # robot-wide index of each environment of the lane
    obs: np.ndarray
    count: int = 0  # steps taken
    sent_at: float = 0.0
    held: bool = False  # next observations withheld while acting is paused


def make_lanes(env_id: str, num_envs: int, pipeline: bool, seed: int) -> list[Lane]:
    """The lanes of ``num_envs`` environments of ``env_id``, reset with seeds from ``seed``."""
    lanes, offset = [], 0
    for index, size in enumerate(lane_sizes(num_envs, pipeline)):
        envs = VectorEnv(env_id, size)
        lanes.append(Lane(index, envs, np.arange(offset, offset + size, dtype=np.uint32),
                          envs.reset(seed=seed + offset)))
        offset += size
    return lanes


def check_actions(actions: np.ndarray, shape: tuple[int, ...], choices: int = 0) -> None:
    """:raises ValueError: when ``actions`` do not have ``shape``, or for a ``Discrete`` action
    of ``choices``, hold a value that is no choice's index."""
    if actions.shape != shape:
        raise ValueError(f"expected actions of shape {shape}, got shape {actions.shape}")
    if choices:
        choice_indices(actions, choices)


class Stepper:
    """A simulator's lanes and the counts of what they produced.

    :param lanes: the environments (none for a robot driven through ros2_control).
    :param random_steps: the first this many environment steps take uniform random actions.
    :param rng: draws the random actions.
    :param robot_id: the robot the experience and episodes are of.
    :param stream: this run of the simulator (a respawn starts a newer one).
    :param intervention: an operator's input, which drives instead of the policy while it
        counts (None: the policy always drives).
    """

    def __init__(self, lanes: list[Lane], random_steps: int, rng: np.random.Generator,
                 robot_id: int = 0, stream: int = 0,
                 intervention: Intervention | None = None, n_step: int = 1,
                 gamma: float = 0.99) -> None:
        self.lanes = lanes
        self.n_step, self.gamma = n_step, gamma
        #: Per lane (-1: a robot through ros2_control), its n-step returns (n_step > 1).
        self._returns: dict[int, NStepReturns] = {}
        self.intervention = intervention
        self.robot_id = robot_id
        self.stream = stream
        self.random_steps = random_steps
        self._rng = rng
        self.sequence = 0  # experience messages produced
        self.step_count = 0  # steps of a lane (or control periods of a robot)
        self.total_env_steps = 0
        self.total_episodes = 0
        self.policy_version = 0  # of the last actions applied

    def batch_step(self, lane: Lane) -> int:
        """The step number of ``lane``'s pending observation batch."""
        return lane.count * len(self.lanes) + lane.index

    def lane_for(self, step: int) -> Lane | None:
        """The lane an action batch for batch ``step`` answers; None for an answer to a batch
        already answered (republished) or to a lane that holds its observations."""
        lane = self.lanes[step % len(self.lanes)]
        if step // len(self.lanes) != lane.count or lane.held:
            return None
        return lane

    @staticmethod
    def actions_shape(lane: Lane) -> tuple[int, ...]:
        """The shape of an action batch for ``lane``."""
        return (len(lane.env_ids), *lane.envs.action_shape)

    def _random(self, shape: tuple[int, ...], choices: int = 0) -> np.ndarray | None:
        if self.total_env_steps < self.random_steps:
            return random_actions(self._rng, shape, choices)
        return None

    def step(self, lane: Lane, actions: np.ndarray, policy_version: int, stamp_ns: int
             ) -> tuple[Experience | None, Episodes | None]:
        """Step ``lane`` with ``actions`` (random ones for the first ``random_steps``): the
        experience to publish (None: with ``n_step``, none completed yet) and the episodes that
        ended (None if none did), stamped ``stamp_ns``."""
        self.policy_version = policy_version
        random = self._random(actions.shape, lane.envs.choices)
        if random is not None:
            actions = random
        actions, intervened = self._intervene(actions, lane.obs, lane.env_ids)
        step = lane.envs.step(actions)
        if self.intervention is not None:
            self.intervention.episodes_ended(lane.env_ids[step.terminated | step.truncated])
        experience = self._experience(lane.index, lane.obs, actions, step.rewards, step.next_obs,
                                      step.terminated, step.truncated, lane.env_ids, stamp_ns,
                                      intervened)
        lane.obs = step.obs
        lane.count += 1
        self.step_count += 1
        self.total_env_steps += len(lane.env_ids)
        if not step.episodes:
            return experience, None
        self.total_episodes += len(step.episodes)
        return experience, Episodes(
            self.robot_id, [int(lane.env_ids[e.env_index]) for e in step.episodes],
            [e.episode_return for e in step.episodes], [e.length for e in step.episodes],
            [bool(e.is_success) for e in step.episodes], self.total_episodes,
            self.total_env_steps, self.policy_version, stamp_ns)

    def _intervene(self, actions: np.ndarray, obs: np.ndarray | None, env_ids: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray | None]:
        """The actions with the operator's in place where one drives, and the flags (None
        when no operator drove any)."""
        if self.intervention is None:
            return actions, None
        actions, intervened = self.intervention.apply(actions, time.monotonic(), obs, env_ids)
        return actions, intervened if intervened.any() else None

    def _experience(self, group: int, obs: np.ndarray, actions: np.ndarray,
                    rewards: np.ndarray, next_obs: np.ndarray, terminated: np.ndarray,
                    truncated: np.ndarray, env_ids: np.ndarray, stamp_ns: int,
                    intervened: np.ndarray | None = None) -> Experience | None:
        """The next experience message of this simulator's stream: the step's transitions of
        environment ``group`` (a lane), or with ``n_step`` the n-step ones it completed."""
        if self.n_step > 1:
            rows = self._returns.setdefault(group, NStepReturns(self.n_step, self.gamma)).add(
                obs, actions, rewards, next_obs, terminated, truncated, intervened)
            if not len(rows.rewards):
                return None
            obs, actions, rewards, next_obs, terminated, truncated, intervened = rows[:7]
            env_ids = env_ids[rows.env_index]
        experience = Experience(self.robot_id, obs, actions, rewards, next_obs, terminated,
                                truncated, self.policy_version, stamp_ns, env_ids, self.stream,
                                self.sequence, intervened)
        self.sequence += 1
        return experience

    def boundary_actions(self, actions: np.ndarray, policy_version: int,
                         obs: np.ndarray | None = None, choices: int = 0
                         ) -> tuple[np.ndarray, bool]:
        """The action a robot driven through ros2_control applies, from a batch of one, and
        whether it is an operator's (one drives); ``obs``: the observation it answers;
        ``choices``: of a gripper, the last value of a row."""
        self.policy_version = policy_version
        random = self._random(actions.shape[1:], choices)
        action = actions[0] if random is None else random
        if self.intervention is None:  # the usual case: no copy on the control path
            return action, False
        driven, intervened = self._intervene(np.asarray(action, dtype=np.float32)[None],
                                             None if obs is None else obs[None],
                                             BOUNDARY_ENV_IDS)
        return driven[0], intervened is not None

    def boundary_transition(self, transition: Transition, stamp_ns: int) -> Experience | None:
        """A control period of a robot driven through ros2_control, as one experience row (with
        ``n_step``, the n-step rows it completed, None for none)."""
        rows = self._experience(
            -1, transition.obs[None].astype(np.float32), transition.action[None],
            np.asarray([transition.reward], dtype=np.float32),
            transition.next_obs[None].astype(np.float32), np.asarray([transition.terminated]),
            np.asarray([transition.truncated]), BOUNDARY_ENV_IDS, stamp_ns,
            np.ones(1, dtype=bool) if transition.intervened else None)
        self.step_count += 1
        self.total_env_steps += 1
        return rows

    def boundary_episode(self, episode: EpisodeEnd, stamp_ns: int) -> Episodes:
        """An episode of a robot driven through ros2_control ended."""
        self.total_episodes += 1
        if self.intervention is not None:
            self.intervention.episodes_ended(BOUNDARY_ENV_IDS)
        return Episodes(self.robot_id, [0], [episode.episode_return], [episode.length],
                        [bool(episode.success)], self.total_episodes, self.total_env_steps,
                        self.policy_version, stamp_ns)

    def unanswered(self, now: float, after_s: float) -> list[Lane]:
        """The lanes whose observations went out more than ``after_s`` ago without an answer
        (and are not held): the watchdog republishes them."""
        return [lane for lane in self.lanes if not lane.held and now - lane.sent_at > after_s]

    def held(self) -> list[Lane]:
        """The lanes that hold their next observations."""
        return [lane for lane in self.lanes if lane.held]

    def waiting(self, now: float, after_s: float) -> bool:
        """Whether a lane has waited more than ``after_s`` for its actions."""
        return any(now - lane.sent_at > after_s for lane in self.lanes)


class RateMeter:
    """A count's rate between successive readings.

    :param now: the time of the first reading (of a count of 0).
    """

    def __init__(self, now: float) -> None:
        self._then, self._count = now, 0
        self.rate = 0.0

    def update(self, now: float, count: int) -> float:
        """The rate since the previous reading, which ``count`` at ``now`` replaces."""
        self.rate = (count - self._count) / max(now - self._then, 1e-9)
        self._then, self._count = now, count
        return self.rate


def acting_diagnosis(gate: ActingGate, waiting: bool, steps_per_second: float, target: float,
                     now: float, warning: str | None = None) -> tuple[bool, str]:
    """What a simulator's diagnostics say about acting: ``(warn, message)``.

    :param waiting: a lane waits for its actions for longer than the watchdog's period.
    :param target: env steps per second the robot should reach (0: no target).
    :param warning: a warning that comes first (the robot's, the latent encoder's), if any.
    """
    if warning is not None:
        return True, warning
    if gate.silent:
        return True, (f"paused: no /replay_status for {gate.silent_for(now):.0f} s "
                      "(is the replay buffer's host reachable?)")
    if gate.awaiting_status:
        return True, ("waiting for the replay buffer's first /replay_status (is the learner "
                      "running? await_replay_status:=false acts without one)")
    if gate.paused:
        return False, "paused by the replay buffer's rate limiter (learner catching up)"
    if waiting:
        return True, "waiting for actions (is the policy running?)"
    if target and steps_per_second < 0.8 * target:
        return True, f"below target rate ({steps_per_second:.0f} < {target:.0f} steps/s)"
    return False, "stepping"


def acting_values(stepper: Stepper, gate: ActingGate, steps_per_second: float,
                  dds_bytes: dict[str, int], now: float) -> dict[str, object]:
    """A simulator's figures for ``/diagnostics``.

    :param dds_bytes: payload bytes sent over DDS: ``acting``, ``experience`` and ``all``.
    """
    env_steps = stepper.total_env_steps
    return {"env steps/s": f"{steps_per_second:.1f}", "env steps": env_steps,
            "dds bytes": dds_bytes["all"], "dds bytes acting": dds_bytes["acting"],
            "dds bytes experience": dds_bytes["experience"],
            "dds bytes per env step": f"{dds_bytes['all'] / max(env_steps, 1):.0f}",
            "episodes": stepper.total_episodes, "policy version": stepper.policy_version,
            "lanes": len(stepper.lanes), "acting paused": gate.paused,
            "paused s": f"{gate.paused_total(now):.1f}"}
