"""Message types by name (rl_bringup.tools.operate.message_types): the complete ``ros2msg``
definition ``rl-bringup record`` stores in MCAP files, built from ``.msg`` texts; no ROS graph."""

from __future__ import annotations

import pytest

from rl_bringup.tools.operate.message_types import (
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

    from rl_core.security.signed_status import StatusCheck, StatusSigner, sign_status, status_refusal
    from rl_core.security.weights_auth import SigningKey
    from rl_interfaces.msg import ReplayStatus

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


# --- bounded sequences (rl_core.wire.messages.MAX_SHAPE_DIMS, rl_core.security.action_auth.MAC_BYTES)

def interface_fields() -> list[tuple[str, str, str]]:
    """``(file, type, name)`` of every field of the rl_interfaces .msg and .srv files."""
    import re

    from tests.processes import REPO

    root = REPO / "src" / "rl_interfaces"
    fields = []
    for path in sorted([*root.glob("msg/*.msg"), *root.glob("srv/*.srv")]):
        for line in path.read_text().splitlines():
            match = re.match(r"^([\w/]+(?:\[[^\]]*\])?)\s+(\w+)\s*$", line.split("#")[0].strip())
            if match:
                fields.append((path.name, match.group(1), match.group(2)))
    return fields


def test_shape_fields_and_the_mac_are_bounded_and_the_data_sequences_not() -> None:
    """Shapes and the action MAC carry their caps in the type; the data sequences stay
    unbounded: Fast DDS reserves address space for a bounded type's largest message at every
    endpoint (docs/architecture.md), and rclpy does not check a bound when receiving."""
    from rl_core.security.action_auth import MAC_BYTES
    from rl_core.wire.messages import MAX_SHAPE_DIMS

    sequences = [(file, kind, name) for file, kind, name in interface_fields() if "[" in kind]
    assert len(sequences) > 30
    for file, kind, name in sequences:
        if name.endswith("_shape"):
            assert kind == f"uint32[<={MAX_SHAPE_DIMS}]", (file, name)
        elif name == "mac":
            assert (file, kind) == ("ActionBatch.msg", f"uint8[<={MAC_BYTES}]")
        else:
            assert kind.endswith("[]"), (file, kind, name)


def test_the_largest_legal_shapes_of_every_task_fit_and_a_longer_one_is_refused() -> None:
    import array

    import gymnasium
    from rclpy.serialization import deserialize_message, serialize_message

    from rl_core.envs import make_env, register_envs
    from rl_core.security.action_auth import MAC_BYTES
    from rl_core.wire.encoding import positive_shape
    from rl_core.wire.messages import MAX_SHAPE_DIMS
    from rl_interfaces.msg import ActionBatch, ObservationBatch

    register_envs()
    for env_id in [name for name in gymnasium.registry if name.startswith("rl_ros2/")]:
        spec = gymnasium.spec(env_id)
        assert spec is not None
        env = make_env(env_id)  # as the nodes see it: a Dict of vectors flattened
        try:
            for space in (env.observation_space, env.action_space):
                assert space.shape is not None and len(space.shape) <= MAX_SHAPE_DIMS, env_id
        finally:
            env.close()
    widest = ObservationBatch(num_envs=1, obs_shape=[1] * MAX_SHAPE_DIMS)
    widest.obs = array.array("f", [0.5])
    assert list(deserialize_message(serialize_message(widest), ObservationBatch).obs_shape) == \
        [1] * MAX_SHAPE_DIMS
    signed = ActionBatch(num_envs=1, action_shape=[1], mac=array.array("B", bytes(MAC_BYTES)))
    signed.actions = array.array("f", [0.5])
    assert len(deserialize_message(serialize_message(signed), ActionBatch).mac) == MAC_BYTES
    # Over the bound: the class refuses it where it checks fields, serialising always does ...
    with pytest.raises(AssertionError, match="obs_shape"):
        ObservationBatch(check_fields=True).obs_shape = [1] * (MAX_SHAPE_DIMS + 1)
    with pytest.raises(AssertionError, match="mac"):
        ActionBatch(check_fields=True).mac = array.array("B", bytes(MAC_BYTES + 1))
    widest.obs_shape = [1] * (MAX_SHAPE_DIMS + 1)
    with pytest.raises(Exception, match="Failed to serialize"):  # stderr: "exceeds upper bound"
        serialize_message(widest)
    # ... but receiving does not (rclpy on Fast DDS), so the decoder checks it again.
    with pytest.raises(ValueError, match=f"at most {MAX_SHAPE_DIMS}"):
        positive_shape([1] * (MAX_SHAPE_DIMS + 1), "obs_shape")
