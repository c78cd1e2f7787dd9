"""The idle dispatch thread waits on the stepping topics alone between turns of the whole
executor (rl_nodes.stepping_wait): their messages are taken there, and while they stream,
timers keep time, other topics and posts from other threads are still served promptly."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Int64

from rl_nodes import graph
from rl_nodes.base import STREAM_QOS
from rl_nodes.conversions import plain
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.stepping_wait import STEPPING_TURN_S, SteppingWait

pytestmark = pytest.mark.integration

STREAM_S = 1.5


@pytest.fixture
def dispatch() -> Iterator[tuple[Node, IntraProcessManager, SingleThreadedExecutor]]:
    rclpy.init(args=[])
    node = rclpy.create_node("stepping_wait_test")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        yield node, IntraProcessManager.for_context(node.context), executor
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()


def test_the_stepping_topics_are_those_every_step_waits_on() -> None:
    stepping = {topic.name for topic in vars(graph).values()
                if isinstance(topic, graph.Topic) and topic.stepping}
    assert stepping == {"observations", "actions", "joint_states"}


def test_stepping_messages_are_taken_by_the_stepping_wait_and_nothing_else_starves(
        dispatch, monkeypatch) -> None:
    node, manager, executor = dispatch
    taken_there = [0]
    original_wait = SteppingWait.wait

    def counting_wait(self: SteppingWait, timeout_s: float) -> bool:
        before = len(received)
        came = original_wait(self, timeout_s)
        # The callback only posts; what the wait took is delivered after it returns.
        manager.post(lambda: taken_there.__setitem__(0, taken_there[0] + len(received) - before))
        return came

    monkeypatch.setattr(SteppingWait, "wait", counting_wait)
    me = threading.get_ident()
    received: list[int] = []
    threads: set[int] = set()
    other_latency: list[float] = []
    post_latency: list[float] = []
    ticks: list[float] = []
    manager.create_subscription(node, plain(Int64), "/stepping/in",
                                lambda msg: (received.append(msg.data),
                                             threads.add(threading.get_ident())),
                                STREAM_QOS, stepping=True)
    manager.create_subscription(node, plain(Int64), "/stepping/other",
                                lambda msg: other_latency.append(
                                    time.monotonic() - msg.data * 1e-9),
                                STREAM_QOS)
    manager.create_timer(node, 0.05, lambda: ticks.append(time.monotonic()))
    outside = rclpy.create_node("stepping_outside", context=node.context)
    stepping_pub = outside.create_publisher(Int64, "/stepping/in", STREAM_QOS)
    other_pub = outside.create_publisher(Int64, "/stepping/other", STREAM_QOS)
    sent = [0]

    def stream() -> None:
        """A robot stepping at about 1 kHz, with other traffic and posts now and then."""
        deadline = time.monotonic() + 10.0
        while (stepping_pub.get_subscription_count() == 0
               or other_pub.get_subscription_count() == 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        end = time.monotonic() + STREAM_S
        count = 0
        while time.monotonic() < end:
            stepping_pub.publish(Int64(data=count))
            count += 1
            if count % 100 == 0:
                other_pub.publish(Int64(data=time.monotonic_ns()))
                posted = time.monotonic()
                manager.post(lambda posted=posted: post_latency.append(time.monotonic() - posted))
            time.sleep(0.001)
        sent[0] = count
        time.sleep(0.5)
        manager.request_shutdown(0)

    streamer = threading.Thread(target=stream, daemon=True)
    try:
        streamer.start()
        assert manager.spin(timeout_s=30.0, executor=executor) == 0
        streamer.join(timeout=5.0)
    finally:
        outside.destroy_node()
    print(f"sent {sent[0]}, taken by the stepping wait {taken_there[0]}, other topic max "
          f"{max(other_latency, default=0):.4f} s, posts max {max(post_latency, default=0):.4f} s, "
          f"timer ticks {len(ticks)}")
    assert sent[0] > 200 and len(received) == sent[0], "every stepping message arrives"
    assert threads == {me}
    assert taken_there[0] >= 0.5 * sent[0], (
        f"only {taken_there[0]} of {sent[0]} stepping messages were taken by the stepping wait")
    assert len(other_latency) >= 0.9 * (sent[0] // 100), "the other topic is served"
    assert max(other_latency) < STEPPING_TURN_S + 0.1, other_latency
    assert post_latency and max(post_latency) < 0.05, post_latency
    # A 20 Hz timer over the stream keeps its rate (its turns come when it is due).
    during = [tick for tick in ticks if tick <= ticks[0] + STREAM_S]
    assert len(during) >= 0.8 * STREAM_S / 0.05, ticks
