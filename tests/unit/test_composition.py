"""The load requests a container follows (rl_core.security.composition)."""

from __future__ import annotations

import dataclasses

import pytest

from rl_core.config import NODE_CONFIGS
from rl_core.names.node_kinds import NODE_CLASSES
from rl_core.security.composition import (
    LOAD_REFUSED_PARAMETERS,
    PLUGINS,
    LoadRequestError,
    check_load_request,
    plugin_of,
)

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


@pytest.mark.parametrize("name", ["allow_unsigned", "output_dir", "checkpoint", "onnx_model",
                                  "resume", "demos", "teleop", "analyzers_file", "action_scale",
                                  "robot_interface", "use_sim_time"])
def test_a_load_request_may_not_set_a_launch_only_parameter(name: str) -> None:
    """A loaded node runs in a process holding the run's signing key (issue 41): its paths,
    signature switches and robot boundary come from the deployment, not from a request."""
    with pytest.raises(LoadRequestError, match=f"may not set {name} \\(.*parameter file"):
        check_load_request("rl_nodes", "rl_nodes::Policy", "", "/robot_1", [], {},
                           ["deterministic", name])


def test_a_load_request_may_set_the_other_parameters() -> None:
    spec = check_load_request("rl_nodes", "rl_nodes::Policy", "", "/robot_1", [], {},
                              ["deterministic", "autostart", "hidden_sizes"])
    assert spec.kind == "policy"


def test_every_refused_parameter_is_one_a_node_declares() -> None:
    """The list names real parameters (a renamed one would slip through unnoticed)."""
    declared = {field.name for classes in NODE_CONFIGS.values() for cls in classes
                for field in dataclasses.fields(cls)}
    assert set(LOAD_REFUSED_PARAMETERS) <= declared | {"analyzers_file", "use_sim_time"}
    for name, reason in LOAD_REFUSED_PARAMETERS.items():
        assert len(reason) > 20, name
