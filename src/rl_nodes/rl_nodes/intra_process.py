"""Intra-process zero-copy communication for rclpy, shaped like rclcpp's intra-process manager.

rclpy has no intra-process manager, so every rclpy publication is serialised and travels through
the DDS stack even when publisher and subscriber share a process (≈1 ms per round trip against a
few hundred µs of work per acting step). This module provides one:

* Publishers and subscriptions made through :class:`IntraProcessManager` are also real rclpy
  endpoints, so the topics remain real ROS topics (rqt_graph, ``ros2 topic echo`` see them).
* A publish hands the **same Python object** to every subscription of the same topic in the same
  process by appending it to a process-local dispatch queue; the dispatch loop
  (:meth:`IntraProcessManager.spin`) calls the subscribers. A publish never calls a subscriber
  re-entrantly (trampoline), so ping-pong loops do not grow the stack.
* The object is converted to a ROS message and published over DDS only when a subscriber outside
  the process exists (matched subscription count > local subscription count), or always for
  transient-local topics, whose DDS history must hold the latest value for late joiners.
* Messages arriving over DDS from this process's own publishers are dropped (they were already
  delivered locally); messages from other processes are decoded and queued like local ones.

Local subscribers must treat received objects as read-only: the publisher and every other local
subscriber see the same object.

Threading: one thread drives :meth:`IntraProcessManager.spin`, which drains the dispatch queue
and also runs every rclpy executor callback (timers, services, parameters, DDS traffic). While
the queue is empty it waits in the executor itself (a post from another thread wakes it), so a
DDS message reaches its subscriber on the thread that took it, with no thread hand-off. While
the queue stays busy for longer than ``EXECUTOR_HANDOVER_S`` (a colocated stepping loop with
gradient steps), an :class:`_ExecutorWatcher` thread waits in the executor on its behalf (rcl
releases the GIL while it waits) and hands each ready callback over; the dispatch thread runs it
after the callback in progress. Polling instead would cost one wait-set build per poll, about
1 ms for a colocated container's four nodes. Subscription, timer and service callbacks all run
on the dispatch thread, so node code needs no locks except around state it shares with its own
worker threads (or with local service callers on other threads).
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rcl_interfaces.srv import DescribeParameters, GetParameters, GetParameterTypes, ListParameters
from rclpy.clock import Clock, ClockType
from rclpy.context import Context
from rclpy.executors import (
    ConditionReachedException,
    Executor,
    ExternalShutdownException,
    ShutdownException,
    TimeoutException,
)
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.parameter_service import ParameterService
from rclpy.qos import DurabilityPolicy, QoSProfile
from rclpy.service import Service
from rclpy.task import Task
from rclpy.timer import Timer
from rclpy.type_description_service import TypeDescriptionService
from type_description_interfaces.srv import GetTypeDescription

from rl_nodes.conversions import ServiceType, TopicType
from rl_nodes.graph import GUID_PREFIX_BYTES

T = TypeVar("T")
BURST = 64  # dispatch items run between two shutdown/deadline checks
#: Messages from DDS queued for the dispatch thread before further ones are dropped (counted).
MAX_QUEUED_RECEPTIONS = 10_000
#: Busy time of the dispatch queue after which the watcher thread waits in the executor for it.
#: Short busy spells (a decoupled node handling one message or stepping 64 environments) never
#: start it: a start and stop cost a wait-set build and two thread switches (~0.5 ms). A
#: colocated stepping loop stays busy, so the watcher starts once and stays; an outside request
#: waits at most this long, plus the callback in progress, at the start of a busy spell.
EXECUTOR_HANDOVER_S = 0.01


@dataclass
class _TopicEntry:
    """Local endpoints of one fully resolved topic name."""

    subscriptions: list[IntraProcessSubscription] = field(default_factory=list)
    publishers: list[IntraProcessPublisher] = field(default_factory=list)
    latest: Any = None  # last object of a transient-local topic, for late local subscribers
    has_latest: bool = False


def callback_name(function: Callable[..., Any]) -> str:
    """A readable name of a dispatched callable (``SimulatorNode._on_actions``) for error reports."""
    target = getattr(function, "__self__", None)
    if isinstance(target, IntraProcessSubscription):  # a subscription's deliver: name the callback
        function = target.callback
    return getattr(function, "__qualname__", repr(function))


class IntraProcessManager:
    """Registry of local publishers/subscriptions and the dispatch queue of one rclpy context.

    Get it with :meth:`for_context`; all nodes of a process built on one context share it.
    """

    _by_context: weakref.WeakKeyDictionary[Context, IntraProcessManager] = weakref.WeakKeyDictionary()
    _registry_lock = threading.Lock()

    def __init__(self, context: Context) -> None:
        self.context = context
        self._queue: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]]] = queue.SimpleQueue()
        self._topics: dict[str, _TopicEntry] = {}
        self._services: dict[str, Callable[[Any], Any]] = {}
        self._lock = threading.Lock()
        self._local_prefix: bytes | None = None
        self._shutdown = threading.Event()
        self._executor: Executor | None = None  # set while spin() drives it
        self._watcher: _ExecutorWatcher | None = None  # set while spin() drives an executor
        #: Timers of :meth:`create_timer`: their rclpy callback only posts, so any thread may run
        #: it (the executor watcher does).
        self._posting_timers: weakref.WeakSet[Timer] = weakref.WeakSet()
        self._executor_waiting = False
        self._in_executor = False
        self._dispatch_thread: int | None = None
        self._on_error: Callable[[str, Exception], None] | None = None
        self.exit_code = 0
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
                         qos: QoSProfile | int) -> IntraProcessPublisher[T]:
        """A publisher that hands objects to local subscribers and to DDS when needed."""
        publisher = node.create_publisher(topic_type.msg_type, topic, qos)
        ipc_publisher = IntraProcessPublisher(self, node, publisher, topic_type)
        with self._lock:
            self._topics.setdefault(publisher.topic_name, _TopicEntry()).publishers.append(ipc_publisher)
        return ipc_publisher

    def create_subscription(self, node: Node, topic_type: TopicType[T], topic: str,
                            callback: Callable[[T], None], qos: QoSProfile | int,
                            on_reject: Callable[[str], None] | None = None
                            ) -> IntraProcessSubscription[T]:
        """A subscription fed by local publishers (same object) and by DDS (decoded).

        :param on_reject: called with the reason when a message from DDS fails to decode
            (malformed shapes, bad checksum); the subscription keeps running.
        """
        ipc_sub = IntraProcessSubscription(self, node, callback, topic_type, on_reject)
        subscription = node.create_subscription(topic_type.msg_type, topic, ipc_sub._on_dds, qos)
        ipc_sub.topic_name = subscription.topic_name
        ipc_sub.rcl_subscription = subscription
        with self._lock:
            entry = self._topics.setdefault(subscription.topic_name, _TopicEntry())
            entry.subscriptions.append(ipc_sub)
            if entry.has_latest:  # transient local: a late local subscriber gets the latest value
                self.post(ipc_sub.deliver, entry.latest)
        return ipc_sub

    def create_timer(self, node: Node, period_s: float, callback: Callable[[], None]) -> Any:
        """An rclpy timer on the steady clock whose callback runs on the dispatch thread (no
        locking needed). Steady: status, watchdogs and deadlines must go on when /clock stops
        under use_sim_time (stamps still come from the node's clock)."""
        timer = node.create_timer(period_s, lambda: self.post(callback),
                                  clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._posting_timers.add(timer)
        return timer

    def has_local_publisher(self, topic: str) -> bool:
        """Whether a node of this process publishes ``topic`` (a fully qualified name)."""
        entry = self._topics.get(topic)
        return bool(entry and entry.publishers)

    # --- dispatch loop --------------------------------------------------------------------------

    def post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the dispatch thread, after what is already queued.

        Callable from any thread; wakes the dispatch thread when it waits in the executor.
        """
        self._queue.put((function, args))
        if self._executor_waiting:
            executor = self._executor
            if executor is not None:
                executor.wake()

    def request_shutdown(self, exit_code: int = 0) -> None:
        """Make :meth:`spin` return ``exit_code`` (e.g. the trainer finished)."""
        self.exit_code = exit_code
        self._shutdown.set()
        self.post(lambda: None)  # wake the loop

    @property
    def shutdown_requested(self) -> bool:
        return self._shutdown.is_set()

    @property
    def on_dispatch_thread(self) -> bool:
        """Whether the caller runs on the thread that drives :meth:`spin` (and the executor)."""
        return threading.get_ident() == self._dispatch_thread

    def spin(self, timeout_s: float | None = None,  # noqa: C901 - one hot loop, kept whole
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
        get, get_nowait = self._queue.get, self._queue.get_nowait
        monotonic = time.monotonic
        self._dispatch_thread = threading.get_ident()
        self._executor = executor
        self._on_error = on_error
        watcher = self._watcher = (_ExecutorWatcher(executor, self._posting_timers)
                                   if executor is not None else None)
        handover_at = monotonic() + EXECUTOR_HANDOVER_S  # when a busy spell gets the watcher
        try:
            while not self._shutdown.is_set() and self.context.ok():
                now = monotonic()
                wait = 0.1 if deadline is None else min(0.1, deadline - now)
                if wait <= 0:
                    break
                if watcher is not None:
                    if watcher.news:
                        self._run_handed_over(watcher)
                    if not watcher.active and now >= handover_at and not self._queue.empty():
                        watcher.wait_on_behalf()
                try:
                    item = get_nowait()
                except queue.Empty:
                    if watcher is None:
                        try:
                            item = get(timeout=wait)
                        except queue.Empty:
                            continue
                    else:
                        if watcher.active:  # idle now: wait in the executor here, not there
                            watcher.reclaim()
                            self._run_handed_over(watcher)
                        self._executor_waiting = True
                        try:
                            if self._queue.empty():  # re-check: a post may have come before the flag
                                self._spin_executor(watcher.executor, wait)
                        finally:
                            self._executor_waiting = False
                        handover_at = monotonic() + EXECUTOR_HANDOVER_S
                        continue
                # Drain a burst before the next shutdown/deadline check: those checks cost about
                # as much as a hand-off, and a stepping loop keeps the queue busy. What the
                # watcher hands over runs after the callback in progress, not after the burst:
                # one callback may carry a gradient step (milliseconds).
                for count in range(1, BURST + 1):
                    function, args = item
                    try:
                        function(*args)
                    except Exception as error:  # a failing callback must not stop the other nodes
                        if on_error is None:
                            raise
                        on_error(callback_name(function), error)
                    if count == BURST or self._shutdown.is_set():
                        break
                    if watcher is not None and (watcher.news or (
                            not watcher.active and monotonic() >= handover_at)):
                        break
                    try:
                        item = get_nowait()
                    except queue.Empty:
                        break
        finally:
            if watcher is not None:
                watcher.close()
                self._run_leftovers(watcher)
            self._watcher = None
            self._executor = None
            self._dispatch_thread = None
            self._on_error = None
        return self.exit_code

    def _run_handed_over(self, watcher: _ExecutorWatcher) -> None:
        """Run the executor callbacks the watcher handed over and report every failure it saw."""
        watcher.news = False
        if watcher.active and watcher.parked:
            watcher.active = False  # it handed a callback over and waits no more
        handlers = watcher.handlers
        ran = False
        while handlers:
            handler = handlers.popleft()
            if handler.done():  # handed over twice (rclpy yields an unfinished task again)
                continue
            self._run_handler(handler)
            ran = True
        if ran and not watcher.active:
            self._run_ready(watcher.executor)
        while watcher.failed:
            failure = watcher.failed.popleft().exception()
            if failure is not None:
                self._report_executor_error(failure)
        if watcher.error is not None:
            error, watcher.error = watcher.error, None
            watcher.reclaim()
            self._report_executor_error(error)

    def _run_handler(self, handler: Task[None]) -> None:
        self._in_executor = True
        try:
            handler()
            error = handler.exception()
        finally:
            self._in_executor = False
        if error is not None:
            self._report_executor_error(error)

    def _run_ready(self, executor: Executor) -> None:
        """Run the executor callbacks ready now, up to :data:`BURST`, without waiting: after a
        handed-over callback more of a stream are often queued (joint states, a burst of
        messages), and one per dispatch callback (a gradient step) would fall behind a stream
        faster than that. Each look costs a wait-set build (~0.65 ms for a colocated
        container), paid only when something came in."""
        for _ in range(BURST):
            try:
                handler, _, _ = executor.wait_for_ready_callbacks(timeout_sec=0.0)
            except TimeoutException:
                return
            except Exception as error:  # noqa: BLE001 - shut down, or rclpy failed: reported
                self._report_executor_error(error)
                return
            if not handler.done():
                self._run_handler(handler)

    def _run_leftovers(self, watcher: _ExecutorWatcher) -> None:
        """Run what the watcher handed over just before the loop ended: rclpy made a task of
        it, which must run (a service request is answered, a message taken) rather than be
        dropped unawaited."""
        try:
            self._run_handed_over(watcher)
        except Exception:  # noqa: BLE001 - ending anyway: the error that ended it is reported
            pass

    def _report_executor_error(self, error: BaseException) -> None:
        shut_down = isinstance(error, (ExternalShutdownException, ShutdownException))
        if shut_down or not self.context.ok():
            self.request_shutdown(self.exit_code)  # the context was shut down (SIGINT/SIGTERM)
        elif self._on_error is not None and isinstance(error, Exception):
            self._on_error("executor callback", error)  # a service, timer or parameter callback
        else:
            raise error

    def _spin_executor(self, executor: Executor, timeout_s: float) -> None:
        self._in_executor = True
        try:
            executor.spin_once(timeout_sec=timeout_s)
        except Exception as error:  # noqa: BLE001 - reported; the loop goes on
            self._report_executor_error(error)
        finally:
            self._in_executor = False

    def wait_on_dispatch_thread(self, done: threading.Event, timeout_s: float) -> bool:
        """Wait for ``done``; on the dispatch thread, keep the executor turning meanwhile.

        A remote service's answer is completed by the executor, which this thread drives; a
        plain wait here would deadlock.

        :raises RuntimeError: when called from inside an executor callback (a service handler,
            a parameter callback), where the executor cannot be re-entered.
        """
        executor = self._executor
        if executor is None or not self.on_dispatch_thread:
            return done.wait(timeout_s)
        if self._in_executor:
            raise RuntimeError("a service handler or parameter callback cannot wait for a remote "
                               "service answer on the dispatch thread; call it from a worker thread")
        watcher = self._watcher
        if watcher is not None and watcher.active:  # this thread waits in the executor now
            watcher.reclaim()
            self._run_handed_over(watcher)
        deadline = time.monotonic() + timeout_s
        while not done.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.context.ok():
                return done.is_set()
            self._spin_executor(executor, min(remaining, 0.05))
        return True

    def spin_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Drain the queue until ``condition()`` holds or ``timeout_s`` passes (tests, tools)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.context.ok():
                return False
            try:
                function, args = self._queue.get(timeout=min(0.05, remaining))
            except queue.Empty:
                continue
            function(*args)
        return True

    # --- own-publication filter -----------------------------------------------------------------

    def is_own_publication(self, node: Node, topic_name: str, publisher_gid: bytes | None) -> bool:
        """Whether a DDS message was published by this process (already delivered locally)."""
        if publisher_gid is None:
            return False
        entry = self._topics.get(topic_name)
        if not entry or not entry.publishers:
            return False  # no local publisher on this topic: it came from elsewhere
        if self._local_prefix is None:
            self._local_prefix = self._find_local_prefix(node, topic_name, entry)
        return self._local_prefix is not None and publisher_gid[:GUID_PREFIX_BYTES] == self._local_prefix

    @staticmethod
    def _find_local_prefix(node: Node, topic_name: str, entry: _TopicEntry) -> bytes | None:
        """GUID prefix of this process' DDS participant, read from a local publisher's endpoint."""
        local_nodes = {(p.node.get_name(), p.node.get_namespace()) for p in entry.publishers}
        for info in node.get_publishers_info_by_topic(topic_name):
            if (info.node_name, info.node_namespace) in local_nodes:
                return bytes(info.endpoint_gid)[:GUID_PREFIX_BYTES]
        return None


#: rclpy's own read-only services (``get_parameters`` and kin on its ParameterService, and
#: ``~/get_type_description``): answering them reads rclpy's state only, on any thread.
_READ_ONLY_SERVICES = {DescribeParameters: ParameterService, GetParameters: ParameterService,
                       GetParameterTypes: ParameterService, ListParameters: ParameterService,
                       GetTypeDescription: TypeDescriptionService}


class _ExecutorWatcher:
    """Waits in the rclpy executor for the dispatch thread while that thread is busy.

    rclpy's executor finds ready callbacks only by building a wait set of every entity of every
    node and waiting on it: about 1 ms of Python for a colocated container's four nodes (32
    services, 74 event handlers). Polling it often enough for prompt answers takes a large share
    of a busy loop (measured: 15-20 % at one poll per 5 ms), and polling it rarely left outside
    requests waiting (one callback per poll, a poll every ~100 ms: ~1 s for ``get_parameters``).
    This thread instead blocks in the wait (rcl releases the GIL there), so it costs only when
    something is ready. Two kinds of callback it runs itself, because they touch no node state:
    the timers of :meth:`IntraProcessManager.create_timer` (their callback only posts) and
    rclpy's read-only services (``get_parameters`` and kin, ``get_type_description``), which
    thus answer even while a dispatch callback runs a gradient step. Any other ready callback
    it hands over (:attr:`handlers`) and stops waiting until the dispatch thread has run it and
    calls :meth:`wait_on_behalf` again: with a subscription's message pending, a wait that
    leaves the subscription out returns at once (its QoS events stay in), so waiting on would
    spin (measured: ~500 empty wake-ups a second, the dispatch thread 30 % slower on the GIL).
    The executor is thus used by one thread at a time.
    """

    def __init__(self, executor: Executor, posting_timers: weakref.WeakSet[Timer]) -> None:
        self.executor = executor
        self._posting_timers = posting_timers
        #: The watcher waits (or is about to) on the dispatch thread's behalf; owned by that thread.
        self.active = False
        #: Set by the watcher after it queued something for the dispatch thread; cleared there.
        self.news = False
        #: A ready callback for the dispatch thread to run, and callbacks the watcher ran that
        #: failed (for the dispatch thread to report).
        self.handlers: deque[Task[None]] = deque()
        self.failed: deque[Task[None]] = deque()
        #: What stopped the watcher's waiting early (the context shut down, rclpy failed).
        self.error: BaseException | None = None
        self._stop = False
        self._closed = False
        self._go = threading.Event()  # dispatch thread -> watcher: wait now
        self._parked = threading.Event()  # watcher -> dispatch thread: out of the executor
        self._parked.set()
        self._guard, self._guard_wait = self._make_guard_wait(executor)
        self._thread = threading.Thread(target=self._run, name="executor-watcher", daemon=True)
        self._thread.start()

    @staticmethod
    def _make_guard_wait(executor: Executor) -> tuple[Any, Any]:
        """The executor's guard condition (rclpy triggers it whenever a callback was taken or
        ran, and on :meth:`Executor.wake`) and a wait set holding only it, or ``(None, None)``
        where this rclpy keeps it elsewhere."""
        guard = getattr(executor, "_guard", None)
        context = getattr(executor, "_context", None)
        if guard is None or context is None or context.handle is None:
            return None, None
        with context.handle:
            return guard, _rclpy.WaitSet(0, 1, 0, 0, 0, 0, context.handle)

    def _clear_guard(self) -> None:
        """Clear the executor's guard condition before a wait: every callback rclpy runs
        triggers it twice, so the next full wait (~0.7 ms of Python for a colocated container's
        entities) would return at once and find nothing. A wait on the guard alone costs
        microseconds. The full wait is built afterwards, so what a trigger announces (an entity
        that may be waited on again, a new one, a stop request checked first) is not lost."""
        guard, wait_set = self._guard, self._guard_wait
        if wait_set is None:
            return
        try:
            with guard.handle:
                wait_set.clear_entities()
                wait_set.add_guard_condition(guard.handle)
                wait_set.wait(0)
        except Exception:  # noqa: BLE001 - a destroyed handle (shutdown): the full wait reports it
            pass

    @property
    def parked(self) -> bool:
        """Whether the watcher is out of the executor (the dispatch thread may use it)."""
        return self._parked.is_set()

    def wait_on_behalf(self) -> None:
        """Dispatch thread: let the watcher wait in the executor."""
        self._stop = False
        self.active = True
        self._parked.clear()
        self._go.set()

    def reclaim(self) -> None:
        """Dispatch thread: stop the watcher's wait and return once it is out of the executor
        (what it queued stays in :attr:`handlers`)."""
        if not self.active:
            return
        self._stop = True
        if not self._parked.is_set():
            self.executor.wake()  # the wait returns and sees the stop condition
        while not self._parked.wait(0.05) and self._thread.is_alive():
            self.executor.wake()  # defensive: a wake-up that came before the wait was consumed
        self.active = False

    def close(self) -> None:
        self.reclaim()
        self._closed = True
        self._go.set()
        self._thread.join(timeout=1.0)
        if self._guard_wait is not None and not self._thread.is_alive():
            self._guard_wait.destroy_when_not_in_use()
            self._guard_wait = None

    def _stop_requested(self) -> bool:
        return self._stop

    def _runs_here(self, entity: object) -> bool:
        if isinstance(entity, Timer):
            return entity in self._posting_timers
        if not isinstance(entity, Service):
            return False
        owner = _READ_ONLY_SERVICES.get(entity.srv_type)
        return owner is not None and isinstance(getattr(entity.callback, "__self__", None), owner)

    def _run(self) -> None:
        wait_for_ready_callbacks = self.executor.wait_for_ready_callbacks
        while True:
            self._go.wait()
            self._go.clear()
            if self._closed:
                return
            handed_over: Task[None] | None = None
            try:
                while not self._stop:
                    self._clear_guard()
                    try:
                        # Same arguments every time: rclpy yields every entity one wait found
                        # ready before it waits again.
                        handler, entity, _ = wait_for_ready_callbacks(
                            None, None, self._stop_requested)
                    except TimeoutException:
                        continue
                    if handler.done():  # rclpy yields an unfinished task again; this one ran
                        continue
                    if not self._runs_here(entity):
                        handed_over = handler
                        break
                    handler()
                    if handler.exception() is not None:
                        self.failed.append(handler)
                        self.news = True
            except (ConditionReachedException, ShutdownException):
                pass
            except BaseException as exception:  # noqa: BLE001 - context shut down, or rclpy failed: report it
                self.error = exception
                self.news = True
            # Out of the executor before the dispatch thread learns of the handler: it may then
            # take the executor back at once.
            self._parked.set()
            if handed_over is not None:
                self.handlers.append(handed_over)
                self.news = True


class IntraProcessPublisher(Generic[T]):
    """Publishes objects: same object to local subscribers, a converted message over DDS."""

    def __init__(self, manager: IntraProcessManager, node: Node, publisher: Any,
                 topic_type: TopicType[T]) -> None:
        self.manager = manager
        self.node = node
        self.rcl_publisher = publisher
        self.topic_type = topic_type
        self.topic_name: str = publisher.topic_name
        self._always_dds = publisher.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
        #: Messages this publisher serialised and sent over DDS / that DDS failed to send.
        self.dds_publications = 0
        self.dds_failures = 0
        #: Payload bytes of the messages sent over DDS (topic types that can count them).
        self.dds_bytes = 0
        self._last_failure_log = 0.0

    def has_remote_subscribers(self) -> bool:
        """Whether a subscriber outside this process is matched (DDS would carry a publication)."""
        local = self.manager._topics[self.topic_name].subscriptions
        return self.rcl_publisher.get_subscription_count() > len(local)

    def publish(self, obj: T, local: bool = True) -> None:
        """Deliver ``obj`` to local subscribers (no copy) and over DDS if someone outside listens.

        :param local: False publishes over DDS only: for a side channel (an image message) whose
            local subscribers get the same data whole on another topic.
        """
        manager = self.manager
        entry = manager._topics[self.topic_name]
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

    def __init__(self, manager: IntraProcessManager, node: Node, callback: Callable[[T], None],
                 topic_type: TopicType[T], on_reject: Callable[[str], None] | None) -> None:
        self.manager = manager
        self.node = node
        self.callback = callback
        self.topic_type = topic_type
        self.on_reject = on_reject

    def deliver(self, obj: T) -> None:
        """Called on the dispatch thread with a local or decoded object."""
        self.callback(obj)

    def _on_dds(self, msg: Any, info: dict[str, Any]) -> None:
        """Rclpy callback (executor thread): drop own publications, decode, queue the rest."""
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
        if self.manager._queue.qsize() >= MAX_QUEUED_RECEPTIONS:
            # The dispatch thread is far behind: refuse new network input rather than grow
            # without bound (local publications are never dropped; their producer waits).
            self.manager.stats["dropped_receptions"] += 1
            if self.on_reject is not None:
                self.on_reject(f"dispatch queue full ({MAX_QUEUED_RECEPTIONS} items); message "
                               "dropped")
            return
        self.manager.stats["dds_receptions"] += 1
        self.manager.post(self.deliver, obj)


class ServiceUnavailable(RuntimeError):
    """No server answered in time; the message says which service and what to check."""


def create_service(manager: IntraProcessManager, node: Node, service_type: ServiceType[Any],
                   name: str, handler: Callable[[Any], Any]) -> Any:
    """A real rclpy service whose handler local clients call directly (no serialisation).

    The handler runs on the caller's thread for local calls and on the executor thread for DDS
    calls, so it must be thread-safe.
    """

    def on_request(request: Any, response: Any) -> Any:
        try:
            return service_type.response_to_msg(handler(service_type.request_from_msg(request)))
        except Exception as error:  # noqa: BLE001 - answer the client instead of leaving it waiting
            if manager._on_error is not None:
                manager._on_error(f"service {name}", error)
            if hasattr(response, "success"):
                response.success = False
            if hasattr(response, "message"):
                response.message = f"request failed: {type(error).__name__}: {error}"
            return response

    service = node.create_service(service_type.srv_type, name, on_request)
    with manager._lock:
        manager._services[service.service_name] = handler
    return service


class IntraProcessClient:
    """Calls a service: directly when its server lives in this process, else over DDS."""

    def __init__(self, manager: IntraProcessManager, node: Node, service_type: ServiceType[Any],
                 name: str) -> None:
        self.manager = manager
        self.service_type = service_type
        self.client = node.create_client(service_type.srv_type, name)
        self.name: str = self.client.service_name

    @property
    def is_local(self) -> bool:
        return self.name in self.manager._services

    def call(self, request: Any, timeout_s: float = 5.0) -> Any:
        """Send ``request`` and return the response object.

        :raises ServiceUnavailable: when no server answers within ``timeout_s``.
        """
        handler = self.manager._services.get(self.name)
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
