"""Central batched inference: one forward pass over every robot's pending batch, split back."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from rl_core.acting.central_batching import CentralBatcher

pytestmark = pytest.mark.unit


def batch(rows: int, value: float) -> SimpleNamespace:
    return SimpleNamespace(obs=np.full((rows, 2), value, dtype=np.float32))


def test_forward_once_every_robot_waits_and_split_the_actions_back() -> None:
    batcher = CentralBatcher(robots=2)
    assert not batcher.add(0, batch(2, 1.0), now=0.0)
    assert not batcher.add(0, batch(1, 2.0), now=0.1)  # a second batch of the same robot
    assert batcher.oldest_wait_s(now=0.5) == pytest.approx(0.5)
    assert batcher.add(1, batch(3, 3.0), now=0.2)
    calls = []

    def act(obs: np.ndarray) -> np.ndarray:
        calls.append(obs.shape)
        return obs[:, :1] * 10

    answers = batcher.forward(act)
    assert calls == [(6, 2)]
    assert [(pending.robot, actions[:, 0].tolist()) for pending, actions in answers] == [
        (0, [10.0, 10.0]), (0, [20.0]), (1, [30.0, 30.0, 30.0])]
    assert not batcher.pending and batcher.oldest_wait_s(1.0) == 0.0
    stats = batcher.stats
    assert (stats.forward_passes, stats.batches, stats.robot_slots, stats.rows) == (1, 3, 2, 6)
    assert stats.robots_per_pass == 2.0 and stats.rows_per_pass == 6.0


def test_reports_cover_the_time_since_the_last_and_name_silent_robots() -> None:
    batcher = CentralBatcher(robots=3)
    batcher.add(0, batch(1, 0.0), now=0.0)
    batcher.forward(lambda obs: obs)
    recent, max_wait, silent = batcher.report()
    assert recent.forward_passes == 1 and silent == [1, 2] and max_wait >= 0.0
    recent, _, silent = batcher.report()
    assert recent.forward_passes == 0 and silent == [0, 1, 2]
    assert batcher.forward(lambda obs: obs) == []  # nothing pending: no pass


def test_a_tick_is_early_while_the_oldest_batch_is_in_the_first_half_of_its_window() -> None:
    batcher = CentralBatcher(robots=2, window_s=0.010)
    assert not batcher.tick_is_early(now=0.0), "nothing pending: the tick only stops the timer"
    batcher.add(0, batch(1, 0.0), now=1.0)
    assert batcher.tick_is_early(now=1.004)  # a tick of the round answered before this one
    assert not batcher.tick_is_early(now=1.006)
    batcher.window_s = 0.0
    assert not batcher.tick_is_early(now=1.0)


def test_diagnostics_report_the_batching_since_the_last_report() -> None:
    batcher = CentralBatcher(robots=2, window_s=0.002)
    batcher.add(0, batch(2, 0.0), now=time.monotonic())
    batcher.add(1, batch(4, 0.0), now=time.monotonic())
    batcher.forward(lambda obs: obs[:, :1])
    values, silent = batcher.diagnostics()
    assert silent == []
    assert values["robots"] == 2 and values["batch window ms"] == "2"
    assert values["forward passes"] == 1 and values["robots per forward pass"] == "2.00"
    assert values["observations per forward pass"] == "6.0"
    assert set(values) >= {"batch wait ms", "batch wait max ms", "answer latency ms"}
    values, silent = batcher.diagnostics()
    assert values["forward passes"] == 0 and silent == [0, 1]
