"""``rl_bringup.run.processes.stop_process``: one process started in its own session, and what it
started, stopped by PID: the first signal, a grace period, then SIGKILL to every descendant."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import psutil
import pytest

from rl_bringup.run.processes import stop_process

pytestmark = pytest.mark.integration

START_TIMEOUT_S = 20.0

# Starts a grandchild in a session of its own (as the Supervisor starts its children, out of
# reach of the parent's group signal), prints its PID, then ignores or honours SIGINT.
PARENT = textwrap.dedent(
    """\
    import signal, subprocess, sys, time
    if sys.argv[1] == "ignore":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                  start_new_session=True)
    print(grandchild.pid, flush=True)
    time.sleep(60)
    """
)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes] | psutil.Process]]:
    """Whatever a test starts; killed by PID afterwards if it is still there."""
    processes: list[subprocess.Popen[bytes] | psutil.Process] = []
    yield processes
    for process in processes:
        try:
            process.kill()
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass


def start_parent(on_sigint: str, started: list) -> tuple[subprocess.Popen[bytes], psutil.Process]:
    """The parent process and its grandchild, once the grandchild runs."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, on_sigint], stdout=subprocess.PIPE,
                              start_new_session=True)
    started.append(parent)
    assert parent.stdout is not None
    line = parent.stdout.readline()  # printed at once; a parent that fails ends it with EOF
    grandchild = psutil.Process(int(line))
    started.append(grandchild)
    return parent, grandchild


def gone(process: psutil.Process, timeout_s: float) -> bool:
    """Whether ``process`` exits (or is a zombie) within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def test_a_process_that_honours_sigint_exits_within_the_grace_period(started: list) -> None:
    parent, _ = start_parent("honour", started)
    begun = time.monotonic()
    stop_process(parent, grace_s=START_TIMEOUT_S)
    assert time.monotonic() - begun < START_TIMEOUT_S / 2
    assert parent.returncode == -signal.SIGINT


def test_a_process_that_ignores_sigint_is_killed_with_its_descendants(started: list) -> None:
    parent, grandchild = start_parent("ignore", started)
    stop_process(parent, grace_s=0.5)
    assert parent.returncode == -signal.SIGKILL
    assert gone(grandchild, timeout_s=5.0)


def test_an_exited_process_is_left_alone(started: list) -> None:
    finished = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    started.append(finished)
    finished.wait(timeout=START_TIMEOUT_S)
    stop_process(finished, grace_s=0.5)
    assert finished.returncode == 0
