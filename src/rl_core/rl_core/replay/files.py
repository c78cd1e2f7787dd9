"""A replay buffer's files: paths confined to one directory, and snapshots that hold up inserts
only while the state is copied (written by a thread of their own).

A snapshot is one file: the buffer's arrays, the demonstration buffer's under
:data:`DEMOS_PREFIX` (where there is one), and, under :data:`COUNTERS_KEY`, the service's
counters (the rate limiter's, the status epoch, the admission state and the first insert-log
segment it does not hold), so a kill can never leave a buffer and counters that disagree."""

from __future__ import annotations

import json
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rl_core.replay.buffer import ReplayBuffer

SNAPSHOT_FILE = "snapshot.npz"
#: Where snapshots before the insert log kept the counters (still read when the snapshot has none).
LIMITER_FILE = "rate_limiter.json"
#: The snapshot entry holding the service's counters as JSON.
COUNTERS_KEY = "service_counters"
#: Prefix of the snapshot entries holding the demonstration buffer's state.
DEMOS_PREFIX = "demos."
#: Held by the replay buffer (rl_core.runs.run_lock): one buffer per run directory.
LOCK_FILE = "replay_buffer.lock"
#: The buffer's own state: the save service never writes over them.
STATE_FILES = (SNAPSHOT_FILE, LIMITER_FILE, LOCK_FILE)
#: The most files the save service keeps in the directory (each is as large as the buffer);
#: saving again under an existing name replaces that file.
MAX_SAVED_FILES = 8
SAVED_SUFFIX = ".npz"


def confined_path(base: Path | None, path: str, default: str) -> Path:
    """``path`` (relative, ``default`` when empty) inside ``base``.

    :raises ValueError: without ``base``, or for a path that leaves it (absolute, ``..``, or a
        symbolic link out).
    """
    if base is None:
        raise ValueError("the replay buffer has no output_dir; start it with output_dir set "
                         "(rl-bringup output_dir:=DIR) to use save/load")
    relative = Path(path or default)
    if relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"{path!r}: give a file name relative to {base} (no absolute paths, "
                         "no '..')")
    base.mkdir(parents=True, exist_ok=True)
    target = (base / relative).resolve()
    if not target.is_relative_to(base.resolve()):
        raise ValueError(f"{path!r} leaves {base} (through a symbolic link)")
    return target


def save_refusal(target: Path) -> str:
    """Why the save service must not write ``target`` (a confined path), or ``""``."""
    if target.name in STATE_FILES or target.name.startswith("."):
        return (f"{target.name} is one of the replay buffer's own state files; save under "
                "another name")
    if target.suffix != SAVED_SUFFIX:
        return f"{target.name}: a saved buffer's name ends in {SAVED_SUFFIX}"
    saved = [path for path in target.parent.glob(f"*{SAVED_SUFFIX}")
             if path.name not in STATE_FILES]
    if target not in saved and len(saved) >= MAX_SAVED_FILES:
        return (f"{target.parent} already holds {len(saved)} saved buffers, the most it keeps; "
                "delete one or save under an existing name")
    return ""


class SnapshotWriter:
    """Writes a buffer's state and its rate limiter's counters into ``base``.

    :param base: the directory of the snapshot files.
    :param copy_state: returns ``(buffer state, counters)``; called under the caller's lock, so
        its time is what a snapshot holds up inserts (:attr:`hold_s`).
    :param written: called with the counters once their snapshot is in place (the insert log
        deletes the segments it holds).
    """

    def __init__(self, base: Path, copy_state: Callable[[], tuple[dict[str, Any], dict[str, Any]]],
                 written: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.base = base
        self._copy_state = copy_state
        self._written = written
        self.snapshots = 0
        self.hold_s = 0.0
        self._thread: threading.Thread | None = None

    def write(self, wait: bool = False) -> bool:
        """Copy the state now and write it (on a thread unless ``wait``); False while the
        previous snapshot is still being written."""
        if self._thread is not None and self._thread.is_alive():
            return False
        started = time.monotonic()
        state, counters = self._copy_state()
        self.hold_s = time.monotonic() - started
        if wait:
            self._write(state, counters)
        else:
            self._thread = threading.Thread(target=self._write, args=(state, counters),
                                            name="replay-snapshot", daemon=True)
            self._thread.start()
        return True

    def join(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)

    def _write(self, state: dict[str, Any], counters: dict[str, Any]) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        ReplayBuffer.write_state({**state, COUNTERS_KEY: np.array(json.dumps(counters))},
                                 self.base / SNAPSHOT_FILE)
        self.snapshots += 1
        if self._written is not None:
            self._written(counters)

    def exists(self) -> bool:
        return (self.base / SNAPSHOT_FILE).is_file()

    def read_demos(self) -> dict[str, np.ndarray] | None:
        """The demonstration buffer's state in the snapshot (None: it had none; OSError,
        ValueError when unreadable)."""
        try:
            with np.load(self.base / SNAPSHOT_FILE, allow_pickle=False) as archive:
                state = {name[len(DEMOS_PREFIX):]: archive[name] for name in archive.files
                         if name.startswith(DEMOS_PREFIX)}
        except (EOFError, zipfile.BadZipFile, KeyError) as error:
            raise ValueError(f"cannot read {self.base / SNAPSHOT_FILE}: {error}") from None
        return state or None

    def read_counters(self) -> dict[str, Any]:
        """The counters of the snapshot (OSError, ValueError when unreadable)."""
        try:
            with np.load(self.base / SNAPSHOT_FILE, allow_pickle=False) as archive:
                if COUNTERS_KEY in archive.files:
                    counters = json.loads(str(archive[COUNTERS_KEY]))
                    if not isinstance(counters, dict):
                        raise ValueError(f"{COUNTERS_KEY} is not a JSON object")
                    return counters
        except (EOFError, zipfile.BadZipFile, KeyError) as error:
            raise ValueError(f"cannot read {self.base / SNAPSHOT_FILE}: {error}") from None
        return json.loads((self.base / LIMITER_FILE).read_text())
