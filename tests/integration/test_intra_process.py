"""Zero-copy channel: same object locally, no serialisation without outside subscribers, real DDS
to and from other processes, own publications never delivered twice, bad wire data rejected."""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Iterator

import numpy as np
import pytest
import rclpy
from rclpy.node import Node

from rl_interfaces.msg import ObservationBatch
from rl_nodes.base import LATCHED_QOS, STREAM_QOS
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.messages import OBSERVATIONS, Observations, TopicType
from tests.processes import Child

pytestmark = pytest.mark.integration


@pytest.fixture
def ros() -> Iterator[tuple[Node, IntraProcessManager]]:
    rclpy.init(args=[])
    node = rclpy.create_node("zero_copy_test")
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    import threading
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield node, IntraProcessManager.for_context(node.context)
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()


def counting(topic_type: TopicType[Observations]) -> tuple[TopicType[Observations], list[int]]:
    """The same topic type, counting conversions to ROS messages."""
    calls = [0]

    def to_msg(obj: Observations) -> ObservationBatch:
        calls[0] += 1
        return topic_type.to_msg(obj)

    return TopicType(topic_type.msg_type, to_msg, topic_type.from_msg), calls


def sample(step: int = 0) -> Observations:
    return Observations(robot_id=0, step=step, obs=np.arange(8, dtype=np.float32).reshape(2, 4))


def test_local_subscriber_gets_the_same_object_without_serialisation(ros) -> None:
    node, manager = ros
    topic_type, conversions = counting(OBSERVATIONS)
    received: list[Observations] = []
    publisher = manager.create_publisher(node, topic_type, "/zc/local", STREAM_QOS)
    manager.create_subscription(node, topic_type, "/zc/local", received.append, STREAM_QOS)
    sent = [sample(i) for i in range(5)]
    for obj in sent:
        publisher.publish(obj)
    assert manager.spin_until(lambda: len(received) == 5, timeout_s=5.0)
    assert all(got is obj for got, obj in zip(received, sent))
    assert conversions[0] == 0, "nothing may be serialised without an outside subscriber"
    assert manager.stats["dds_publications"] == 0


def test_a_forgotten_node_gets_nothing_more_not_even_what_was_queued(ros) -> None:
    """A node unloaded from a container (forget_node) has closed its state: deliveries queued
    before the unload must not reach it (an unloaded simulator stepped closed envs)."""
    node, manager = ros
    topic_type, _ = counting(OBSERVATIONS)
    received: list[Observations] = []
    publisher = manager.create_publisher(node, topic_type, "/zc/forgotten", STREAM_QOS)
    manager.create_subscription(node, topic_type, "/zc/forgotten", received.append, STREAM_QOS)
    publisher.publish(sample(0))  # queued, not yet delivered
    manager.forget_node(node)
    publisher.publish(sample(1))
    manager.spin_until(lambda: False, timeout_s=0.3)
    assert received == []


def test_calls_posted_for_a_node_do_not_run_once_it_is_forgotten(ros) -> None:
    """A timer tick or a call posted for a node before its unload must not run on the
    destroyed node (a queued diagnostics tick read a destroyed lifecycle machine: segfault).
    The timer fires on the test's executor thread; its tick waits in the queue. 0.4 s."""
    node, manager = ros
    ran: list[str] = []
    manager.post_for(node, ran.append, "posted")
    timer = manager.create_timer(node, 0.01, lambda: ran.append("tick"))
    time.sleep(0.1)  # ticks pile up in the queue, undrained
    manager.forget_node(node)
    manager.spin_until(lambda: False, timeout_s=0.3)
    timer.cancel()
    assert ran == []
    manager.post(ran.append, "not for a node")  # other calls still run
    assert manager.spin_until(lambda: ran == ["not for a node"], timeout_s=1.0)


def test_publish_never_calls_subscribers_reentrantly(ros) -> None:
    node, manager = ros
    depth = [0]
    seen: list[int] = []
    publisher = manager.create_publisher(node, OBSERVATIONS, "/zc/pingpong", STREAM_QOS)

    def on_message(obj: Observations) -> None:
        depth[0] += 1
        assert depth[0] == 1, "a subscriber ran inside another subscriber's publish"
        seen.append(obj.step)
        if obj.step < 2000:  # deep enough to overflow the stack if it recursed
            publisher.publish(sample(obj.step + 1))
        depth[0] -= 1

    manager.create_subscription(node, OBSERVATIONS, "/zc/pingpong", on_message, STREAM_QOS)
    publisher.publish(sample(0))
    assert manager.spin_until(lambda: len(seen) == 2001, timeout_s=10.0)


SUBSCRIBER = textwrap.dedent("""
    import sys, rclpy
    from rl_interfaces.msg import ObservationBatch
    rclpy.init()
    node = rclpy.create_node("outside_listener")
    def on_msg(msg):
        print(f"got step {msg.step} shape {list(msg.obs_shape)} first {msg.obs[0]}", flush=True)
    node.create_subscription(ObservationBatch, "/zc/outside", on_msg, 10)
    print("ready", flush=True)
    try:
        rclpy.spin(node)
    except BaseException:
        pass
""")


def test_outside_process_receives_over_dds_and_locals_get_no_duplicates(ros, ros_env) -> None:
    node, manager = ros
    topic_type, conversions = counting(OBSERVATIONS)
    local: list[Observations] = []
    publisher = manager.create_publisher(node, topic_type, "/zc/outside", STREAM_QOS)
    manager.create_subscription(node, topic_type, "/zc/outside", local.append, STREAM_QOS)
    child = Child([sys.executable, "-c", SUBSCRIBER], env=ros_env)
    try:
        assert child.wait_for_line(lambda line: line == "ready", 20.0), child.output()
        deadline = time.monotonic() + 20.0
        while publisher.get_subscription_count() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert publisher.get_subscription_count() >= 2, "the outside subscriber never matched"
        step = 0
        while time.monotonic() < deadline and not any(text.startswith("got") for text in child.lines):
            publisher.publish(sample(step))
            manager.spin_until(lambda: False, timeout_s=0.1)
            step += 1
        line = child.wait_for_line(lambda text: text.startswith("got step"), 5.0)
        assert line is not None and "shape [4] first 0.0" in line, child.output()
        assert conversions[0] > 0 and manager.stats["dds_publications"] > 0
        # The local subscriber got each object exactly once, by reference; the DDS copy of the
        # process' own publications was dropped.
        manager.spin_until(lambda: len(local) == step, timeout_s=5.0)
        time.sleep(0.5)
        manager.spin_until(lambda: False, timeout_s=0.2)
        assert [o.step for o in local] == list(range(step))
        assert manager.stats["dropped_own_dds"] > 0
    finally:
        child.stop()


PUBLISHER = textwrap.dedent("""
    import sys, time, array, rclpy
    from rl_interfaces.msg import ObservationBatch
    rclpy.init()
    node = rclpy.create_node("outside_talker")
    pub = node.create_publisher(ObservationBatch, "/zc/inbound", 10)
    good = ObservationBatch(step=7, num_envs=2, obs_shape=[3], obs=array.array("f", range(6)))
    bad = ObservationBatch(step=8, num_envs=2, obs_shape=[3], obs=array.array("f", range(5)))
    while pub.get_subscription_count() == 0:
        time.sleep(0.05)
    for _ in range(100):
        pub.publish(bad)
        pub.publish(good)
        time.sleep(0.1)
""")


def test_messages_from_other_processes_are_decoded_and_malformed_ones_rejected(ros, ros_env) -> None:
    node, manager = ros
    received: list[Observations] = []
    reasons: list[str] = []
    manager.create_subscription(node, OBSERVATIONS, "/zc/inbound", received.append, STREAM_QOS,
                                on_reject=reasons.append)
    child = Child([sys.executable, "-c", PUBLISHER], env=ros_env)
    try:
        assert manager.spin_until(lambda: received and reasons, timeout_s=30.0), child.output()
    finally:
        child.stop()
    assert received[0].step == 7 and received[0].obs.shape == (2, 3)
    assert received[0].obs[1].tolist() == [3.0, 4.0, 5.0]
    assert "field 'obs' has 5 values, but 2 rows of shape [3] need 6" in reasons[0]
    assert all(obj.step == 7 for obj in received), "a malformed message got through"


def test_transient_local_topic_hands_the_latest_object_to_late_local_subscribers(ros) -> None:
    node, manager = ros
    publisher = manager.create_publisher(node, OBSERVATIONS, "/zc/latched", LATCHED_QOS)
    first, latest = sample(1), sample(2)
    publisher.publish(first)
    publisher.publish(latest)
    late: list[Observations] = []
    manager.create_subscription(node, OBSERVATIONS, "/zc/latched", late.append, LATCHED_QOS)
    assert manager.spin_until(lambda: late, timeout_s=5.0)
    manager.spin_until(lambda: False, timeout_s=0.3)
    assert late[0] is latest and len(late) == 1


def test_one_executor_turn_takes_every_message_queued_on_a_subscription() -> None:
    """A DDS subscription's callback also takes what else waits on it: rclpy takes one message
    per executor turn, and each turn rebuilds the wait set (the replay buffer's ingest ceiling
    with many robots, benchmarks/fleet.py)."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    receiving, sending = rclpy.Context(), rclpy.Context()
    rclpy.init(args=[], context=receiving)
    rclpy.init(args=[], context=sending)
    try:
        node = rclpy.create_node("drain_listener", context=receiving)
        manager = IntraProcessManager.for_context(receiving)
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        manager.create_subscription(node, OBSERVATIONS, "/zc/drain", lambda obj: None, qos)
        talker = rclpy.create_node("drain_talker", context=sending)
        publisher = talker.create_publisher(ObservationBatch, "/zc/drain", qos)
        deadline = time.monotonic() + 20.0
        while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        for step in range(30):
            publisher.publish(OBSERVATIONS.to_msg(sample(step)))
        time.sleep(1.0)  # all 30 wait in the subscription's queue (reliable, one host)
        executor = SingleThreadedExecutor(context=receiving)
        executor.add_node(node)
        while manager.stats["dds_receptions"] == 0 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        assert manager.stats["dds_receptions"] == 30, manager.stats
        executor.shutdown(timeout_sec=1.0)
    finally:
        rclpy.try_shutdown(context=sending)
        rclpy.try_shutdown(context=receiving)
