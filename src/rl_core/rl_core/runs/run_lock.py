"""One run per ``output_dir``: an exclusive lock a node holds on its files there.

Two trainers (or two replay buffers) writing the same run directory would overwrite each
other's checkpoints and snapshots; that happens when a relaunch meets the orphans of a
supervisor that was SIGKILLed. The lock is ``flock`` on a file in the directory, so the
kernel releases it when its holder dies, however it dies: a respawn after a crash takes it at
once. Within one process the lock is shared (an in-process test, or two nodes of a process, may
open the same run twice).
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from rl_core.config import ConfigError

_held: dict[Path, tuple[int, int]] = {}  # resolved path -> (descriptor, holders in this process)
_guard = threading.Lock()


class RunLockedError(ConfigError):
    """Another process holds the run directory (a node exits as on a configuration error)."""


class RunLock:
    """Holds ``path`` (created 0600, its folder too) until :meth:`release`.

    :param path: the lock file, inside the run directory it guards.
    :param what: who takes it, for the error (``"trainer"``).
    :raises RunLockedError: while another process holds it, naming that process.
    """

    def __init__(self, path: Path, what: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path.parent.resolve() / path.name  # one key per file, however it is named
        self._released = False
        with _guard:
            if self.path in _held:
                descriptor, holders = _held[self.path]
                _held[self.path] = (descriptor, holders + 1)
                return
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(descriptor, 32).decode(errors="replace").strip() or "unknown"
                os.close(descriptor)
                raise RunLockedError(
                    f"{what}: {self.path.parent} is in use by process {holder} (another {what} "
                    "of a run in the same output_dir, perhaps left over from a killed launch); "
                    "stop that process, or give this run another output_dir") from None
            os.ftruncate(descriptor, 0)
            os.write(descriptor, f"{os.getpid()}\n".encode())
            _held[self.path] = (descriptor, 1)

    def release(self) -> None:
        """Let the directory go (idempotent); the last holder in the process unlocks it."""
        with _guard:
            if self._released or self.path not in _held:
                return
            self._released = True
            descriptor, holders = _held.pop(self.path)
            if holders > 1:
                _held[self.path] = (descriptor, holders - 1)
            else:
                os.close(descriptor)
