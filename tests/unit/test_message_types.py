"""Message types by name (rl_bringup.tools.message_types): the complete ``ros2msg`` definition
``rl-bringup record`` stores in MCAP files, built from ``.msg`` texts; no ROS graph."""

from __future__ import annotations

import pytest

from rl_bringup.tools.message_types import (
    DEFINITION_SEPARATOR,
    DefinitionError,
    full_message_definition,
    message_class,
    referenced_types,
    split_type_name,
)

pytestmark = pytest.mark.unit

DEFINITIONS = {
    ("demo_msgs", "Outer"): "# comment\nstd_msgs/Header header\nInner[] inners\n"
                            "demo_msgs/Inner[<=3] bounded\nstring<=8 name\nint32 LIMIT=3\n",
    ("demo_msgs", "Inner"): "builtin_interfaces/Time stamp\nfloat32[4] values\n",
    ("std_msgs", "Header"): "builtin_interfaces/Time stamp\nstring frame_id\n",
    ("builtin_interfaces", "Time"): "int32 sec\nuint32 nanosec\n",
}


def test_referenced_types_strip_arrays_bounds_and_resolve_the_own_package() -> None:
    assert referenced_types(DEFINITIONS[("demo_msgs", "Outer")], "demo_msgs") == [
        "std_msgs/Header", "demo_msgs/Inner"]


def test_complete_definition_lists_each_nested_type_once_after_a_separator() -> None:
    text = full_message_definition("demo_msgs/msg/Outer",
                                   lambda package, name: DEFINITIONS[(package, name)])
    sections = text.split(DEFINITION_SEPARATOR + "\n")
    assert sections[0].startswith("# comment\nstd_msgs/Header header")
    headers = [section.splitlines()[0] for section in sections[1:]]
    assert headers == ["MSG: std_msgs/msg/Header", "MSG: builtin_interfaces/msg/Time",
                       "MSG: demo_msgs/msg/Inner"]


def test_complete_definition_of_installed_types_parses_with_mcap_ros2() -> None:
    from mcap_ros2._dynamic import generate_dynamic

    for type_name in ("rl_interfaces/msg/ExperienceBatch", "visualization_msgs/msg/MarkerArray",
                      "rcl_interfaces/msg/ParameterEvent"):
        assert type_name in generate_dynamic(type_name, full_message_definition(type_name))


@pytest.mark.parametrize(("name", "expected"), [
    ("std_msgs/msg/Float64", ("std_msgs", "Float64")),
    ("std_msgs/Float64", ("std_msgs", "Float64")),
])
def test_type_names_split_with_or_without_msg(name: str, expected: tuple[str, str]) -> None:
    assert split_type_name(name) == expected


def test_message_class_imports_the_generated_class_or_says_what_to_install() -> None:
    assert message_class("std_msgs/msg/Float64")().data == 0.0
    with pytest.raises(DefinitionError, match="install the interface package"):
        message_class("no_such_msgs/msg/Nothing")
    with pytest.raises(DefinitionError, match="not a message type name"):
        message_class("not a type")


def test_a_signed_status_verifies_after_the_wire_and_fails_when_any_field_changes() -> None:
    """The signature covers every ReplayStatus field but itself, in a canonical encoding: a
    float32 a sender assigned as a Python float verifies after the receiver decoded it."""
    from rclpy.serialization import deserialize_message, serialize_message

    from rl_core.signed_status import StatusCheck, StatusSigner
    from rl_core.weights_auth import SigningKey
    from rl_interfaces.msg import ReplayStatus
    from rl_nodes.conversions import sign_status, status_refusal

    key = SigningKey(bytes(range(32)))
    signer = StatusSigner(key)
    for index in range(50):
        msg = ReplayStatus(size=index, insert_rate=0.1 * index, updates_per_transition=1 / 3,
                           rate_limited=True)
        msg.header.frame_id = "x" * (index % 7)  # moves the alignment of what follows
        sign_status(msg, signer)
        received = deserialize_message(serialize_message(msg), ReplayStatus)
        assert status_refusal(received, StatusCheck(key.public)) is None, index
    for name, value in [("acting_paused", True), ("done", True), ("size", 1), ("sequence", 99),
                        ("insert_rate", 7.0)]:
        changed = deserialize_message(serialize_message(msg), ReplayStatus)
        setattr(changed, name, value)
        assert "not signed" in status_refusal(changed, StatusCheck(key.public)), name
