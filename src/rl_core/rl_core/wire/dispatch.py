"""A process' dispatch queue: calls posted from any thread, run in order by one thread.

rl_nodes.intra_process hands every local message, timer tick and handed-over executor callback
to its nodes through this queue (a trampoline: a publish never calls a subscriber re-entrantly),
and drives it from the thread that also runs the rclpy executor. Nothing here knows ROS.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

#: Calls run in one burst between two checks of shutdown, deadline and the executor.
BURST = 64

Call = tuple[Callable[..., None], tuple[Any, ...]]


def callback_name(function: Callable[..., Any]) -> str:
    """A readable name of a dispatched callable (``SimulatorNode._on_actions``) for error
    reports; a bound method of an object with a ``callback`` (a subscription's ``deliver``) is
    named after that callback."""
    target = getattr(function, "__self__", None)
    callback = getattr(target, "callback", None)
    if callable(callback):
        function = callback
    return getattr(function, "__qualname__", repr(function))


class DispatchQueue:
    """Calls to run on one thread, in the order they were posted, and the request to stop.

    :attr:`wake` is called after a post while :attr:`waiting` is set: the running thread then
    waits elsewhere (in an executor) and must be woken to see the call.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Call] = queue.SimpleQueue()
        self._shutdown = threading.Event()
        self.exit_code = 0
        self.waiting = False
        self.wake: Callable[[], None] = lambda: None

    def post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the dispatch thread, after what is already queued.
        Callable from any thread."""
        self._queue.put((function, args))
        if self.waiting:
            self.wake()

    def request_shutdown(self, exit_code: int = 0) -> None:
        """Stop the running loop, which returns ``exit_code``."""
        self.exit_code = exit_code
        self._shutdown.set()
        self.post(lambda: None)  # wake the loop

    @property
    def shutdown_requested(self) -> bool:
        return self._shutdown.is_set()

    @property
    def queued(self) -> int:
        """Calls waiting (approximately, as ``qsize`` counts)."""
        return self._queue.qsize()

    def empty(self) -> bool:
        return self._queue.empty()

    def next(self, timeout_s: float = 0.0) -> Call | None:
        """The next call, waiting up to ``timeout_s`` for one (0: do not wait); None if none."""
        try:
            return self._queue.get(timeout=timeout_s) if timeout_s > 0 else \
                self._queue.get_nowait()
        except queue.Empty:
            return None

    def run_burst(self, call: Call, on_error: Callable[[str, Exception], None] | None,
                  stop: Callable[[], bool]) -> None:
        """Run ``call``, then the calls queued after it, up to :data:`BURST`, until the queue is
        empty, shutdown is requested or ``stop()`` says the loop has other work.

        :param on_error: receives ``(callback name, exception)`` of a failing call, and the burst
            goes on (one node's failure must not stop the others); without it the exception
            propagates.
        """
        for count in range(1, BURST + 1):
            function, args = call
            try:
                function(*args)
            except Exception as error:
                if on_error is None:
                    raise
                on_error(callback_name(function), error)
            if count == BURST or self._shutdown.is_set() or stop():
                return
            following = self.next()
            if following is None:
                return
            call = following

    def run_until(self, condition: Callable[[], bool], timeout_s: float,
                  alive: Callable[[], bool] = lambda: True) -> bool:
        """Run calls until ``condition()`` holds (True) or ``timeout_s`` passes or ``alive()``
        fails (False)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not alive():
                return False
            call = self.next(min(0.05, remaining))
            if call is not None:
                function, args = call
                function(*args)
        return True


#: The longest the idle dispatch thread waits on the stepping topics alone while a step's reply
#: is due: the rest of the process (services, parameters, other topics) is served at least this
#: often while a robot steps, and at once while none does (timers on time either way).
STEPPING_TURN_S = 0.02


class StepReplies:
    """Whether a step's reply is due from another process, and when the idle dispatch thread
    must turn its whole executor while one is; in between it waits on the stepping topics alone
    (rl_nodes.dispatch_executor). A reply is due once a stepping message went out with no local
    subscriber (the simulator's observations, the policy's actions, in decoupled mode) until a
    stepping message comes in. Nothing here knows ROS."""

    def __init__(self) -> None:
        #: A step's reply is due from another process.
        self.due = False
        self._next_turn = 0.0

    def sent(self, local_subscribers: int) -> None:
        """A stepping message went out over DDS, to ``local_subscribers`` in this process too."""
        if not local_subscribers:
            self.due = True

    def received(self) -> None:
        """A stepping message came in from another process."""
        self.due = False

    def alone_for(self, now: float, timeout_s: float) -> float:
        """Seconds to wait on the stepping topics alone at ``now`` (at most ``timeout_s``; 0:
        turn the whole executor now)."""
        if not self.due:
            return 0.0
        return max(0.0, min(timeout_s, self._next_turn - now))

    def turned(self, now: float, next_timer_s: float | None) -> None:
        """The whole executor turned at ``now``: the next turn is due when the next timer is
        (``next_timer_s`` from now; None: no timer), at most :data:`STEPPING_TURN_S` later."""
        wait_s = STEPPING_TURN_S if next_timer_s is None else \
            min(STEPPING_TURN_S, max(0.0, next_timer_s))
        self._next_turn = now + wait_s
