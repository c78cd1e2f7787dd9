"""Shared test setup: loopback-only ROS discovery and a ROS_DOMAIN_ID of this run's own.

Every test that starts ROS inherits ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` (network-safety
rule) and a domain id derived from the pytest process id, so parallel runs and other work on the
machine never see each other's graphs.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator

import pytest

# Set before any test module imports rclpy.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ["PYTHONUNBUFFERED"] = "1"

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_signals_lost() -> list[str]:
    """How SIGINT and SIGTERM are ignored or blocked in this thread (children inherit both)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return ([f"{signal.Signals(s).name} ignored" for s in _STOP_SIGNALS
             if signal.getsignal(s) == signal.SIG_IGN]
            + [f"{signal.Signals(s).name} blocked" for s in _STOP_SIGNALS if s in blocked])


@pytest.fixture(autouse=True)
def stop_signals_left_as_found() -> Iterator[None]:
    """A test must not leave the test process ignoring or blocking SIGINT/SIGTERM: every
    process started afterwards would inherit it and could no longer be stopped by a signal."""
    before = _stop_signals_lost()
    yield
    after = _stop_signals_lost()
    assert after == before, f"this test left the test process with {after} (was {before})"


@pytest.fixture
def ros_env() -> dict[str, str]:
    """Environment for child processes of a test (inherits the run's domain id and range)."""
    return dict(os.environ)


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``rl-bringup ARGV`` in-process: ``(exit code, stdout, stderr)``, argparse exits included."""
    from rl_bringup import cli

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = cli.main(list(argv))
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
