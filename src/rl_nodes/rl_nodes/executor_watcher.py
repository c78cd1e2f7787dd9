"""The rclpy executor driven from the dispatch thread of rl_nodes.intra_process, and the
watcher thread that waits in it while that thread is busy.

``IntraProcessManager.spin`` (rl_nodes.intra_process) runs the process' dispatch queue and every
rclpy executor callback on one thread (:class:`DispatchExecutor`). While the queue is empty that
thread waits in the executor itself; once the queue has stayed busy for
:data:`EXECUTOR_HANDOVER_S`, an :class:`ExecutorWatcher` thread waits in the executor on its
behalf (rcl releases the GIL while it waits) and hands each ready callback over, which the
dispatch thread runs after the callback in progress. Polling the executor instead would cost a
wait-set build of every entity per poll. rclpy has no such hand-over, hence this module.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from rcl_interfaces.srv import DescribeParameters, GetParameters, GetParameterTypes, ListParameters
from rclpy.context import Context
from rclpy.executors import (
    ConditionReachedException,
    Executor,
    ExternalShutdownException,
    ShutdownException,
    TimeoutException,
)
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.parameter_service import ParameterService
from rclpy.service import Service
from rclpy.task import Task
from rclpy.timer import Timer
from rclpy.type_description_service import TypeDescriptionService
from type_description_interfaces.srv import GetTypeDescription

#: Busy time of the dispatch queue after which the watcher thread waits in the executor for it.
#: Short busy spells (a decoupled node handling one message or stepping 64 environments) never
#: start it: a start and stop cost a wait-set build and two thread switches (~0.5 ms). A
#: colocated stepping loop stays busy, so the watcher starts once and stays; an outside request
#: waits at most this long, plus the callback in progress, at the start of a busy spell.
EXECUTOR_HANDOVER_S = 0.01
#: Executor callbacks the dispatch thread runs without waiting after a handed-over one.
READY_BURST = 64


#: rclpy's own read-only services (``get_parameters`` and kin on its ParameterService, and
#: ``~/get_type_description``): answering them reads rclpy's state only, on any thread.
READ_ONLY_SERVICES = {DescribeParameters: ParameterService, GetParameters: ParameterService,
                       GetParameterTypes: ParameterService, ListParameters: ParameterService,
                       GetTypeDescription: TypeDescriptionService}


class ExecutorWatcher:
    """Waits in the rclpy executor for the dispatch thread while that thread is busy.

    rclpy's executor finds ready callbacks only by building a wait set of every entity of every
    node and waiting on it: about 1 ms of Python for a colocated container's four nodes (32
    services, 74 event handlers). Polling it often enough for prompt answers takes a large share
    of a busy loop (measured: 15-20 % at one poll per 5 ms), and polling it rarely left outside
    requests waiting (one callback per poll, a poll every ~100 ms: ~1 s for ``get_parameters``).
    This thread instead blocks in the wait (rcl releases the GIL there), so it costs only when
    something is ready. Two kinds of callback it runs itself, because they touch no node state:
    the timers of ``IntraProcessManager.create_timer`` (their callback only posts) and
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
        owner = READ_ONLY_SERVICES.get(entity.srv_type)
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


class DispatchExecutor:
    """The rclpy executor as the dispatch thread drives it, with the :class:`ExecutorWatcher`
    that waits in it while that thread is busy; made by ``IntraProcessManager.spin`` for the
    time it spins, and used on the dispatch thread only.

    :param executor: the rclpy executor of the process' nodes.
    :param posting_timers: timers whose callback only posts (the watcher runs them itself).
    :param context: the rclpy context; once it is shut down, errors mean shutdown.
    :param on_error: receives ``(source, exception)`` for a failing executor callback; without
        it the exception propagates.
    :param on_shutdown: called when the executor reports that the context was shut down.
    """

    def __init__(self, executor: Executor, posting_timers: weakref.WeakSet[Timer], context: Context,
                 on_error: Callable[[str, Exception], None] | None,
                 on_shutdown: Callable[[], None]) -> None:
        self.executor = executor
        self.watcher = ExecutorWatcher(executor, posting_timers)
        self.context = context
        self.on_error = on_error
        self.on_shutdown = on_shutdown
        #: Whether the dispatch thread runs inside the executor now (it cannot be re-entered).
        self.in_executor = False

    def spin_once(self, timeout_s: float) -> None:
        """Wait in the executor here for up to ``timeout_s`` and run what is ready."""
        self.in_executor = True
        try:
            self.executor.spin_once(timeout_sec=timeout_s)
        except Exception as error:  # noqa: BLE001 - reported; the loop goes on
            self.report_error(error)
        finally:
            self.in_executor = False

    def take_back(self) -> None:
        """Stop the watcher's wait, if it waits, and run what it handed over."""
        if self.watcher.active:
            self.watcher.reclaim()
            self.run_handed_over()

    def run_handed_over(self) -> None:
        """Run the executor callbacks the watcher handed over and report every failure it saw."""
        watcher = self.watcher
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
            self._run_ready()
        while watcher.failed:
            failure = watcher.failed.popleft().exception()
            if failure is not None:
                self.report_error(failure)
        if watcher.error is not None:
            error, watcher.error = watcher.error, None
            watcher.reclaim()
            self.report_error(error)

    def close(self) -> None:
        """Stop the watcher, then run what it handed over just before the loop ended: rclpy made
        a task of it, which must run (a service request is answered, a message taken) rather
        than be dropped unawaited."""
        self.watcher.close()
        try:
            self.run_handed_over()
        except Exception:  # noqa: BLE001 - ending anyway: the error that ended it is reported
            pass

    def report_error(self, error: BaseException) -> None:
        """Shut down on a shut-down context, else hand ``error`` to ``on_error`` (or raise it)."""
        shut_down = isinstance(error, (ExternalShutdownException, ShutdownException))
        if shut_down or not self.context.ok():
            self.on_shutdown()  # the context was shut down (SIGINT/SIGTERM)
        elif self.on_error is not None and isinstance(error, Exception):
            self.on_error("executor callback", error)  # a service, timer or parameter callback
        else:
            raise error

    def _run_handler(self, handler: Task[None]) -> None:
        self.in_executor = True
        try:
            handler()
            error = handler.exception()
        finally:
            self.in_executor = False
        if error is not None:
            self.report_error(error)

    def _run_ready(self) -> None:
        """Run the executor callbacks ready now, up to :data:`READY_BURST`, without waiting:
        after a handed-over callback more of a stream are often queued (joint states, a burst of
        messages), and one per dispatch callback (a gradient step) would fall behind a stream
        faster than that. Each look costs a wait-set build (~0.65 ms for a colocated
        container), paid only when something came in."""
        executor = self.executor
        for _ in range(READY_BURST):
            try:
                handler, _, _ = executor.wait_for_ready_callbacks(timeout_sec=0.0)
            except TimeoutException:
                return
            except Exception as error:  # noqa: BLE001 - shut down, or rclpy failed: reported
                self.report_error(error)
                return
            if not handler.done():
                self._run_handler(handler)
