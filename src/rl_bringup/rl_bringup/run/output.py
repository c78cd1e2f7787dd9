"""The supervisor's output: its own lines and its children's, whole and prefixed, on one stream.

Each child's stdout and stderr arrive through one pipe, copied by a reader thread of its own
(:meth:`LineOutput.start_reader`) with ``[name]`` before every line; the supervisor's own lines
carry ``[label]``. One lock keeps lines of different threads from interleaving, and a stream that
went away (a closed pipe) is ignored so that supervision goes on.
"""

from __future__ import annotations

import threading
from typing import IO


class LineOutput:
    """Whole lines from several threads onto one stream.

    :param stream: where the lines go.
    :param label: prefix of the supervisor's own lines.
    """

    def __init__(self, stream: IO[str], label: str) -> None:
        self._stream = stream
        self._label = label
        self._lock = threading.Lock()

    def log(self, message: str) -> None:
        """A line of the supervisor's own (``[label] message``). Thread-safe."""
        self.write(f"[{self._label}] {message}")

    def write(self, line: str) -> None:
        """Write one whole line; the lock keeps lines of different children from interleaving."""
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass  # our own output is gone (closed pipe); keep supervising regardless

    def start_reader(self, name: str, stream: IO[bytes]) -> threading.Thread:
        """Start a daemon thread copying ``stream`` (a child's pipe) with ``[name]`` prefixes."""
        reader = threading.Thread(target=self._pump, args=(name, stream), name=f"output-{name}",
                                  daemon=True)
        reader.start()
        return reader

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        """Copy a child's output to ours, one prefixed line at a time, until end of file."""
        prefix = f"[{name}] "
        try:
            for raw_line in iter(stream.readline, b""):
                self.write(prefix + raw_line.decode("utf-8", errors="replace").rstrip("\r\n"))
        except (OSError, ValueError):
            pass  # the pipe closed under us while stopping; nothing left to copy
        finally:
            stream.close()
