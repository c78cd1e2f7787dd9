"""The load requests a container follows (rl_core.composition)."""

from __future__ import annotations

import pytest

from rl_core.composition import PLUGINS, LoadRequestError, check_load_request, plugin_of
from rl_core.node_kinds import NODE_CLASSES

pytestmark = pytest.mark.unit


def test_every_node_kind_has_a_plugin_name_the_ros_way() -> None:
    assert set(PLUGINS.values()) == set(NODE_CLASSES)
    assert plugin_of("replay_buffer") == "rl_nodes::ReplayBuffer"
    assert plugin_of("simulator") == "rl_nodes::Simulator"


@pytest.mark.parametrize(("namespace", "rules", "expected"), [
    ("/robot_1", [], "/robot_1"),
    ("robot_1/", [], "/robot_1"),
    ("", [], "/"),
    ("", ["__ns:=/lab/robot_2"], "/lab/robot_2"),
    ("/robot_1", ["/experience:=/lab/experience", "__node:=simulator"], "/robot_1"),
])
def test_a_load_request_gives_the_kind_and_namespace(namespace: str, rules: list[str],
                                                     expected: str) -> None:
    spec = check_load_request("rl_nodes", "rl_nodes::Simulator", "", namespace, rules, {})
    assert (spec.kind, spec.namespace) == ("simulator", expected)


@pytest.mark.parametrize(("package", "plugin", "name", "extra", "match"), [
    ("rclcpp_components", "rl_nodes::Simulator", "", {}, "loads rl_nodes's nodes"),
    ("rl_nodes", "rl_nodes::Nope", "", {}, "unknown plugin 'rl_nodes::Nope'; valid: rl_nodes::"),
    ("rl_nodes", "rl_nodes::Policy", "my_policy", {}, "keep their names \\(policy\\)"),
    ("rl_nodes", "rl_nodes::Policy", "", {"use_intra_process_comms": False},
     "use_intra_process_comms: false is not supported.*process of its own"),
])
def test_what_a_container_cannot_load_is_refused_with_the_reason(
        package: str, plugin: str, name: str, extra: dict[str, object], match: str) -> None:
    with pytest.raises(LoadRequestError, match=match):
        check_load_request(package, plugin, name, "/robot_1", [], extra)
    # use_intra_process_comms: true is what the container does anyway.
    check_load_request("rl_nodes", "rl_nodes::Policy", "", "/", [],
                       {"use_intra_process_comms": True})
