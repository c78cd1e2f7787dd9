"""A replay buffer behind a samples-per-insert rate limiter: what the replay node and the bare
loop both serve batches from.

Acting inserts, learning takes batches; the limiter (:class:`SampleToInsertRatio`) keeps
``updates_per_transition`` batches per inserted transition. Learning never runs ahead of the data
(exactly the bare loop's schedule), and acting may run ahead by ``error_buffer`` transitions.
Inserts are never refused, so the back-pressure is a flag, :attr:`RateLimitedReplay.acting_paused`,
which the owner passes on to the actors, with hysteresis. With ``enforce=False`` the flag stays
down and the achieved ratio is only reported. With demonstrations (:mod:`rl_core.replay.demos`)
every batch draws ``demo_ratio`` of its rows from them (RLPD's symmetric sampling) and the
limiter counts online inserts only; transitions an operator drove are stored among them too.
The buffer also owns the run's schedule: :attr:`RateLimitedReplay.done` turns true once the
``total_env_steps`` transitions are in and every batch they pay for was granted. The rules:
docs/architecture.md, "Rate limiting: acting and learning at one ratio".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rl_core.replay.buffer import ReplayBuffer
from rl_core.replay.hindsight import Hindsight
from rl_core.replay.insert_log import Chunk
from rl_core.wire.messages import DEMO_SLOT, Batch, PriorityUpdate


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

    It keeps learning (samples) and acting (inserts) at a configured ratio, so a learner never
    trains on data that does not exist yet and acting never runs further ahead of learning than an
    error buffer allows. Below ``min_size_to_sample`` inserts every insert is allowed and every
    sample is refused. Above it, with ``diff = inserts * samples_per_insert - samples`` and
    ``m = min_size_to_sample * samples_per_insert``, an insert is allowed while ``diff`` after it
    is at most ``m + error_buffer`` and a sample while ``diff`` after it is at least
    ``m - error_buffer``; the window holds at least one of each, so each side unblocks as the
    other moves. As in Reverb, ``error_buffer`` may be a pair ``(min_diff, max_diff)``.
    ``samples_per_insert == 0`` means "no learning to wait for".

    Reverb blocks the caller inside ``insert``/``sample``; a ROS node cannot block a topic
    callback, so this class answers questions (:meth:`can_insert`, :meth:`sample_allowance`) and
    records what happened and the time each side was blocked.

    :param samples_per_insert: target samples per inserted item (``>= 0``).
    :param min_size_to_sample: inserts needed before the first sample (``>= 1``).
    :param error_buffer: how far (in samples) the ratio may drift either way, or the pair
        ``(min_diff, max_diff)``; ``max_diff - min_diff`` must be at least
        ``samples_per_insert + 1``, else insert and sample could block each other forever.
    :param clock: monotonic clock in seconds (tests inject one).
    :raises ValueError: on values outside those ranges, saying how to fix them.

    Not thread-safe: :class:`RateLimitedReplay` owns one, and the replay node's
    :class:`~rl_core.replay.service.ReplayService` serialises every call under its lock.
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


#: ``max_batches`` of :meth:`RateLimitedReplay.take` that takes every batch the limiter grants.
UNLIMITED_BATCHES = 1 << 30


@dataclass
class Draw:
    """Batches granted by :meth:`RateLimitedReplay.take` and the buffer's counters then."""

    batches: list[Batch]
    buffer_size: int
    total_inserted: int
    #: Whether the buffer samples by priority (the learner keeps the batches' TD errors).
    prioritized: bool = False
    #: The run's budget in transitions (0: none), and whether the run is done: the budget is in
    #: and these were the last batches it pays for.
    total_env_steps: int = 0
    done: bool = False


class RateLimitedReplay:
    """A :class:`ReplayBuffer` whose sampling and inserting follow one update-to-data ratio.

    :param buffer: the storage.
    :param updates_per_transition: batches (gradient steps) per inserted transition.
    :param learning_starts: transitions stored before the first batch is granted.
    :param error_buffer: transitions acting may run ahead of learning before it is paused.
    :param enforce: raise :attr:`acting_paused` when acting is too far ahead (``rate_limit``).
    :param total_env_steps: the run's budget in transitions (0: none, the run never ends).
    :param demos: demonstrations, sampled beside ``buffer`` (None: none); it must have room
        for the interventions to come (:func:`rl_core.replay.demos.demo_buffer`).
    :param demo_ratio: the share of every batch drawn from ``demos``.
    :param demo_note: what the demonstrations are, for the log.
    :param hindsight: relabels sampled goals (HER; None: off); :meth:`add` then takes each row's
        episode key.

    Not thread-safe, and it takes no lock of its own: the bare loop calls it from one thread, and
    the replay node's :class:`~rl_core.replay.service.ReplayService` serialises every call (and
    every read of its state from another thread) under the service's lock.
    """

    def __init__(self, buffer: ReplayBuffer, updates_per_transition: float, learning_starts: int,
                 error_buffer: int, enforce: bool = True, total_env_steps: int = 0,
                 demos: ReplayBuffer | None = None, demo_ratio: float = 0.5,
                 demo_note: str = "", hindsight: Hindsight | None = None) -> None:
        if error_buffer < 1:
            raise ValueError(f"error_buffer must be at least 1 transition, got {error_buffer}")
        if not 0.0 <= demo_ratio <= 1.0:
            raise ValueError(f"demo_ratio must be in [0, 1], got {demo_ratio}")
        self.buffer = buffer
        self.demos = demos if demos is not None and len(demos) else None
        self.demo_ratio = demo_ratio
        #: What the demonstrations are, for the log ('' without them).
        self.demo_note = demo_note
        self.hindsight = hindsight
        #: Rows stored among the demonstrations because an operator drove them.
        self.intervened_rows = 0
        self.enforce = enforce
        self.total_env_steps = total_env_steps
        low = learning_starts * updates_per_transition
        high = low + max(error_buffer * updates_per_transition, updates_per_transition + 1)
        self.limiter = SampleToInsertRatio(updates_per_transition, learning_starts, (low, high))
        self._resume_headroom = max(1.0, error_buffer / 2)
        self.acting_paused = False
        self._done_reported = False  # the done the last status change saw
        self.acting_weights_version = 0

    def __len__(self) -> int:
        return len(self.buffer)

    @property
    def total_inserted(self) -> int:
        return self.buffer.total_inserted

    def add(self, obs, actions, rewards, next_obs, terminated, truncated=None,
            policy_version: int = 0, intervened=None, episode_keys=None) -> bool:
        """Insert a batch (never refused for rate reasons; invalid data raises ``ValueError``);
        the rows ``intervened`` marks go among the demonstrations too. ``episode_keys`` name each
        row's episode stream, one per robot and environment (HER follows its episodes).

        :returns: whether :attr:`acting_paused` changed.
        """
        slots = self.buffer.add(obs, actions, rewards, next_obs, terminated, truncated)
        if self.hindsight is not None and episode_keys is not None:
            self.hindsight.record(slots, episode_keys, np.logical_or(
                terminated, False if truncated is None else truncated))
        if intervened is not None and np.any(intervened):
            self._add_demonstrations(np.asarray(intervened, dtype=bool), obs, actions,
                                     rewards, next_obs, terminated, truncated)
        self.limiter.insert(len(rewards))
        self.acting_weights_version = max(self.acting_weights_version, int(policy_version))
        return self._update_pause()

    def _demo_buffer(self) -> ReplayBuffer:
        """The demonstration buffer; made like the online one for the first intervention of a
        run without recorded demonstrations."""
        if self.demos is None:
            self.demos = ReplayBuffer(self.buffer.obs_shape, self.buffer.action_shape,
                                      self.buffer.capacity, value_bound=self.buffer.value_bound,
                                      obs_dtype=self.buffer.obs_dtype)
        return self.demos

    def _add_demonstrations(self, rows: np.ndarray, obs, actions, rewards, next_obs,
                            terminated, truncated) -> None:
        """Store the ``rows`` of a batch an operator drove among the demonstrations."""
        self._demo_buffer().add(np.asarray(obs)[rows], np.asarray(actions)[rows],
                                np.asarray(rewards)[rows], np.asarray(next_obs)[rows],
                                np.asarray(terminated)[rows],
                                None if truncated is None else np.asarray(truncated)[rows])
        self.intervened_rows += int(rows.sum())

    def restore(self, chunk: Chunk) -> None:
        """Put back what an insert log's chunk holds (rows, inserts, samples granted) as the
        adds and takes it records did (ValueError when its rows do not fit)."""
        if chunk.intervened is not None and len(chunk.intervened) != len(chunk.rows):
            raise ValueError(f"{len(chunk.intervened)} intervention flags for "
                             f"{len(chunk.rows)} rows")
        self.buffer.restore_rows(chunk.rows, chunk.images, chunk.inserted)
        if self.hindsight is not None:
            self.hindsight.clear()  # restored rows come without their episodes
        if chunk.intervened is not None and chunk.intervened.any():
            rows = chunk.intervened
            self._demo_buffer().restore_rows(
                chunk.rows[rows], {name: frames[rows] for name, frames in chunk.images.items()},
                int(rows.sum()))
            self.intervened_rows += int(rows.sum())
        self.limiter.insert(chunk.inserted)
        self.limiter.sample(chunk.sampled)
        if len(chunk.senders):
            self.acting_weights_version = max(self.acting_weights_version,
                                              int(chunk.senders["policy_version"].max()))
        self._update_pause()

    def replace_buffer(self, buffer: ReplayBuffer) -> bool:
        """Put ``buffer`` (a loaded file) in place of the storage. Counters only move forward:
        the limiter counts the file's inserts beyond its own, and keeps its samples.

        :returns: whether :attr:`acting_paused` changed.
        :raises ValueError: when ``buffer`` made fewer inserts than the storage it replaces
            (``total_inserted`` would move back: a rollback).
        """
        if buffer.total_inserted < self.buffer.total_inserted:
            raise ValueError(f"it holds {buffer.total_inserted} inserts, fewer than the "
                             f"{self.buffer.total_inserted} this buffer made: loading it "
                             "would roll the run back")
        self.buffer = buffer
        if self.hindsight is not None:
            self.hindsight.clear()  # its slots held other rows
        self.limiter.insert(max(0, buffer.total_inserted - self.limiter.inserts))
        return self._update_pause()

    @property
    def done(self) -> bool:
        """The budget is in and every batch it pays for was granted (never, without a budget)."""
        return bool(self.total_env_steps) and self.total_inserted >= self.total_env_steps and \
            self.limiter.sample_allowance(self.total_env_steps) == 0

    def take(self, batch_size: int, max_batches: int) -> tuple[Draw, bool]:
        """Grant up to ``max_batches`` batches of ``batch_size`` (0 while learning is ahead), only
        those the first ``total_env_steps`` transitions pay for, so a run ends with exactly the
        bare loop's number of updates while acting goes on.

        :returns: the draw and whether :attr:`acting_paused` changed.
        """
        granted = (self.limiter.take_samples(max_batches, self.total_env_steps or None)
                   if len(self.buffer) else 0)
        batches = [self._batch(batch_size) for _ in range(granted)]
        return (Draw(batches, len(self.buffer), self.buffer.total_inserted,
                     self.buffer.prioritized, self.total_env_steps, self.done),
                self._update_pause())

    def _batch(self, batch_size: int) -> Batch:
        """One batch: ``demo_ratio`` of it from the demonstrations, the rest online."""
        demos = self.demos
        from_demos = round(batch_size * self.demo_ratio) if demos is not None else 0
        if demos is None or from_demos == 0:
            return self._online(batch_size)
        demo = demos.sample(from_demos)._replace(
            indices=np.full(from_demos, DEMO_SLOT, dtype=np.int64))
        if from_demos == batch_size:
            return demo
        online = self._online(batch_size - from_demos)
        return Batch(**{name: np.concatenate((getattr(online, name), getattr(demo, name)))
                        for name in Batch._fields})

    def _online(self, batch_size: int) -> Batch:
        batch = self.buffer.sample(batch_size)
        if self.hindsight is None:
            return batch
        return self.hindsight.relabel(batch, self.buffer.next_obs_at)

    def update_priorities(self, update: PriorityUpdate) -> int:
        """Apply a learner's priorities, skipping slots written since they were drawn (and,
        with demonstrations, their rows).

        :returns: how many were applied.
        :raises InvalidPriorities: on malformed input (nothing changed).
        """
        if self.demos is not None:
            online = update.indices != DEMO_SLOT
            update = PriorityUpdate(update.indices[online], update.priorities[online],
                                    update.drawn_at)
        return self.buffer.update_priorities(update.indices, update.priorities, update.drawn_at)

    def _update_pause(self) -> bool:
        headroom = self.limiter.insert_headroom()
        paused = self.acting_paused
        if not self.enforce:
            paused = False
        elif headroom < 1:
            paused = True
        elif headroom >= self._resume_headroom:
            paused = False
        # The run's end is a change too: robots stop acting (and hold) at once.
        done = self.done
        changed = paused != self.acting_paused or done != self._done_reported
        self.acting_paused, self._done_reported = paused, done
        return changed

    def stats(self) -> RateLimiterStats:
        return self.limiter.stats()
