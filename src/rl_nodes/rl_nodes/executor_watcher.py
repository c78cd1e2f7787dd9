"""The rclpy executor driven from the dispatch thread of rl_nodes.intra_process, and the
watcher thread that waits in it while that thread is busy.

``IntraProcessManager.spin`` (rl_nodes.intra_process) runs the process' dispatch queue and every
rclpy executor callback on one thread (rl_nodes.dispatch_executor). While the queue is empty that
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
from typing import Any

from rcl_interfaces.srv import DescribeParameters, GetParameters, GetParameterTypes, ListParameters
from rclpy.executors import (
    ConditionReachedException,
    Executor,
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
#: Short busy spells (a decoupled node handling one message) never start it: a start and stop
#: cost a wait-set build and two thread switches. A colocated stepping loop stays busy, so the
#: watcher starts once and stays; an outside request waits at most this long, plus the
#: callback in progress, at the start of a busy spell.
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

    rclpy finds ready callbacks only by building a wait set of every entity and waiting on it,
    so polling is either costly or slow (docs/architecture.md, "Zero-copy inside one process",
    has the figures); this thread blocks in the wait instead (rcl releases the GIL there) and
    costs only when something is ready. It runs two kinds of callback itself, because they touch
    no node state: the timers of ``IntraProcessManager.create_timer`` (they only post) and
    rclpy's read-only services (``get_parameters`` and kin, ``get_type_description``). Any other
    ready callback it hands over (:attr:`handlers`) and stops waiting until the dispatch thread
    has run it and calls :meth:`wait_on_behalf` again: with a message pending, a wait that
    leaves its subscription out returns at once, so waiting on would spin. The executor is thus
    used by one thread at a time.
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
        triggers it, so the next full (costly) wait would return at once and find nothing; a
        wait on the guard alone costs microseconds. The full wait is built afterwards, so what a
        trigger announces (an entity to wait on again, a new one, a stop request) is not lost."""
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
