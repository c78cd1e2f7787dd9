"""The shipped rviz configs show each robot from the topics the nodes publish, with and without TF.

* ``rl.rviz`` / ``rl_multi_robot.rviz``: for installs without TF (the pip install: the PyPI wheels
  lack tf2_msgs, so no ``/tf``). The markers carry the robot; no display needs a transform, and
  the header comment says so.
* ``rl_tf.rviz`` / ``rl_multi_robot_tf.rviz``: for installs with TF (the docker image, where rosdep
  installs tf2_msgs from rl_nodes' manifest and the simulators publish ``/tf``): a TF display and
  a RobotModel per robot whose TF prefix matches the frames the simulators publish.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from rl_nodes import visualization

pytestmark = pytest.mark.unit
REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = REPO_ROOT / "config"
#: (config without TF, config with TF, robots)
CONFIGS = [("rl.rviz", "rl_tf.rviz", 1), ("rl_multi_robot.rviz", "rl_multi_robot_tf.rviz", 3)]
MARKER_NAMESPACES = ("links", "chain", "target")


def displays(name: str) -> list[dict[str, Any]]:
    manager = yaml.safe_load((CONFIG / name).read_text())["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == visualization.FIXED_FRAME
    return [display for display in manager["Displays"] if display.get("Enabled", True)]


def of_class(entries: list[dict[str, Any]], plugin: str) -> list[dict[str, Any]]:
    return [display for display in entries if display["Class"] == f"rviz_default_plugins/{plugin}"]


def header(name: str) -> str:
    """The leading comment block of a config, as one line of text."""
    lines = []
    for line in (CONFIG / name).read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


@pytest.mark.parametrize("name, with_tf, robots", [(name, tf_name, robots)
                                                    for name, tf_name, robots in CONFIGS])
def test_config_without_tf_shows_the_robots_by_their_markers(name: str, with_tf: str,
                                                             robots: int) -> None:
    shown = displays(name)
    markers = of_class(shown, "MarkerArray")
    assert [m["Topic"]["Value"] for m in markers] == [f"/robot_{k}/markers" for k in range(robots)]
    # Every namespace of the markers shows (links, their chain and the target carry the robot).
    assert all(not m.get("Namespaces") or all(m["Namespaces"].values()) for m in markers)
    # Nothing that needs a transform from the robot's frames: those come only with /tf.
    assert not of_class(shown, "RobotModel") and not of_class(shown, "TF")
    text = header(name)
    assert "the markers carry the robot" in text and "tf2_msgs" in text and with_tf in text


@pytest.mark.parametrize("name, without_tf, robots", [(tf_name, name, robots)
                                                       for name, tf_name, robots in CONFIGS])
def test_config_with_tf_shows_the_models_placed_by_tf(name: str, without_tf: str,
                                                      robots: int) -> None:
    shown = displays(name)
    assert len(of_class(shown, "TF")) == 1
    models = of_class(shown, "RobotModel")
    assert [m["Description Topic"]["Value"] for m in models] == [
        f"/robot_{k}/robot_description" for k in range(robots)]
    # robot_description is latched (transient local): rviz must ask for it that way.
    assert all(m["Description Topic"]["Durability Policy"] == "Transient Local" for m in models)
    # The frames the simulators publish on /tf: world -> robot_k/<link>.
    assert [m["TF Prefix"] + "/" for m in models] == [visualization.frame_prefix(k)
                                                       for k in range(robots)]
    markers = of_class(shown, "MarkerArray")
    assert [m["Topic"]["Value"] for m in markers] == [f"/robot_{k}/markers" for k in range(robots)]
    for k, display in enumerate(markers):
        # The model draws the robot; the markers add the task target.
        assert display["Namespaces"] == {f"robot_{k}/links": False, f"robot_{k}/chain": False,
                                         f"robot_{k}/target": True}
    text = header(name)
    assert "Needs /tf" in text and "tf2_msgs" in text and without_tf in text


def test_marker_namespaces_are_the_ones_the_simulator_publishes() -> None:
    """The namespaces the TF configs switch, from the simulator's own marker builder."""

    class Robot:
        """The introspection the simulator's marker builder reads from an environment."""

        def link_world_poses(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
            upright = np.array([0.0, 0.0, 0.0, 1.0])
            return {"base": (np.zeros(3), upright), "pole": (np.array([0.0, 0.0, 0.5]), upright)}

        def target_position(self) -> tuple[float, float, float]:
            return (0.3, 0.0, 0.5)

    array = visualization.markers(Robot(), 2, visualization.Time())
    assert {marker.ns for marker in array.markers} == {f"robot_2/{namespace}"
                                                       for namespace in MARKER_NAMESPACES}
    assert {marker.header.frame_id for marker in array.markers} == {visualization.FIXED_FRAME}


def test_tf_reaches_rviz_where_tf2_msgs_is_installed() -> None:
    """The simulator publishes /tf exactly when tf2_msgs imports, and rl_nodes declares tf2_msgs,
    so rosdep (the docker image) installs it and the TF configs have their frames."""
    try:
        import tf2_msgs.msg  # noqa: F401
        available = True
    except ImportError:
        available = False
    assert (visualization.TFMessage is not None) == available
    manifest = (REPO_ROOT / "src" / "rl_nodes" / "package.xml").read_text()
    assert "<exec_depend>tf2_msgs</exec_depend>" in manifest
