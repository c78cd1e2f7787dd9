"""launch_testing test of ``ros2 launch rl_bringup decoupled.launch.py``: one process per node.

It runs under ``colcon test`` (or pytest with launch_testing's pytest plugin loaded);
docs/testing.md says how, and why the repository's pytest 9 run reaches it through
tests/system/test_colcon_test.py. launch_checks.py holds the checks every mode shares.
"""

from typing import Any

import launch_checks
import launch_testing
import pytest


@pytest.mark.launch_test
@pytest.mark.system
def generate_test_description() -> tuple[Any, dict[str, Any]]:
    """``decoupled.launch.py`` with a tiny budget (launch_checks.describe)."""
    return launch_checks.describe("decoupled")


class TestDecoupledWhileRunning(launch_checks.WhileRunning):
    """Robot 0's and the learner's nodes join the graph, experience flows, training ends the run."""


@launch_testing.post_shutdown_test()
class TestDecoupledAfterShutdown(launch_checks.AfterShutdown):
    """One process per node: simulator, policy, replay buffer and trainer each apart (and the
    diagnostics aggregator where the plan runs one)."""

    PROCESSES = (4, 8)
