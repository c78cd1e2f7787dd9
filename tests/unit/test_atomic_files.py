"""Files a crash leaves whole (rl_core.runs.atomic_files): the old version or the new one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from rl_core.runs.atomic_files import write_atomically

pytestmark = pytest.mark.unit


def test_a_file_is_replaced_whole_and_private(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("old")
    write_atomically(path, lambda handle: handle.write(b"new"))
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("old")

    def fail(handle: object) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, fail)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "missing" / "x", lambda handle: handle.write(b""))
