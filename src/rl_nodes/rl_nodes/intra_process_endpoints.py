"""The endpoints of rl_nodes.intra_process: a publisher that hands the same object to the
subscriptions of its process and converts it for DDS only when someone outside listens, a
subscription fed by both (decoded from DDS, its own process' DDS copies dropped), and a service
whose handler a client in the same process calls directly.

All are real rclpy endpoints underneath, made by ``IntraProcessManager.create_publisher``,
``create_subscription`` and :func:`create_service`; the manager's dispatch thread runs every local
delivery. rclpy has no intra-process services: the manager keeps the handlers of this process'
services by name, and a client looks its service up there before each call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from rclpy.exceptions import InvalidHandle
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy

from rl_core.wire.local_registry import TopicEntry
from rl_nodes.dispatch_executor import SteppingTopics
from rl_nodes.graph import GUID_PREFIX_BYTES
from rl_nodes.messages import ServiceType, TopicType

T = TypeVar("T")


class Manager(Protocol):
    """What the endpoints use of rl_nodes.intra_process.IntraProcessManager (a port: that
    module builds them, so they do not import it)."""

    stats: dict[str, int]
    stepping: SteppingTopics

    @property
    def queued(self) -> int: ...

    def post(self, function: Callable[..., None], *args: Any) -> None: ...

    def is_own_publication(self, node: Node, topic_name: str,
                           publisher_gid: bytes | None) -> bool: ...

    def report_error(self, source: str, error: Exception) -> None: ...

    def add_local_service(self, name: str, handler: Callable[[Any], Any]) -> None: ...

    def local_service(self, name: str) -> Callable[[Any], Any] | None: ...

    def wait_on_dispatch_thread(self, done: threading.Event, timeout_s: float) -> bool: ...


#: Messages from DDS queued for the dispatch thread before further ones are dropped (counted).
MAX_QUEUED_RECEPTIONS = 10_000
#: Messages a DDS subscription's callback takes beyond its own (see ``_on_dds``).
DRAIN_BURST = 64


class OwnPublications:
    """Recognises DDS copies of the process' own publications by the GUID prefix of its
    participant, read once from the endpoint of a local publisher."""

    def __init__(self) -> None:
        self._prefix: bytes | None = None

    def match(self, node: Node, entry: TopicEntry | None, topic_name: str,
              publisher_gid: bytes | None) -> bool:
        """Whether a message on ``topic_name`` (local endpoints ``entry``) from the publisher
        ``publisher_gid`` came from this process."""
        if publisher_gid is None or not entry or not entry.publishers:
            return False  # no local publisher on this topic: it came from elsewhere
        if self._prefix is None:
            local_nodes = {(p.node.get_name(), p.node.get_namespace()) for p in entry.publishers}
            for info in node.get_publishers_info_by_topic(topic_name):
                if (info.node_name, info.node_namespace) in local_nodes:
                    self._prefix = bytes(info.endpoint_gid)[:GUID_PREFIX_BYTES]
                    break
        return self._prefix is not None and publisher_gid[:GUID_PREFIX_BYTES] == self._prefix


class IntraProcessPublisher(Generic[T]):
    """Publishes objects: same object to local subscribers, a converted message over DDS."""

    def __init__(self, manager: Manager, node: Node, publisher: Any,
                 topic_type: TopicType[T], entry: TopicEntry, stepping: bool = False) -> None:
        self.manager = manager
        self.node = node
        self.entry = entry  # the local endpoints of its topic
        self.rcl_publisher = publisher
        self.topic_type = topic_type
        self.topic_name: str = publisher.topic_name
        self._always_dds = publisher.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
        #: A stepping topic: its publication over DDS alone makes a step's reply due.
        self.stepping = stepping
        #: Messages this publisher serialised and sent over DDS / that DDS failed to send.
        self.dds_publications = 0
        self.dds_failures = 0
        #: Payload bytes of the messages sent over DDS (topic types that can count them).
        self.dds_bytes = 0
        self._last_failure_log = 0.0

    def has_remote_subscribers(self) -> bool:
        """Whether a subscriber outside this process is matched (DDS would carry a publication)."""
        local = self.entry.subscriptions
        return self.rcl_publisher.get_subscription_count() > len(local)

    def publish(self, obj: T, local: bool = True) -> None:
        """Deliver ``obj`` to local subscribers (no copy) and over DDS if someone outside listens.

        :param local: False publishes over DDS only: for a side channel (an image message) whose
            local subscribers get the same data whole on another topic.
        """
        manager = self.manager
        entry = self.entry
        subscriptions = entry.subscriptions
        if local:
            for subscription in subscriptions:
                manager.post(subscription.deliver, obj)
            manager.stats["local_deliveries"] += len(subscriptions)
        if self._always_dds:
            entry.latest, entry.has_latest = obj, True
        if self._always_dds or self.has_remote_subscribers():
            try:
                msg = self.topic_type.to_msg(obj)
                self.rcl_publisher.publish(msg)
            except _rclpy.RCLError as error:
                # A reliable writer whose reader does not keep up can fail after blocking; the
                # caller's loop (a stepping chain) must go on, so count and report it instead.
                self.dds_failures += 1
                manager.stats["dds_failures"] += 1
                self._report_failure(error)
                return
            self.dds_publications += 1
            manager.stats["dds_publications"] += 1
            if self.stepping:
                manager.stepping.replies.sent(len(subscriptions))
            if self.topic_type.wire_bytes is not None:
                self.dds_bytes += self.topic_type.wire_bytes(msg)

    def _report_failure(self, error: Exception) -> None:
        now = time.monotonic()
        if now - self._last_failure_log >= 1.0:
            self._last_failure_log = now
            self.node.get_logger().error(
                f"publishing on {self.topic_name} failed ({self.dds_failures} so far): {error}; "
                "a subscriber does not keep up")

    def get_subscription_count(self) -> int:
        """All matched subscriptions, local and remote (as rclpy reports them)."""
        return self.rcl_publisher.get_subscription_count()


class IntraProcessSubscription(Generic[T]):
    """Receives objects from local publishers and decoded messages from DDS."""

    topic_name: str
    rcl_subscription: Any

    def __init__(self, manager: Manager, node: Node, callback: Callable[[T], None],
                 topic_type: TopicType[T], on_reject: Callable[[str], None] | None,
                 stepping: bool = False, with_sender: bool = False) -> None:
        self.manager = manager
        self.node = node
        self.callback = callback
        self.topic_type = topic_type
        self.on_reject = on_reject
        #: A stepping topic: a message of it is a step's reply.
        self.stepping = stepping
        #: The callback also takes the sender: its DDS publisher GID (bytes), None when local.
        self.with_sender = with_sender
        #: The node was unloaded (IntraProcessManager.forget_node).
        self.forgotten = False

    def deliver(self, obj: T, sender: bytes | None = None) -> None:
        """Called on the dispatch thread with a local or decoded object (dropped once the node
        was forgotten: unloaded, its state closed)."""
        if self.forgotten:
            return
        if self.with_sender:
            self.callback(obj, sender)  # type: ignore[call-arg]
        else:
            self.callback(obj)

    def _on_dds(self, msg: Any, info: dict[str, Any]) -> None:
        """Rclpy callback (executor thread): receive ``msg``, then up to
        :data:`DRAIN_BURST` more messages already queued on this subscription. rclpy takes one
        message per turn of the executor, and each turn rebuilds its wait set over every
        endpoint, timer and service of the process: for a stream of small messages from many
        senders that costs more than the messages themselves."""
        if self.stepping:
            self.manager.stepping.replies.received()
        self._receive(msg, info)
        subscription = self.rcl_subscription
        for _ in range(DRAIN_BURST):
            try:
                with subscription.handle:
                    taken = subscription.handle.take_message(subscription.msg_type,
                                                             subscription.raw)
            except InvalidHandle:  # destroyed meanwhile
                return
            if taken is None:
                return
            self._receive(*taken)

    def _receive(self, msg: Any, info: dict[str, Any]) -> None:
        """Drop own publications, decode, queue the rest for the dispatch thread."""
        gid = info.get("publisher_gid") if info else None
        if self.manager.is_own_publication(self.node, self.topic_name, gid["data"] if gid else None):
            self.manager.stats["dropped_own_dds"] += 1
            return
        try:
            obj = self.topic_type.from_msg(msg)
        except ValueError as error:
            self.manager.stats["rejected"] += 1
            if self.on_reject is not None:
                self.on_reject(str(error))
            return
        if self.manager.queued >= MAX_QUEUED_RECEPTIONS:
            # The dispatch thread is far behind: refuse new network input rather than grow
            # without bound (local publications are never dropped; their producer waits).
            self.manager.stats["dropped_receptions"] += 1
            if self.on_reject is not None:
                self.on_reject(f"dispatch queue full ({MAX_QUEUED_RECEPTIONS} items); message "
                               "dropped")
            return
        self.manager.stats["dds_receptions"] += 1
        self.manager.post(self.deliver, obj, bytes(gid["data"]) if gid else None)


# --- services ------------------------------------------------------------------------------------

class ServiceUnavailable(RuntimeError):
    """No server answered in time; the message says which service and what to check."""


def create_service(manager: Manager, node: Node, service_type: ServiceType[Any],
                   name: str, handler: Callable[[Any], Any]) -> Any:
    """A real rclpy service whose handler local clients call directly (no serialisation).

    The handler runs on the caller's thread for local calls and on the executor thread for DDS
    calls, so it must be thread-safe.
    """

    def on_request(request: Any, response: Any) -> Any:
        try:
            return service_type.response_to_msg(handler(service_type.request_from_msg(request)))
        except Exception as error:  # noqa: BLE001 - answer the client instead of leaving it waiting
            manager.report_error(f"service {name}", error)
            if hasattr(response, "success"):
                response.success = False
            if hasattr(response, "message"):
                response.message = f"request failed: {type(error).__name__}: {error}"
            return response

    service = node.create_service(service_type.srv_type, name, on_request)
    manager.add_local_service(service.service_name, handler)
    return service


class IntraProcessClient:
    """Calls a service: directly when its server lives in this process, else over DDS."""

    def __init__(self, manager: Manager, node: Node, service_type: ServiceType[Any],
                 name: str) -> None:
        self.manager = manager
        self.service_type = service_type
        self.client = node.create_client(service_type.srv_type, name)
        self.name: str = self.client.service_name

    @property
    def is_local(self) -> bool:
        return self.manager.local_service(self.name) is not None

    def call(self, request: Any, timeout_s: float = 5.0) -> Any:
        """Send ``request`` and return the response object.

        :raises ServiceUnavailable: when no server answers within ``timeout_s``.
        """
        handler = self.manager.local_service(self.name)
        if handler is not None:
            return handler(request)
        if not self.client.wait_for_service(timeout_sec=timeout_s):
            raise ServiceUnavailable(f"service {self.name} is not available; check that its node "
                                     "runs, with the same ROS_DOMAIN_ID and discovery settings")
        done = threading.Event()
        future = self.client.call_async(self.service_type.request_to_msg(request))
        future.add_done_callback(lambda _: done.set())
        if not self.manager.wait_on_dispatch_thread(done, timeout_s):
            self.client.remove_pending_request(future)
            raise ServiceUnavailable(f"service {self.name} did not answer within {timeout_s} s")
        return self.service_type.response_from_msg(future.result())
