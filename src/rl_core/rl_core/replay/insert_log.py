"""An append-only log of what a replay buffer stored since its last snapshot, so that a SIGKILL
loses at most about a second of experience (issue 19, item 7).

A snapshot copies the whole buffer, so it is taken rarely (``snapshot_period``, 30 s shipped; a
full pixel buffer is ~295 MB). Between snapshots every stored experience batch and every grant
of samples is appended to the current *segment*, ``inserts-<n>.log`` beside the snapshot. When
a snapshot copies the state it starts a new segment at the same moment (under the same lock) and
records that segment's number; once the snapshot file is in place, the older segments are
deleted (compaction). A respawned buffer loads the snapshot and replays the segments from that
number on, in order, up to the first record that is torn or corrupt (the end of what reached
the file), so it ends where its predecessor was, less the records not yet written.

Records are collected in memory and written by a thread of the log every ``flush_period_s``
(0.5 s by default): the insert path pays for copying the arrays into bytes, never for a system
call or a disk. Bytes written are in the kernel's page cache, so a kill of the process cannot
lose them; each write is also ``fdatasync``-ed, so a power cut loses about the same. Records
held when the writer falls behind by more than :data:`MAX_PENDING_BYTES` are written by the
caller at once (back-pressure instead of unbounded memory).

A record is ``magic, length, crc32`` (``<4sII``) then its payload: a kind byte, then for an
insert the robot id, stream, sequence and policy version (``<QQQQ``) and its arrays (obs,
actions, rewards, next_obs, terminated, truncated; each a dtype string, a shape and the raw
bytes, C order); for a grant of samples, their count (``<Q``). Nothing is pickled.
"""

from __future__ import annotations

import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

#: A segment's file name; the number orders segments.
SEGMENT_PATTERN = re.compile(r"^inserts-(\d{8})\.log$")
#: Records held in memory before the caller writes them itself.
MAX_PENDING_BYTES = 64 << 20
#: The largest record a reader accepts (a corrupt length must not allocate gigabytes).
MAX_RECORD_BYTES = 1 << 30
#: How often the log's thread writes what was appended.
FLUSH_PERIOD_S = 0.5

_MAGIC = b"RLIL"
_FRAME = struct.Struct("<4sII")
_INSERT_HEAD = struct.Struct("<BQQQQB")
_SAMPLES = struct.Struct("<BQ")
_ARRAY_HEAD = struct.Struct("<BB")
_INSERT, _SAMPLED = 1, 2
#: The arrays of an insert, in record order (``truncated`` may be empty: none given).
ARRAY_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")


def segment_name(number: int) -> str:
    return f"inserts-{number:08d}.log"


def segments(directory: Path) -> list[tuple[int, Path]]:
    """The log segments in ``directory``, oldest first."""
    found = []
    for path in directory.glob("inserts-*.log") if directory.is_dir() else ():
        match = SEGMENT_PATTERN.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


class InsertRecord(NamedTuple):
    """One stored experience batch, as :meth:`InsertLog.inserted` was given it."""

    robot_id: int
    stream: int
    sequence: int
    policy_version: int
    arrays: tuple[np.ndarray, ...]  # in the order of ARRAY_FIELDS


class SampledRecord(NamedTuple):
    """A grant of ``batches`` samples, which the rate limiter must count again."""

    batches: int


Record = InsertRecord | SampledRecord


def _encode_array(value: object) -> list[bytes]:
    array = np.ascontiguousarray(value)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"the insert log keeps numeric arrays only, got {array.dtype}")
    dtype = array.dtype.str.encode()
    return [_ARRAY_HEAD.pack(len(dtype), array.ndim), dtype,
            struct.pack(f"<{array.ndim}Q", *array.shape), array.tobytes()]


def encode_insert(robot_id: int, stream: int, sequence: int, policy_version: int,
                  arrays: Sequence[object]) -> bytes:
    """The payload of an insert record (``arrays`` in :data:`ARRAY_FIELDS` order; None for a
    missing ``truncated``)."""
    parts = [_INSERT_HEAD.pack(_INSERT, int(robot_id), int(stream), int(sequence),
                               int(policy_version), len(arrays))]
    for value in arrays:
        parts.extend(_encode_array(np.empty(0, dtype=bool) if value is None else value))
    return b"".join(parts)


def encode_samples(count: int) -> bytes:
    return _SAMPLES.pack(_SAMPLED, int(count))


def frame(payload: bytes) -> bytes:
    """A record: its header, then ``payload``."""
    return _FRAME.pack(_MAGIC, len(payload), zlib.crc32(payload)) + payload


def decode(payload: bytes) -> Record:
    """The record of a payload whose checksum matched (ValueError when it is not one)."""
    view = memoryview(payload)
    if view[0] == _SAMPLED and len(view) == _SAMPLES.size:
        return SampledRecord(_SAMPLES.unpack(view)[1])
    if view[0] != _INSERT:
        raise ValueError(f"unknown record kind {view[0]}")
    _, robot_id, stream, sequence, version, count = _INSERT_HEAD.unpack_from(view)
    offset, arrays = _INSERT_HEAD.size, []
    for _ in range(count):
        dtype_length, ndim = _ARRAY_HEAD.unpack_from(view, offset)
        offset += _ARRAY_HEAD.size
        dtype = np.dtype(bytes(view[offset:offset + dtype_length]).decode())
        offset += dtype_length
        shape = struct.unpack_from(f"<{ndim}Q", view, offset)
        offset += 8 * ndim
        size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if dtype.kind not in "biuf" or offset + size > len(view):
            raise ValueError("an array runs past its record")
        arrays.append(np.frombuffer(view[offset:offset + size], dtype=dtype).reshape(shape))
        offset += size
    if offset != len(view):
        raise ValueError("bytes left after the record's arrays")
    return InsertRecord(robot_id, stream, sequence, version, tuple(arrays))


def read_segment(path: Path) -> tuple[list[Record], str]:
    """The whole records of one segment, and why reading stopped early (``""``: at its end).

    A torn tail (the process was killed in the middle of a write) or a corrupt record ends the
    segment: what follows it cannot be trusted to be in order.
    """
    data = path.read_bytes()
    records: list[Record] = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < _FRAME.size:
            return records, f"a torn record header at byte {offset}"
        magic, length, crc = _FRAME.unpack_from(data, offset)
        start = offset + _FRAME.size
        if magic != _MAGIC or length > MAX_RECORD_BYTES:
            return records, f"no record at byte {offset}"
        payload = data[start:start + length]
        if len(payload) < length:
            return records, f"a torn record at byte {offset}"
        if zlib.crc32(payload) != crc:
            return records, f"a record with a wrong checksum at byte {offset}"
        try:
            records.append(decode(payload))
        except (ValueError, TypeError, struct.error) as error:
            return records, f"a malformed record at byte {offset} ({error})"
        offset = start + length
    return records, ""


class InsertLog:
    """Appends records to the current segment of ``directory``; a thread writes them.

    :param directory: where the segments live (the replay buffer's ``output_dir/replay``).
    :param segment: the number of the first segment to write (one past any that exist).
    :param flush_period_s: how often appended records are written.
    """

    def __init__(self, directory: Path, segment: int,
                 flush_period_s: float = FLUSH_PERIOD_S) -> None:
        self.directory = directory
        self.segment = segment
        self.flush_period_s = flush_period_s
        #: Records appended since the last snapshot, and the last write error ("" = none).
        self.records = 0
        self.error = ""
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._append_lock = threading.Lock()  # appends: microseconds, never a system call
        self._io_lock = threading.Lock()  # the segment's file: writes and rotation
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = self._open(segment)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-insert-log", daemon=True)
        self._thread.start()

    def _open(self, segment: int) -> int:
        return os.open(self.directory / segment_name(segment),
                       os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    # --- appending (the caller holds the buffer's lock, so records keep the inserts' order) -----

    def inserted(self, robot_id: int, stream: int, sequence: int, policy_version: int,
                 arrays: Sequence[object]) -> None:
        """Log a stored experience batch (``arrays`` in :data:`ARRAY_FIELDS` order)."""
        self._append(frame(encode_insert(robot_id, stream, sequence, policy_version, arrays)))

    def sampled(self, count: int) -> None:
        """Log a grant of ``count`` samples."""
        if count:
            self._append(frame(encode_samples(count)))

    def _append(self, record: bytes) -> None:
        with self._append_lock:
            self._pending.append(record)
            self._pending_bytes += len(record)
            self.records += 1
            behind = self._pending_bytes > MAX_PENDING_BYTES
        if behind:
            self.flush()

    # --- writing ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write what was appended and make it durable."""
        with self._io_lock:
            self._write_pending()

    def _write_pending(self) -> None:
        with self._append_lock:
            pending, self._pending, self._pending_bytes = self._pending, [], 0
        if not pending or self._fd < 0:
            return
        try:
            os.write(self._fd, b"".join(pending))
            os.fdatasync(self._fd)
        except OSError as error:
            # The records are dropped rather than kept in memory without bound; the buffer
            # itself keeps them, and the next snapshot holds them again.
            self.error = f"{type(error).__name__}: {error}"

    def rotate(self) -> int:
        """Start a new segment (a snapshot is copying the state now) and return its number: the
        snapshot holds everything logged before it."""
        with self._io_lock:
            self._write_pending()
            os.close(self._fd)
            self.segment += 1
            self._fd = self._open(self.segment)
            self.records = 0
            return self.segment

    def compact(self, kept_from: int) -> None:
        """Delete the segments before ``kept_from`` (a snapshot holding them is in place)."""
        for number, path in segments(self.directory):
            if number < kept_from:
                path.unlink(missing_ok=True)

    def _run(self) -> None:
        while not self._stop.wait(self.flush_period_s):
            self.flush()

    def close(self) -> None:
        """Write what is left and close the segment."""
        self._stop.set()
        self._thread.join(timeout=10.0)
        with self._io_lock:
            self._write_pending()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def replay_segments(directory: Path, first: int) -> Iterator[tuple[Path, list[Record], str]]:
    """The records of every segment numbered ``first`` or later, oldest first, with why each
    segment's reading stopped early (see :func:`read_segment`)."""
    for number, path in segments(directory):
        if number >= first:
            records, stopped = read_segment(path)
            yield path, records, stopped


def next_segment(directory: Path) -> int:
    """One past the newest segment in ``directory`` (0 when there is none): a respawned buffer
    never appends to a segment whose tail may be torn."""
    found = segments(directory)
    return found[-1][0] + 1 if found else 0
