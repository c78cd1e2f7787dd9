"""One thread drains the dispatch queue and drives the rclpy executor: DDS messages, timers,
services and posts from other threads all run on it, and a failing callback is reported per
source while the process keeps serving."""

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

from rl_nodes.base import STREAM_QOS
from rl_nodes.conversions import plain
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.intra_process_services import IntraProcessClient, create_service
from rl_nodes.service_types import ServiceType

pytestmark = pytest.mark.integration

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
