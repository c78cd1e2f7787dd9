"""launch_testing test of ``ros2 launch rl_bringup hybrid.launch.py``: one process for the robot
(simulator and policy) and one learner process (replay buffer and trainer).

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
    """``hybrid.launch.py`` with a tiny budget (launch_checks.describe)."""
    return launch_checks.describe("hybrid")


class TestHybridWhileRunning(launch_checks.WhileRunning):
    """Robot 0's and the learner's nodes join the graph, experience flows, training ends the run."""


@launch_testing.post_shutdown_test()
class TestHybridAfterShutdown(launch_checks.AfterShutdown):
    """Two processes: robot 0's (simulator and policy) and the learner's (replay buffer and trainer)."""

    PROCESSES = (2, 2)
