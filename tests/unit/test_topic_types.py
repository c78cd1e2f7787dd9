"""Every topic of the graph names its message type once: rl_nodes.messages.topic_type turns
it into the conversion a node's publisher(graph.X) uses; no ROS graph."""

from __future__ import annotations

import pytest
from diagnostic_msgs.msg import DiagnosticArray

from rl_nodes import graph
from rl_nodes.messages import CONVERSIONS, EXPERIENCE, WEIGHTS, topic_type

pytestmark = pytest.mark.unit


def test_rl_interfaces_topics_get_their_conversion() -> None:
    assert topic_type(graph.EXPERIENCE.type) is EXPERIENCE
    assert topic_type(graph.WEIGHTS.type) is WEIGHTS
    # The batch messages are converted; the replay buffer's status travels as it is.
    assert set(CONVERSIONS) == {topic.type for topic in graph.TOPICS
                                if topic.type.startswith("rl_interfaces/")} - {
        graph.REPLAY_STATUS.type}


def test_other_topics_travel_as_their_ros_message() -> None:
    diagnostics = topic_type(graph.DIAGNOSTICS.type)
    assert diagnostics.msg_type is DiagnosticArray
    message = DiagnosticArray()
    assert diagnostics.to_msg(message) is message and diagnostics.from_msg(message) is message
    for topic in graph.TOPICS:  # every type of the graph resolves
        assert topic_type(topic.type).msg_type.__name__ == topic.type.split("/")[-1]


@pytest.mark.parametrize("bad", ["std_msgs/String", "nope_msgs/msg/Thing", "std_msgs/msg/Nope"])
def test_a_bad_type_name_says_what_is_wrong(bad: str) -> None:
    with pytest.raises(ValueError, match="pkg/msg/Type|cannot be imported"):
        topic_type(bad)


def test_the_rows_an_operator_drove_cross_the_wire_flagged() -> None:
    import dataclasses

    import numpy as np

    from rl_nodes.messages import Experience, experience_from_msg, experience_to_msg

    obs = np.zeros((2, 3), np.float32)
    data = Experience(0, obs, np.zeros((2, 1), np.float32), np.ones(2, np.float32), obs,
                      np.zeros(2, bool), np.zeros(2, bool), intervened=np.array([True, False]))
    msg = experience_to_msg(data)
    assert list(msg.intervened) == [True, False]
    assert experience_from_msg(msg).intervened.tolist() == [True, False]
    # No operator drove any row: nothing on the wire, None on arrival.
    unflagged = experience_to_msg(dataclasses.replace(data, intervened=np.zeros(2, bool)))
    assert len(unflagged.intervened) == 0 and experience_from_msg(unflagged).intervened is None
    msg.intervened = [True]
    with pytest.raises(ValueError, match="'intervened' has 1 entries, expected 2"):
        experience_from_msg(msg)
