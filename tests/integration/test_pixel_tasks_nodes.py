"""Pixel tasks are refused by the nodes with a reason until image transport lands."""

from __future__ import annotations

import pytest
import rclpy

from rl_core.config import ConfigError
from rl_nodes.policy import PolicyNode
from tests.processes import REPO

pytestmark = pytest.mark.integration


def test_policy_node_refuses_image_observations() -> None:
    rclpy.init(args=["--ros-args", "--params-file", str(REPO / "config" / "cartpole_pixels.yaml")])
    try:
        with pytest.raises(ConfigError, match="observes images.*rl-train-bare"):
            PolicyNode("/robot_0")
    finally:
        rclpy.shutdown()
