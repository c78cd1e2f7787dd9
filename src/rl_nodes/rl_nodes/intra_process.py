"""Intra-process zero-copy communication for rclpy, shaped like rclcpp's intra-process manager.

rclpy serialises every publication through the DDS stack even when publisher and subscriber share
a process, and a round trip costs more than the work of an acting step. Endpoints made through
:class:`IntraProcessManager` are also real rclpy endpoints (the graph stays visible to tools),
but a publish hands the **same Python object** to every local subscription through a dispatch
queue (rl_core.wire.dispatch), never re-entrantly; local subscribers treat it as read-only. It is
converted and published over DDS only when a subscriber outside the process exists, or always for
transient-local topics; DDS copies of this process' own publications are dropped.

One thread drives :meth:`IntraProcessManager.spin`, which drains the queue and runs every rclpy
executor callback too, so node code needs no locks except around state it shares with its own
worker threads; while the queue stays busy, a watcher thread waits in the executor on its behalf
(rl_nodes.executor_watcher); the endpoints are in rl_nodes.intra_process_endpoints. Why and how:
docs/architecture.md, "Zero-copy inside one process".
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from rclpy.clock import Clock, ClockType
from rclpy.context import Context
from rclpy.executors import Executor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.timer import Timer

from rl_core.wire.dispatch import DispatchQueue
from rl_core.wire.local_registry import LocalRegistry
from rl_nodes.dispatch_executor import DispatchExecutor, SteppingTopics, SteppingWait
from rl_nodes.executor_watcher import EXECUTOR_HANDOVER_S
from rl_nodes.intra_process_endpoints import (
    IntraProcessPublisher,
    IntraProcessSubscription,
    OwnPublications,
)
from rl_nodes.messages import TopicType

T = TypeVar("T")
#: How soon a wait off the dispatch thread sees that the spin has ended.
SPIN_END_POLL_S = 0.05


class IntraProcessManager:
    """Registry of local publishers, subscriptions and services, and the dispatch queue of one
    rclpy context.

    Get it with :meth:`for_context`; all nodes of a process built on one context share it.
    """

    _by_context: weakref.WeakKeyDictionary[Context, IntraProcessManager] = weakref.WeakKeyDictionary()
    _registry_lock = threading.Lock()

    def __init__(self, context: Context) -> None:
        self.context = context
        #: The calls the dispatch thread runs (posted messages, timer ticks, handed-over work).
        self.dispatch = DispatchQueue()
        self.dispatch.wake = self._wake_executor
        self._registry = LocalRegistry()
        self._own_publications = OwnPublications()
        self._driver: DispatchExecutor | None = None  # set while spin() drives an executor
        #: Timers of :meth:`create_timer`: their rclpy callback only posts, so any thread may run
        #: it (the executor watcher does).
        self._posting_timers: weakref.WeakSet[Timer] = weakref.WeakSet()
        #: Nodes unloaded: calls posted for them before that are dropped (:meth:`post_for`).
        self._forgotten: weakref.WeakSet[Node] = weakref.WeakSet()
        self.stepping = SteppingTopics()  # waited on alone while a reply is due
        self._dispatch_thread: int | None = None
        self._spin_ended = False  # no executor turns now: an answer it would deliver never comes
        self._on_error: Callable[[str, Exception], None] | None = None
        #: Objects handed over locally / converted and published over DDS / received over DDS.
        self.stats = {"local_deliveries": 0, "dds_publications": 0, "dds_receptions": 0,
                      "dropped_own_dds": 0, "rejected": 0, "dds_failures": 0,
                      "dropped_receptions": 0}

    @classmethod
    def for_context(cls, context: Context) -> IntraProcessManager:
        """The manager of ``context`` (created on first use)."""
        with cls._registry_lock:
            manager = cls._by_context.get(context)
            if manager is None:
                manager = cls._by_context[context] = cls(context)
            return manager

    # --- endpoints ------------------------------------------------------------------------------

    def create_publisher(self, node: Node, topic_type: TopicType[T], topic: str,
                         qos: QoSProfile | int, stepping: bool = False) -> IntraProcessPublisher[T]:
        """A publisher that hands objects to local subscribers and to DDS when needed;
        ``stepping``: a stepping topic (rl_nodes.dispatch_executor)."""
        publisher = node.create_publisher(topic_type.msg_type, topic, qos)
        with self._registry.lock:
            entry = self._registry.entry(publisher.topic_name)
            ipc_publisher = IntraProcessPublisher(self, node, publisher, topic_type, entry,
                                                  stepping)
            entry.publishers.append(ipc_publisher)
        return ipc_publisher

    def create_subscription(self, node: Node, topic_type: TopicType[T], topic: str,
                            callback: Callable[[T], None], qos: QoSProfile | int,
                            on_reject: Callable[[str], None] | None = None, stepping: bool = False,
                            with_sender: bool = False) -> IntraProcessSubscription[T]:
        """A subscription fed by local publishers (same object) and by DDS (decoded).

        :param on_reject: told why a message from DDS failed to decode (it keeps running).
        :param stepping: a stepping topic: waited on alone while a step's reply is due.
        :param with_sender: call ``callback(obj, sender)``, the DDS publisher's GID or None.
        """
        ipc_sub = IntraProcessSubscription(self, node, callback, topic_type, on_reject, stepping,
                                           with_sender)
        subscription = node.create_subscription(topic_type.msg_type, topic, ipc_sub._on_dds, qos)
        ipc_sub.topic_name = subscription.topic_name
        ipc_sub.rcl_subscription = subscription
        if stepping:
            self.stepping.subscriptions.add(subscription)
        with self._registry.lock:
            entry = self._registry.entry(subscription.topic_name)
            entry.subscriptions.append(ipc_sub)
            if entry.has_latest:  # transient local: a late local subscriber gets the latest value
                self.post(ipc_sub.deliver, entry.latest)
        return ipc_sub

    def forget_node(self, node: Node) -> None:
        """Drop ``node``'s endpoints, services, queued deliveries and posted calls (unloaded)."""
        self._forgotten.add(node)
        for subscription in self._registry.forget(node):
            subscription.forgotten = True

    def create_timer(self, node: Node, period_s: float, callback: Callable[[], None]) -> Any:
        """An rclpy timer on the steady clock whose callback runs on the dispatch thread (no
        locking needed). Steady: status, watchdogs and deadlines must go on when /clock stops
        under use_sim_time (stamps still come from the node's clock)."""
        timer = node.create_timer(period_s, lambda: self.post_for(node, callback),
                                  clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._posting_timers.add(timer)
        return timer

    def has_local_publisher(self, topic: str) -> bool:
        """Whether a node of this process publishes ``topic`` (a fully qualified name)."""
        return self._registry.has_publisher(topic)

    def add_local_service(self, name: str, handler: Callable[[Any], Any]) -> None:
        """Let local clients of service ``name`` (fully qualified) call ``handler`` directly."""
        self._registry.add_service(name, handler)

    def local_service(self, name: str) -> Callable[[Any], Any] | None:
        """The handler of service ``name`` when its server lives in this process."""
        return self._registry.service(name)

    # --- dispatch loop --------------------------------------------------------------------------

    def post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the dispatch thread, after what is already queued; from any
        thread (it wakes the dispatch thread when that waits in the executor)."""
        self.dispatch.post(function, *args)

    def post_for(self, node: Node, function: Callable[..., None], *args: Any) -> None:
        """:meth:`post` on behalf of ``node``: dropped if the node is unloaded before it runs."""
        self.dispatch.post(self._run_for, node, function, args)

    def _run_for(self, node: Node, function: Callable[..., None], args: tuple[Any, ...]) -> None:
        if node not in self._forgotten:
            function(*args)

    def _wake_executor(self) -> None:
        driver = self._driver
        if driver is not None:
            driver.wake()

    def request_shutdown(self, exit_code: int = 0) -> None:
        """Make :meth:`spin` return ``exit_code`` (e.g. the trainer finished)."""
        self.dispatch.request_shutdown(exit_code)

    @property
    def exit_code(self) -> int:
        return self.dispatch.exit_code

    @property
    def shutdown_requested(self) -> bool:
        return self.dispatch.shutdown_requested

    @property
    def queued(self) -> int:
        """Items waiting in the dispatch queue (approximately, as ``qsize`` counts)."""
        return self.dispatch.queued

    def report_error(self, source: str, error: Exception) -> None:
        """Hand ``error`` to the ``on_error`` of the running :meth:`spin`, if it has one."""
        on_error = self._on_error
        if on_error is not None:
            on_error(source, error)

    @property
    def on_dispatch_thread(self) -> bool:
        """Whether the caller runs on the thread that drives :meth:`spin` (and the executor)."""
        return threading.get_ident() == self._dispatch_thread

    def spin(self, timeout_s: float | None = None,
             on_error: Callable[[str, Exception], None] | None = None,
             executor: Executor | None = None) -> int:
        """Drain the dispatch queue until shutdown (or ``timeout_s``); returns the exit code.

        :param on_error: receives ``(source, exception)`` for every exception a callback raises
            (dispatch callbacks, and executor callbacks when ``executor`` is given), and the
            loop goes on; without it exceptions propagate.
        :param executor: the rclpy executor of this process' nodes. When given, this thread also
            runs its callbacks: it waits in the executor while the queue is empty (a post from
            another thread wakes it), and once the queue has stayed busy for
            ``EXECUTOR_HANDOVER_S`` a watcher thread waits for it and hands each ready callback
            over, which this thread runs after the callback in progress. So timers, services and
            parameters stay responsive, and DDS callbacks queue their messages on the thread
            that drains the queue: no thread hand-off per message. Without it, another thread
            must spin the executor.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        dispatch = self.dispatch
        monotonic = time.monotonic
        self._dispatch_thread = threading.get_ident()
        self._on_error, self._spin_ended = on_error, False
        driver = self._driver = (
            DispatchExecutor(executor, self._posting_timers, self.context, on_error,
                             lambda: self.request_shutdown(self.exit_code),
                             SteppingWait(self.stepping, self.context))
            if executor is not None else None)
        watcher = driver.watcher if driver is not None else None
        handover_at = monotonic() + EXECUTOR_HANDOVER_S  # when a busy spell gets the watcher

        def executor_has_work() -> bool:
            """What the watcher handed over runs after the callback in progress, not after the
            burst (one callback may carry a gradient step, milliseconds); and a busy spell
            hands the executor to the watcher."""
            return watcher is not None and (watcher.news or (
                not watcher.active and monotonic() >= handover_at))

        try:
            while not dispatch.shutdown_requested and self.context.ok():
                now = monotonic()
                wait = 0.1 if deadline is None else min(0.1, deadline - now)
                if wait <= 0:
                    break
                if driver is not None and watcher is not None:
                    if watcher.news:
                        driver.run_handed_over()
                    if not watcher.active and now >= handover_at and not dispatch.empty():
                        watcher.wait_on_behalf()
                call = dispatch.next()
                if call is None:
                    if driver is None:
                        call = dispatch.next(wait)
                        if call is None:
                            continue
                    else:
                        driver.wait_idle(dispatch, wait)
                        handover_at = monotonic() + EXECUTOR_HANDOVER_S
                        continue
                # A burst between two shutdown/deadline checks: those cost about as much as a
                # hand-off, and a stepping loop keeps the queue busy.
                dispatch.run_burst(call, on_error, executor_has_work)
        finally:
            if driver is not None:
                driver.close()
            self._driver, self._spin_ended = None, True
            self._dispatch_thread = None
            self._on_error = None
        return self.exit_code

    def wait_on_dispatch_thread(self, done: threading.Event, timeout_s: float) -> bool:
        """Wait for ``done``; on the dispatch thread, keep the executor turning meanwhile.

        A remote service's answer is completed by the executor, which this thread drives; a
        plain wait here would deadlock.

        :raises RuntimeError: when called from inside an executor callback (a service handler,
            a parameter callback), where the executor cannot be re-entered.
        """
        driver = self._driver
        if driver is not None and self.on_dispatch_thread:
            return driver.wait_for(done, timeout_s)
        # False soon after the spin ended: no turn delivers an answer then (a closing prefetcher).
        deadline = time.monotonic() + timeout_s
        while not done.wait(min(SPIN_END_POLL_S, max(deadline - time.monotonic(), 0.0))):
            if self._spin_ended or time.monotonic() >= deadline:
                return False
        return True

    def spin_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Drain the queue until ``condition()`` holds or ``timeout_s`` passes (tests, tools)."""
        return self.dispatch.run_until(condition, timeout_s, self.context.ok)

    # --- own-publication filter -----------------------------------------------------------------

    def is_own_publication(self, node: Node, topic_name: str, publisher_gid: bytes | None) -> bool:
        """Whether a DDS message was published by this process (already delivered locally)."""
        return self._own_publications.match(node, self._registry.find(topic_name), topic_name,
                                            publisher_gid)
