"""The replay buffer's ``sample`` service over DDS: requests and answers as rl_interfaces types
(rl_nodes.messages); image answers are in test_image_transport.py."""

from __future__ import annotations

import array

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message

from rl_core.wire.messages import Batch, PriorityAnswer, PriorityUpdate, SampleAnswer, SampleRequest
from rl_interfaces.srv import SampleBatch, UpdatePriorities
from rl_nodes.messages import PRIORITIES_SERVICE, SAMPLE_SERVICE

pytestmark = pytest.mark.unit


def batch(rows: int, start: int = 0) -> Batch:
    values = np.arange(start, start + rows, dtype=np.float32)
    return Batch(np.stack([values, -values, values], axis=1), values[:, None] / 10, values + 0.5,
                 np.stack([values, values, -values], axis=1), (values % 2 == 0).astype(np.float32),
                 np.arange(start, start + rows, dtype=np.int64), np.full(rows, 0.25, np.float32))


def test_an_answer_of_several_batches_crosses_the_wire_as_one_transition_batch() -> None:
    sent = [batch(4), batch(4, start=10)]
    msg = SAMPLE_SERVICE.response_to_msg(SampleAnswer(True, "", sent, 20, 30, prioritized=True))
    assert msg.batches == 2 and msg.transitions.batch_size == 8
    wire_msg = deserialize_message(serialize_message(msg), SampleBatch.Response)
    answer = SAMPLE_SERVICE.response_from_msg(wire_msg)
    assert (answer.success, answer.buffer_size, answer.total_inserted, answer.prioritized) == \
        (True, 20, 30, True)
    assert len(answer.batches) == 2
    for got, want in zip(answer.batches, sent, strict=True):
        for name, column in zip(Batch._fields, want, strict=True):
            np.testing.assert_array_equal(getattr(got, name), column, err_msg=name)


def test_an_empty_or_failed_answer_has_no_batches() -> None:
    msg = SAMPLE_SERVICE.response_to_msg(SampleAnswer(False, "empty", [], 0, 0))
    answer = SAMPLE_SERVICE.response_from_msg(msg)
    assert (answer.success, answer.message, answer.batches) == (False, "empty", [])


@pytest.mark.parametrize(("field", "value", "match"), [
    ("rewards", [1.0], "field 'rewards' has 1 values"),
    ("indices", [0, 1], "indices"),
    ("weights", [1.0] * 9, "field 'weights' has 9 values"),
    ("obs_shape", [0], "obs_shape"),
    ("pixels", [1, 2, 3], "'pixels' is set"),
])
def test_a_malformed_transition_batch_is_refused_naming_the_field(field: str, value: list[float],
                                                                 match: str) -> None:
    msg = SAMPLE_SERVICE.response_to_msg(SampleAnswer(True, "", [batch(4)], 4, 4))
    typecode = {"indices": "q", "obs_shape": "I", "pixels": "B"}.get(field, "f")
    setattr(msg.transitions, field, array.array(typecode, value))
    with pytest.raises(ValueError, match=match):
        SAMPLE_SERVICE.response_from_msg(msg)


def test_a_request_and_a_priority_update_cross_the_wire() -> None:
    msg = SAMPLE_SERVICE.request_to_msg(SampleRequest(64, 2))
    assert SAMPLE_SERVICE.request_from_msg(msg) == SampleRequest(64, 2)
    update = PriorityUpdate(np.array([3, 5], np.int64), np.array([0.5, 2.0], np.float32), 7)
    back = PRIORITIES_SERVICE.request_from_msg(deserialize_message(
        serialize_message(PRIORITIES_SERVICE.request_to_msg(update)), UpdatePriorities.Request))
    assert back.drawn_at == 7
    np.testing.assert_array_equal(back.indices, update.indices)
    np.testing.assert_array_equal(back.priorities, update.priorities)
    answer = PriorityAnswer(False, "index out of range", 0, 0)
    assert PRIORITIES_SERVICE.response_from_msg(PRIORITIES_SERVICE.response_to_msg(answer)) == answer
