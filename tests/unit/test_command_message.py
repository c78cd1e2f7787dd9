"""A robot command as ros2_control's controllers take it (rl_nodes.messages.command_message):
a forward command controller's array, or one point of a joint trajectory one period ahead."""

from __future__ import annotations

import numpy as np
import pytest
from builtin_interfaces.msg import Time

from rl_nodes.messages import command_message

pytestmark = pytest.mark.unit


def test_a_forward_command_is_the_values_in_command_order() -> None:
    msg = command_message(np.array([0.5, -1.0]), "commands", ["a", "b"], "velocity", 0.02,
                          Time(sec=3))
    assert list(msg.data) == [0.5, -1.0]


def test_a_trajectory_command_is_one_point_a_period_ahead_in_the_interfaces_field() -> None:
    msg = command_message(np.array([0.5, -1.0]), "joint_trajectory", ["a", "b"], "velocity",
                          1.25, Time(sec=3, nanosec=7))
    assert list(msg.joint_names) == ["a", "b"] and len(msg.points) == 1
    point = msg.points[0]
    assert list(point.velocities) == [0.5, -1.0] and not list(point.positions)
    assert (point.time_from_start.sec, point.time_from_start.nanosec) == (1, 250_000_000)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (3, 7)
