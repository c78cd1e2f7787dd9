"""The rclpy executor as the dispatch thread of rl_nodes.intra_process drives it: waiting in it
while the dispatch queue is idle, taking it back from the :class:`ExecutorWatcher` that waits in
it while the queue is busy, running what the watcher handed over, and reporting failures; and
the :class:`SteppingWait`, a wait on the stepping topics alone while a decoupled step's reply is
due from another process.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.executors import Executor, ExternalShutdownException, ShutdownException, TimeoutException
from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.subscription import Subscription
from rclpy.task import Task
from rclpy.timer import Timer

from rl_core.wire.dispatch import DispatchQueue, StepReplies
from rl_nodes.executor_watcher import READY_BURST, ExecutorWatcher


class SteppingTopics:
    """A process' stepping subscriptions, and whether a step's reply is due over DDS."""

    def __init__(self) -> None:
        #: The rclpy subscriptions of the stepping topics (a destroyed one drops out).
        self.subscriptions: weakref.WeakSet[Subscription[Any]] = weakref.WeakSet()
        self.replies = StepReplies()


class SteppingWait:
    """Waits on the stepping subscriptions of a process (and :attr:`guard`, which a post from
    another thread triggers) and runs the rclpy callback of each message that came.

    A decoupled robot's simulator and policy pass every step to each other over DDS, and
    each waits for the other's message with its dispatch thread idle. A turn of the rclpy
    executor costs a wait set of every endpoint, timer and service of the process, far more
    than a wait set of one subscription. So while a step's reply is due from another
    process, the dispatch thread waits on the stepping subscriptions and a wake-up guard
    only, between two turns of the whole executor, which still come whenever a timer is due
    and at least every ``rl_core.wire.dispatch.STEPPING_TURN_S`` (``StepReplies`` there
    keeps that schedule and the reply's state; the DispatchExecutor below waits). Processes
    with no reply due (a paused simulator, a robot that steps in-process) wait in the whole
    executor as before. The stepping topics are those of rl_nodes.graph with ``stepping``.
    The costs: docs/architecture.md, "Zero-copy inside one process".

    :param topics: the process' stepping subscriptions (their callbacks take ``(message,
        info)``) and whether a reply is due.
    :param context: the rclpy context of the process.
    """

    def __init__(self, topics: SteppingTopics, context: Context) -> None:
        self.topics = topics
        self.context = context
        #: Triggered to end a wait early: a call was posted to the dispatch queue.
        self.guard = GuardCondition(None, None, context=context)
        self._wait_set: Any = None
        self._wait_set_size = -1

    def __bool__(self) -> bool:
        """Whether to wait here: a step's reply is due and there is a subscription to wait on."""
        return self.topics.replies.due and bool(self.topics.subscriptions)

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` and run the callbacks of what came. True when a message
        came or the guard was triggered, False when the wait timed out (or the subscriptions
        are gone): then the whole executor should turn."""
        subscriptions = list(self.topics.subscriptions)
        wait_set = self._wait_set_for(len(subscriptions))
        wait_set.clear_entities()
        taken: list[tuple[Subscription[Any], tuple[Any, Any]]] = []
        try:
            with self.guard.handle:
                wait_set.add_guard_condition(self.guard.handle)
                for subscription in subscriptions:
                    with subscription.handle:
                        wait_set.add_subscription(subscription.handle)
                wait_set.wait(max(0, int(timeout_s * 1e9)))
                ready = wait_set.get_ready_entities("subscription")
                woken = bool(wait_set.get_ready_entities("guard_condition"))
                for subscription in subscriptions:
                    if subscription.handle.pointer in ready:
                        with subscription.handle:
                            message = subscription.handle.take_message(subscription.msg_type,
                                                                       subscription.raw)
                        if message is not None:
                            taken.append((subscription, message))
        except InvalidHandle:  # a subscription or the context went away: a whole turn sees it
            return False
        for subscription, message in taken:
            subscription.callback(*message)
        return bool(taken) or woken

    def _wait_set_for(self, subscriptions: int) -> Any:
        if subscriptions != self._wait_set_size:
            self._wait_set = _rclpy.WaitSet(subscriptions, 1, 0, 0, 0, 0, self.context.handle)
            self._wait_set_size = subscriptions
        return self._wait_set

    def destroy(self) -> None:
        self.guard.destroy()


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
    :param stepping: the wait on the process' stepping subscriptions (rl_nodes.dispatch_executor),
        where the idle thread waits between two turns of the whole executor while a step's
        reply is due.
    """

    def __init__(self, executor: Executor, posting_timers: weakref.WeakSet[Timer], context: Context,
                 on_error: Callable[[str, Exception], None] | None,
                 on_shutdown: Callable[[], None], stepping: SteppingWait | None = None) -> None:
        self.executor = executor
        self.watcher = ExecutorWatcher(executor, posting_timers)
        self.context = context
        self.on_error = on_error
        self.on_shutdown = on_shutdown
        self.stepping = stepping
        #: Whether the dispatch thread runs inside the executor now (it cannot be re-entered).
        self.in_executor = False

    def wake(self) -> None:
        """End the dispatch thread's wait, wherever it waits (any thread)."""
        self.executor.wake()
        if self.stepping is not None:
            self.stepping.guard.trigger()

    def wait_idle(self, dispatch: DispatchQueue, timeout_s: float) -> None:
        """The dispatch queue is empty: take the executor back from the watcher, wait here up to
        ``timeout_s`` (a post wakes the wait) and run what came."""
        self.take_back()
        dispatch.waiting = True
        try:
            if dispatch.empty():  # re-check: a post may have come before the flag
                self._wait(timeout_s)
        finally:
            dispatch.waiting = False

    def _wait(self, timeout_s: float) -> None:
        """While a step's reply is due, on the stepping subscriptions alone until the next turn
        of the whole executor (``StepReplies`` says when), else in the whole executor; a turn
        while stepping also runs everything else ready then, so a stepping loop's messages
        starve neither timers nor services nor other topics."""
        stepping = self.stepping
        if not stepping:
            self.spin_once(timeout_s)
            return
        replies = stepping.topics.replies
        alone_s = replies.alone_for(time.monotonic(), timeout_s)
        if alone_s > 0:
            self.in_executor = True
            try:
                if stepping.wait(alone_s):
                    return
            except Exception as error:  # noqa: BLE001 - reported; the loop goes on
                self.report_error(error)
                return
            finally:
                self.in_executor = False
        self.spin_once(timeout_s)
        self._run_ready()
        replies.turned(time.monotonic(), self._next_timer_s())

    def _next_timer_s(self) -> float | None:
        """Seconds until the executor's next timer is due (None: it has none)."""
        due = [timer.time_until_next_call() for node in self.executor.get_nodes()
               for timer in node.timers]
        due_ns = [value for value in due if value is not None]
        return min(due_ns) * 1e-9 if due_ns else None

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

    def wait_for(self, done: threading.Event, timeout_s: float) -> bool:
        """Wait for ``done`` on the dispatch thread, turning the executor meanwhile (a remote
        service's answer is completed by the executor, which this thread drives).

        :raises RuntimeError: when called from inside an executor callback (a service handler,
            a parameter callback), where the executor cannot be re-entered.
        """
        if self.in_executor:
            raise RuntimeError("a service handler or parameter callback cannot wait for a remote "
                               "service answer on the dispatch thread; call it from a worker thread")
        self.take_back()  # this thread waits in the executor now
        deadline = time.monotonic() + timeout_s
        while not done.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.context.ok():
                return done.is_set()
            self.spin_once(min(remaining, 0.05))
        return True

    def close(self) -> None:
        """Stop the watcher, then run what it handed over just before the loop ended: rclpy made
        a task of it, which must run (a service request is answered, a message taken) rather
        than be dropped unawaited; and release the stepping wait's guard."""
        self.watcher.close()
        try:
            self.run_handed_over()
        except Exception:  # noqa: BLE001 - ending anyway: the error that ended it is reported
            pass
        if self.stepping is not None:
            self.stepping.destroy()

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
        messages), and one per dispatch callback (a gradient step) would fall behind. Each look
        costs a wait-set build, paid only when something came in."""
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
