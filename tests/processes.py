"""Start and stop child processes of tests: by PID only, SIGINT, grace period, then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class Child:
    """A child process in its own process group whose output is collected line by line."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        self.argv = list(argv)
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            self.argv, env=env, cwd=cwd or REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, predicate: Callable[[str], bool], timeout_s: float) -> str | None:
        """The first output line satisfying ``predicate`` within ``timeout_s`` (None otherwise)."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                line = self.lines[seen]
                seen += 1
                if predicate(line):
                    return line
            if self.process.poll() is not None and seen >= len(self.lines):
                self._reader.join(timeout=1.0)
                if seen >= len(self.lines):
                    return None
            time.sleep(0.05)
        return None

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float = 10.0) -> int:
        """SIGINT the process group we started, then SIGKILL it after ``grace_s``."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            if self.wait(grace_s) is None:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(timeout=10)
        else:  # the leader is gone; make sure nothing it started is left in its group
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reader.join(timeout=2.0)
        return self.process.returncode


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Whether ``condition()`` came true within ``timeout_s`` (polled every 50 ms)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()
