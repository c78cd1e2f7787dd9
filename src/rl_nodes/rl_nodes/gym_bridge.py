"""Gymnasium environments whose ``step`` drives running simulator nodes through the ROS graph.

Other learners (Stable-Baselines3, CleanRL, RLlib) speak gymnasium; our robots speak
``rl_interfaces``. :class:`BridgeVectorEnv` (one or several robots) and :class:`BridgeEnv` (one
robot with one environment, what Stable-Baselines3 wraps) take the policy node's place for the
bridged robots: ``step`` publishes an ``ActionBatch`` on ``/robot_k/actions`` answering the
simulator's pending ``ObservationBatch``, then returns the next batch from
``/robot_k/observations`` with the rewards and episode ends of the ``/experience`` rows that step
produced (matched by the simulator's message counter, which equals the step of a simulator with
one lane). Written here because no library maps a gym API onto ROS topics; the environments
themselves are gymnasium's classes.

How the simulator's protocol maps onto gymnasium:

* **Autoreset.** A simulator resets a finished environment inside the same step, so the bridge
  uses ``AutoresetMode.SAME_STEP``: ``step`` returns the reset observation and puts the final one
  in ``info["final_obs"]`` (masked by ``info["_final_obs"]``), as gymnasium's own vector
  environments do in that mode. :class:`BridgeEnv` returns the final observation from ``step``
  and the reset one from the following ``reset()``.
* **reset().** A remote robot cannot be put back on request: ``reset()`` returns the simulator's
  pending observations (the start of a new episode right after an episode ended) and resynchronises
  with the simulator's step counter. Called in the middle of an episode, it continues that
  episode, with a warning. ``seed`` seeds only the action spaces; the environments are seeded by
  the simulator's ``seed`` parameter.
* **Pacing.** Without a replay buffer nothing pauses the simulator: it steps once per action
  batch, so the learner sets the pace (a learner busy with gradient steps simply answers later;
  the simulator's watchdog republishes unanswered observations every second and the bridge answers
  a republished batch again with the same actions). When a replay buffer with a rate limiter runs
  in the same graph and pauses acting (``/replay_status``), a waiting ``step`` waits for the
  pause to end instead of timing out.
* **Timeouts.** A ``step`` or ``reset`` that hears nothing for ``timeout_s`` raises
  :class:`SimulatorTimeout`, saying whether the simulator's topic lost its publisher (the
  simulator is gone) or it is silent. A simulator that restarted (its step counter went back)
  raises :class:`SimulatorProtocolError`; ``reset()`` then resynchronises.
* **Camera tasks.** For a task that observes images the bridge also subscribes to the image
  side topics of the observations and the experience and joins them with their batches
  (rl_nodes.image_transport), whichever ``observation_codec`` (raw, png, jpeg) the simulator
  uses; observations are ``uint8`` frames as the task's space says. (``latent`` sends encoder
  features meant for our policy node's actor head; a bridged learner needs the frames.)
* **What the simulator must be.** Non-pipelined (``pipeline: false``) and ``random_steps: 0``:
  the simulator replaces the first ``random_steps`` actions by random ones, which would feed the
  learner transitions it did not choose, so the bridge refuses experience whose actions are not
  the ones it sent (as it does when another node, a policy, answers the same robot).

The bridge uses an rclpy context of its own, so it never shares the zero-copy channel of a
process that also runs nodes: its messages always cross DDS, like a remote learner's.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import gymnasium
import numpy as np
import rclpy
from gymnasium.vector import AutoresetMode
from rclpy.executors import SingleThreadedExecutor

from rl_core.image_codecs import is_image_shape
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph
from rl_nodes.base import robot_id_from_namespace
from rl_nodes.conversions import (
    ACTIONS,
    EXPERIENCE,
    EXPERIENCE_WITH_IMAGES,
    OBSERVATIONS,
    OBSERVATIONS_WITH_IMAGES,
    Actions,
    Experience,
    Observations,
    TopicType,
)
from rl_nodes.runtime import ensure_network_defaults

__all__ = ["BridgeEnv", "BridgeVectorEnv", "SimulatorProtocolError", "SimulatorTimeout"]

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 10.0
_SPIN_SLICE_S = 0.05  # longest single wait for a message, so deadlines are checked often
#: A pause announced on /replay_status holds for this long without a newer status (the replay
#: buffer publishes at least every 2 s, graph.REPLAY_STATUS), so a vanished buffer stops counting.
_PAUSE_HOLDS_S = 3.0


class SimulatorTimeout(TimeoutError):
    """A simulator did not answer within the bridge's timeout (gone, or not reachable)."""


class SimulatorProtocolError(RuntimeError):
    """A simulator's messages do not fit the bridge's protocol (restarted, pipelined, or another
    node acts for the robot); the message says which and what to do."""


@dataclass
class _Robot:
    """One bridged robot: its topics and what has arrived from them."""

    namespace: str
    robot_id: int
    actions_pub: Any
    latest: Observations | None = None  # last observation batch received, in arrival order
    step: int = -1  # step of the batch the bridge acts on next (-1: not synchronised)
    experience: dict[int, Experience] = field(default_factory=dict)  # by sequence
    stream: int = 0
    sent: Actions | None = None  # the answer to ``step - 1``, kept to answer a republish

    @property
    def num_envs(self) -> int:
        assert self.latest is not None
        return int(self.latest.obs.shape[0])


def _spaces_of(env_id: str) -> tuple[gymnasium.spaces.Box, gymnasium.spaces.Box]:
    """Observation and action space of one environment of ``env_id`` (made once, then closed)."""
    from rl_core.envs import register_envs

    register_envs()
    env = gymnasium.make(env_id, disable_env_checker=True)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


class _Link:
    """The ROS side shared by both environments: a node in a context of its own, one
    :class:`_Robot` per namespace, and waiting with deadlines."""

    def __init__(self, namespaces: Sequence[str], timeout_s: float, domain_id: int | None,
                 images: bool = False) -> None:
        namespaces = ["/" + namespace.strip("/") for namespace in namespaces]
        robot_ids = [robot_id_from_namespace(namespace) for namespace in namespaces]
        if not namespaces:
            raise ValueError("namespaces must name at least one robot, e.g. ['/robot_0']")
        if len(set(robot_ids)) != len(robot_ids):
            raise ValueError(f"namespaces must be distinct robots (/robot_k), got {namespaces}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self.acting_paused = False
        self._status_at = -math.inf
        self.rejected_messages = 0
        self._closed = False
        ensure_network_defaults()
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context,
                   **({} if domain_id is None else {"domain_id": domain_id}))
        self.node = rclpy.create_node(graph.GYM_BRIDGE, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.robots = [_Robot(namespace, robot_id, self.node.create_publisher(
            ACTIONS.msg_type, self._topic(graph.ACTIONS, namespace), graph.ACTIONS.qos.profile()))
            for namespace, robot_id in zip(namespaces, robot_ids)]
        self._by_id = {robot.robot_id: robot for robot in self.robots}
        for robot in self.robots:
            self._subscribe(graph.OBSERVATIONS, self._topic(graph.OBSERVATIONS, robot.namespace),
                            images, lambda batch, robot=robot: self._on_observations(robot, batch))
        self._subscribe(graph.EXPERIENCE, graph.EXPERIENCE.name, images, self._on_experience)
        self.node.create_subscription(ReplayStatus, graph.REPLAY_STATUS.name,
                                      self._on_replay_status, graph.REPLAY_STATUS.qos.profile())

    @staticmethod
    def _topic(topic: graph.Topic, namespace: str) -> str:
        return graph.resolve(topic.name, namespace)

    def _subscribe(self, topic: graph.Topic, name: str, images: bool,
                   deliver: Callable[[Any], None]) -> None:
        """Subscribe batch topic ``name`` (observations or experience), handing decoded batches
        to ``deliver``; with ``images`` also its image side topics, joined with the batches
        (rl_nodes.image_transport), as a pixel task's simulator sends its frames."""
        batch_type = {graph.OBSERVATIONS: (OBSERVATIONS, OBSERVATIONS_WITH_IMAGES),
                      graph.EXPERIENCE: (EXPERIENCE, EXPERIENCE_WITH_IMAGES)}[topic][images]
        qos = topic.qos.profile()
        if not images:
            self.node.create_subscription(
                batch_type.msg_type, name,
                lambda msg: self._deliver(batch_type, msg, name, deliver), qos)
            return
        from rl_nodes.image_transport import ImageJoin, image_receivers

        join = ImageJoin(deliver, lambda what, reason: self._count_rejection(name, reason),
                         topic.name.strip("/"))
        self.node.create_subscription(
            batch_type.msg_type, name,
            lambda msg: self._deliver(batch_type, msg, name, join.on_batch), qos)
        for side_name, side_type in image_receivers(name):
            self.node.create_subscription(
                side_type.msg_type, side_name,
                lambda msg, side_type=side_type, side_name=side_name: self._deliver(
                    side_type, msg, side_name, join.on_frames), qos)

    def _deliver(self, topic_type: TopicType[T], msg: Any, topic: str,
                 deliver: Callable[[T], None]) -> None:
        decoded = self._decoded(topic_type, msg, topic)
        if decoded is not None:
            deliver(decoded)

    # --- callbacks: store, never decide ---------------------------------------------------------

    def _decoded(self, topic_type: TopicType[T], msg: Any, topic: str) -> T | None:
        """``msg`` decoded, or None (logged and counted) when it is malformed: a bad message
        from the wire must not stop the learner."""
        try:
            return topic_type.from_msg(msg)
        except ValueError as error:
            self._count_rejection(topic, str(error))
            return None

    def _count_rejection(self, topic: str, reason: str) -> None:
        self.rejected_messages += 1
        self.node.get_logger().error(
            f"rejected a message on {topic} ({self.rejected_messages} so far): {reason}",
            throttle_duration_sec=1.0)

    def _on_observations(self, robot: _Robot, batch: Observations) -> None:
        if batch.robot_id == robot.robot_id:
            robot.latest = batch

    def _on_experience(self, rows: Experience) -> None:
        robot = self._by_id.get(rows.robot_id)
        if robot is None or rows.stream < robot.stream:
            return  # another robot's, or from a simulator run that has since been replaced
        if rows.stream > robot.stream:
            robot.stream, robot.experience = rows.stream, {}
        robot.experience[rows.sequence] = rows

    def _on_replay_status(self, msg: ReplayStatus) -> None:
        self.acting_paused = bool(msg.rate_limited and msg.acting_paused)
        self._status_at = time.monotonic()

    # --- waiting --------------------------------------------------------------------------------

    def wait_until(self, done: Callable[[], bool], robot: _Robot, what: str) -> None:
        """Spin until ``done()``; raise :class:`SimulatorTimeout` after ``timeout_s`` without it.
        A pause of acting by a live replay buffer's rate limiter does not count while the
        robot's simulator is still there."""
        deadline = time.monotonic() + self.timeout_s
        while not done():
            now = time.monotonic()
            if self.acting_paused and now - self._status_at < _PAUSE_HOLDS_S and \
                    self.node.count_publishers(self._topic(graph.OBSERVATIONS, robot.namespace)):
                deadline = now + self.timeout_s
            if now >= deadline:
                raise SimulatorTimeout(f"no answer within {self.timeout_s:g} s: "
                                       f"{self.silence(robot, what)}")
            self.executor.spin_once(timeout_sec=min(_SPIN_SLICE_S, deadline - now))

    def silence(self, robot: _Robot, what: str) -> str:
        """Why ``robot`` may be silent, for a timeout's message."""
        topic = self._topic(graph.OBSERVATIONS, robot.namespace)
        if self.node.count_publishers(topic) == 0:
            cause = (f"nothing publishes {topic} any more: the simulator is gone"
                     if robot.latest is not None else f"nothing publishes {topic}: is a simulator "
                     f"running in namespace {robot.namespace}")
        else:
            cause = f"{topic} has a publisher, but it sent nothing for this step"
        return (f"{what} of {robot.namespace}: {cause} (domain {self.context.get_domain_id()}, "
                f"ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE')})")

    # --- the protocol ---------------------------------------------------------------------------

    def synchronise(self) -> None:
        """Take each robot's pending observations as the batch to act on next, once the
        simulator also hears our actions."""
        for robot in self.robots:
            topic = self._topic(graph.ACTIONS, robot.namespace)
            self.wait_until(lambda robot=robot: robot.latest is not None, robot,
                            "the first observations")
            self.wait_until(lambda robot=robot: robot.actions_pub.get_subscription_count() > 0,
                            robot, f"a subscriber of {topic}")
        for robot in self.robots:
            assert robot.latest is not None
            robot.step, robot.sent = robot.latest.step, None

    def send(self, robot: _Robot, actions: np.ndarray) -> None:
        robot.sent = Actions(robot.robot_id, robot.step, np.ascontiguousarray(actions, np.float32),
                             0, time.time_ns())
        robot.actions_pub.publish(ACTIONS.to_msg(robot.sent))
        robot.step += 1

    def receive(self, robot: _Robot) -> tuple[Observations, Experience]:
        """The observation batch and the experience rows that our last actions produced."""
        assert robot.sent is not None
        answered = robot.sent.step

        def arrived() -> bool:
            latest = robot.latest
            assert latest is not None
            if latest.step == answered and robot.sent is not None and \
                    time.time_ns() - robot.sent.stamp_ns > 0.5e9:
                # A watchdog republish: our answer was lost (or the simulator started to hear
                # us late). Answer again, at most every half second.
                robot.sent.stamp_ns = time.time_ns()
                robot.actions_pub.publish(ACTIONS.to_msg(robot.sent))
            elif latest.step < answered:
                raise SimulatorProtocolError(
                    f"the simulator of {robot.namespace} restarted (its step went back from "
                    f"{answered} to {latest.step}); its episodes were cut: call reset()")
            elif latest.step > answered + 1:
                raise SimulatorProtocolError(
                    f"{robot.namespace} sent step {latest.step} while step {answered + 1} was due: "
                    "the bridge needs a simulator with pipeline: false, and no other node "
                    "(a policy) answering this robot")
            return latest.step == answered + 1 and answered in robot.experience

        self.wait_until(arrived, robot, f"step {answered + 1}")
        experience = robot.experience.pop(answered)
        for sequence in [s for s in robot.experience if s < answered]:
            del robot.experience[sequence]
        if experience.actions.shape != robot.sent.actions.shape or \
                not np.allclose(experience.actions, robot.sent.actions, atol=1e-6):
            raise SimulatorProtocolError(
                f"the simulator of {robot.namespace} applied other actions than the bridge sent: "
                "start it with random_steps:=0 (it replaces the first random_steps actions with "
                "random ones) and run no policy node for this robot")
        robot.sent = None
        assert robot.latest is not None
        return robot.latest, experience

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


class BridgeVectorEnv(gymnasium.vector.VectorEnv):
    """The environments of one or several running simulators as one gymnasium vector env.

    Environments are ordered by robot (the namespaces' order), then by the simulator's own
    environment index. Construction waits for every simulator's first observations, which also
    tell each one's ``num_envs``.

    :param env_id: the simulators' task (gives the spaces), e.g. ``rl_ros2/CartPoleBalance-v0``.
    :param namespaces: the robots' namespaces, e.g. ``["/robot_0", "/robot_1"]``.
    :param timeout_s: longest wait for a simulator's answer before :class:`SimulatorTimeout`.
    :param domain_id: ROS domain; ``None``: ``ROS_DOMAIN_ID`` as every ROS 2 node reads it.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, env_id: str, namespaces: Sequence[str] = (graph.robot_namespace(0),),
                 timeout_s: float = DEFAULT_TIMEOUT_S, domain_id: int | None = None) -> None:
        observation_space, action_space = _spaces_of(env_id)
        self.link = _Link(namespaces, timeout_s, domain_id,
                          images=is_image_shape(observation_space.shape))
        try:
            self.link.synchronise()
        except BaseException:
            self.link.close()
            raise
        self.robots = self.link.robots
        for robot in self.robots:
            assert robot.latest is not None
            if robot.latest.obs.shape[1:] != observation_space.shape:
                shape = robot.latest.obs.shape[1:]
                self.link.close()
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
        for robot, start, end in zip(self.robots, self._bounds[:-1], self._bounds[1:]):
            self.link.send(robot, actions[start:end])
        results = [self.link.receive(robot) for robot in self.robots]
        experience = [rows for _, rows in results]
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


class BridgeEnv(gymnasium.Env):
    """One running simulator with ``num_envs: 1`` as a single gymnasium environment.

    ``step`` returns the final observation when an episode ends; the next ``reset()`` returns
    the simulator's reset observation (it reset the environment in that same step).

    :param env_id: the simulator's task (gives the spaces).
    :param namespace: the robot's namespace, e.g. ``/robot_0``.
    :param timeout_s: longest wait for the simulator's answer before :class:`SimulatorTimeout`.
    :param domain_id: ROS domain; ``None``: ``ROS_DOMAIN_ID``.
    """

    def __init__(self, env_id: str, namespace: str = graph.robot_namespace(0),
                 timeout_s: float = DEFAULT_TIMEOUT_S, domain_id: int | None = None) -> None:
        self.envs = BridgeVectorEnv(env_id, [namespace], timeout_s, domain_id)
        if self.envs.num_envs != 1:
            self.envs.close()
            raise ValueError(f"the simulator of {namespace} steps {self.envs.num_envs} "
                             "environments; BridgeEnv needs num_envs: 1 (use BridgeVectorEnv)")
        self.observation_space = self.envs.single_observation_space
        self.action_space = self.envs.single_action_space
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
