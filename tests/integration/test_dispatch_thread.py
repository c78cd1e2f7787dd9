"""One thread drains the dispatch queue and drives the rclpy executor: DDS messages, timers,
services and posts from other threads all run on it, and a failing callback is reported per
source while the process keeps serving. While idle with a step's reply due, it waits on the
stepping topics alone between turns of the whole executor (rl_nodes.dispatch_executor): the reply
is taken there, and timers keep time, other topics and posts are still served promptly."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Int64
from std_srvs.srv import Trigger

from rl_core.wire.dispatch import STEPPING_TURN_S
from rl_nodes import graph
from rl_nodes.base import STREAM_QOS
from rl_nodes.dispatch_executor import SteppingWait
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.intra_process_endpoints import (
    IntraProcessClient,
    ServiceUnavailable,
    create_service,
)
from rl_nodes.messages import ServiceType, plain

pytestmark = pytest.mark.integration

#: How long the outside node of the stepping tests steps.
STREAM_S = 1.5

TRIGGER = ServiceType(Trigger, lambda request: Trigger.Request(), lambda msg: msg,
                      lambda response: response, lambda msg: msg)


@pytest.fixture
def dispatch() -> Iterator[tuple[Node, IntraProcessManager, SingleThreadedExecutor]]:
    rclpy.init(args=[])
    node = rclpy.create_node("dispatch_thread_test")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        yield node, IntraProcessManager.for_context(node.context), executor
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()


def test_dds_timers_and_posts_run_on_the_spinning_thread(dispatch) -> None:
    node, manager, executor = dispatch
    threads: dict[str, int] = {}
    outside = rclpy.create_node("outside_publisher", context=node.context)
    try:
        # A subscription fed over DDS by a publisher the manager does not know (another "process").
        manager.create_subscription(node, plain(Int64), "/dispatch/in",
                                    lambda msg: threads.setdefault("dds", threading.get_ident()),
                                    STREAM_QOS)
        publisher = outside.create_publisher(Int64, "/dispatch/in", STREAM_QOS)
        manager.create_timer(node, 0.01, lambda: threads.setdefault("timer", threading.get_ident()))
        poster = threading.Thread(target=lambda: (time.sleep(0.2), manager.post(
            lambda: threads.setdefault("post", threading.get_ident()))))
        poster.start()

        def publish_until_received() -> None:
            deadline = time.monotonic() + 10.0
            while "dds" not in threads and time.monotonic() < deadline:
                publisher.publish(Int64(data=1))
                time.sleep(0.05)
            time.sleep(0.3)
            manager.request_shutdown(0)

        threading.Thread(target=publish_until_received, daemon=True).start()
        assert manager.spin(timeout_s=20.0, executor=executor) == 0
        poster.join()
    finally:
        outside.destroy_node()
    me = threading.get_ident()
    assert threads == {"dds": me, "timer": me, "post": me}


def test_failing_callbacks_are_reported_per_source_and_the_loop_goes_on(dispatch) -> None:
    node, manager, executor = dispatch
    reports: list[tuple[str, str]] = []
    delivered: list[int] = []

    def fragile(value: int) -> None:
        if value == 0:
            raise RecursionError("maximum recursion depth exceeded (a deeply nested input)")
        delivered.append(value)

    def failing_handler(request: object) -> object:
        raise MemoryError("request too large")

    create_service(manager, node, TRIGGER, "/dispatch/fragile", failing_handler)
    client = rclpy.create_node("dispatch_client", context=node.context)
    answers: list[Trigger.Response] = []
    try:
        remote = client.create_client(Trigger, "/dispatch/fragile")
        for value in (0, 1, 2):
            manager.post(fragile, value)

        def call_remotely() -> None:
            assert remote.wait_for_service(timeout_sec=10.0)
            done = threading.Event()
            future = remote.call_async(Trigger.Request())
            future.add_done_callback(lambda _: done.set())
            # The server's executor is driven by manager.spin; our client's by a local executor.
            local = SingleThreadedExecutor(context=node.context)
            local.add_node(client)
            local.spin_until_future_complete(future, timeout_sec=10.0)
            answers.append(future.result())
            manager.request_shutdown(0)

        threading.Thread(target=call_remotely, daemon=True).start()
        manager.spin(timeout_s=30.0, executor=executor,
                     on_error=lambda source, error: reports.append((source, type(error).__name__)))
    finally:
        client.destroy_node()
    assert delivered == [1, 2], "the callbacks after the failing one must still run"
    assert ("test_failing_callbacks_are_reported_per_source_and_the_loop_goes_on.<locals>.fragile",
            "RecursionError") in reports
    assert ("service /dispatch/fragile", "MemoryError") in reports
    assert answers and answers[0].success is False and "MemoryError" in answers[0].message


def test_a_remote_call_from_the_dispatch_thread_keeps_the_executor_turning(dispatch) -> None:
    node, manager, executor = dispatch
    server = rclpy.create_node("dispatch_server", context=node.context)
    served = SingleThreadedExecutor(context=node.context)
    served.add_node(server)
    server.create_service(Trigger, "/dispatch/remote",
                          lambda request, response: Trigger.Response(success=True, message="hi"))
    threading.Thread(target=served.spin, daemon=True).start()
    client = IntraProcessClient(manager, node, TRIGGER, "/dispatch/remote")
    answers: list[Trigger.Response] = []

    def call_on_dispatch_thread() -> None:
        answers.append(client.call(Trigger.Request(), timeout_s=10.0))
        manager.request_shutdown(0)

    try:
        manager.post(call_on_dispatch_thread)
        manager.spin(timeout_s=30.0, executor=executor)
    finally:
        served.shutdown(timeout_sec=1.0)
        server.destroy_node()
    assert answers and answers[0].success and answers[0].message == "hi"



def test_a_call_from_another_thread_ends_soon_after_the_spin_ended(dispatch) -> None:
    """A closing trainer's prefetcher waited out its 5 s timeout for an answer no executor turn
    would deliver (the trainer took 4.3 s to close); now the call fails within a poll. ~1 s."""
    node, manager, executor = dispatch
    silent = rclpy.create_node("dispatch_silent_server", context=node.context)
    silent.create_service(Trigger, "/dispatch/silent", lambda request, response: response)
    client = IntraProcessClient(manager, node, TRIGGER, "/dispatch/silent")
    outcome: list[BaseException | float] = []

    def call_from_another_thread() -> None:
        try:
            client.call(Trigger.Request(), timeout_s=10.0)  # no executor spins the server
        except BaseException as error:  # noqa: BLE001 - the test reads what ended the call
            outcome.extend([error, time.monotonic()])

    caller = threading.Thread(target=call_from_another_thread, daemon=True)
    try:
        manager.post(caller.start)
        manager.spin(timeout_s=0.5, executor=executor)
        spin_ended = time.monotonic()
        caller.join(timeout=10.0)
    finally:
        silent.destroy_node()
    assert len(outcome) == 2 and isinstance(outcome[0], ServiceUnavailable), outcome
    assert outcome[1] - spin_ended < 1.0, f"the call ended {outcome[1] - spin_ended:.2f} s after"

# --- waiting for a step's reply ------------------------------------------------------------

def test_the_stepping_topics_are_those_every_step_waits_on() -> None:
    stepping = {topic.name for topic in vars(graph).values()
                if isinstance(topic, graph.Topic) and topic.stepping}
    assert stepping == {"observations", "actions", "joint_states"}


class Traffic:
    """What the dispatch thread saw while an outside node stepped with it."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.threads: set[int] = set()
        self.taken_by_stepping_wait = 0
        self.other_latency: list[float] = []
        self.post_latency: list[float] = []
        self.ticks: list[float] = []
        self.sent = 0


def run_traffic(node: Node, manager: IntraProcessManager, executor: SingleThreadedExecutor,
                monkeypatch: pytest.MonkeyPatch, answer: bool) -> Traffic:
    """An outside node steps with ``node`` for STREAM_S: it sends ``/stepping/in`` (a stepping
    topic), and ``node`` answers each on ``/stepping/out`` (stepping, no local subscriber) when
    ``answer``. Now and then the outside node also sends ``/stepping/other`` and posts a call;
    a 20 Hz timer ticks throughout."""
    seen = Traffic()
    original_wait = SteppingWait.wait
    inside = threading.Event()  # the dispatch thread is in a stepping wait
    counted: set[int] = set()

    def counting_wait(self: SteppingWait, timeout_s: float) -> bool:
        # A message counts as taken by the stepping wait when its subscription's callback runs
        # inside the wait. (Posting a count from here instead would wake the next wait at once:
        # a busy loop that starves the other threads of the GIL.)
        for subscription in self.topics.subscriptions:
            if id(subscription) not in counted:
                counted.add(id(subscription))
                subscription.callback = counting(subscription.callback)
        inside.set()
        try:
            return original_wait(self, timeout_s)
        finally:
            inside.clear()

    def counting(callback):
        def count(message, info):  # two parameters: rclpy passes the message info too
            if inside.is_set():
                seen.taken_by_stepping_wait += 1
            return callback(message, info)
        return count

    monkeypatch.setattr(SteppingWait, "wait", counting_wait)
    answers = manager.create_publisher(node, plain(Int64), "/stepping/out", STREAM_QOS,
                                       stepping=True)

    def on_step(msg: Int64) -> None:
        seen.received.append(msg.data)
        seen.threads.add(threading.get_ident())
        if answer:
            answers.publish(msg)

    manager.create_subscription(node, plain(Int64), "/stepping/in", on_step, STREAM_QOS,
                                stepping=True)
    manager.create_subscription(node, plain(Int64), "/stepping/other", lambda msg: seen.
                                other_latency.append(time.monotonic() - msg.data * 1e-9),
                                STREAM_QOS)
    manager.create_timer(node, 0.05, lambda: seen.ticks.append(time.monotonic()))
    outside = rclpy.create_node("stepping_outside", context=node.context)
    steps = outside.create_publisher(Int64, "/stepping/in", STREAM_QOS)
    other = outside.create_publisher(Int64, "/stepping/other", STREAM_QOS)
    answered = threading.Event()
    outside.create_subscription(Int64, "/stepping/out", lambda msg: answered.set(), STREAM_QOS)
    outside_executor = SingleThreadedExecutor(context=node.context)
    outside_executor.add_node(outside)
    spinning = threading.Thread(target=outside_executor.spin, daemon=True)

    def step() -> None:
        """A robot stepping as fast as the answers come (about 1 kHz without them)."""
        deadline = time.monotonic() + 10.0
        while ((steps.get_subscription_count() == 0 or other.get_subscription_count() == 0
                or (answer and answers.rcl_publisher.get_subscription_count() == 0))
               and time.monotonic() < deadline):
            time.sleep(0.01)
        end = time.monotonic() + STREAM_S
        while time.monotonic() < end:
            answered.clear()
            steps.publish(Int64(data=seen.sent))
            seen.sent += 1
            if seen.sent % 100 == 0:
                other.publish(Int64(data=time.monotonic_ns()))
                posted = time.monotonic()
                manager.post(lambda posted=posted: seen.post_latency.append(
                    time.monotonic() - posted))
            if not answer or not answered.wait(1.0):
                time.sleep(0.001)
        time.sleep(0.5)
        manager.request_shutdown(0)

    stepper = threading.Thread(target=step, daemon=True)
    try:
        spinning.start()
        stepper.start()
        assert manager.spin(timeout_s=30.0, executor=executor) == 0
        stepper.join(timeout=5.0)
    finally:
        outside_executor.shutdown(timeout_sec=1.0)
        outside.destroy_node()
    print(f"answer={answer}: {seen.sent} steps, {seen.taken_by_stepping_wait} taken by the "
          f"stepping wait, other topic max {max(seen.other_latency, default=0.0):.4f} s, posts "
          f"max {max(seen.post_latency, default=0.0):.4f} s, {len(seen.ticks)} timer ticks")
    assert seen.sent > 200 and len(seen.received) == seen.sent, "every stepping message arrives"
    assert seen.threads == {threading.get_ident()}
    assert len(seen.other_latency) >= 0.9 * (seen.sent // 100), "the other topic is served"
    assert seen.post_latency and max(seen.post_latency) < 0.05, seen.post_latency
    # A 20 Hz timer keeps its rate throughout (its turns come when it is due).
    during = [tick for tick in seen.ticks if tick <= seen.ticks[0] + STREAM_S]
    assert len(during) >= 0.8 * STREAM_S / 0.05, seen.ticks
    return seen


def test_a_step_s_reply_is_taken_by_the_stepping_wait_and_nothing_else_starves(
        dispatch, monkeypatch) -> None:
    seen = run_traffic(*dispatch, monkeypatch, answer=True)
    assert seen.taken_by_stepping_wait >= 0.5 * seen.sent, (
        f"only {seen.taken_by_stepping_wait} of {seen.sent} replies were taken by the stepping "
        "wait")
    assert max(seen.other_latency) < STEPPING_TURN_S + 0.1, seen.other_latency


def test_without_a_reply_due_the_whole_executor_waits(dispatch, monkeypatch) -> None:
    """A process that sent no stepping message over DDS (a colocated or hybrid robot, a paused
    simulator) waits in the whole executor: other traffic is not held back."""
    seen = run_traffic(*dispatch, monkeypatch, answer=False)
    assert seen.taken_by_stepping_wait == 0
    assert max(seen.other_latency) < 0.05, seen.other_latency
