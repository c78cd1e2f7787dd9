"""rl_core.wire.dispatch: the dispatch queue's order, bursts, errors, shutdown and wake-ups."""

from __future__ import annotations

import threading

import pytest

from rl_core.wire.dispatch import BURST, STEPPING_TURN_S, DispatchQueue, StepReplies, callback_name

pytestmark = pytest.mark.unit


def test_calls_run_in_posting_order_and_a_burst_stops_when_the_queue_is_empty() -> None:
    dispatch, ran = DispatchQueue(), []
    for value in range(3):
        dispatch.post(ran.append, value)
    assert dispatch.queued == 3
    call = dispatch.next()
    assert call is not None
    dispatch.run_burst(call, None, lambda: False)
    assert ran == [0, 1, 2] and dispatch.empty() and dispatch.next() is None


def test_a_burst_runs_at_most_burst_calls_and_yields_when_told() -> None:
    dispatch, ran = DispatchQueue(), []
    for value in range(BURST + 5):
        dispatch.post(ran.append, value)
    dispatch.run_burst(dispatch.next(), None, lambda: False)
    assert len(ran) == BURST and dispatch.queued == 5
    dispatch.run_burst(dispatch.next(), None, lambda: len(ran) >= BURST + 2)
    assert len(ran) == BURST + 2  # stop() is asked after each call


def test_a_failing_call_is_reported_by_name_and_the_burst_goes_on() -> None:
    dispatch, ran, errors = DispatchQueue(), [], []

    def broken() -> None:
        raise RuntimeError("boom")

    dispatch.post(broken)
    dispatch.post(ran.append, 1)
    dispatch.run_burst(dispatch.next(), lambda name, error: errors.append((name, str(error))),
                       lambda: False)
    assert ran == [1]
    assert errors == [("test_a_failing_call_is_reported_by_name_and_the_burst_goes_on.<locals>."
                       "broken", "boom")]
    dispatch.post(broken)
    with pytest.raises(RuntimeError, match="boom"):
        dispatch.run_burst(dispatch.next(), None, lambda: False)  # no on_error: it propagates


def test_shutdown_ends_a_burst_and_keeps_the_exit_code() -> None:
    dispatch, ran = DispatchQueue(), []
    dispatch.post(lambda: dispatch.request_shutdown(3))
    dispatch.post(ran.append, 1)
    dispatch.run_burst(dispatch.next(), None, lambda: False)
    assert ran == [] and dispatch.shutdown_requested and dispatch.exit_code == 3


def test_a_post_wakes_the_thread_only_while_it_waits_elsewhere() -> None:
    dispatch, wakes = DispatchQueue(), []
    dispatch.wake = lambda: wakes.append(1)
    dispatch.post(lambda: None)
    assert wakes == []
    dispatch.waiting = True
    dispatch.post(lambda: None)
    assert wakes == [1]


def test_next_waits_for_a_call_from_another_thread() -> None:
    dispatch, ran = DispatchQueue(), []
    threading.Timer(0.05, dispatch.post, (ran.append, 7)).start()
    call = dispatch.next(2.0)
    assert call is not None and call[1] == (7,)
    assert dispatch.next(0.01) is None


def test_run_until_runs_calls_until_the_condition_holds_or_time_is_up() -> None:
    dispatch, ran = DispatchQueue(), []
    for value in range(3):
        dispatch.post(ran.append, value)
    assert dispatch.run_until(lambda: len(ran) == 2, 1.0) and ran == [0, 1]
    assert not dispatch.run_until(lambda: False, 0.05)
    assert not dispatch.run_until(lambda: False, 5.0, alive=lambda: False)


def test_a_callback_name_names_what_a_delivery_calls() -> None:
    class Subscription:
        def callback(self, message: object) -> None:
            pass

        def deliver(self, message: object) -> None:
            pass

    assert callback_name(Subscription().deliver) == (
        "test_a_callback_name_names_what_a_delivery_calls.<locals>.Subscription.callback")
    assert callback_name(len) == "len"


def test_a_reply_is_due_after_a_stepping_message_to_another_process_only() -> None:
    replies = StepReplies()
    assert not replies.due
    replies.sent(local_subscribers=1)  # a colocated or hybrid robot: answered in-process
    assert not replies.due
    replies.sent(local_subscribers=0)
    assert replies.due
    replies.received()
    assert not replies.due


def test_the_whole_executor_turns_with_the_next_timer_and_at_least_every_turn_period() -> None:
    replies = StepReplies()
    assert replies.alone_for(now=5.0, timeout_s=0.1) == 0.0  # no reply due: the whole executor
    replies.sent(local_subscribers=0)
    assert replies.alone_for(now=5.0, timeout_s=0.1) == 0.0  # never turned: turn now
    replies.turned(now=5.0, next_timer_s=None)
    assert replies.alone_for(now=5.0, timeout_s=0.1) == pytest.approx(STEPPING_TURN_S)
    assert replies.alone_for(now=5.0, timeout_s=0.005) == pytest.approx(0.005)
    assert replies.alone_for(now=5.0 + STEPPING_TURN_S, timeout_s=0.1) == 0.0
    replies.turned(now=6.0, next_timer_s=0.004)  # a timer due sooner than the turn period
    assert replies.alone_for(now=6.0, timeout_s=0.1) == pytest.approx(0.004)
    replies.turned(now=7.0, next_timer_s=-0.001)  # an overdue timer: turn again at once
    assert replies.alone_for(now=7.0, timeout_s=0.1) == 0.0
    replies.turned(now=8.0, next_timer_s=1.0)
    assert replies.alone_for(now=8.0, timeout_s=0.1) == pytest.approx(STEPPING_TURN_S)
    replies.received()
    assert replies.alone_for(now=8.0, timeout_s=0.1) == 0.0
