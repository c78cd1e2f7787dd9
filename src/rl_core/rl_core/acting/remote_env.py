"""Gymnasium environments whose ``step`` drives remote simulators, in plain Python.

The step protocol with each simulator, the same-step autoreset bookkeeping, and one environment
out of a vector of one. rl_nodes.gym_bridge supplies the link (a :class:`SimulatorLink`: ROS
topics, waiting with deadlines); everything here runs without ROS and is tested with a fake
link. The environments themselves are gymnasium's classes; no library maps a gym API onto a
remote simulator's messages, hence this module.

``step`` answers each robot's pending observation batch and waits for the next batch and the
experience rows those actions produced; each answer's MAC binds the digest of the batch it
answers (:attr:`RemoteRobot.sent_digest`, rl_core.security.action_auth). Autoreset is
``AutoresetMode.SAME_STEP``; ``reset()`` cannot put a remote robot back, it resynchronises. The
simulator must be non-pipelined with no random first steps, else :class:`SimulatorProtocolError`.
How the protocol maps onto gymnasium: docs/architecture.md, "The stepping loop".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from rl_core.envs.spaces import action_row_shape, with_rl_spaces
from rl_core.security.action_auth import batch_digest

#: A pending batch still unanswered this long after our answer was answered again.
REPUBLISH_AFTER_S = 0.5
#: Experience messages a link keeps while it waits for the answer to its actions.
KEPT_EXPERIENCE = 64


class SimulatorTimeout(TimeoutError):
    """A simulator did not answer within the bridge's timeout (gone, or not reachable)."""


class SimulatorProtocolError(RuntimeError):
    """A simulator's messages do not fit the bridge's protocol (restarted, pipelined, or another
    node acts for the robot); the message says which and what to do."""


class ObservationBatch(Protocol):
    """What the protocol reads of an observation batch (rl_nodes.messages.Observations)."""

    robot_id: int
    step: int
    obs: np.ndarray


class ExperienceRows(Protocol):
    """What the protocol reads of an experience message (rl_nodes.messages.Experience)."""

    robot_id: int
    stream: int
    sequence: int
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


#: Sends an action batch: ``(step, actions, stamp_ns)``; the batch it answers has the digest
#: :attr:`RemoteRobot.sent_digest`.
Publish = Callable[[int, np.ndarray, int], None]


def check_bridge_arguments(namespaces: Sequence[str], robot_ids: Sequence[int],
                           timeout_s: float) -> None:
    """:raises ValueError: for no robot, two namespaces of one robot, or a timeout not positive."""
    if not namespaces:
        raise ValueError("namespaces must name at least one robot, e.g. ['/robot_0']")
    if len(set(robot_ids)) != len(robot_ids):
        raise ValueError(f"namespaces must be distinct robots (/robot_k), got {list(namespaces)}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")


def spaces_of(env_id: str) -> tuple[gymnasium.spaces.Box, gymnasium.Space]:
    """Observation and action space of one environment of ``env_id`` (made once, then closed)."""
    from rl_core.envs import register_envs

    register_envs()
    env = with_rl_spaces(gymnasium.make(env_id, disable_env_checker=True))
    try:
        return env.observation_space, env.action_space  # type: ignore[return-value]
    finally:
        env.close()


class RemoteRobot:
    """One bridged robot's side of the step protocol: what arrived from its simulator and the
    answer in flight.

    :param namespace: the robot's namespace, e.g. ``/robot_0``.
    :param robot_id: ``k`` of ``/robot_k``.
    :param publish: sends an action batch to the robot's simulator.
    """

    def __init__(self, namespace: str, robot_id: int, publish: Publish) -> None:
        self.namespace = namespace
        self.robot_id = robot_id
        self.publish = publish
        self.latest: ObservationBatch | None = None  # last observation batch, in arrival order
        self.step = -1  # step of the batch acted on next (-1: not synchronised)
        self.experience: dict[int, ExperienceRows] = {}  # by sequence
        self.stream = 0
        self.sent: np.ndarray | None = None  # the answer to ``sent_step``, to answer a republish
        self.sent_step = -1
        #: The digest of the batch ``sent`` answers (rl_core.security.action_auth.batch_digest).
        self.sent_digest = b""
        self._answering: ObservationBatch | None = None  # the batch acted on next
        self._sent_at_ns = 0

    @property
    def num_envs(self) -> int:
        assert self.latest is not None
        return int(self.latest.obs.shape[0])

    def on_observations(self, batch: ObservationBatch) -> None:
        if batch.robot_id == self.robot_id:
            self.latest = batch

    def on_experience(self, rows: ExperienceRows) -> None:
        """Keep ``rows`` (this robot's); rows of another simulator run than the last one heard
        from replace what was kept. Whichever run spoke last wins, so no stream number (a
        forged one, or a respawn on a host whose clock is behind) shuts the others out; at most
        :data:`KEPT_EXPERIENCE` messages are kept."""
        if rows.stream != self.stream:
            self.stream, self.experience = rows.stream, {}
        self.experience[rows.sequence] = rows
        while len(self.experience) > KEPT_EXPERIENCE:
            del self.experience[min(self.experience)]

    def synchronise(self) -> None:
        """Act next on the pending observations."""
        assert self.latest is not None
        self.step, self.sent = self.latest.step, None
        self._answering = self.latest

    def send(self, actions: np.ndarray, now_ns: int) -> None:
        """Answer the pending observations with ``actions``."""
        assert self._answering is not None and self._answering.step == self.step
        self.sent = np.ascontiguousarray(actions, np.float32)
        self.sent_step, self._sent_at_ns = self.step, now_ns
        self.sent_digest = batch_digest(self._answering)
        self.publish(self.step, self.sent, now_ns)
        self.step += 1

    def arrived(self, now_ns: int) -> bool:
        """Whether the answer to our last actions arrived (observations and experience);
        answers a republished batch again.

        :raises SimulatorProtocolError: when the simulator restarted or skipped a step.
        """
        latest, answered = self.latest, self.sent_step
        assert latest is not None and self.sent is not None
        if latest.step == answered and now_ns - self._sent_at_ns > REPUBLISH_AFTER_S * 1e9:
            # A watchdog republish: our answer was lost (or the simulator started to hear us
            # late). Answer again.
            self._sent_at_ns = now_ns
            self.publish(answered, self.sent, now_ns)
        elif latest.step < answered:
            raise SimulatorProtocolError(
                f"the simulator of {self.namespace} restarted (its step went back from "
                f"{answered} to {latest.step}); its episodes were cut: call reset()")
        elif latest.step > answered + 1:
            raise SimulatorProtocolError(
                f"{self.namespace} sent step {latest.step} while step {answered + 1} was due: "
                "the bridge needs a simulator with pipeline: false, and no other node "
                "(a policy) answering this robot")
        return latest.step == answered + 1 and answered in self.experience

    def take(self) -> tuple[ObservationBatch, ExperienceRows]:
        """The observation batch and the experience rows that our last actions produced (once
        :meth:`arrived`).

        :raises SimulatorProtocolError: when the simulator applied other actions.
        """
        answered, sent = self.sent_step, self.sent
        assert sent is not None and self.latest is not None
        experience = self.experience.pop(answered)
        for sequence in [s for s in self.experience if s < answered]:
            del self.experience[sequence]
        if experience.actions.shape != sent.shape or \
                not np.allclose(experience.actions, sent, atol=1e-6):
            raise SimulatorProtocolError(
                f"the simulator of {self.namespace} applied other actions than the bridge sent: "
                "start it with random_steps:=0 (it replaces the first random_steps actions with "
                "random ones) and n_step:=1, and run no policy node for this robot")
        self.sent, self._answering = None, self.latest
        return self.latest, experience

    def silence_cause(self, topic: str, publishers: int) -> str:
        """Why the robot's observation ``topic`` (with ``publishers`` publishers) may be silent."""
        if publishers:
            latest = self.latest
            if latest is not None and self.sent is not None and \
                    latest.step == self.sent_step + 1:
                return (f"{topic} answered step {self.sent_step}, but the simulator's "
                        "experience rows of that step did not arrive on /experience (a "
                        "simulator with n_step above 1 sends them steps later: the bridge needs "
                        "n_step 1)")
            return f"{topic} has a publisher, but it sent nothing for this step"
        if self.latest is not None:
            return f"nothing publishes {topic} any more: the simulator is gone"
        return f"nothing publishes {topic}: is a simulator running in namespace {self.namespace}"


class SimulatorLink(Protocol):
    """The transport to the simulators (rl_nodes.gym_bridge): waits with deadlines."""

    robots: list[RemoteRobot]

    def synchronise(self) -> None:
        """Wait for every robot's pending observations, then :meth:`RemoteRobot.synchronise`."""

    def receive(self, robot: RemoteRobot) -> tuple[ObservationBatch, ExperienceRows]:
        """Wait until ``robot`` :meth:`~RemoteRobot.arrived`, then :meth:`~RemoteRobot.take`."""

    def close(self) -> None: ...


class RemoteVectorEnv(gymnasium.vector.VectorEnv):
    """The environments of the robots of ``link`` as one gymnasium vector env, ordered by
    robot, then by the simulator's own environment index. Construction waits for every
    simulator's first observations, which also tell each one's ``num_envs``; it closes
    ``link`` when it fails.

    :param link: the simulators' transport.
    :param env_id: the simulators' task, e.g. ``rl_ros2/CartPoleBalance-v0``.
    :param observation_space: one environment's observation space (:func:`spaces_of`).
    :param action_space: one environment's action space.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, link: SimulatorLink, env_id: str, observation_space: gymnasium.spaces.Box,
                 action_space: gymnasium.Space) -> None:
        self.link = link
        try:
            link.synchronise()
        except BaseException:
            link.close()
            raise
        self.robots = link.robots
        for robot in self.robots:
            assert robot.latest is not None
            if robot.latest.obs.shape[1:] != observation_space.shape:
                shape = robot.latest.obs.shape[1:]
                link.close()
                raise ValueError(f"{robot.namespace} sends observations of shape {shape}, but "
                                 f"{env_id} has {observation_space.shape}: is it running {env_id}?")
        self.num_envs = sum(robot.num_envs for robot in self.robots)
        self._bounds = np.cumsum([0, *(robot.num_envs for robot in self.robots)])
        self.single_observation_space = observation_space
        self.single_action_space = action_space
        self.observation_space = gymnasium.vector.utils.batch_space(observation_space,
                                                                    self.num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(action_space, self.num_envs)
        self._episode_steps = np.zeros(self.num_envs, dtype=np.int64)
        self._warned_mid_episode = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """The simulators' pending observations (see the module docstring: remote robots cannot
        be reset on request; ``seed`` seeds the action spaces only)."""
        super().reset(seed=seed, options=options)
        if seed is not None:
            self.action_space.seed(seed)
            self.single_action_space.seed(seed)
        if self._episode_steps.any() and not self._warned_mid_episode:
            self._warned_mid_episode = True
            gymnasium.logger.warn("reset() in the middle of an episode: a remote simulator cannot "
                                  "be reset on request, its episodes continue")
        self.link.synchronise()
        return self._observations(), {}

    def _observations(self) -> np.ndarray:
        return np.concatenate([robot.latest.obs for robot in self.robots if robot.latest
                               is not None]).astype(self.single_observation_space.dtype)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                 dict[str, Any]]:
        actions = np.asarray(actions, dtype=np.float32)
        if actions.shape != self.action_space.shape:
            raise ValueError(f"actions must have shape {self.action_space.shape} (num_envs, "
                             f"*action_shape), got {actions.shape}")
        if self.robots[0].step < 0:
            raise RuntimeError("call reset() before step()")
        # A Discrete action's batch is (num_envs,): the simulators take rows of one index.
        rows = actions.reshape((self.num_envs, *action_row_shape(self.single_action_space)))
        for robot, start, end in zip(self.robots, self._bounds[:-1], self._bounds[1:]):
            robot.send(rows[start:end], time.time_ns())
        experience = [self.link.receive(robot)[1] for robot in self.robots]
        rewards = np.concatenate([rows.rewards for rows in experience]).astype(np.float64)
        terminated = np.concatenate([rows.terminated for rows in experience])
        truncated = np.concatenate([rows.truncated for rows in experience])
        final_obs = np.concatenate([rows.next_obs for rows in experience])
        infos: dict[str, Any] = {}
        self._episode_steps += 1
        for index in np.flatnonzero(terminated | truncated):
            infos = self._add_info(infos, {"final_obs": final_obs[index], "final_info": {}},
                                   int(index))
            self._episode_steps[index] = 0
        return self._observations(), rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        link = getattr(self, "link", None)  # absent when construction failed early
        if link is not None:
            link.close()


class SingleRemoteEnv(gymnasium.Env):
    """The one environment of a :class:`RemoteVectorEnv` of one robot with ``num_envs: 1`` as a
    gymnasium environment. ``step`` returns the final observation when an episode ends; the next
    ``reset()`` returns the simulator's reset observation (it reset the environment in that same
    step).

    :param envs: the vector env (closed here when it has more than one environment).
    :param namespace: the robot's namespace, for the error message.
    """

    def __init__(self, envs: RemoteVectorEnv, namespace: str) -> None:
        self.envs = envs
        if envs.num_envs != 1:
            envs.close()
            raise ValueError(f"the simulator of {namespace} steps {envs.num_envs} environments; "
                             f"{type(self).__name__} needs num_envs: 1 (use "
                             f"{type(envs).__name__})")
        self.observation_space = envs.single_observation_space
        self.action_space = envs.single_action_space
        self._reset_obs: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        if self._reset_obs is not None:
            obs, self._reset_obs = self._reset_obs, None
            return obs, {}
        obs, info = self.envs.reset(seed=seed, options=options)
        return obs[0], info

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.envs.step(np.asarray(action)[None])
        if terminated[0] or truncated[0]:
            self._reset_obs, obs = obs[0], info["final_obs"][:1]
        return obs[0], float(rewards[0]), bool(terminated[0]), bool(truncated[0]), {}

    def close(self) -> None:
        self.envs.close()
