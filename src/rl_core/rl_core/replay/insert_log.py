"""An append-only log of what a replay buffer stored since its last snapshot, so that a SIGKILL
of the buffer's process loses no stored experience (issue 19, item 7; issue 41, item 11).

A snapshot copies the whole buffer, so it is taken rarely (``snapshot_period``). Between
snapshots each insert appends a *chunk* to the current *segment* (``inserts-<n>.log`` beside the
snapshot) before the insert returns: the rows stored, who sent them and the samples granted; a
thread of the log writes later grants and ``fdatasync``-s the segment every ``flush_period_s``.
A snapshot starts a new segment, and the older ones are deleted once it is in place. A respawned
buffer that loaded the snapshot applies exactly the chunks that continue it, up to a gap, a torn
tail or a corrupt record. A kill of the process loses nothing written; a power cut loses at most
``flush_period_s``. Records are plain ``struct`` layouts with a CRC; nothing is pickled. The
segments and the record layout: docs/replay.md, "What is stored, saved and loaded".
"""

from __future__ import annotations

import os
import re
import struct
import threading
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

#: A segment's file name; the number orders segments.
SEGMENT_PATTERN = re.compile(r"^inserts-(\d{8})\.log$")
#: The largest record a reader accepts (a corrupt length must not allocate gigabytes).
MAX_RECORD_BYTES = 1 << 31
#: How often the log's thread writes the samples granted and syncs the segment to disk.
FLUSH_PERIOD_S = 0.5

_MAGIC = b"RLIL"
_FRAME = struct.Struct("<4sII")
_CHUNK_HEAD = struct.Struct("<BQQQQQI")
_CHUNK = 1
#: A chunk with its rows' intervention flags.
_CHUNK_INTERVENED = 2
#: One batch's sender in a chunk: robot, stream, sequence, policy version, rows.
SENDER = np.dtype([("robot_id", "<u8"), ("stream", "<u8"), ("sequence", "<u8"),
                   ("policy_version", "<u8"), ("rows", "<u8")])


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


def next_segment(directory: Path) -> int:
    """One past the newest segment in ``directory`` (0 when there is none): a respawned buffer
    never appends to a segment whose tail may be torn."""
    found = segments(directory)
    return found[-1][0] + 1 if found else 0


class Chunk(NamedTuple):
    """What a buffer stored between two writes of the log."""

    #: The log's segment when the chunk was collected (a snapshot from a later one holds it).
    segment: int
    #: Inserts the buffer had made before the chunk, and inserts in it.
    start: int
    inserted: int
    #: Samples (batches) granted in the chunk's time.
    sampled: int
    #: The batches' senders (:data:`SENDER` records), in insert order.
    senders: np.ndarray
    #: The stored rows (float32, the buffer's row layout) and image fields (pixel tasks).
    rows: np.ndarray
    images: Mapping[str, np.ndarray]
    #: Per row kept, whether an operator drove it (an intervention); None: no row was one.
    intervened: np.ndarray | None = None


def encode(chunk: Chunk) -> bytes:
    """A chunk as one framed record."""
    senders, rows = chunk.senders, chunk.rows
    if senders.dtype != SENDER or not senders.flags.c_contiguous:
        senders = np.ascontiguousarray(senders, dtype=SENDER)
    if rows.dtype != np.float32 or not rows.flags.c_contiguous:
        rows = np.ascontiguousarray(rows, np.float32)
    kind = _CHUNK if chunk.intervened is None else _CHUNK_INTERVENED
    parts: list[bytes | memoryview] = [
        _CHUNK_HEAD.pack(kind, chunk.segment, chunk.start, chunk.inserted, len(rows),
                         chunk.sampled, len(senders)), senders.data, rows.data]
    parts.extend(np.ascontiguousarray(chunk.images[name]).data for name in sorted(chunk.images))
    if chunk.intervened is not None:
        parts.append(np.asarray(chunk.intervened, dtype=np.uint8).data)
    payload = b"".join(parts)
    return _FRAME.pack(_MAGIC, len(payload), zlib.crc32(payload)) + payload


def decode(payload: bytes, row_width: int, image_shapes: Mapping[str, tuple[int, ...]]) -> Chunk:
    """The chunk of a payload whose checksum matched, for a buffer of ``row_width`` float32
    values per row and these image fields (ValueError when it does not fit)."""
    view = memoryview(payload)
    kind, segment, start, inserted, rows, sampled, batches = _CHUNK_HEAD.unpack_from(view)
    if kind not in (_CHUNK, _CHUNK_INTERVENED):
        raise ValueError(f"unknown record kind {kind}")
    sizes = [batches * SENDER.itemsize, rows * row_width * 4,
             *(rows * int(np.prod(image_shapes[name])) for name in sorted(image_shapes)),
             *((rows,) if kind == _CHUNK_INTERVENED else ())]
    if _CHUNK_HEAD.size + sum(sizes) != len(view):
        raise ValueError(f"{len(view)} bytes do not hold {rows} rows of width {row_width} and "
                         f"{batches} senders")
    offset, pieces = _CHUNK_HEAD.size, []
    for size in sizes:
        pieces.append(view[offset:offset + size])
        offset += size
    senders = np.frombuffer(pieces[0], dtype=SENDER)
    block = np.frombuffer(pieces[1], dtype=np.float32).reshape(rows, row_width)
    images = {name: np.frombuffer(piece, dtype=np.uint8).reshape(rows, *image_shapes[name])
              for name, piece in zip(sorted(image_shapes), pieces[2:])}
    intervened = (np.frombuffer(pieces[-1], dtype=np.uint8).astype(bool)
                  if kind == _CHUNK_INTERVENED else None)
    return Chunk(segment, start, inserted, sampled, senders, block, images, intervened)


def read_segment(path: Path) -> tuple[list[bytes], str]:
    """The payloads of the whole records of one segment, and why reading stopped early (``""``:
    at its end). A torn or corrupt record ends the segment: what follows it cannot be trusted to
    be in order."""
    data = path.read_bytes()
    payloads: list[bytes] = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < _FRAME.size:
            return payloads, f"a torn record header at byte {offset}"
        magic, length, crc = _FRAME.unpack_from(data, offset)
        start = offset + _FRAME.size
        if magic != _MAGIC or length > MAX_RECORD_BYTES:
            return payloads, f"no record at byte {offset}"
        payload = data[start:start + length]
        if len(payload) < length:
            return payloads, f"a torn record at byte {offset}"
        if zlib.crc32(payload) != crc:
            return payloads, f"a record with a wrong checksum at byte {offset}"
        payloads.append(payload)
        offset = start + length
    return payloads, ""


class InsertLog:
    """Writes the chunks that ``collect`` returns into the current segment of ``directory``: at
    each :meth:`flush` (the buffer calls it after each insert), and from a thread of its own
    every ``flush_period_s``, which also syncs the segment to disk.

    :param directory: where the segments live (the replay buffer's ``output_dir/replay``).
    :param segment: the number of the first segment to write (one past any that exist).
    :param collect: the chunk stored since the previous call, or None when nothing happened;
        takes the buffer's lock itself (this log never holds its file's lock while calling it).
    :param flush_period_s: how often the thread writes and syncs.
    """

    def __init__(self, directory: Path, segment: int, collect: Callable[[], Chunk | None],
                 flush_period_s: float = FLUSH_PERIOD_S) -> None:
        self.directory = directory
        self.segment = segment
        self.flush_period_s = flush_period_s
        self._collect = collect
        #: Chunks written into the current segment, and the last write error ("" = none).
        self.chunks = 0
        self.error = ""
        # Chunks are written in the order they were collected: one flush at a time. Taken
        # before the buffer's lock and the file's; never while holding either.
        self._order = threading.Lock()
        self._io_lock = threading.Lock()  # the segment's file descriptor
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = self._open(segment)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-insert-log", daemon=True)
        self._thread.start()

    def _open(self, segment: int) -> int:
        return os.open(self.directory / segment_name(segment),
                       os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def flush(self, sync: bool = True) -> None:
        """Write what was stored and granted since the last chunk into the page cache (a kill
        of the process cannot lose it), and with ``sync`` make the segment durable."""
        with self._order:
            chunk = self._collect()
            written = chunk is None or self._write(encode(chunk))
        if sync and written:
            with self._io_lock:
                if self._fd >= 0:
                    self._record_error(os.fdatasync, self._fd)

    def _write(self, record: bytes) -> bool:
        with self._io_lock:
            if self._fd < 0:
                return False
            view = memoryview(record)
            while view:  # a regular file takes it all at once, but write() may say less
                done = self._record_error(os.write, self._fd, view)
                if done is None:  # the rows stay in the buffer; the next snapshot holds them
                    return False
                view = view[done:]
            self.chunks += 1
            return True

    def _record_error(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)``, or None with the error kept in :attr:`error`."""
        try:
            return call(*args)
        except OSError as error:
            self.error = f"{type(error).__name__}: {error}"
            return None

    def rotate(self) -> int:
        """Start a new segment and return its number (a snapshot is copying the state now: it
        holds every chunk collected before). A chunk collected before and written after lands
        in the new segment; its segment number says the snapshot holds it.

        :raises OSError: when the new segment cannot be opened (a full disk, a directory made
            read-only). The log then goes on writing the current segment, which still holds
            everything since the last snapshot, so the caller must not take this snapshot
            (issue 41, item 8: the old segment used to be closed first, and every later
            write went to a closed descriptor).
        """
        with self._io_lock:
            try:
                fd = self._open(self.segment + 1)
            except OSError as error:
                self.error = (f"segment {self.segment + 1} not opened ({type(error).__name__}: "
                              f"{error}); writing on in segment {self.segment}")
                raise
            if self._fd >= 0:
                os.close(self._fd)
            self._fd = fd
            self.segment += 1
            # The snapshot being copied holds whatever an earlier failed write left out.
            self.chunks, self.error = 0, ""
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
        """Stop the thread, write what is left and close the segment."""
        self._stop.set()
        self._thread.join(timeout=10.0)
        self.flush()
        with self._io_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
