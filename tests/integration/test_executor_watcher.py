"""A dispatch thread kept busy still answers the outside promptly (the executor watcher).

One process: a node whose :class:`IntraProcessManager` loop is kept busy by callbacks that each
take a few milliseconds (as a colocated run's stepping and gradient steps do), and a second rclpy
context in the same process (another DDS participant) that calls its ``get_parameters``, one of
its own services and publishes to one of its subscriptions. Read-only parameter services answer
while a busy callback runs; node callbacks still run on the dispatch thread, after the callback
in progress, never behind the queue.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator

import pytest
import rclpy
from rcl_interfaces.srv import GetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from rl_nodes.executor_watcher import EXECUTOR_HANDOVER_S
from rl_nodes.intra_process import IntraProcessManager
from tests.service_calls import first_answer

pytestmark = pytest.mark.integration

BUSY_CALLBACK_S = 0.005
#: The fault guarded against: outside work queued behind the busy loop (~1 s). A prompt answer
#: takes a few milliseconds; the limits leave room for a loaded 2-core machine.
GET_PARAMETERS_MEDIAN_LIMIT_S = 0.02
NODE_CALLBACK_MEDIAN_LIMIT_S = 0.05


class BusyProcess:
    """A node spun by its manager's loop, kept busy by a self-reposting callback."""

    def __init__(self, domain_id: int) -> None:
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, domain_id=domain_id)
        self.node = Node("busy", context=self.context)
        self.node.declare_parameter("answer", 42)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.manager = IntraProcessManager.for_context(self.context)
        self.busy_callbacks = 0
        self.node_callback_threads: set[int] = set()
        self.messages: list[str] = []
        self.ticks = 0
        self.node.create_service(Trigger, "~/poke", self._on_poke)
        self.node.create_subscription(String, "~/notes", self._on_note, 10)
        self.manager.create_timer(self.node, 0.05, self._on_tick)
        self.stop_busy = threading.Event()
        self.dispatch_thread: int | None = None
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        self.dispatch_thread = threading.get_ident()
        self.manager.post(self._busy)
        self.manager.spin(executor=self.executor)

    def _busy(self) -> None:
        deadline = time.perf_counter() + BUSY_CALLBACK_S
        while time.perf_counter() < deadline:  # holds the GIL, as a gradient step partly does
            pass
        self.busy_callbacks += 1
        if not self.stop_busy.is_set():
            self.manager.post(self._busy)

    def _on_poke(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.node_callback_threads.add(threading.get_ident())
        response.success = True
        return response

    def _on_note(self, msg: String) -> None:
        self.node_callback_threads.add(threading.get_ident())
        self.messages.append(msg.data)

    def _on_tick(self) -> None:
        self.node_callback_threads.add(threading.get_ident())
        self.ticks += 1

    def close(self) -> None:
        self.stop_busy.set()
        self.manager.request_shutdown()
        self._thread.join(timeout=5.0)
        alive = self._thread.is_alive()
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        assert not alive, "the dispatch loop did not end on request_shutdown"


@pytest.fixture
def processes(ros_env) -> Iterator[tuple[BusyProcess, Node, SingleThreadedExecutor]]:
    domain_id = int(ros_env["ROS_DOMAIN_ID"])
    busy = BusyProcess(domain_id)
    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    outside = Node("outside", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(outside)
    try:
        yield busy, outside, executor
    finally:
        executor.shutdown(timeout_sec=1.0)
        outside.destroy_node()
        rclpy.try_shutdown(context=context)
        busy.close()


def round_trips_s(executor: SingleThreadedExecutor, client, request, calls: int) -> list[float]:
    deadline = time.monotonic() + 20.0
    while not client.service_is_ready():
        assert time.monotonic() < deadline, f"{client.srv_name} not discovered"
        executor.spin_once(timeout_sec=0.05)
    first_answer(client, request, lambda future, seconds: executor.spin_until_future_complete(
        future, timeout_sec=seconds))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        future = client.call_async(request)
        executor.spin_until_future_complete(future, timeout_sec=5.0)
        assert future.done(), f"{client.srv_name} did not answer within 5 s"
        times.append(time.perf_counter() - start)
        time.sleep(0.005)
    return times


def test_a_busy_loop_answers_parameters_services_and_messages_promptly(processes) -> None:
    busy, outside, executor = processes
    time.sleep(2 * EXECUTOR_HANDOVER_S)
    assert busy.busy_callbacks > 0, "the loop is not busy"

    parameters = outside.create_client(GetParameters, "/busy/get_parameters")
    answers = round_trips_s(executor, parameters, GetParameters.Request(names=["answer"]), 40)
    future = parameters.call_async(GetParameters.Request(names=["answer"]))
    executor.spin_until_future_complete(future, timeout_sec=5.0)
    assert future.result().values[0].integer_value == 42
    assert statistics.median(answers) < GET_PARAMETERS_MEDIAN_LIMIT_S, answers

    poke = outside.create_client(Trigger, "/busy/poke")
    pokes = round_trips_s(executor, poke, Trigger.Request(), 20)
    assert statistics.median(pokes) < NODE_CALLBACK_MEDIAN_LIMIT_S, pokes

    publisher = outside.create_publisher(String, "/busy/notes", 10)
    deadline = time.monotonic() + 10.0
    while publisher.get_subscription_count() == 0:
        assert time.monotonic() < deadline, "subscription not discovered"
        executor.spin_once(timeout_sec=0.05)
    for index in range(30):
        publisher.publish(String(data=str(index)))
        time.sleep(0.005)
    deadline = time.monotonic() + 2.0
    while len(busy.messages) < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert busy.messages == [str(index) for index in range(30)]

    ticks = busy.ticks
    time.sleep(0.3)
    assert busy.ticks > ticks, "the manager's timer stopped while the loop was busy"
    # Node callbacks (a service, a subscription, a timer) ran on the dispatch thread only.
    assert busy.node_callback_threads == {busy.dispatch_thread}
    assert busy.busy_callbacks > 100, "the busy loop was starved"


def test_the_loop_goes_idle_and_busy_again_and_ends_cleanly(processes) -> None:
    busy, outside, executor = processes
    parameters = outside.create_client(GetParameters, "/busy/get_parameters")
    request = GetParameters.Request(names=["answer"])
    for _ in range(3):
        busy.stop_busy.set()
        time.sleep(0.05)  # idle: the dispatch thread waits in the executor itself
        assert max(round_trips_s(executor, parameters, request, 5)) < 1.0
        busy.stop_busy.clear()
        busy.manager.post(busy._busy)
        time.sleep(3 * EXECUTOR_HANDOVER_S)  # busy: the watcher waits on its behalf
        assert max(round_trips_s(executor, parameters, request, 5)) < 1.0
    count = busy.busy_callbacks
    time.sleep(0.1)
    assert busy.busy_callbacks > count
