"""Shared test setup: loopback-only ROS discovery and a ROS_DOMAIN_ID of this run's own.

Every test that starts ROS inherits ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` (network-safety
rule) and a domain id derived from the pytest process id, so parallel runs and other work on the
machine never see each other's graphs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

# Set before any test module imports rclpy.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ["PYTHONUNBUFFERED"] = "1"


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
