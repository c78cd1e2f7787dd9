"""sim_robot's rate report may change severity from one report to the next (a slow spell, then a
recovered rate): rclpy refuses a severity change at one call site ("Logger severity cannot be
changed between calls"), which raised in the report's timer. Well under a second, no ROS graph."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import rclpy.logging

from rl_nodes.sim_robot import SimRobotNode

pytestmark = pytest.mark.unit


def test_the_rate_report_may_turn_slow_and_back() -> None:
    reports = iter([("slow", True), ("on rate", False), ("slow", True)])
    logger = rclpy.logging.get_logger("sim_robot_report_test")  # one logger, as a node's
    node = SimpleNamespace(robot=SimpleNamespace(rate_report=lambda: next(reports)),
                           get_logger=lambda: logger)
    for _ in range(3):
        SimRobotNode._report_rate(node)  # type: ignore[arg-type]
