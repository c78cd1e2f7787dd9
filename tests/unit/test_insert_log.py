"""Durable replay (issue 19, item 7; issue 41, item 11): the insert log between snapshots
(rl_core.replay.insert_log) and a replay service that recovers from a kill with every stored
transition (and the samples granted up to the log's last periodic write), for state and pixel
tasks alike."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rl_core.config import ReplayConfig
from rl_core.replay.insert_log import (
    SENDER,
    Chunk,
    InsertLog,
    decode,
    encode,
    read_segment,
    segment_name,
    segments,
)
from rl_core.replay.service import ReplayService

pytestmark = pytest.mark.unit

STATE, PIXELS = (3,), (2, 8, 8, 3)  # a pixel task's observation: a stack of RGB frames


def experience(sequence: int, obs_shape: tuple[int, ...] = STATE, rows: int = 4,
               robot_id: int = 0, stream: int = 7) -> SimpleNamespace:
    """The fields of rl_nodes.messages.Experience the service reads; values follow the
    sequence number so that a restored buffer can be compared row by row."""
    dtype = np.uint8 if len(obs_shape) == 4 else np.float32
    obs = np.full((rows, *obs_shape), sequence % 200, dtype)
    return SimpleNamespace(robot_id=robot_id, stream=stream, sequence=sequence, obs=obs,
                           actions=np.full((rows, 1), 0.5, np.float32),
                           rewards=np.full(rows, sequence, np.float32), next_obs=obs + 1,
                           terminated=np.arange(rows) % 2 == 0, truncated=np.zeros(rows, bool),
                           policy_version=sequence, intervened=None)


class Run:
    """Replay services of one run directory: the first one and its respawns."""

    def __init__(self, folder: Path, obs_shape: tuple[int, ...] = STATE) -> None:
        self.folder, self.obs_shape = folder, obs_shape
        self.rejected: list[tuple[str, str]] = []

    def service(self) -> ReplayService:
        config = ReplayConfig(capacity=1000, learning_starts=8, error_buffer=10_000,
                              output_dir=str(self.folder))
        return ReplayService(config, self.obs_shape, (1,),
                             lambda kind, reason: self.rejected.append((kind, reason)),
                             lambda: None, 256)


def killed(service: ReplayService) -> None:
    """What a SIGKILL leaves: the log's thread and the run lock end with the process, written
    bytes stay in the files (the page cache outlives a process)."""
    assert service.insert_log is not None
    service.insert_log._stop.set()  # the thread dies with the process
    service.insert_log._thread.join(5.0)
    os.close(service.insert_log._fd)
    if service.run_lock is not None:
        service.run_lock.release()


def sample(service: ReplayService, batches: int) -> int:
    answer = service.sample(SimpleNamespace(batch_size=4, max_batches=batches))
    return len(answer.batches)


def chunk(segment: int = 0, rows: int = 3, images: bool = False) -> Chunk:
    senders = np.array([(1, 7, 9, 4, rows)], dtype=SENDER)
    frames = {name: np.full((rows, *PIXELS), 5, np.uint8) for name in ("next_obs", "obs")} \
        if images else {}
    return Chunk(segment, 10, rows + 2, 6, senders,
                 np.arange(rows * 5, dtype=np.float32).reshape(rows, 5), frames)


def test_chunks_round_trip_and_a_torn_or_corrupt_tail_ends_the_segment(tmp_path: Path) -> None:
    path = tmp_path / segment_name(0)
    first, second = chunk(images=True), chunk(segment=1)
    whole = encode(first) + encode(second)
    path.write_bytes(whole)
    payloads, stopped = read_segment(path)
    assert stopped == "" and len(payloads) == 2
    decoded = decode(payloads[0], 5, {"obs": PIXELS, "next_obs": PIXELS})
    assert decoded[:4] == (0, 10, 5, 6) and np.array_equal(decoded.senders, first.senders)
    assert np.array_equal(decoded.rows, first.rows)
    assert all(np.array_equal(decoded.images[name], first.images[name]) for name in first.images)
    with pytest.raises(ValueError, match="do not hold"):
        decode(payloads[1], 6, {})  # rows of another width

    path.write_bytes(whole[:-5])  # killed in the middle of the second record's write
    payloads, stopped = read_segment(path)
    assert len(payloads) == 1 and "torn record" in stopped
    corrupt = bytearray(whole)
    corrupt[-3] ^= 0xFF
    path.write_bytes(bytes(corrupt))
    payloads, stopped = read_segment(path)
    assert len(payloads) == 1 and "wrong checksum" in stopped
    path.write_bytes(b"\0" * 60)  # zeros where a record should start
    assert read_segment(path) == ([], "no record at byte 0")


@pytest.mark.parametrize("obs_shape", [STATE, PIXELS], ids=["state", "pixels"])
def test_a_killed_buffer_comes_back_with_everything_its_log_had_written(
        tmp_path: Path, obs_shape: tuple[int, ...]) -> None:
    run = Run(tmp_path, obs_shape)
    service = run.service()
    assert service.recover() is None
    for sequence in range(10):
        service.insert(experience(sequence, obs_shape))
    service.snapshot(wait=True)  # 40 transitions in the snapshot ...
    for sequence in range(10, 25):
        service.insert(experience(sequence, obs_shape))
    granted = sample(service, 30)
    assert granted > 0
    service.insert_log.flush()  # ... 60, and the samples after them by the log's thread
    before = (len(service.buffer), service.replay.total_inserted,
              service.replay.stats().samples, service.buffer.state_dict())
    killed(service)

    respawned = run.service()
    restored, message = respawned.recover()
    assert restored and message.startswith("restored 100 transitions (100 inserted so far)")
    assert "then 16 logged chunks" in message, message  # one per insert, one of samples
    after = respawned.buffer.state_dict()
    assert (len(respawned.buffer), respawned.replay.total_inserted,
            respawned.replay.stats().samples) == before[:3]
    for name in ("obs", "actions", "rewards", "next_obs", "terminated", "truncated", "position"):
        assert np.array_equal(after[name], before[3][name]), name
    # What the robots send again after the respawn is stored once (admission came back too).
    respawned.insert(experience(24, obs_shape))
    assert run.rejected[-1][0] == "experience (duplicate)"
    respawned.insert(experience(25, obs_shape))
    assert respawned.replay.total_inserted == 104
    respawned.close()


@pytest.mark.parametrize("obs_shape", [STATE, PIXELS], ids=["state", "pixels"])
def test_interventions_after_the_snapshot_come_back_among_the_demonstrations_too(
        tmp_path: Path, obs_shape: tuple[int, ...]) -> None:
    """The log flags the rows an operator drove, and a respawn puts them into both buffers,
    as the live buffer did (HIL-SERL's rule); a chunk without any keeps the old record kind."""
    run = Run(tmp_path, obs_shape)
    service = run.service()
    assert service.recover() is None
    service.insert(experience(0, obs_shape))
    service.snapshot(wait=True)
    service.insert(experience(1, obs_shape))
    driven = experience(2, obs_shape)
    driven.intervened = np.array([False, True, True, False])
    service.insert(driven)
    service.insert(experience(3, obs_shape))  # a chunk without interventions
    (_, segment), = [found for found in segments(tmp_path / "replay")
                     if found[0] == service.insert_log.segment]
    payloads, _ = read_segment(segment)
    images = {name: obs_shape for name in service.buffer.image_fields}
    first, flagged, plain = (decode(payload, service.buffer.row_width, images)
                             for payload in payloads)
    np.testing.assert_array_equal(flagged.intervened, [False, True, True, False])
    assert first.intervened is None and plain.intervened is None
    demos_before = service.replay.demos.state_dict()
    assert service.replay.intervened_rows == 2
    killed(service)

    respawned = run.service()
    restored, message = respawned.recover()
    assert restored and "then 3 logged chunks" in message, message
    assert respawned.replay.total_inserted == 16 and respawned.replay.intervened_rows == 2
    assert len(respawned.replay.demos) == 2
    after = respawned.replay.demos.state_dict()
    for name in ("obs", "actions", "rewards", "next_obs", "terminated"):
        np.testing.assert_array_equal(after[name], demos_before[name], err_msg=name)
    respawned.close()


def test_every_insert_is_on_file_when_it_returns_and_samples_within_the_period(
        tmp_path: Path) -> None:
    """A kill right after an insert loses nothing stored (the soak of issue 41 lost the rows of
    the last half second at each replay kill); the samples granted since are written by the
    log's thread within its period. Under 1 s."""
    run = Run(tmp_path)
    service = run.service()
    service.recover()
    assert service.insert_log is not None and service.insert_log.flush_period_s <= 0.5
    path = tmp_path / "replay" / segment_name(service.insert_log.segment)
    for sequence in range(3):
        service.insert(experience(sequence))
        assert len(read_segment(path)[0]) == sequence + 1
    assert sample(service, 1) == 1
    deadline = time.monotonic() + 5.0
    while len(read_segment(path)[0]) == 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(read_segment(path)[0]) == 4, "the log's thread never wrote the samples"
    service.insert(experience(3))
    killed(service)
    respawned = run.service()
    assert respawned.recover()[0]
    assert (len(respawned.buffer), respawned.replay.stats().samples) == (16, 1)
    respawned.close()


def test_snapshots_compact_the_log_and_a_respawn_never_appends_to_an_old_segment(
        tmp_path: Path) -> None:
    run = Run(tmp_path)
    service = run.service()
    service.recover()
    for sequence in range(3):
        service.insert(experience(sequence))
        service.snapshot(wait=True)
    folder = tmp_path / "replay"
    assert [number for number, _ in segments(folder)] == [3], "older segments were deleted"
    service.insert(experience(3))
    service.insert_log.flush()
    killed(service)
    respawned = run.service()
    restored, message = respawned.recover()
    assert restored and len(respawned.buffer) == 16 and "then 1 logged chunks" in message
    assert respawned.insert_log.segment == 4
    respawned.close()  # the last snapshot holds everything: one empty segment is left
    assert [(number, path.stat().st_size) for number, path in segments(folder)] == [(5, 0)]


def test_a_torn_log_restores_what_came_before_the_tear(tmp_path: Path) -> None:
    run = Run(tmp_path)
    service = run.service()
    service.recover()
    for sequence in range(5):
        service.insert(experience(sequence))
        service.insert_log.flush()
    killed(service)
    path = tmp_path / "replay" / segment_name(0)
    path.write_bytes(path.read_bytes()[:-10])  # the kill came in the middle of a write
    respawned = run.service()
    restored, message = respawned.recover()
    assert restored and len(respawned.buffer) == 16, message
    assert "no snapshot, then 4 logged chunks; the log ended early" in message
    assert respawned.insert_log.segment == 1
    respawned.close()


def test_a_loaded_file_is_snapshotted_at_once_so_the_old_log_no_longer_applies(
        tmp_path: Path) -> None:
    other = Run(tmp_path / "other").service()  # a saved buffer of another run, 20 inserts
    for sequence in range(5):
        other.insert(experience(sequence))
    assert other.save("kept.npz")[0]
    other.close()
    (tmp_path / "replay").mkdir()
    os.replace(tmp_path / "other" / "replay" / "kept.npz", tmp_path / "replay" / "kept.npz")
    run = Run(tmp_path)
    service = run.service()
    service.recover()
    for sequence in range(3):
        service.insert(experience(sequence))
    service.insert_log.flush()
    killed(service)
    # A respawned buffer that has not stored anything yet is not active: it may load.
    respawned = run.service()
    assert respawned.recover()[0] and len(respawned.buffer) == 12
    assert respawned.load("kept.npz")[:3] == (True, "loaded", 20)
    killed(respawned)
    again = run.service()
    assert again.recover()[0] and len(again.buffer) == 20, "the old log was replayed"
    again.close()


def test_a_write_error_is_reported_not_raised(tmp_path: Path) -> None:
    log = InsertLog(tmp_path, 0, chunk, flush_period_s=60.0)
    os.close(log._fd)
    log._fd = os.open(os.devnull, os.O_RDONLY)  # writes fail from now on
    log.flush()
    assert "Bad file descriptor" in log.error and log.chunks == 0
    log.close()
    assert read_segment(tmp_path / segment_name(0)) == ([], "")


def refuse_to_open(log: InsertLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next segment cannot be opened (a full disk; tests run as root, so no chmod)."""
    def fail(segment: int) -> int:
        raise OSError(28, "No space left on device", segment_name(segment))
    monkeypatch.setattr(log, "_open", fail)


def test_a_segment_that_cannot_be_opened_leaves_the_log_writing_the_current_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41, item 8: rotate closed the segment before opening the next, so a failed open
    left a closed descriptor and every later chunk was lost."""
    log = InsertLog(tmp_path, 0, chunk, flush_period_s=60.0)
    refuse_to_open(log, monkeypatch)
    with pytest.raises(OSError, match="No space"):
        log.rotate()
    assert log.segment == 0 and "segment 1 not opened" in log.error
    log.flush()
    assert log.chunks == 1 and len(read_segment(tmp_path / segment_name(0))[0]) == 1
    monkeypatch.undo()
    assert log.rotate() == 1 and log.error == ""
    log.close()


def test_a_snapshot_whose_segment_cannot_be_opened_is_skipped_and_nothing_is_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run(tmp_path)
    service = run.service()
    service.recover()
    for sequence in range(3):
        service.insert(experience(sequence))
    refuse_to_open(service.insert_log, monkeypatch)
    service.snapshot(wait=True)  # the periodic snapshot: skipped, not raised
    healthy, message, _ = service.diagnostics()
    assert not healthy and "segment 1 not opened" in message, message
    assert not (tmp_path / "replay" / "snapshot.npz").exists()
    service.insert(experience(3))
    killed(service)
    respawned = run.service()
    restored, message = respawned.recover()
    assert restored and len(respawned.buffer) == 16 and "then 4 logged chunks" in message, message
    respawned.close()


def test_a_lockout_in_an_older_buffers_log_is_not_restored(tmp_path: Path) -> None:
    """Issue 41, item 4: a buffer before the fix stored a replayed batch with sequence
    2**64 - 1 and logged it; its respawn refused every later genuine batch."""
    run = Run(tmp_path)
    service = run.service()
    service.recover()
    service.insert(experience(0))
    service.admission.refusal = lambda *_: None  # as the older buffer admitted it
    service.insert(SimpleNamespace(**{**vars(experience(0)), "sequence": 2**64 - 1}))
    service.insert_log.flush()
    killed(service)
    respawned = run.service()
    assert respawned.recover()[0] and len(respawned.buffer) == 8
    respawned.insert(experience(1))
    respawned.insert(experience(0))  # a duplicate still is one
    assert len(respawned.buffer) == 12 and run.rejected == [
        ("experience (duplicate)", "robot 0: sequence 0 of stream 7 was already stored")]
    respawned.close()


def test_a_chunk_collected_before_a_snapshot_but_written_after_it_is_skipped(
        tmp_path: Path) -> None:
    run = Run(tmp_path)
    service = run.service()
    service.recover()
    service.insert(experience(0))
    early = service._collect_chunk()  # the log's thread collected it, then a snapshot came
    service.snapshot(wait=True)
    service.insert_log._collect = lambda: early
    service.insert_log.flush()  # ... and it is written into the snapshot's new segment
    service.insert_log._collect = service._collect_chunk
    service.insert(experience(1))
    service.insert_log.flush()
    killed(service)
    respawned = run.service()
    restored, message = respawned.recover()
    assert restored and len(respawned.buffer) == 8 and "then 1 logged chunks" in message, message
    respawned.close()


def test_restored_rows_are_checked_like_added_ones() -> None:
    from rl_core.replay import ReplayBuffer

    buffer = ReplayBuffer((3,), (1,), 10)
    rows = np.zeros((2, buffer.row_width), np.float32)
    rows[1, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        buffer.restore_rows(rows, {}, 2)
    with pytest.raises(ValueError, match="do not fit"):
        buffer.restore_rows(np.zeros((2, 4), np.float32), {}, 2)
    buffer.restore_rows(np.zeros((2, buffer.row_width), np.float32), {}, 5)
    assert (len(buffer), buffer.total_inserted) == (2, 5)  # 3 were overwritten before the copy
