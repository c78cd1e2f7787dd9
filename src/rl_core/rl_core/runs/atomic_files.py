"""Files that a crash leaves whole: the old version or the new one, never half of either.

A file is written to a private temporary file beside it (``mkstemp``: mode 0600), flushed and
fsynced, renamed over the destination, and the folder is fsynced so that the rename itself
survives a power cut (POSIX).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def fsync_directory(path: str | os.PathLike[str]) -> None:
    """Make a rename inside ``path`` durable (POSIX: fsync the directory)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomically(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> None:
    """Replace ``path`` by what ``write`` writes to the open file it is given.

    :raises OSError: when the folder is missing or the write fails (the destination is then
        unchanged and no temporary file is left).
    """
    destination = Path(path)
    descriptor, staging = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp",
                                           dir=destination.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, destination)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    fsync_directory(destination.parent)
