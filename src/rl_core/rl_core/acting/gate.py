"""When a robot may act: the replay buffer's rate limiter, its silence, and a control rate.

Plain objects for the simulator node (``rl_nodes.simulator``) and the gym bridge
(``rl_nodes.gym_bridge``), which feed them what they hear and do what they answer; times are
``time.monotonic()`` seconds, passed in.
"""

from __future__ import annotations

import math
import threading
import time
from typing import NamedTuple


class StatusChange(NamedTuple):
    """What one ``/replay_status`` changed."""

    #: The first status heard since start.
    first: bool
    #: The replay buffer had fallen silent and reports again.
    heard_again: bool
    #: Acting was paused and may go on now.
    resumed: bool
    #: The replay buffer has just said that the run is done: acting stops.
    finished: bool = False

    def lines(self, total_env_steps: int, rate_limited: bool) -> list[str]:
        """What a simulator logs of this change (``total_env_steps``, ``rate_limited``: the
        status's)."""
        lines = []
        if self.finished:
            lines.append(f"the replay buffer says the run is done ({total_env_steps} "
                         "transitions): acting stops")
        if self.first:
            lines.append("the replay buffer reports; acting follows its rate limiter"
                         if rate_limited else
                         "the replay buffer reports; its rate limiter is off: acting runs free")
        if self.heard_again:
            lines.append("the replay buffer reports again; acting follows its rate limiter")
        return lines


class ActingGate:
    """Acting pauses while the replay buffer's rate limiter says so, while a rate-limited
    buffer is silent for longer than ``silence_s`` (experience sent then would be lost), once
    the buffer says that the run is done (until it says otherwise: a run resumed with more budget),
    and, with ``await_status``, until the buffer's first status.

    :param silence_s: silence of a rate-limited buffer after which acting pauses.
    :param await_status: start paused: a robot of a deployment acts only once it knows whether
        the rate limiter holds it, rather than with its initial policy for as long as the
        learner takes to be heard (seconds across DDS, thousands of transitions).
    :param now: the start (the pause before the first status counts from it).
    """

    def __init__(self, silence_s: float, await_status: bool = False, now: float = 0.0) -> None:
        self.silence_s = silence_s
        self.paused = await_status
        #: Paused because the replay buffer fell silent.
        self.silent = False
        self._status_at: float | None = None
        self._rate_limited = False
        #: The replay buffer said that the run is done.
        self.done = False
        self._paused_s = 0.0
        self._paused_since: float | None = now if await_status else None

    @property
    def awaiting_status(self) -> bool:
        """Paused until the replay buffer's first status."""
        return self.paused and self._status_at is None

    def on_status(self, rate_limited: bool, acting_paused: bool, now: float,
                  done: bool = False) -> StatusChange:
        """A ``/replay_status`` came."""
        first = self._status_at is None
        self._status_at = now
        self._rate_limited = rate_limited
        heard_again, self.silent = self.silent, False
        finished = done and not self.done
        self.done = done
        return StatusChange(first, heard_again,
                            self._set_paused(done or rate_limited and acting_paused, now),
                            finished)

    def on_tick(self, now: float) -> bool:
        """Periodic check; True when the buffer has just been found silent (acting pauses)."""
        if (not self._rate_limited or self.silent or self._status_at is None
                or now - self._status_at <= self.silence_s):
            return False
        self.silent = True
        self._set_paused(True, now)
        return True

    def held_by_limiter(self, now: float) -> bool:
        """Paused by a rate limiter that reported within ``silence_s``: a learner waiting for a
        robot (the gym bridge) waits on, while the pause of a buffer since gone stops counting."""
        return self.paused and not self.silent and self._status_at is not None \
            and now - self._status_at < self.silence_s

    def silent_for(self, now: float) -> float:
        """Seconds since the last status (0 before the first)."""
        return now - self._status_at if self._status_at is not None else 0.0

    def paused_total(self, now: float) -> float:
        """Seconds acting has been paused, the current pause included."""
        ongoing = now - self._paused_since if self._paused_since is not None else 0.0
        return self._paused_s + ongoing

    def _set_paused(self, paused: bool, now: float) -> bool:
        """Pause or go on; True when acting goes on after a pause."""
        if paused == self.paused:
            return False
        self.paused = paused
        if paused:
            self._paused_since = now
            return False
        self._paused_s = self.paused_total(now)
        self._paused_since = None
        return True


class Pacer:
    """Holds a control rate: :meth:`wait` returns no sooner than one period after the last
    (a real robot cannot step faster). ``rate_hz`` 0 never waits. The wait ends early when the
    rate changes (on another thread) or :meth:`close` is called; config keeps a capped rate at
    or above ``MIN_RATE_HZ``, so one wait is bounded."""

    def __init__(self, rate_hz: float) -> None:
        self._rate_hz = rate_hz
        self._last_at = -math.inf
        self._wake = threading.Event()
        self._closed = False

    @property
    def rate_hz(self) -> float:
        return self._rate_hz

    @rate_hz.setter
    def rate_hz(self, value: float) -> None:
        self._rate_hz = value
        self._wake.set()

    def wait(self) -> None:
        started = time.monotonic()
        due = started
        while not self._closed and self._rate_hz > 0:
            due = self._last_at + 1.0 / self._rate_hz
            remaining = due - time.monotonic()
            if remaining <= 0:
                break
            self._wake.wait(remaining)
            self._wake.clear()
        self._last_at = max(started, due)

    def close(self) -> None:
        """End a wait now, and every later one at once."""
        self._closed = True
        self._wake.set()
