"""The prefetching sampler: one request in flight, answers in order, outages reported and retried."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from rl_core.learning.learner import PrefetchingSampler

pytestmark = pytest.mark.unit


class Unreachable(Exception):
    pass


def test_answers_arrive_in_order_with_one_request_ahead() -> None:
    calls: list[int] = []

    def call() -> SimpleNamespace:
        calls.append(len(calls))
        return SimpleNamespace(batches=[len(calls) - 1])

    sampler = PrefetchingSampler(call, on_error=lambda reason: None)
    try:
        assert [sampler.get(2.0).batches[0] for _ in range(5)] == [0, 1, 2, 3, 4]
        time.sleep(0.2)
        # Not taken: one answer waits in the queue and one call holds the next (double buffering).
        assert len(calls) <= 7
    finally:
        sampler.close()
    assert not sampler._thread.is_alive()


def test_an_unavailable_service_is_reported_and_retried() -> None:
    reasons: list[str] = []
    failures = iter([True, False])

    def call() -> SimpleNamespace:
        if next(failures, False):
            raise Unreachable("replay buffer gone")
        return SimpleNamespace(batches=["batch"])

    sampler = PrefetchingSampler(call, reasons.append, Unreachable)
    try:
        assert sampler.get(5.0).batches == ["batch"]  # after the one-second retry
        assert reasons == ["replay buffer gone"]
    finally:
        sampler.close()


def test_nothing_granted_backs_off_and_get_times_out() -> None:
    count = threading.Semaphore(0)

    def call() -> SimpleNamespace:
        count.release()
        return SimpleNamespace(batches=[])

    sampler = PrefetchingSampler(call, on_error=lambda reason: None)
    try:
        assert sampler.get(1.0).batches == []
        sampler.stop()
        time.sleep(0.1)
        while sampler.get(0.0) is not None:
            pass
        assert sampler.get(0.05) is None
    finally:
        sampler.close()
