"""ROS name rules (rl_core.names.ros_names): namespaces, node names, resolution, moving under NS."""

from __future__ import annotations

import pytest

from rl_core.names.ros_names import in_namespace, node_name, resolve, robot_namespace

pytestmark = pytest.mark.unit


def test_names_resolve_as_ros_resolves_them() -> None:
    assert robot_namespace(3) == "/robot_3"
    assert node_name("policy", "/robot_3") == "/robot_3/policy"
    assert node_name("trainer") == "/trainer"
    assert resolve("/experience", "/robot_0", "simulator") == "/experience"  # absolute
    assert resolve("actions", "/robot_0", "policy") == "/robot_0/actions"  # relative
    assert resolve("~/sample", "/", "replay_buffer") == "/replay_buffer/sample"  # private
    assert resolve("~/get_action", "/robot_1/", "policy") == "/robot_1/policy/get_action"


def test_absolute_names_move_under_a_deployment_namespace() -> None:
    assert in_namespace("/lab", "/experience") == "/lab/experience"
    assert in_namespace("/lab/", "/robot_0") == "/lab/robot_0"
    assert in_namespace("/lab", "/") == "/lab"
    assert in_namespace("/", "/experience") == "/experience"
    assert in_namespace("", "/tf") == "/tf"
