"""The samples-per-insert rate limiter: Reverb's SampleToInsertRatio semantics."""

from __future__ import annotations

import pytest

from rl_core.replay import SampleToInsertRatio

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_below_min_size_inserts_pass_and_samples_are_refused() -> None:
    limiter = SampleToInsertRatio(samples_per_insert=1.0, min_size_to_sample=10, error_buffer=2.0)
    for _ in range(9):
        assert limiter.can_insert()
        limiter.insert()
    assert limiter.sample_allowance() == 0
    limiter.insert()
    # diff = 10, min_diff = 8: two samples may run ahead of the next insert.
    assert limiter.sample_allowance() == 2


def test_inserts_block_once_acting_is_an_error_buffer_ahead() -> None:
    limiter = SampleToInsertRatio(1.0, min_size_to_sample=5, error_buffer=3.0)
    limiter.insert(5)
    allowed = 0
    while limiter.can_insert():
        limiter.insert()
        allowed += 1
    assert allowed == 3  # max_diff = 5 + 3: three inserts beyond min size without samples
    assert limiter.stats().insert_blocked
    assert limiter.take_samples(1) == 1
    assert limiter.can_insert()  # each sample pays for one insert at a ratio of 1


def test_sampling_never_runs_ahead_of_the_data() -> None:
    limiter = SampleToInsertRatio(2.0, min_size_to_sample=4, error_buffer=2.0)
    limiter.insert(4)  # diff 8, min_diff 6
    assert limiter.take_samples(100) == 2
    assert limiter.take_samples(1) == 0
    limiter.insert()
    assert limiter.take_samples(100) == 2  # two updates per new transition
    stats = limiter.stats()
    assert stats.samples == 4 and stats.achieved_samples_per_insert == pytest.approx(4.0)


def test_long_run_keeps_the_ratio_within_the_error_buffer() -> None:
    spi, min_size, buffer = 0.5, 100, 20.0
    limiter = SampleToInsertRatio(spi, min_size, buffer)
    for step in range(5000):
        if limiter.can_insert():
            limiter.insert()
        if step % 3 == 0:  # a learner that is slower than acting
            limiter.take_samples(1)
        diff = limiter.inserts * spi - limiter.samples
        if limiter.inserts >= min_size:
            assert limiter.min_diff - 1 <= diff <= limiter.max_diff + spi


def test_a_pair_sets_the_window_directly_so_learning_never_runs_ahead() -> None:
    limiter = SampleToInsertRatio(1.0, min_size_to_sample=10, error_buffer=(10.0, 14.0))
    limiter.insert(10)
    assert limiter.sample_allowance() == 0  # exactly the bare loop's schedule: no update yet
    limiter.insert(3)
    assert limiter.take_samples(100) == 3
    limiter.insert(4)
    assert not limiter.can_insert()  # acting four transitions ahead: the upper side blocks


def test_zero_ratio_never_blocks_inserts() -> None:
    limiter = SampleToInsertRatio(0.0, min_size_to_sample=1, error_buffer=0.0)
    limiter.insert(10_000)
    assert limiter.can_insert() and limiter.sample_allowance() == 0


@pytest.mark.parametrize("arguments, message", [
    ((-1.0, 1, 1.0), "samples_per_insert"),
    ((float("nan"), 1, 1.0), "samples_per_insert"),
    ((1.0, 0, 1.0), "min_size_to_sample"),
    ((2.0, 1, 1.0), "deadlock"),
    ((1.0, 10, (10.0, 10.5)), "deadlock"),
    ((1.0, 10, (float("inf"), 12.0)), "finite"),
])
def test_invalid_settings_are_refused_with_the_reason(arguments, message) -> None:
    with pytest.raises(ValueError, match=message):
        SampleToInsertRatio(*arguments)


def test_blocked_time_is_accounted_per_side() -> None:
    clock = FakeClock()
    limiter = SampleToInsertRatio(1.0, min_size_to_sample=2, error_buffer=1.0, clock=clock)
    assert limiter.take_samples(1) == 0  # refused: the sampler is blocked from now
    clock.now = 2.0
    limiter.insert(2)
    assert limiter.take_samples(1) == 1  # granted: the block ended after 2 s
    limiter.insert(2)  # diff 3 > max_diff 3 - 1 ... inserts now blocked
    assert limiter.stats().insert_blocked
    clock.now = 5.0
    stats = limiter.stats()
    assert stats.sample_blocked_s == pytest.approx(2.0)
    assert stats.insert_blocked_s == pytest.approx(3.0)


def test_counters_survive_a_state_round_trip() -> None:
    limiter = SampleToInsertRatio(1.0, min_size_to_sample=2, error_buffer=1.0)
    limiter.insert(5)
    limiter.take_samples(3)
    restored = SampleToInsertRatio(1.0, min_size_to_sample=2, error_buffer=1.0)
    restored.load_state_dict(limiter.state_dict())
    assert (restored.inserts, restored.samples) == (5, 3)
    assert restored.sample_allowance() == limiter.sample_allowance()


def test_an_insert_cap_grants_only_what_the_budget_pays_for() -> None:
    limiter = SampleToInsertRatio(1.0, min_size_to_sample=10, error_buffer=(10.0, 50.0))
    limiter.insert(30)  # acting went on past a budget of 20 transitions
    assert limiter.take_samples(100, insert_cap=20) == 10
    assert limiter.take_samples(100, insert_cap=20) == 0
    assert limiter.take_samples(100) == 10  # without the cap the rest is still owed
