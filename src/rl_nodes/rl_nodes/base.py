"""Shared base of the rl_ros2 nodes: zero-copy endpoints, rejection counting, QoS profiles."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile

from rl_core.config import ConfigError
from rl_core.monitoring import heartbeat
from rl_core.names import variables
from rl_core.security import action_auth, weights_auth
from rl_core.security.action_auth import ActionCheck, ActionKeys
from rl_core.security.signed_status import StatusCheck, status_refusal
from rl_core.wire.encoding import peer_version_refusal
from rl_nodes import graph
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.intra_process_endpoints import IntraProcessPublisher, IntraProcessSubscription
from rl_nodes.lifecycle import ManagedNode
from rl_nodes.messages import Actions, TopicType, topic_type

T = TypeVar("T")

STREAM_QOS = graph.STREAM.profile()
EXPERIENCE_QOS = graph.DEEP.profile()
LATCHED_QOS = graph.LATCHED.profile()

#: Diagnostic levels (diagnostic_msgs/DiagnosticStatus), for rqt_robot_monitor.
OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
#: Seconds between checks of the peers' message definitions; a node under use_sim_time whose
#: clock stands still this long says so on /diagnostics.
PEER_CHECK_S, CLOCK_FROZEN_S = 5.0, 2.0
#: Parameters rclpy declares on every node that may be set only at launch: switched at run time
#: ``use_sim_time`` hands the node's timers to a ``/clock`` that may not run, stopping them.
LAUNCH_ONLY_PARAMETERS = ("use_sim_time",)


def load_signing_key(logger: Any) -> weights_auth.SigningKey | None:
    """The learner's private key (rl_core.security.weights_auth), for the trainer and the replay buffer;
    warns when the run has none.

    :raises ConfigError: when a configured key cannot be read or is malformed.
    """
    try:
        key = weights_auth.load_key()
    except weights_auth.WeightsKeyError as error:
        raise ConfigError(str(error)) from error
    if key is None:
        logger.warning(f"no signing key ({weights_auth.KEY_VARIABLE} / "
                       f"{weights_auth.KEY_FILE_VARIABLE}): weights and replay status go out "
                       "unsigned, and robots refuse them unless started with allow_unsigned:=true;"
                       " rl-bringup and the launch files create a key per run")
    return key


def load_public_key(logger: Any, allow_unsigned: bool) -> weights_auth.VerifyKey | None:
    """The learner's public key, for what a robot checks (weights, replay status); warns when
    the run has none: then everything is refused, unless ``allow_unsigned``.

    :raises ConfigError: when a configured key cannot be read or is malformed.
    """
    try:
        key = weights_auth.load_public_key()
    except weights_auth.WeightsKeyError as error:
        raise ConfigError(str(error)) from error
    if key is None and allow_unsigned:
        logger.warning("no public key and allow_unsigned is true: weights and replay status are "
                       "obeyed unchecked, whoever publishes them (development only)")
    elif key is None:
        logger.warning(f"no public key ({weights_auth.PUBLIC_KEY_VARIABLE} / "
                       f"{weights_auth.PUBLIC_KEY_FILE_VARIABLE}): weights and replay status are "
                       "refused; rl-bringup and the launch files give one per run, "
                       "allow_unsigned:=true accepts unsigned ones (development only)")
    return key


def load_action_keys(logger: Any, allow_unsigned: bool = False) -> ActionKeys:
    """This process' action keys (rl_core.security.action_auth), for a policy or a simulator; warns
    when none is configured: then only nodes of this process authenticate each other's actions.

    :raises ConfigError: when a configured key cannot be read or is malformed.
    """
    try:
        keys = action_auth.load_keys()
    except action_auth.ActionKeyError as error:
        raise ConfigError(str(error)) from error
    if not keys.any_configured:
        logger.warning(
            f"no action key ({action_auth.ROBOT_KEYS_VARIABLE}, {action_auth.KEY_VARIABLE} or "
            f"{action_auth.KEY_FILE_VARIABLE}): actions are authenticated only between a policy "
            "and a simulator in this process" + (
                "; allow_unsigned is true: this robot steps with any actions, whoever sends "
                "them (development only)" if allow_unsigned else
                "; rl-bringup and the launch files give each robot a key per launch"))
    return keys


def _name_and_qos(topic: graph.Topic | str, qos: QoSProfile | None) -> tuple[str, QoSProfile]:
    if isinstance(topic, graph.Topic):
        return topic.name, qos or topic.qos.profile()
    return topic, qos or STREAM_QOS


def _stepping(topic: graph.Topic | str, given: bool | None) -> bool:
    if given is not None:
        return given
    return isinstance(topic, graph.Topic) and topic.stepping


def _topic_type(topic: graph.Topic | str, given: TopicType[T] | None) -> TopicType[T]:
    if given is not None:
        return given
    if isinstance(topic, graph.Topic):
        return topic_type(topic.type)
    raise TypeError(f"topic {topic!r} is a bare name: pass its topic_type")


def robot_id_from_namespace(namespace: str) -> int:
    """``/robot_3`` -> 3; any other namespace -> 0 (a single robot)."""
    match = re.search(r"robot_(\d+)$", namespace.rstrip("/"))
    return int(match.group(1)) if match else 0


def launch_only_guard(parameters: list[Parameter]) -> SetParametersResult:
    """Refuse run-time changes of :data:`LAUNCH_ONLY_PARAMETERS` (the parameter callback)."""
    for parameter in parameters:
        if parameter.name in LAUNCH_ONLY_PARAMETERS:
            return SetParametersResult(successful=False, reason=(
                f"{parameter.name} is read-only at run time; set it at launch "
                f"(--ros-args -p {parameter.name}:=...)"))
    return SetParametersResult(successful=True)


class RLNode(ManagedNode):
    """A managed node (rl_nodes.lifecycle) whose topics go through the process' intra-process
    manager.

    Subclasses name themselves (:attr:`NAME`), build in :meth:`build` (the configure
    transition), and create endpoints there with :meth:`publisher` / :meth:`subscription` and
    :meth:`timer`, whose callbacks run on the dispatch thread. ``begin()`` runs at the first
    activation, once every node of the process is configured and the executor runs;
    ``pause()`` / ``resume()`` at deactivate and later activations; ``close()`` at cleanup,
    shutdown or the process' end.

    :param namespace: the node's namespace.
    :param configure: configure at once, raising :class:`ConfigError` with the reason when that
        fails (nodes built directly in Python); :mod:`rl_nodes.runtime` passes false and drives
        the transitions.
    """

    #: The node's name (each subclass sets it).
    NAME = ""

    def __init__(self, namespace: str = "", configure: bool = True, **kwargs: Any) -> None:
        super().__init__(self.NAME, namespace=namespace, **kwargs)
        self.ipc = IntraProcessManager.for_context(self.context)
        self.rejected_messages = 0
        #: Rejected inputs per source ("experience from robot 3", "policy weights", ...).
        self.rejections: dict[str, int] = {}
        self._last_reject_log: dict[str, float] = {}
        self._clock_seen = (self.get_clock().now().nanoseconds, time.monotonic())
        self._peers_refused: set[tuple[str, str, str]] = set()  # (node, type, hash)
        self._peers_checked_at = -PEER_CHECK_S
        self._diagnostics_pub = self.publisher(graph.DIAGNOSTICS)
        self.timer(graph.DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        self.add_on_set_parameters_callback(launch_only_guard)
        if configure:
            self.configure_now()

    def publisher(self, topic: graph.Topic | str, topic_type: TopicType[T] | None = None,
                  qos: QoSProfile | None = None, stepping: bool | None = None
                  ) -> IntraProcessPublisher[T]:
        """A publisher on ``topic``: a topic of :mod:`rl_nodes.graph` (its name, QoS and message
        type, converted as :func:`rl_nodes.messages.topic_type` says unless ``topic_type``
        is given), or a name, with ``topic_type`` and ``qos`` (default: the stream profile).
        ``stepping``: a robot's every step waits on it (default: the graph topic's; False for
        a bare name; rl_nodes.dispatch_executor)."""
        name, qos = _name_and_qos(topic, qos)
        return self.ipc.create_publisher(self, _topic_type(topic, topic_type), name, qos,
                                         _stepping(topic, stepping))

    def subscription(self, topic: graph.Topic | str, callback: Callable[[T], None],
                     topic_type: TopicType[T] | None = None, qos: QoSProfile | None = None,
                     stepping: bool | None = None,
                     with_sender: bool = False) -> IntraProcessSubscription[T]:
        """A subscription to ``topic`` (as :meth:`publisher`); ``callback`` runs on the dispatch
        thread, and a malformed message is counted and logged as a rejection instead;
        ``stepping`` as for :meth:`publisher`; ``with_sender``: the callback also takes the
        sender's publisher GID (rl_nodes.intra_process)."""
        name, qos = _name_and_qos(topic, qos)
        return self.ipc.create_subscription(self, _topic_type(topic, topic_type), name, callback,
                                            qos, on_reject=lambda reason: self.reject(name, reason),
                                            stepping=_stepping(topic, stepping),
                                            with_sender=with_sender)

    def timer(self, period_s: float, callback: Callable[[], None]) -> Any:
        """A timer whose callback runs on the dispatch thread."""
        return self.ipc.create_timer(self, period_s, callback)

    def set_parameters_atomically(self, parameter_list: list[Any]) -> Any:
        """Rclpy's parameter services call this for every ``set_parameters`` request: count a
        refused change (read-only, out of range, invalid) like any other rejected input."""
        result = super().set_parameters_atomically(parameter_list)
        if not result.successful:
            names = ", ".join(parameter.name for parameter in parameter_list)
            self.reject("parameter change", f"{names}: {result.reason}")
        return result

    def reject(self, what: str, reason: str) -> None:
        """Count a rejected input per source and log why (at most once a second per source),
        then keep running."""
        self.rejected_messages += 1
        self.rejections[what] = self.rejections.get(what, 0) + 1
        now = time.monotonic()
        if now - self._last_reject_log.get(what, -1.0) >= 1.0:
            self._last_reject_log[what] = now
            self.get_logger().error(f"rejected {what} ({self.rejections[what]} so far): {reason}")

    def status_obeyed(self, msg: Any, check: StatusCheck) -> bool:
        """Whether a received ``/replay_status`` is the learner's signed, newer one
        (rl_core.security.signed_status); a refused one is counted and logged."""
        refusal = status_refusal(msg, check)
        if refusal is not None:
            self.reject("replay status", refusal)
        return refusal is None

    def actions_authentic(self, msg: Actions, check: ActionCheck) -> bool:
        """Whether an action batch carries its robot's MAC (rl_core.security.action_auth); a refused
        one is counted and logged, and the robot keeps waiting for its policy's answer."""
        refusal = check.refusal(msg.robot_id, msg.step, msg.actions, msg.policy_version, msg.mac)
        if refusal is not None:
            self.reject("actions", refusal)
        return refusal is None

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        """``(level, message, values)`` for ``/diagnostics``; nodes override it."""
        return OK, "running", {}

    def _clock_frozen_s(self) -> float:
        """Seconds the node's clock has stood still under ``use_sim_time`` (0: it moves, or the
        node runs on the system clock). Diagnostics run on a steady timer, so they see it."""
        now_ns = self.get_clock().now().nanoseconds
        steady = time.monotonic()
        if not self.get_parameter("use_sim_time").value or now_ns != self._clock_seen[0]:
            self._clock_seen = (now_ns, steady)
            return 0.0
        return steady - self._clock_seen[1]

    def _check_peer_versions(self) -> None:
        """Refuse, once each, publishers DDS will not connect to this node's rl_interfaces
        subscriptions (another type or definition: rl_core.wire.encoding)."""
        me = (self.get_name(), self.get_namespace())
        for topic, types in self.get_topic_names_and_types():
            if not any(kind.startswith("rl_interfaces/") for kind in types):
                continue
            mine = [(i.topic_type, str(i.topic_type_hash)) for i in
                    self.get_subscriptions_info_by_topic(topic) if (i.node_name, i.node_namespace) == me]
            for info in self.get_publishers_info_by_topic(topic) if mine else ():
                peer = (f"{info.node_namespace.rstrip('/')}/{info.node_name}", info.topic_type,
                        str(info.topic_type_hash))
                refusal = peer_version_refusal(topic, mine[0], peer)
                if refusal is not None and peer not in self._peers_refused:
                    self._peers_refused.add(peer)
                    self.reject("peer of another wire version", refusal)

    def _publish_diagnostics(self) -> None:
        heartbeat_file = os.environ.get(variables.HEARTBEAT_FILE)
        if heartbeat_file:  # this thread turns (rl_core.monitoring.heartbeat)
            heartbeat.beat(heartbeat_file)
        if time.monotonic() - self._peers_checked_at >= PEER_CHECK_S:
            self._peers_checked_at = time.monotonic()
            self._check_peer_versions()
        if self.configured:
            level, message, values = self.diagnose()
            if not self.active:
                message = f"inactive (lifecycle; ros2 lifecycle set to activate): {message}"
        else:
            level, message, values = OK, f"{self.lifecycle_state()} (lifecycle)", {}
        frozen_s = self._clock_frozen_s()
        if frozen_s >= CLOCK_FROZEN_S:
            level = max(level, WARN)
            message = (f"use_sim_time: the clock has not moved for {frozen_s:.0f} s (is /clock "
                       f"published?); {message}")
        values = {**values, "rejected inputs": self.rejected_messages,
                  **{f"rejected {what}": count for what, count in self.rejections.items()}}
        status = DiagnosticStatus(level=level, name=self.get_fully_qualified_name(),
                                  message=message, hardware_id=self.get_namespace(),
                                  values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diagnostics_pub.publish(array)


