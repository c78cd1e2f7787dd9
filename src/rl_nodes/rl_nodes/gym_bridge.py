"""Gymnasium environments whose ``step`` drives running simulator nodes through the ROS graph.

Other learners (Stable-Baselines3, CleanRL, RLlib) speak gymnasium; our robots speak
``rl_interfaces``. :class:`BridgeVectorEnv` (one or several robots) and :class:`BridgeEnv` (one
robot with one environment, what Stable-Baselines3 wraps) take the policy node's place: ``step``
answers each simulator's pending ``ObservationBatch`` with an ``ActionBatch`` and returns the next
batch with the rewards and episode ends of the ``/experience`` rows that step produced. The
protocol is rl_core.acting.remote_env's; this is the ROS link: pacing (the learner sets it, and a
rate-limiter pause on ``/replay_status`` is waited out), timeouts (:class:`SimulatorTimeout` after
``timeout_s`` of silence) and the image side topics of camera tasks (rl_nodes.image_transport).
Details: docs/architecture.md, "The stepping loop".

The bridge uses an rclpy context of its own, so it never shares the zero-copy channel of a
process that also runs nodes: its messages always cross DDS, like a remote learner's.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor

from rl_core.acting import remote_env
from rl_core.acting.gate import ActingGate
from rl_core.acting.remote_env import RemoteRobot, SimulatorProtocolError, SimulatorTimeout
from rl_core.security import action_auth, weights_auth
from rl_core.security.signed_status import StatusCheck, status_refusal
from rl_core.wire.image_codecs import Camera, is_image_shape
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph
from rl_nodes.base import robot_id_from_namespace
from rl_nodes.messages import (
    ACTIONS,
    EXPERIENCE,
    EXPERIENCE_WITH_IMAGES,
    OBSERVATIONS,
    OBSERVATIONS_WITH_IMAGES,
    Actions,
    Experience,
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


class _Link:
    """The ROS side under both environments (an rl_core.acting.remote_env.SimulatorLink): a node in a
    context of its own, one :class:`RemoteRobot` per namespace, and waiting with deadlines."""

    def __init__(self, namespaces: Sequence[str], timeout_s: float, domain_id: int | None,
                 camera: Camera | None = None) -> None:
        namespaces = ["/" + namespace.strip("/") for namespace in namespaces]
        robot_ids = [robot_id_from_namespace(namespace) for namespace in namespaces]
        remote_env.check_bridge_arguments(namespaces, robot_ids, timeout_s)
        self.timeout_s = float(timeout_s)
        self.gate = ActingGate(_PAUSE_HOLDS_S)  # follows the rate limiter, never on silence
        # The bridge is the learner's side: with the run's public key it obeys only the replay
        # buffer's signed statuses; without one (a bridge beside robots started by hand) any.
        key = weights_auth.load_public_key()
        self.status_check = StatusCheck(key, allow_unsigned=key is None)
        # It drives the robots in their policies' place, so it needs their action keys (the
        # run's RL_ROS2_ACTION_KEY), or simulators started with allow_unsigned:=true.
        self.action_keys = action_auth.load_keys()
        self.rejected_messages = 0
        self._closed = False
        ensure_network_defaults()
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context,
                   **({} if domain_id is None else {"domain_id": domain_id}))
        self.node = rclpy.create_node(graph.GYM_BRIDGE, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        # The experience subscription comes first. Discovery announces a process' subscriptions
        # in creation order, and a simulator's observations reach us only once it has matched
        # our observation subscription, so by then it has matched this one as well. Otherwise
        # the rows of our first step could go out before the simulator knew of this reader, and
        # they would be lost for good: /experience is volatile.
        self._experience_sub = self._subscribe(graph.EXPERIENCE, graph.EXPERIENCE.name, camera,
                                               self._on_experience)
        self.actions_pubs = [self.node.create_publisher(
            ACTIONS.msg_type, self._topic(graph.ACTIONS, namespace), graph.ACTIONS.qos.profile())
            for namespace in namespaces]
        self.robots = [RemoteRobot(namespace, robot_id,
                                   functools.partial(self._publish_actions, publisher, robot_id))
                       for namespace, robot_id, publisher in zip(namespaces, robot_ids,
                                                                 self.actions_pubs)]
        self._by_id = {robot.robot_id: robot for robot in self.robots}
        for robot in self.robots:
            self._subscribe(graph.OBSERVATIONS, self._topic(graph.OBSERVATIONS, robot.namespace),
                            camera, robot.on_observations)
        self.node.create_subscription(ReplayStatus, graph.REPLAY_STATUS.name,
                                      self._on_replay_status, graph.REPLAY_STATUS.qos.profile())

    @property
    def acting_paused(self) -> bool:
        """The last /replay_status paused acting (with its rate limiter on)."""
        return self.gate.paused

    @staticmethod
    def _topic(topic: graph.Topic, namespace: str) -> str:
        return graph.resolve(topic.name, namespace)

    def _publish_actions(self, publisher: Any, robot_id: int, step: int, actions: np.ndarray,
                         stamp_ns: int) -> None:
        # The MAC binds the digest of the batch answered: the simulator takes only an answer to
        # observations it published (rl_core.security.action_auth).
        mac = self.action_keys.mac(robot_id, step, actions, 0, self._by_id[robot_id].sent_digest)
        publisher.publish(ACTIONS.to_msg(Actions(robot_id, step, actions, 0, stamp_ns, mac)))

    def _subscribe(self, topic: graph.Topic, name: str, camera: Camera | None,
                   deliver: Callable[[Any], None]) -> Any:
        """Subscribe batch topic ``name`` (observations or experience), handing decoded batches
        to ``deliver``; with a ``camera`` also its image side topics, joined with the batches
        (rl_nodes.image_transport), as a pixel task's simulator sends its frames. Returns the
        batch topic's subscription."""
        batch_type = {graph.OBSERVATIONS: (OBSERVATIONS, OBSERVATIONS_WITH_IMAGES),
                      graph.EXPERIENCE: (EXPERIENCE, EXPERIENCE_WITH_IMAGES)}[topic][
                          camera is not None]
        qos = topic.qos.profile()
        if camera is None:
            return self.node.create_subscription(
                batch_type.msg_type, name,
                lambda msg: self._deliver(batch_type, msg, name, deliver), qos)
        from rl_nodes.image_transport import ImageJoin, image_receivers

        join = ImageJoin(deliver, lambda what, reason: self._count_rejection(name, reason),
                         topic.name.strip("/"))
        batches = self.node.create_subscription(
            batch_type.msg_type, name,
            lambda msg: self._deliver(batch_type, msg, name, join.on_batch), qos)
        for side_name, side_type in image_receivers(name, camera):
            self.node.create_subscription(
                side_type.msg_type, side_name,
                lambda msg, side_type=side_type, side_name=side_name: self._deliver(
                    side_type, msg, side_name, join.on_frames), qos)
        return batches

    # --- callbacks: store, never decide ---------------------------------------------------------

    def _deliver(self, topic_type: TopicType[T], msg: Any, topic: str,
                 deliver: Callable[[T], None]) -> None:
        """Hand ``msg`` decoded to ``deliver``; log and count it when it is malformed: a bad
        message from the wire must not stop the learner."""
        try:
            decoded = topic_type.from_msg(msg)
        except ValueError as error:
            self._count_rejection(topic, str(error))
            return
        deliver(decoded)

    def _count_rejection(self, topic: str, reason: str) -> None:
        self.rejected_messages += 1
        self.node.get_logger().error(
            f"rejected a message on {topic} ({self.rejected_messages} so far): {reason}",
            throttle_duration_sec=1.0)

    def _on_experience(self, rows: Experience) -> None:
        robot = self._by_id.get(rows.robot_id)
        if robot is not None:  # not another robot's
            robot.on_experience(rows)

    def _on_replay_status(self, msg: ReplayStatus) -> None:
        if status_refusal(msg, self.status_check) is not None:
            self.rejected_messages += 1
            return
        self.gate.on_status(bool(msg.rate_limited), bool(msg.acting_paused), time.monotonic())

    def wait_until(self, done: Callable[[], bool], robot: RemoteRobot, what: str) -> None:
        """Spin until ``done()``; raise :class:`SimulatorTimeout` after ``timeout_s`` without it.
        A pause of acting by a live replay buffer's rate limiter does not count while the
        robot's simulator is still there."""
        deadline = time.monotonic() + self.timeout_s
        while not done():
            now = time.monotonic()
            if self.gate.held_by_limiter(now) and \
                    self.node.count_publishers(self._topic(graph.OBSERVATIONS, robot.namespace)):
                deadline = now + self.timeout_s
            if now >= deadline:
                raise SimulatorTimeout(f"no answer within {self.timeout_s:g} s: "
                                       f"{self.silence(robot, what)}")
            self.executor.spin_once(timeout_sec=min(_SPIN_SLICE_S, deadline - now))

    def silence(self, robot: RemoteRobot, what: str) -> str:
        """Why ``robot`` may be silent, for a timeout's message."""
        topic = self._topic(graph.OBSERVATIONS, robot.namespace)
        cause = robot.silence_cause(topic, self.node.count_publishers(topic))
        return (f"{what} of {robot.namespace}: {cause} (domain {self.context.get_domain_id()}, "
                f"ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE')})")

    # --- the protocol (rl_core.acting.remote_env.RemoteRobot) ----------------------------------------

    def synchronise(self) -> None:
        """Take each robot's pending observations as the batch to act on next, once the
        simulator also hears our actions."""
        for robot, publisher in zip(self.robots, self.actions_pubs):
            topic = self._topic(graph.ACTIONS, robot.namespace)
            self.wait_until(lambda robot=robot: robot.latest is not None, robot,
                            "the first observations")
            self.wait_until(lambda publisher=publisher: publisher.get_subscription_count() > 0,
                            robot, f"a subscriber of {topic}")
            self.wait_until(lambda robot=robot: self._hears_experience_of(robot), robot,
                            f"its simulator's {graph.EXPERIENCE.name} publisher")
        for robot in self.robots:
            robot.synchronise()

    def _hears_experience_of(self, robot: RemoteRobot) -> bool:
        """Our /experience subscription has matched a publisher, and the graph has one in
        ``robot``'s namespace (its simulator)."""
        return self._experience_sub.get_publisher_count() > 0 and any(
            info.node_namespace == robot.namespace
            for info in self.node.get_publishers_info_by_topic(graph.EXPERIENCE.name))

    def receive(self, robot: RemoteRobot) -> tuple[Any, Any]:
        """The observation batch and the experience rows that our last actions produced."""
        self.wait_until(lambda: robot.arrived(time.time_ns()), robot,
                        f"step {robot.sent_step + 1}")
        return robot.take()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


class BridgeVectorEnv(remote_env.RemoteVectorEnv):
    """The environments of one or several running simulators as one gymnasium vector env
    (rl_core.acting.remote_env.RemoteVectorEnv over this module's ROS link), ordered by robot (the
    namespaces' order), then by each simulator's own environment index.

    :param env_id: the simulators' task (gives the spaces), e.g. ``rl_ros2/CartPoleBalance-v0``.
    :param namespaces: the robots' namespaces, e.g. ``["/robot_0", "/robot_1"]``.
    :param timeout_s: longest wait for a simulator's answer before :class:`SimulatorTimeout`.
    :param domain_id: ROS domain; ``None``: ``ROS_DOMAIN_ID`` as every ROS 2 node reads it.
    """

    def __init__(self, env_id: str, namespaces: Sequence[str] = (graph.robot_namespace(0),),
                 timeout_s: float = DEFAULT_TIMEOUT_S, domain_id: int | None = None) -> None:
        observation_space, action_space = remote_env.spaces_of(env_id)
        shape = observation_space.shape
        link = _Link(namespaces, timeout_s, domain_id,
                     Camera.of(shape) if is_image_shape(shape) else None)
        super().__init__(link, env_id, observation_space, action_space)


class BridgeEnv(remote_env.SingleRemoteEnv):
    """One running simulator with ``num_envs: 1`` as a single gymnasium environment
    (rl_core.acting.remote_env.SingleRemoteEnv: the final observation from ``step``, the reset one
    from the next ``reset()``).

    :param env_id: the simulator's task (gives the spaces).
    :param namespace: the robot's namespace, e.g. ``/robot_0``.
    :param timeout_s: longest wait for the simulator's answer before :class:`SimulatorTimeout`.
    :param domain_id: ROS domain; ``None``: ``ROS_DOMAIN_ID``.
    """

    def __init__(self, env_id: str, namespace: str = graph.robot_namespace(0),
                 timeout_s: float = DEFAULT_TIMEOUT_S, domain_id: int | None = None) -> None:
        super().__init__(BridgeVectorEnv(env_id, [namespace], timeout_s, domain_id), namespace)
