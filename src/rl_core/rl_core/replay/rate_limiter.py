"""A samples-per-insert rate limiter with DeepMind Reverb's ``SampleToInsertRatio`` semantics.

It keeps learning (samples) and acting (inserts) at a configured ratio, so a learner never trains
on data that does not exist yet and acting never runs further ahead of learning than an error
buffer allows. Below ``min_size_to_sample`` inserts every insert is allowed and every sample is
refused. Above it, with ``diff = inserts * samples_per_insert - samples`` and
``m = min_size_to_sample * samples_per_insert``, an insert is allowed while ``diff`` after it is
at most ``m + error_buffer`` and a sample while ``diff`` after it is at least ``m - error_buffer``;
the window holds at least one of each, so each side unblocks as the other moves. As in Reverb,
``error_buffer`` may be a pair ``(min_diff, max_diff)``. ``samples_per_insert == 0`` means "no
learning to wait for".

Reverb blocks the caller inside ``insert``/``sample``; a ROS node cannot block a topic callback,
so this class answers questions (:meth:`can_insert`, :meth:`sample_allowance`) and records what
happened and the time each side was blocked. No lock: its owner serialises every call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RateLimiterStats:
    """A consistent snapshot of the limiter's counters."""

    inserts: int
    samples: int
    insert_blocked: bool
    sample_blocked: bool
    insert_blocked_s: float
    sample_blocked_s: float
    #: Samples per insert counted from the moment ``min_size_to_sample`` was reached.
    achieved_samples_per_insert: float


class SampleToInsertRatio:
    """Reverb's ``SampleToInsertRatio(samples_per_insert, min_size_to_sample, error_buffer)``.

    :param samples_per_insert: target samples per inserted item (``>= 0``).
    :param min_size_to_sample: inserts needed before the first sample (``>= 1``).
    :param error_buffer: how far (in samples) the ratio may drift either way, or the pair
        ``(min_diff, max_diff)``; ``max_diff - min_diff`` must be at least
        ``samples_per_insert + 1``, else insert and sample could block each other forever.
    :param clock: monotonic clock in seconds (tests inject one).
    :raises ValueError: on values outside those ranges, saying how to fix them.

    Not thread-safe: :class:`~rl_core.replay.limited.RateLimitedReplay` owns one, and the replay
    node's :class:`~rl_core.replay.service.ReplayService` serialises every call under its lock.
    """

    def __init__(self, samples_per_insert: float, min_size_to_sample: int,
                 error_buffer: float | tuple[float, float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not math.isfinite(samples_per_insert) or samples_per_insert < 0:
            raise ValueError(f"samples_per_insert must be a finite number >= 0, got {samples_per_insert}")
        if min_size_to_sample < 1:
            raise ValueError(f"min_size_to_sample must be >= 1, got {min_size_to_sample}")
        if isinstance(error_buffer, tuple):
            min_diff, max_diff = map(float, error_buffer)
        else:
            centre = min_size_to_sample * samples_per_insert
            min_diff, max_diff = centre - error_buffer, centre + error_buffer
        if not (math.isfinite(min_diff) and math.isfinite(max_diff)):
            raise ValueError(f"error_buffer must be finite, got {error_buffer}")
        if samples_per_insert > 0 and max_diff - min_diff < samples_per_insert + 1:
            raise ValueError(f"error_buffer {error_buffer} leaves a window of {max_diff - min_diff} "
                             f"samples; it must hold one insert ({samples_per_insert}) and one "
                             "sample, else inserts and samples deadlock")
        self.samples_per_insert = float(samples_per_insert)
        self.min_size_to_sample = int(min_size_to_sample)
        self.min_diff, self.max_diff = min_diff, max_diff
        self._clock = clock
        self.inserts = 0
        self.samples = 0
        self._inserts_at_min_size: int | None = None
        self._samples_at_min_size = 0
        self._blocked_since: dict[str, float | None] = {"insert": None, "sample": None}
        self._blocked_total = {"insert": 0.0, "sample": 0.0}

    # --- questions ----------------------------------------------------------------------------

    def _diff(self) -> float:
        return self.inserts * self.samples_per_insert - self.samples

    def can_insert(self, count: int = 1) -> bool:
        """Whether ``count`` more inserts stay within the error buffer."""
        if self.samples_per_insert == 0 or self.inserts < self.min_size_to_sample:
            return True
        return self._diff() + count * self.samples_per_insert <= self.max_diff

    def insert_headroom(self) -> float:
        """Inserts still allowed before inserts block (infinite below the minimum size)."""
        if self.samples_per_insert == 0 or self.inserts < self.min_size_to_sample:
            return math.inf
        return (self.max_diff - self._diff()) / self.samples_per_insert

    def sample_allowance(self, insert_cap: int | None = None) -> int:
        """The largest number of samples allowed now (0 while the learner is ahead), counting
        only the first ``insert_cap`` inserts when given (see :meth:`take_samples`)."""
        inserts = self.inserts if insert_cap is None else min(self.inserts, insert_cap)
        if inserts < self.min_size_to_sample:
            return 0
        diff = inserts * self.samples_per_insert - self.samples
        return max(0, math.floor(diff - self.min_diff + 1e-9))

    # --- records ------------------------------------------------------------------------------

    def insert(self, count: int = 1) -> None:
        """Record ``count`` inserts. Never refuses: data that arrived is kept (back-pressure is
        the caller's business, through :meth:`can_insert`)."""
        self.inserts += count
        if self._inserts_at_min_size is None and self.inserts >= self.min_size_to_sample:
            self._inserts_at_min_size = self.inserts
            self._samples_at_min_size = self.samples
        self._account()

    def sample(self, count: int = 1) -> None:
        """Record ``count`` samples (the caller checked :meth:`sample_allowance`)."""
        self.samples += count
        self._account()

    def take_samples(self, wanted: int, insert_cap: int | None = None) -> int:
        """Grant and record up to ``wanted`` samples at once; returns how many were granted.

        :param insert_cap: grant only what the first ``insert_cap`` inserts pay for (a learner
            with a fixed budget of data); None = no cap.
        """
        granted = min(max(wanted, 0), self.sample_allowance(insert_cap))
        self.samples += granted
        self._mark("sample", wanted > 0 and granted == 0)
        self._account()
        return granted

    # --- accounting ---------------------------------------------------------------------------

    def _mark(self, side: str, blocked: bool) -> None:
        now = self._clock()
        since = self._blocked_since[side]
        if blocked and since is None:
            self._blocked_since[side] = now
        elif not blocked and since is not None:
            self._blocked_total[side] += now - since
            self._blocked_since[side] = None

    def _account(self) -> None:
        self._mark("insert", not self.can_insert())
        if self.sample_allowance() > 0:
            self._mark("sample", False)

    def stats(self) -> RateLimiterStats:
        """Counters, blocked state and blocked time (including a block still going on)."""
        now = self._clock()
        blocked = {side: self._blocked_total[side] + (now - since if since is not None else 0.0)
                   for side, since in self._blocked_since.items()}
        achieved = 0.0
        if self._inserts_at_min_size is not None:
            inserts = self.inserts - self._inserts_at_min_size
            achieved = (self.samples - self._samples_at_min_size) / inserts if inserts else 0.0
        return RateLimiterStats(self.inserts, self.samples, not self.can_insert(),
                                self._blocked_since["sample"] is not None,
                                blocked["insert"], blocked["sample"], achieved)

    def state_dict(self) -> dict[str, int]:
        """Counters to store with a replay snapshot (the configuration comes from parameters)."""
        return {"inserts": self.inserts, "samples": self.samples}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from stored counters."""
        self.inserts, self.samples = int(state["inserts"]), int(state["samples"])
        self._inserts_at_min_size = (self.inserts if self.inserts >= self.min_size_to_sample
                                     else None)
        self._samples_at_min_size = self.samples
        self._account()
