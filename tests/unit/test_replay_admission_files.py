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
    # A respawned simulator starts a newer stream at 0; the old stream's leftovers are refused.
    assert admission.refusal(0, stream=6, sequence=0) is None
    admission.stored(0, 6, 0)
    refusal = admission.refusal(0, stream=5, sequence=4)
    assert refusal.kind == "experience (stale stream)" and "older" in refusal.reason
    assert admission.lost_messages == 2
    assert ExperienceAdmission(robots=0).refusal(99, 1, 0) is None  # any id


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
    assert (tmp_path / "replay" / LIMITER_FILE).is_file()
    restored = ReplayBuffer.from_file(tmp_path / "replay" / SNAPSHOT_FILE, max_capacity=16)
    assert len(restored) == 4
    assert writer.write(wait=True) and writer.snapshots == 2 and len(copies) == 2
