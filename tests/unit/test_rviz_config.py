"""The shipped rviz configs show each robot's model and markers from the topics the nodes publish."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit
CONFIG = Path(__file__).resolve().parents[2] / "config"


@pytest.mark.parametrize("name, robots", [("rl.rviz", 1), ("rl_multi_robot.rviz", 3)])
def test_rviz_config_has_model_and_markers_per_robot(name: str, robots: int) -> None:
    manager = yaml.safe_load((CONFIG / name).read_text())["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "world"
    displays = manager["Displays"]
    models = [d for d in displays if d["Class"] == "rviz_default_plugins/RobotModel"]
    markers = [d for d in displays if d["Class"] == "rviz_default_plugins/MarkerArray"]
    assert [m["Description Topic"]["Value"] for m in models] == [
        f"/robot_{k}/robot_description" for k in range(robots)]
    # robot_description is latched (transient local): rviz must ask for it that way.
    assert all(m["Description Topic"]["Durability Policy"] == "Transient Local" for m in models)
    assert [m["Topic"]["Value"] for m in markers] == [f"/robot_{k}/markers" for k in range(robots)]
    assert [m["TF Prefix"] for m in models] == [f"robot_{k}" for k in range(robots)]
