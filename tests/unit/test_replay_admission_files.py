"""What a replay buffer stores (robots, streams, sequences) and where its files may go."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from rl_core.replay import ReplayBuffer
from rl_core.replay.admission import (
    JUMP_CONFIRMATIONS,
    MAX_SEQUENCE,
    MAX_SEQUENCE_JUMP,
    NEW_STREAMS,
    PROVEN_BATCHES,
    RUNS_PER_STREAM,
    ExperienceAdmission,
)
from rl_core.replay.files import LIMITER_FILE, SNAPSHOT_FILE, SnapshotWriter, confined_path

pytestmark = pytest.mark.unit


def test_batches_of_the_deployment_are_stored_once_and_gaps_counted() -> None:
    admission = ExperienceAdmission(robots=2)
    assert admission.refusal(0, stream=5, sequence=0) is None
    admission.stored(0, 5, 0)
    assert admission.refusal(0, 5, 0).kind == "experience (duplicate)"
    assert admission.refusal(2, 5, 0).kind == "experience (foreign robot)"
    admission.stored(0, 5, 3)  # 1 and 2 never came
    assert admission.lost_messages == 2
    # A respawned simulator starts another stream; the old stream's late batches still count once.
    assert admission.refusal(0, stream=6, sequence=0) is None
    admission.stored(0, 6, 0)
    assert admission.refusal(0, stream=5, sequence=4) is None
    assert admission.refusal(0, stream=5, sequence=3).kind == "experience (duplicate)"
    assert admission.lost_messages == 2
    assert ExperienceAdmission(robots=0).refusal(99, 1, 0) is None  # any id


def test_no_forged_batch_locks_a_robot_out() -> None:
    """One valid batch with the largest stream and sequence (issue 19) leaves the robot's own
    stream, and a respawn with a smaller (clock-behind) stream, admitted."""
    admission = ExperienceAdmission(robots=1)
    admission.stored(0, stream=1000, sequence=10)
    admission.stored(0, stream=2**64 - 1, sequence=2**64 - 1)  # forged
    assert admission.refusal(0, 1000, 11) is None
    assert admission.refusal(0, stream=7, sequence=0) is None  # respawned, clock behind
    assert admission.lost_messages == 0


def test_a_replayed_batch_with_the_largest_sequence_locks_nothing_out() -> None:
    """Issue 41, item 4: a sniffed batch of the robot's own stream sent again with
    ``sequence = 2**64 - 1`` is refused as a jump; even stored (a log written before the fix),
    it refuses only its own sequence."""
    admission = ExperienceAdmission(robots=1)
    for sequence in range(10):
        admission.stored(0, 7, sequence)
    refusal = admission.refusal(0, 7, MAX_SEQUENCE)
    assert refusal is not None and refusal.kind == "experience (sequence jump)"
    assert admission.refusal(0, 7, 10) is None
    admission.stored(0, 7, MAX_SEQUENCE)  # as the insert log of an older buffer replays it
    for sequence in range(10, 20):
        assert admission.refusal(0, 7, sequence) is None, sequence
        admission.stored(0, 7, sequence)
    assert admission.refusal(0, 7, 5).kind == "experience (duplicate)"
    assert admission.refusal(0, 7, MAX_SEQUENCE).kind == "experience (duplicate)"
    assert admission.lost_messages == 0 and admission.jumps_adopted == 1


def test_sequence_jumps_past_the_bound_are_refused_unless_consecutive_batches_confirm_them(
        ) -> None:
    admission = ExperienceAdmission()
    admission.stored(0, 7, 100)
    assert admission.refusal(0, 7, 100 + MAX_SEQUENCE_JUMP) is None  # at the bound: a gap
    far = 101 + MAX_SEQUENCE_JUMP
    for _ in range(2 * JUMP_CONFIRMATIONS):  # the same forged sequence again and again
        assert admission.refusal(0, 7, far).kind == "experience (sequence jump)"
    # A robot back after a long outage: its next consecutive batches are taken after a few.
    back = 10 * MAX_SEQUENCE_JUMP
    answers = [admission.refusal(0, 7, back + offset) for offset in range(JUMP_CONFIRMATIONS)]
    assert all(answer is not None for answer in answers[:-1]) and answers[-1] is None
    admission.stored(0, 7, back + JUMP_CONFIRMATIONS - 1)
    assert admission.refusal(0, 7, back + JUMP_CONFIRMATIONS) is None
    assert admission.jumps_adopted == 1 and admission.lost_messages == 0
    assert admission.refusal(0, 7, 101) is None  # an adopted jump refuses nothing below it


def test_a_flood_of_new_streams_never_pushes_out_the_robots_streams() -> None:
    admission = ExperienceAdmission(robots=2)
    for sequence in range(PROVEN_BATCHES):
        admission.stored(1, 1, sequence)
    for stream in range(2, admission.max_streams + 2 * NEW_STREAMS):
        admission.stored(0, stream, 0)
    assert admission.streams == (1, NEW_STREAMS)
    assert admission.refusal(1, 1, 3).kind == "experience (duplicate)", "robot 1 forgotten"
    # Proven streams are bounded too, the least recently stored forgotten first.
    for stream in range(admission.max_streams + 5):
        for sequence in range(PROVEN_BATCHES):
            admission.stored(1, 1, PROVEN_BATCHES + stream * PROVEN_BATCHES + sequence)
            admission.stored(0, 10**6 + stream, sequence)
    assert admission.streams[0] == admission.max_streams
    assert admission.refusal(1, 1, 3).kind == "experience (duplicate)", "stored recently"
    assert admission.refusal(0, 10**6, 3) is None, "the least recently stored is forgotten"


def test_forged_points_are_forgotten_before_the_robots_runs() -> None:
    admission = ExperienceAdmission()
    for sequence in range(100):
        admission.stored(0, 7, sequence)
    for point in range(2 * RUNS_PER_STREAM):
        admission.stored(0, 7, 1000 + 10 * point)
    assert admission.refusal(0, 7, 50).kind == "experience (duplicate)"
    assert admission.refusal(0, 7, 100) is None


def test_a_lockout_saved_before_the_fix_is_not_restored_and_the_state_round_trips() -> None:
    """A snapshot of the old format kept only each stream's last sequence; 2**64 - 1 there
    refused every later genuine batch after each respawn."""
    admission = ExperienceAdmission(robots=1)
    admission.load_state_dict({"streams": [[0, 7, 9], [0, 8, MAX_SEQUENCE]], "lost_messages": 3})
    assert admission.refusal(0, 8, 12) is None and admission.refusal(0, 7, 10) is None
    assert admission.refusal(0, 7, 9).kind == "experience (duplicate)"
    for sequence in range(10, 10 + PROVEN_BATCHES):
        admission.stored(0, 7, sequence)
    restored = ExperienceAdmission(robots=1)
    restored.load_state_dict(admission.state_dict())
    assert restored.streams == admission.streams == (1, 1)
    assert restored.state_dict() == admission.state_dict()
    assert restored.refusal(0, 7, 20).kind == "experience (duplicate)"
    assert restored.lost_messages == 3
    for bad in ({"streams": [[0, 7, 9, 1, [[5, 9], [1, 2]]]], "lost_messages": 0},
                {"streams": [[0, 7, -1]], "lost_messages": 0}, {"streams": [[0]]}):
        with pytest.raises(ValueError, match="malformed"):
            restored.load_state_dict(bad)


def test_paths_stay_inside_the_directory(tmp_path: Path) -> None:
    base = tmp_path / "replay"
    assert confined_path(base, "", "default.npz") == (base / "default.npz").resolve()
    assert confined_path(base, "sub/b.npz", "x") == (base / "sub" / "b.npz").resolve()
    for bad in ("/etc/passwd", "../escape.npz", "a/../../b"):
        with pytest.raises(ValueError, match="relative"):
            confined_path(base, bad, "x")
    os.symlink(tmp_path, base / "link")
    with pytest.raises(ValueError, match="symbolic link"):
        confined_path(base, "link/out.npz", "x")
    with pytest.raises(ValueError, match="output_dir"):
        confined_path(None, "a.npz", "x")


def test_a_snapshot_is_written_in_the_background_and_reads_back(tmp_path: Path) -> None:
    buffer = ReplayBuffer((3,), (1,), 16)
    rows = np.ones((4, 3), dtype=np.float32)
    buffer.add(rows, np.zeros((4, 1), np.float32), np.zeros(4, np.float32), rows,
               np.zeros(4, bool), np.zeros(4, bool))
    copies = []

    def copy_state() -> tuple[dict, dict]:
        copies.append(1)
        return buffer.state_dict(), {"inserted": 4}

    writer = SnapshotWriter(tmp_path / "replay", copy_state)
    assert not writer.exists()
    assert writer.write()
    writer.join(10.0)
    assert writer.snapshots == 1 and writer.exists() and writer.hold_s >= 0.0
    assert writer.read_counters() == {"inserted": 4}
    # The counters live inside the snapshot file: a kill cannot leave one without the other.
    assert not (tmp_path / "replay" / LIMITER_FILE).exists()
    restored = ReplayBuffer.from_file(tmp_path / "replay" / SNAPSHOT_FILE, max_capacity=16)
    assert len(restored) == 4
    assert writer.write(wait=True) and writer.snapshots == 2 and len(copies) == 2
