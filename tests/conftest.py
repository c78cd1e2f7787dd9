"""Shared test setup: loopback-only ROS discovery, a ROS_DOMAIN_ID of this run's own, a
learner key and an action key.

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
# Under pytest-xdist (-n N) every worker inherits the run's domain; each takes one of its own, the
# next ones up (gw0 the run's + 1, ...), so that the workers' graphs never meet.
if os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):
    _worker = int(os.environ["PYTEST_XDIST_WORKER"][2:])
    os.environ["ROS_DOMAIN_ID"] = str(1 + (int(os.environ["ROS_DOMAIN_ID"]) + _worker) % 100)
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ["PYTHONUNBUFFERED"] = "1"
# Nodes started in-process sign and check with the learner's key, as in a run rl-bringup starts
# (without one, robots refuse weights and replay status). Tests of the keyless case unset it.
if not (os.environ.get("RL_ROS2_WEIGHTS_KEY") or os.environ.get("RL_ROS2_WEIGHTS_KEY_FILE")):
    os.environ["RL_ROS2_WEIGHTS_KEY"] = "5e" * 32
# Likewise the run's action key, from which every robot's derives: simulators step only with
# actions MAC'd under it (rl_core.security.action_auth), and test processes drive robots of each other.
if not (os.environ.get("RL_ROS2_ACTION_KEY") or os.environ.get("RL_ROS2_ACTION_KEY_FILE")):
    os.environ["RL_ROS2_ACTION_KEY"] = "a7" * 32

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A suite started in the background by a non-interactive shell (`make test &`) inherits SIGINT
# ignored, and so would every process it starts: the tests that stop processes with SIGINT (as
# users do, and as ros2 launch and the supervisor do) would then wait out their grace periods.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop_signals_lost() -> list[str]:
    """How SIGINT and SIGTERM are ignored or blocked in this process' main thread, as the kernel
    has it (children inherit both; a C library may set them behind Python's back)."""
    masks = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("SigIgn", "SigBlk"):
                masks[key] = int(value.strip(), 16)
    lost = []
    for number in _STOP_SIGNALS:
        bit = 1 << (number - 1)
        if masks.get("SigIgn", 0) & bit:
            lost.append(f"{signal.Signals(number).name} ignored")
        if masks.get("SigBlk", 0) & bit:
            lost.append(f"{signal.Signals(number).name} blocked")
    return lost


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
