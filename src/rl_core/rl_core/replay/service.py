"""What the replay node serves, without ROS: experience admitted, sample answers, priorities,
files, snapshots and the figures it reports.

:class:`ReplayService` owns a :class:`~rl_core.replay.limited.RateLimitedReplay` and the one lock
that serialises every access to it: the node's callbacks on its dispatch thread, ``sample`` also
on an in-process caller's (a learner thread), the insert log and snapshots on threads of theirs.
Every rejected input is handed to the node's ``reject``, which logs and counts it; the service
keeps going. ``sample`` applies the priorities the request carries first, then grants the batches
the rate limiter allows, at most ``max_rows`` rows per answer; the rest stays owed.

With ``output_dir`` the service survives a kill: snapshots every ``snapshot_period`` and, between
them, the insert log (:mod:`rl_core.replay.insert_log`); :meth:`ReplayService.recover` loads the
snapshot and replays the log. No request rolls a run back (issue 41, item 6): ``save`` writes at
most once per ``save_interval``, and ``load`` replaces the contents only before the run is
*active* (:attr:`ReplayService.run_active`) and never moves a counter back (docs/replay.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rl_core.config import ReplayConfig
from rl_core.replay.admission import ExperienceAdmission
from rl_core.replay.buffer import InvalidPriorities, OutOfBounds, ReplayBuffer
from rl_core.replay.build import new_buffer, new_replay
from rl_core.replay.files import (
    DEMOS_PREFIX,
    LOCK_FILE,
    SNAPSHOT_FILE,
    SnapshotWriter,
    confined_path,
    save_refusal,
)
from rl_core.replay.hindsight import episode_keys
from rl_core.replay.insert_log import (
    SENDER,
    Chunk,
    InsertLog,
    decode,
    next_segment,
    read_segment,
    segments,
)
from rl_core.runs.run_lock import RunLock
from rl_core.security.signed_status import StatusSigner
from rl_core.wire.messages import (
    FileAnswer,
    PriorityAnswer,
    PriorityUpdate,
    SampleAnswer,
    max_answer_rows,
)

#: The file ``save`` and ``load`` use when the request names none.
DEFAULT_FILE = "replay_buffer.npz"
#: The status epoch beside the rate limiter's counters in a snapshot.
STATUS_EPOCH = "status_epoch"
#: The first insert-log segment a snapshot does not hold, and the admission state, beside them.
LOG_SEGMENT, ADMISSION = "log_segment", "admission"
#: The transitions an operator drove that the demonstration buffer holds, beside them.
INTERVENTIONS = "interventions_stored"



@dataclass
class StatusFigures:
    """The ``/replay_status`` fields the service knows (the node adds its rejection count)."""

    size: int
    capacity: int
    total_inserted: int
    insert_rate: float
    sample_rate: float
    rate_limited: bool
    acting_paused: bool
    target_updates_per_transition: float
    learning_starts: int
    updates_per_transition: float
    total_sampled: int
    insert_blocked_s: float
    sample_blocked_s: float
    total_env_steps: int
    done: bool
    acting_weights_version: int


class RateMeter:
    """Inserts and batches per second over the last status period.

    :param period_s: the status period; rates are taken over at least half of it, so a status
        published at once between two periodic ones keeps the previous rates.
    :param now: ``time.monotonic()`` at start.
    """

    def __init__(self, period_s: float, now: float) -> None:
        self.period_s = period_s
        self._last = (now, 0, 0)  # time, inserted, sampled at the last measurement
        self.rates = (0.0, 0.0)

    def update(self, now: float, inserted: int, sampled: int) -> tuple[float, float]:
        """``(inserts/s, batches/s)`` given the totals at ``now``."""
        then, inserted_before, sampled_before = self._last
        elapsed = now - then
        if elapsed >= self.period_s / 2:  # rates over a meaningful window only
            self._last = (now, inserted, sampled)
            self.rates = ((inserted - inserted_before) / elapsed,
                          (sampled - sampled_before) / elapsed)
        return self.rates


class ReplayService:
    """A replay node's storage and answers; thread-safe: :attr:`lock` serialises every access
    to :attr:`replay` (which has no lock of its own) and to this service's counters, and the
    node's callback ``on_pause_change`` is called after it is released.

    :param config: the node's parameters.
    :param obs_shape: observation shape of the task.
    :param action_shape: action shape of the task.
    :param reject: told of every rejected input, ``(kind, reason)``.
    :param on_pause_change: called when :attr:`RateLimitedReplay.acting_paused` changed (the
        node publishes its status at once).
    :param max_rows: most rows one sample answer or priority update may carry.
    :param status_period_s: period of the node's status (the window of the rates it reports).
    :param signer: signs the node's statuses; its epoch is kept in snapshots, so a respawned
        buffer's statuses stay newer than its predecessor's (rl_core.security.signed_status).
    :param clock: monotonic seconds (``save_interval`` is measured with it; tests inject one).
    """

    def __init__(self, config: ReplayConfig, obs_shape: tuple[int, ...],
                 action_shape: tuple[int, ...], reject: Callable[[str, str], None],
                 on_pause_change: Callable[[], None], max_rows: int,
                 status_period_s: float = 1.0, signer: StatusSigner | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self.signer = signer or StatusSigner(None)
        self.obs_shape, self.action_shape = obs_shape, action_shape
        self._reject = reject
        self._on_pause_change = on_pause_change
        self.replay = new_replay(config, new_buffer(config, obs_shape, action_shape))
        # Bounded in bytes too: a pixel task's rows are 40 KB each.
        self.max_rows = min(max_rows, max_answer_rows(obs_shape, self.buffer.obs_dtype.itemsize,
                                                      action_shape))
        #: The one lock of an insert, a sample, a save or load, a snapshot's copy, the insert
        #: log's collection and a status: :attr:`replay` and the admission state are plain
        #: single-threaded objects. Never held while calling ``on_pause_change``.
        self.lock = threading.Lock()
        self.rates = RateMeter(status_period_s, time.monotonic())
        self.admission = ExperienceAdmission(config.deployment_robots)
        #: Priorities applied, those skipped because their slot was written since the draw, and
        #: those clipped to ``value_bound``.
        self.priorities_applied = self.priorities_stale = self.priorities_clipped = 0
        #: Whether this service stored an experience batch or granted a batch since it started
        #: (then ``load`` is refused: it would replace what the run learns from).
        self.run_active = False
        self._last_save: float | None = None  # when the save service last wrote
        #: Why the last snapshot was skipped ("" = it was not). Set outside :attr:`lock` (a
        #: snapshot takes it to copy the state) and read whole: a reference, atomic in CPython.
        self.snapshot_error = ""
        self.run_lock = (RunLock(self.files_dir / LOCK_FILE, "replay buffer")
                         if self.files_dir is not None else None)
        self.snapshot_writer = (SnapshotWriter(self.files_dir, self._copy_state,
                                               self._snapshot_written)
                                if self.files_dir is not None else None)
        #: Opened by :meth:`recover`: what was stored since the last snapshot. The senders of the
        #: batches and the samples granted since its last chunk, and the inserts before it.
        self.insert_log: InsertLog | None = None
        self._log_senders: list[tuple[int, int, int, int, int]] = []
        #: Per batch since the last chunk, its rows' intervention flags (None: none was one).
        self._log_intervened: list[np.ndarray | None] = []
        self._log_sampled = 0
        self._log_mark = 0
        #: Chunks dropped because their frames were overwritten while being copied.
        self.log_overruns = 0

    @property
    def buffer(self) -> ReplayBuffer:
        return self.replay.buffer

    def configure(self, config: ReplayConfig) -> None:
        """Follow changed parameters."""
        with self.lock:
            self.config = config
            if config.deployment_robots != self.admission.robots:
                self.admission.resize(config.deployment_robots)
            if config.prioritized:
                self.buffer.beta = config.priority_beta

    def sizes(self) -> tuple[int, int]:
        """Transitions stored now, and inserted in all."""
        with self.lock:
            return self._sizes()

    def _sizes(self) -> tuple[int, int]:
        """:meth:`sizes`, for a caller holding the lock."""
        return len(self.replay), self.replay.total_inserted

    def insert(self, msg: Any) -> None:
        """Store an experience batch (the fields of ``rl_nodes.messages.Experience``) unless
        admission or the buffer refuses it."""
        with self.lock:
            refusal = self.admission.refusal(msg.robot_id, msg.stream, msg.sequence)
            if refusal is not None:
                self._reject(*refusal)
                return
            keys = None if self.replay.hindsight is None else episode_keys(msg.robot_id,
                                                                           msg.env_ids)
            try:
                changed = self.replay.add(msg.obs, msg.actions, msg.rewards, msg.next_obs,
                                          msg.terminated, msg.truncated, msg.policy_version,
                                          msg.intervened, keys)
            except OutOfBounds as error:  # checked by the buffer in its finiteness pass
                self._reject("experience (values out of bounds)", f"robot {msg.robot_id}: {error}")
                return
            except ValueError as error:
                self._reject("experience (malformed)", f"robot {msg.robot_id}: {error}")
                return
            self.admission.stored(msg.robot_id, msg.stream, msg.sequence)
            self.run_active = True
            if self.insert_log is not None:
                self._log_senders.append((msg.robot_id, msg.stream, msg.sequence,
                                          msg.policy_version, len(msg.rewards)))
                self._log_intervened.append(
                    None if msg.intervened is None or not np.any(msg.intervened)
                    else np.asarray(msg.intervened, dtype=bool))
        if self.insert_log is not None:  # on file before the sender's next batch is taken
            self.insert_log.flush(sync=False)
        if changed:
            self._on_pause_change()

    def sample(self, request: Any) -> SampleAnswer:
        """Grant up to ``request.max_batches`` batches (0 = only report sizes); ``request`` has
        the fields of ``rl_core.wire.messages.SampleRequest``."""
        if request.max_batches and not 1 <= request.batch_size <= self.max_rows:
            message = f"batch_size must be between 1 and {self.max_rows}, got {request.batch_size}"
            self._reject("sample request", message)
            return SampleAnswer(False, message, [], *self.sizes())
        max_batches = min(request.max_batches, self.max_rows // max(request.batch_size, 1))
        with self.lock:
            size, total = self._sizes()
            schedule = self.replay.total_env_steps, self.replay.done
            if max_batches == 0:
                return SampleAnswer(True, "sizes only", [], size, total, False, *schedule)
            if size == 0:
                return SampleAnswer(False, "buffer is empty; wait for experience", [], 0, total,
                                    False, *schedule)
            draw, changed = self.replay.take(request.batch_size, max_batches)
            self._log_sampled += len(draw.batches)
            self.run_active = self.run_active or bool(draw.batches)
        if changed:
            self._on_pause_change()
        message = ("run done: the budget is in and its updates were granted" if draw.done else
                   "" if draw.batches else "rate limited: learning is ahead of the data")
        return SampleAnswer(True, message, draw.batches, draw.buffer_size, draw.total_inserted,
                            draw.prioritized, draw.total_env_steps, draw.done)

    def update_priorities(self, update: PriorityUpdate) -> PriorityAnswer:
        """Apply a learner's priorities, or reject them (counted per reason)."""
        with self.lock:
            if not self.buffer.prioritized:
                return self._refuse_priorities("buffer not prioritized", f"{len(update)} "
                                               "priorities sent to a buffer that samples "
                                               "uniformly (prioritized: false)")
            if max(len(update.indices), len(update.priorities)) > self.max_rows:
                return self._refuse_priorities("too many", f"{len(update)} priorities in one "
                                               f"request, more than the cap of {self.max_rows}")
            try:
                applied = self.replay.update_priorities(update)
            except InvalidPriorities as error:
                return self._refuse_priorities(error.kind, str(error))
            self.priorities_applied += applied
            self.priorities_stale += len(update) - applied
            bound = self.buffer.value_bound
            clipped = 0 if bound is None else int(np.count_nonzero(update.priorities > bound))
            self.priorities_clipped += clipped
        if clipped:  # applied, at the bound: counted and logged like a rejection
            self._reject("priorities (clipped)", f"{clipped} of {len(update)} priorities over "
                         f"value_bound {bound:g} were set to it")
        return PriorityAnswer(True, "", applied, len(update) - applied)

    def _refuse_priorities(self, kind: str, message: str) -> PriorityAnswer:
        self._reject(f"priorities ({kind})", message)
        return PriorityAnswer(False, message, 0, 0)

    # --- files: save/load and snapshots, confined to output_dir/replay ---------------------------

    @property
    def files_dir(self) -> Path | None:
        """Where this buffer's files live (``output_dir/replay``); None without ``output_dir``."""
        return Path(self.config.output_dir) / "replay" if self.config.output_dir else None

    def _target(self, path: str, what: str) -> Path | FileAnswer:
        """The file of a ``what`` request, or the answer refusing a path outside the directory."""
        try:
            target = confined_path(self.files_dir, path, DEFAULT_FILE)
            target.is_file()  # a name the file system refuses (over 255 bytes) fails here
            return target
        except (OSError, ValueError) as error:
            self._reject(what, str(error))
            return False, str(error), 0, path

    def save(self, path: str) -> FileAnswer:
        """Write the buffer to ``output_dir/replay/<path>`` (.npz): never over the buffer's own
        state files, at most :data:`MAX_SAVED_FILES` files in all, and at most once per
        ``save_interval`` seconds (a save holds up inserts while it writes)."""
        target = self._target(path, "save request")
        if not isinstance(target, Path):
            return target
        with self.lock:  # one save at a time, however many threads ask
            refusal = save_refusal(target) or self._save_too_soon()
            if refusal:
                self._reject("save request", refusal)
                return False, refusal, 0, str(target)
            if len(self.buffer) == 0:
                return False, "buffer is empty; nothing to save", 0, str(target)
            self._last_save = self._clock()
            try:
                self.buffer.save(target)
            except OSError as error:
                return False, f"could not write {target}: {error}", 0, str(target)
            return True, "saved", len(self.buffer), str(target)

    def _save_too_soon(self) -> str:
        """Why a save now comes too soon after the last one, or ``""``."""
        interval = self.config.save_interval
        if self._last_save is None or not interval:
            return ""
        wait_s = self._last_save + interval - self._clock()
        return (f"the last save was less than save_interval {interval:g} s ago; try again in "
                f"{wait_s:.0f} s") if wait_s > 0 else ""

    def load(self, path: str) -> FileAnswer:
        """Replace the contents with ``output_dir/replay/<path>``, before the run is active
        (:attr:`run_active`) and only with a file of at least as many inserts: counters never
        move back. On failure or refusal nothing changes."""
        target = self._target(path, "load request")
        if not isinstance(target, Path):
            return target
        if not target.is_file():
            return False, f"no file {target}; pass the name of a saved buffer", 0, str(target)
        with self.lock:
            if self.run_active:
                return self._refuse_load(target, "this run is active (experience stored or "
                                         "batches granted since the buffer started); load a "
                                         "saved buffer into a fresh one, before robots and "
                                         "learner run")
            try:
                loaded = self._read_matching(target)
            except (OSError, ValueError) as error:
                return False, f"could not load {target}: {error}", 0, str(target)
            try:
                changed = self.replay.replace_buffer(loaded)
            except ValueError as error:
                return self._refuse_load(target, f"{target.name}: {error}")
            self._restart_log_chunk()
        if changed:
            self._on_pause_change()
        # The log after the last snapshot no longer applies to this content: snapshot it now
        # (after one still being written, which would make this one wait its turn).
        if self.snapshot_writer is not None:
            self.snapshot_writer.join(timeout_s=30.0)
        self.snapshot(wait=True)
        message = "loaded" if not self.snapshot_error else (
            f"loaded, but not snapshotted ({self.snapshot_error}): a kill before the next "
            "snapshot brings the previous contents back")
        return True, message, len(loaded), str(target)

    def _refuse_load(self, target: Path, reason: str) -> FileAnswer:
        self._reject("load request", reason)
        return False, reason, 0, str(target)

    def _read_matching(self, path: Path) -> ReplayBuffer:
        """A saved buffer that fits this service's shapes and capacity (ValueError otherwise)."""
        loaded = ReplayBuffer.from_file(path, max_capacity=self.config.capacity)
        if (loaded.obs_shape, loaded.action_shape, loaded.capacity) != (
                self.obs_shape, self.action_shape, self.config.capacity):
            raise ValueError(f"it holds obs {loaded.obs_shape}, action {loaded.action_shape}, "
                             f"capacity {loaded.capacity}; this buffer has {self.obs_shape}, "
                             f"{self.action_shape}, {self.config.capacity}")
        loaded.value_bound = self.config.value_bound
        return loaded

    def recover(self) -> tuple[bool, str] | None:
        """Restore what a predecessor of this run left (a respawned buffer): its latest snapshot,
        then the insert log after it; then start logging (with ``output_dir``).

        :returns: None when there was nothing to restore, else whether it was restored and a line
            for the log.
        """
        if self.files_dir is None:
            return None
        # Under the lock: in a container an insert may come while this node is still built.
        with self.lock:
            outcome, log_from = self._restore_snapshot()
            # A snapshot that could not be read leaves nothing for the log to continue.
            replayed, stopped = self._replay_log(log_from) if outcome is None or outcome[0] \
                else (0, "")
            self._restart_log_chunk()
            self.insert_log = InsertLog(self.files_dir, next_segment(self.files_dir),
                                        self._collect_chunk)
            size, total = self._sizes()
        if outcome is None and not replayed:
            return None
        restored, message = outcome or (True, "no snapshot")
        if restored:
            message = (f"restored {size} transitions ({total} inserted so far) from {message}, "
                       f"then {replayed} logged chunks"
                       + (f"; the log ended early: {stopped}" if stopped else ""))
        return restored, message

    def _restore_snapshot(self) -> tuple[tuple[bool, str] | None, int]:
        """Load the snapshot (the caller holds the lock): whether it was loaded and where from or
        why not (None without a snapshot), and the first log segment it does not hold."""
        if self.snapshot_writer is None or not self.snapshot_writer.exists():
            return None, 0
        base = self.snapshot_writer.base
        try:
            loaded = self._read_matching(base / SNAPSHOT_FILE)
            counters = self.snapshot_writer.read_counters()
            demo_state = self.snapshot_writer.read_demos()
            self.admission.load_state_dict(counters.pop(ADMISSION, {"streams": [],
                                                                    "lost_messages": 0}))
        except (OSError, ValueError) as error:
            return (False, f"snapshot in {base} not loaded ({error}); starting empty"), 0
        self.signer.resume_after(int(counters.pop(STATUS_EPOCH, 0)))
        log_from = int(counters.pop(LOG_SEGMENT, 0))
        interventions = int(counters.pop(INTERVENTIONS, 0))
        self.replay = new_replay(self.config, loaded)
        self.replay.limiter.load_state_dict(counters)
        if demo_state is not None:
            self._restore_demos(demo_state, base / SNAPSHOT_FILE, interventions)
        return (True, str(base / SNAPSHOT_FILE)), log_from

    def _restore_demos(self, state: dict[str, np.ndarray], snapshot: Path,
                       interventions: int) -> None:
        """The snapshot's demonstration buffer replaces the one ``demos`` loaded afresh: it
        holds the same recordings, and the transitions operators drove since. One that does
        not fit this buffer is reported, and the recordings alone are kept."""
        files = self.replay.demos
        try:
            demos = ReplayBuffer.from_state(
                state, f"demonstration buffer in {snapshot}",
                max_capacity=max(self.config.capacity, files.capacity if files else 0))
            if (demos.obs_shape, demos.action_shape) != (self.obs_shape, self.action_shape):
                raise ValueError(f"it holds obs {demos.obs_shape}, action {demos.action_shape}; "
                                 f"this buffer has {self.obs_shape}, {self.action_shape}")
        except ValueError as error:
            self._reject("snapshot (demonstrations)", f"{error}; keeping only the "
                         "demonstrations the demos parameter names")
            return
        demos.value_bound = self.config.value_bound
        self.replay.demos = demos
        self.replay.intervened_rows = interventions

    def _replay_log(self, first: int) -> tuple[int, str]:
        """Apply the logged chunks collected in segment ``first`` or later (the snapshot holds
        the others; the caller holds the lock); how many, and why the replay stopped early
        (``""``: it did not)."""
        assert self.files_dir is not None
        replayed = 0
        images = {name: self.obs_shape for name in self.buffer.image_fields}
        for number, path in segments(self.files_dir):
            if number < first:
                continue
            payloads, stopped = read_segment(path)
            for payload in payloads:
                try:
                    chunk = decode(payload, self.buffer.row_width, images)
                    if chunk.segment < first:
                        continue  # collected before the snapshot, written after it
                    if chunk.start != self.replay.total_inserted:
                        raise ValueError(f"a chunk from insert {chunk.start} cannot follow "
                                         f"{self.replay.total_inserted} inserts")
                    self.replay.restore(chunk)
                except ValueError as error:
                    return replayed, f"{path.name}: {error}"
                for sender in chunk.senders:
                    self.admission.stored(int(sender["robot_id"]), int(sender["stream"]),
                                          int(sender["sequence"]))
                replayed += 1
            if stopped:
                return replayed, f"{path.name}: {stopped}"
        return replayed, ""

    def _restart_log_chunk(self) -> None:
        """The next chunk starts here (the caller holds the lock, or the service is starting)."""
        self._log_senders, self._log_intervened, self._log_sampled = [], [], 0
        self._log_mark = self.replay.total_inserted

    def _collect_chunk(self) -> Chunk | None:
        """What was stored and granted since the last chunk (the insert log's thread).

        A pixel task's frames are copied after the lock is released (inserts would otherwise
        wait tens of milliseconds), then the copy is checked: none of its slots may have been
        written since. Should they have been (``capacity`` inserts during one copy), the chunk
        is dropped and counted; a replay then stops at the gap it leaves."""
        with self.lock:
            if self.insert_log is None or (self.replay.total_inserted == self._log_mark
                                           and not self._log_sampled):
                return None
            buffer, end = self.buffer, self.replay.total_inserted
            rows, first, inserted = buffer.rows_since(self._log_mark)
            chunk = Chunk(self.insert_log.segment, self._log_mark, inserted, self._log_sampled,
                          np.array(self._log_senders, dtype=SENDER), rows, {},
                          self._intervened_rows(len(rows)))
            self._restart_log_chunk()
        if not buffer.image_fields:
            return chunk
        images = buffer.frames(first, len(rows))
        with self.lock:
            if buffer is not self.buffer or buffer.total_inserted - end > \
                    buffer.capacity - len(rows):
                self.log_overruns += 1
                return None
        return chunk._replace(images=images)

    def _intervened_rows(self, kept: int) -> np.ndarray | None:
        """The intervention flags of the last ``kept`` rows stored since the last chunk (None
        when no batch since held an intervention)."""
        if all(flags is None for flags in self._log_intervened):
            return None
        flags = np.concatenate([np.zeros(rows, dtype=bool) if batch_flags is None else batch_flags
                                for (*_, rows), batch_flags in zip(self._log_senders,
                                                                   self._log_intervened)])
        return flags[len(flags) - kept:]

    def _copy_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        with self.lock:
            # The new log segment starts exactly where the copied state ends.
            segment = self.insert_log.rotate() if self.insert_log is not None else 0
            self._restart_log_chunk()
            state = self.buffer.state_dict()
            if self.replay.demos is not None:
                state.update({DEMOS_PREFIX + name: value
                              for name, value in self.replay.demos.state_dict().items()})
            return state, {**self.replay.limiter.state_dict(), STATUS_EPOCH: self.signer.epoch,
                           LOG_SEGMENT: segment, ADMISSION: self.admission.state_dict(),
                           INTERVENTIONS: self.replay.intervened_rows}

    def _snapshot_written(self, counters: dict[str, Any]) -> None:
        if self.insert_log is not None and counters.get(LOG_SEGMENT):
            self.insert_log.compact(int(counters[LOG_SEGMENT]))

    def snapshot(self, wait: bool = False) -> None:
        """Write the buffer and its rate-limiter counters to ``output_dir/replay`` (by a
        background thread unless ``wait``; inserts wait only while the state is copied).

        One that cannot start a new log segment (or, waiting, cannot be written) is skipped and
        said on /diagnostics: the log's current segment still holds everything since the last
        snapshot, and the next period tries again."""
        if self.snapshot_writer is None:
            return
        try:
            if self.snapshot_writer.write(wait):
                self.snapshot_error = ""
        except OSError as error:
            self.snapshot_error = f"{type(error).__name__}: {error}"

    def close(self) -> None:
        """Finish a snapshot being written, then write the last one."""
        if self.snapshot_writer is not None:
            self.snapshot_writer.join(timeout_s=30.0)
        self.snapshot(wait=True)
        if self.insert_log is not None:
            self.insert_log.close()
        if self.run_lock is not None:
            self.run_lock.release()

    # --- figures -------------------------------------------------------------------------------

    def diagnostics(self) -> tuple[bool, str, dict[str, object]]:
        """``(healthy, message, values)`` for /diagnostics; an empty buffer is not healthy."""
        writer = self.snapshot_writer
        with self.lock:
            size, total = self._sizes()
            stats = self.replay.stats()
            paused = self.replay.acting_paused
            values = {"size": size, "capacity": self.config.capacity, "total inserted": total,
                      "fill": f"{size / self.config.capacity:.1%}",
                      "updates per transition": f"{stats.achieved_samples_per_insert:.3f}",
                      "target updates per transition": self.config.updates_per_transition,
                      "acting paused": paused,
                      "acting blocked s": f"{stats.insert_blocked_s:.1f}",
                      "learner blocked s": f"{stats.sample_blocked_s:.1f}",
                      "lost experience messages": self.admission.lost_messages,
                      "experience streams (proven, new)":
                          ", ".join(map(str, self.admission.streams)),
                      "sequence jumps adopted": self.admission.jumps_adopted,
                      "priorities applied": self.priorities_applied,
                      "priorities skipped (slot overwritten)": self.priorities_stale,
                      "priorities clipped (over value_bound)": self.priorities_clipped,
                      # The writer's figures are its own, written by its thread: one int and
                      # one float, each read whole (atomic in CPython).
                      "snapshots": writer.snapshots if writer else 0,
                      "snapshot hold ms": f"{1000 * writer.hold_s if writer else 0.0:.1f}",
                      "demonstrations": len(self.replay.demos) if self.replay.demos else 0,
                      "interventions stored": self.replay.intervened_rows,
                      **self._hindsight_figures(), **self._log_figures()}
        # Two strings set by other threads, each read whole (a reference: atomic in CPython).
        if self.insert_log is not None and self.insert_log.error:
            return False, f"insert log not written: {self.insert_log.error}", values
        if self.snapshot_error:
            return False, f"snapshot skipped: {self.snapshot_error}", values
        if size == 0:
            return False, "empty: no experience received yet", values
        if paused:
            return True, f"{size} transitions; acting paused while learning catches up", values
        return True, f"{size} transitions", values

    def _hindsight_figures(self) -> dict[str, object]:
        """HER's figures (none without it)."""
        hindsight = self.replay.hindsight
        if hindsight is None:
            return {}
        return {"hindsight episodes": len(hindsight), "hindsight relabelled": hindsight.relabelled}

    def _log_figures(self) -> dict[str, object]:
        """The insert log's figures. Its segment and chunk count are its own, written under its
        file's lock: each is one int read whole (atomic in CPython)."""
        log = self.insert_log
        if log is None:
            return {"insert log": "off (no output_dir)"}
        return {"insert log": f"segment {log.segment}, {log.chunks} chunks since the snapshot",
                "insert log overruns": self.log_overruns}

    def status(self, now: float) -> StatusFigures:
        """The figures of ``/replay_status`` at ``now`` (``time.monotonic()``), taken together
        under the lock (the node calls this from its timer and after a pause change)."""
        with self.lock:
            size, total = self._sizes()
            stats = self.replay.stats()
            insert_rate, sample_rate = self.rates.update(now, total, stats.samples)
            return StatusFigures(
                size=size, capacity=self.config.capacity, total_inserted=total,
                insert_rate=insert_rate, sample_rate=sample_rate,
                rate_limited=self.config.rate_limit, acting_paused=self.replay.acting_paused,
                target_updates_per_transition=self.config.updates_per_transition,
                learning_starts=self.config.learning_starts,
                updates_per_transition=stats.achieved_samples_per_insert,
                total_sampled=stats.samples, insert_blocked_s=stats.insert_blocked_s,
                sample_blocked_s=stats.sample_blocked_s,
                total_env_steps=self.replay.total_env_steps, done=self.replay.done,
                acting_weights_version=self.replay.acting_weights_version)
