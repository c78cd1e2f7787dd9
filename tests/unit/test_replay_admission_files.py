"""What a replay buffer stores (robots, streams, sequences) and where its files may go."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from rl_core.replay import ReplayBuffer
from rl_core.replay.admission import ExperienceAdmission
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


def test_a_flood_of_streams_is_bounded_and_forgets_the_oldest() -> None:
    admission = ExperienceAdmission(robots=2)
    admission.stored(1, stream=1, sequence=5)
    for stream in range(2, admission.max_streams + 10):
        admission.stored(0, stream, 0)
    assert len(admission._last) == admission.max_streams
    assert admission.refusal(1, 1, 5) is None  # forgotten: stored afresh, never refused
    admission.stored(1, 1, 9)
    assert admission.lost_messages == 0


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
