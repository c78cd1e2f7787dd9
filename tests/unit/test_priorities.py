"""Priorities that come back late, as from a trainer in another node (no ROS needed)."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.replay import (
    InvalidPriorities,
    PriorityFeedback,
    RateLimitedReplay,
    ReplayBuffer,
)
from rl_core.wire.messages import PriorityUpdate

pytestmark = pytest.mark.unit


def transitions(count: int, start: int = 0, rewards: np.ndarray | None = None
                ) -> tuple[np.ndarray, ...]:
    """``count`` transitions whose observation is their sequence number."""
    ids = np.arange(start, start + count, dtype=np.float32)
    return (ids[:, None], np.zeros((count, 1), np.float32),
            np.zeros(count, np.float32) if rewards is None else rewards,
            ids[:, None] + 1.0, np.zeros(count, bool))


def priorities(buffer: ReplayBuffer) -> np.ndarray:
    return buffer.state_dict()["priorities"]


def test_priorities_of_slots_overwritten_since_the_draw_are_skipped() -> None:
    buffer = ReplayBuffer(1, 1, capacity=8, prioritized=True, alpha=1.0, epsilon=0.0, seed=0)
    buffer.add(*transitions(6))
    drawn_at = buffer.total_inserted  # 6: the learner samples now ...
    buffer.add(*transitions(3, start=6))  # ... while slots 6, 7 and 0 are written
    applied = buffer.update_priorities(np.arange(8), np.full(8, 5.0), drawn_at)
    assert applied == 5
    np.testing.assert_allclose(priorities(buffer), [1, 5, 5, 5, 5, 5, 1, 1])


@pytest.mark.parametrize(("written", "applied"), [(0, 4), (7, 1), (8, 0), (20, 0)])
def test_stale_slots_counted_from_the_ring_position(written: int, applied: int) -> None:
    buffer = ReplayBuffer(1, 1, capacity=8, prioritized=True, seed=0)
    buffer.add(*transitions(8))
    drawn_at = buffer.total_inserted
    if written:
        buffer.add(*transitions(written, start=8))
    assert buffer.update_priorities([0, 2, 5, 7], np.ones(4), drawn_at) == applied


def test_a_draw_from_before_a_reload_is_stale() -> None:
    buffer = ReplayBuffer(1, 1, capacity=8, prioritized=True, seed=0)
    buffer.add(*transitions(4))
    before = priorities(buffer)
    # drawn_at beyond total_inserted: the buffer was replaced by a smaller saved one meanwhile, so
    # slot 6 is not even stored any more. Stale, not an error.
    assert buffer.update_priorities([0, 6], [3.0, 3.0], drawn_at=100) == 0
    np.testing.assert_array_equal(priorities(buffer), before)


@pytest.mark.parametrize(("indices", "values", "kind"), [
    ([0, 1], [1.0], "malformed"),
    ([0.0], [1.0], "malformed"),
    ([0, 9], [1.0, 1.0], "index out of range"),  # outside the ring
    ([0, 5], [1.0, 1.0], "index out of range"),  # in the ring, not stored, not stale
    ([-1], [1.0], "index out of range"),
    ([0], [np.nan], "not finite"),
    ([0], [np.inf], "not finite"),
    ([0], [-1.0], "negative"),
])
def test_invalid_priorities_name_their_kind_and_change_nothing(indices: list, values: list,
                                                               kind: str) -> None:
    buffer = ReplayBuffer(1, 1, capacity=8, prioritized=True, seed=0)
    buffer.add(*transitions(4))
    before = priorities(buffer)
    with pytest.raises(InvalidPriorities) as error:
        buffer.update_priorities(indices, values, drawn_at=buffer.total_inserted)
    assert error.value.kind == kind
    np.testing.assert_array_equal(priorities(buffer), before)


def test_feedback_joins_batches_under_the_oldest_draw() -> None:
    feedback = PriorityFeedback(max_rows=100)
    assert feedback.take() is None
    feedback.add([1, 2], [0.5, 1.5], drawn_at=40)
    feedback.add([3], [2.5], drawn_at=30)
    update = feedback.take()
    assert update is not None and len(update) == 3 and update.drawn_at == 30
    np.testing.assert_array_equal(update.indices, [1, 2, 3])
    np.testing.assert_allclose(update.priorities, [0.5, 1.5, 2.5])
    assert feedback.take() is None


def test_feedback_drops_the_oldest_rows_beyond_its_cap() -> None:
    feedback = PriorityFeedback(max_rows=4)
    for start in range(0, 9, 3):  # three batches of 3 rows
        feedback.add(np.arange(start, start + 3), np.ones(3), drawn_at=start)
    update = feedback.take()
    assert update is not None and update.indices.tolist() == [6, 7, 8]
    assert update.drawn_at == 6 and feedback.dropped == 6
    with pytest.raises(ValueError, match="equal length"):
        feedback.add([1, 2], [1.0], drawn_at=0)


def test_late_priorities_skew_sampling_towards_high_td_errors() -> None:
    """The path the trainer node takes: draw, learn, send the TD errors back with the next
    request. One transition in 20 is 'surprising' (TD error 10 against 0.1)."""
    buffer = ReplayBuffer(1, 1, capacity=1000, prioritized=True, alpha=0.6, seed=1)
    replay = RateLimitedReplay(buffer, updates_per_transition=1.0, learning_starts=1,
                               error_buffer=10**6, enforce=False)
    surprising = np.arange(1000) % 20 == 0
    replay.add(*transitions(1000))
    feedback = PriorityFeedback(max_rows=10**5)

    def surprising_share() -> float:
        draw, _ = replay.take(64, 50)
        rows = np.concatenate([batch.indices for batch in draw.batches])
        for batch in draw.batches:  # stand-in for the learner's |TD error|
            feedback.add(batch.indices, np.where(surprising[batch.indices], 10.0, 0.1),
                         draw.total_inserted)
        return float(surprising[rows].mean())

    assert surprising_share() == pytest.approx(0.05, abs=0.02)  # all at max priority: uniform
    update = feedback.take()
    assert isinstance(update, PriorityUpdate)
    assert replay.update_priorities(update) == len(update)
    # Sampled slots now carry their errors, (10 / 0.1) ** 0.6 = 16x the weight; never-sampled
    # ones keep the initial priority 1. Most rows now come from the surprising 5 %.
    assert surprising_share() > 0.3
