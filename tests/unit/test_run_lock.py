"""One run per output_dir (rl_core.runs.run_lock): across processes, released when the holder dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rl_core.runs.run_lock import RunLock, RunLockedError

pytestmark = pytest.mark.unit

HOLD = ("import sys, time\nfrom pathlib import Path\nfrom rl_core.runs.run_lock import RunLock\n"
        "lock = RunLock(Path(sys.argv[1]), 'trainer')\nprint('held', flush=True)\n"
        "time.sleep(60)\n")


def test_a_second_process_is_refused_until_the_holder_dies(tmp_path: Path) -> None:
    path = tmp_path / "run" / "trainer.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"in use by process {holder.pid}"):
            RunLock(path, "trainer")
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    lock = RunLock(path, "trainer")  # the kernel released it with the killed holder
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    lock.release()


def test_one_process_may_hold_its_run_twice_and_releases_it_with_the_last(tmp_path: Path) -> None:
    path = tmp_path / "replay" / "replay_buffer.lock"
    first, second = RunLock(path, "replay buffer"), RunLock(path, "replay buffer")
    first.release()
    first.release()  # idempotent: the second holder keeps it
    probe = subprocess.run([sys.executable, "-c", HOLD.replace("time.sleep(60)", ""), str(path)],
                           capture_output=True, text=True, timeout=60)
    assert "RunLockedError" in probe.stderr
    second.release()
    probe = subprocess.run([sys.executable, "-c", HOLD.replace("time.sleep(60)", ""), str(path)],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and "held" in probe.stdout
