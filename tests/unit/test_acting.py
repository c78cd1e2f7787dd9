"""The acting gate (rate limiter pauses, a silent replay buffer) and the control-rate pacer."""

from __future__ import annotations

import threading
import time

import pytest

from rl_core.acting.gate import ActingGate, Pacer, StatusChange
from rl_core.acting.stepping import acting_diagnosis
from rl_core.config import MIN_RATE_HZ, ConfigError, SimulatorConfig

pytestmark = pytest.mark.unit


def test_acting_follows_the_rate_limiter_and_counts_paused_time() -> None:
    gate = ActingGate(silence_s=2.0)
    assert gate.on_status(True, False, now=0.0) == StatusChange(True, False, False)  # the first
    assert not gate.paused
    assert gate.on_status(True, True, now=1.0) == StatusChange(False, False, False)
    assert gate.paused and gate.paused_total(1.5) == pytest.approx(0.5)
    assert gate.on_status(True, True, now=1.8).resumed is False  # still paused
    assert gate.on_status(True, False, now=2.0) == StatusChange(False, False, True)
    assert not gate.paused and gate.paused_total(10.0) == pytest.approx(1.0)


@pytest.mark.parametrize("rate_limited", [True, False])
def test_a_gate_awaiting_the_first_status_holds_acting_until_it_comes(rate_limited: bool) -> None:
    """A deployment's robot (await_replay_status) acts only once the replay buffer is heard:
    then it follows the limiter from the first step, or runs free when there is none."""
    gate = ActingGate(silence_s=2.0, await_status=True, now=10.0)
    assert gate.paused and gate.awaiting_status
    assert not gate.on_tick(now=100.0), "no status yet is not silence"
    assert gate.paused and not gate.silent
    warn, message = acting_diagnosis(gate, False, 0.0, 0.0, 100.0)
    assert warn and "first /replay_status" in message and "await_replay_status" in message
    change = gate.on_status(rate_limited, False, now=11.5)
    assert change == StatusChange(True, False, True)  # the first, and acting goes on
    assert not gate.paused and not gate.awaiting_status
    assert gate.paused_total(20.0) == pytest.approx(1.5)


def test_a_gate_awaiting_the_first_status_stays_paused_if_the_limiter_holds_it() -> None:
    gate = ActingGate(silence_s=2.0, await_status=True, now=0.0)
    assert gate.on_status(True, True, now=1.0) == StatusChange(True, False, False)
    assert gate.paused and not gate.awaiting_status
    assert gate.on_status(True, False, now=2.0).resumed


def test_a_buffer_without_rate_limit_never_pauses_acting() -> None:
    gate = ActingGate(silence_s=2.0)
    gate.on_status(False, True, now=0.0)  # acting_paused is ignored without the limiter
    assert not gate.paused
    assert not gate.on_tick(now=100.0)  # nor does its silence pause acting
    assert not gate.silent


def test_a_silent_rate_limited_buffer_pauses_acting_until_it_reports_again() -> None:
    gate = ActingGate(silence_s=2.0)
    assert not gate.on_tick(now=50.0)  # nothing heard yet: no silence to judge
    gate.on_status(True, False, now=0.0)
    assert not gate.on_tick(now=2.0)
    assert gate.on_tick(now=2.5)
    assert gate.silent and gate.paused and gate.silent_for(3.0) == pytest.approx(3.0)
    assert not gate.on_tick(now=3.0)  # reported once
    assert gate.on_status(True, False, now=4.0) == StatusChange(False, True, True)
    assert not gate.silent and not gate.paused
    assert gate.paused_total(4.0) == pytest.approx(1.5)


def test_heard_again_while_the_limiter_still_pauses() -> None:
    gate = ActingGate(silence_s=1.0)
    gate.on_status(True, False, now=0.0)
    gate.on_tick(now=2.0)
    assert gate.on_status(True, True, now=3.0) == StatusChange(False, True, False)
    assert gate.paused and not gate.silent


def test_the_pacer_holds_its_rate_and_zero_never_waits() -> None:
    pacer = Pacer(50.0)
    start = time.monotonic()
    for _ in range(6):
        pacer.wait()
    assert time.monotonic() - start >= 5 / 50.0 - 1e-3
    free = Pacer(0.0)
    start = time.monotonic()
    for _ in range(1000):
        free.wait()
    assert time.monotonic() - start < 0.05


def test_a_pacer_wait_ends_when_the_rate_rises_or_the_pacer_closes() -> None:
    pacer = Pacer(1.0)
    pacer.wait()  # the first step is free; the next is due in 1 s
    threading.Timer(0.05, lambda: setattr(pacer, "rate_hz", 1000.0)).start()
    start = time.monotonic()
    pacer.wait()
    assert time.monotonic() - start < 0.5
    pacer.rate_hz = 1.0  # the next step is due in 1 s again
    threading.Timer(0.05, pacer.close).start()
    start = time.monotonic()
    pacer.wait()
    assert time.monotonic() - start < 0.5


def test_a_capped_rate_below_the_minimum_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 1 Hz"):
        SimulatorConfig(max_rate_hz=1e-5)
    assert SimulatorConfig(max_rate_hz=0.0).max_rate_hz == 0.0
    assert SimulatorConfig(max_rate_hz=MIN_RATE_HZ).max_rate_hz == MIN_RATE_HZ


def test_a_limiter_pause_holds_only_while_its_buffer_reports() -> None:
    """The gym bridge's view: a learner waits out a pause, not a buffer that has gone."""
    gate = ActingGate(silence_s=3.0)
    assert not gate.held_by_limiter(now=0.0)  # nothing heard
    gate.on_status(True, True, now=0.0)
    assert gate.held_by_limiter(now=2.9)
    assert not gate.held_by_limiter(now=3.1)  # no newer status: the pause stops counting
    gate.on_status(True, True, now=4.0)
    assert gate.held_by_limiter(now=5.0)
    gate.on_status(True, False, now=5.5)
    assert not gate.held_by_limiter(now=5.6)
    gate.on_status(False, True, now=6.0)  # without the limiter acting_paused means nothing
    assert not gate.held_by_limiter(now=6.1)


def test_acting_stops_when_the_run_is_done_and_goes_on_with_a_new_budget() -> None:
    gate = ActingGate(silence_s=3.0)
    gate.on_status(True, False, now=0.0)
    change = gate.on_status(True, False, now=1.0, done=True)
    assert change.finished and gate.paused and gate.done
    assert not gate.on_status(True, False, now=2.0, done=True).finished  # told once
    assert gate.paused
    assert gate.on_status(False, False, now=3.0, done=True).resumed is False  # limiter off: still
    assert gate.on_status(True, False, now=4.0, done=False).resumed  # resumed with more budget
    assert not gate.paused and not gate.done


def test_a_status_change_says_what_changed() -> None:
    gate = ActingGate(2.0)
    first = gate.on_status(True, False, 0.0)
    assert first.lines(100, True) == ["the replay buffer reports; acting follows its rate limiter"]
    assert gate.on_tick(3.0)  # silent: acting pauses
    again = gate.on_status(True, False, 3.5, done=True)
    assert again.lines(100, True) == [
        "the replay buffer says the run is done (100 transitions): acting stops",
        "the replay buffer reports again; acting follows its rate limiter"]
