"""Outside requests reach a busy colocated run promptly.

A colocated run (simulator, policy, replay buffer and trainer in one process) keeps its dispatch
thread busy with stepping and gradient steps. Requests from other processes (``get_parameters``
from ``ros2 param``, rqt, a tool; services; messages on the run's topics) used to wait behind
that work for about a second (docs/architecture.md, "Zero-copy inside one process"). This test
starts a real run with ``rl-bringup launch colocated``, waits until it trains (past
``learning_starts``, batches being sampled), and then, from this process, measures
``get_parameters`` on three of its nodes, ``get_action`` on the policy, and how soon messages
published on ``/episodes`` are taken. The machine is small and shared: the calls are repeated in
rounds until one meets the limits, and when other processes kept the CPU busy in every round the
p95 limits are not judged (the test skips and reports the figures); the medians are always
judged, and a run whose requests queue behind its own work (~1 s) fails in any case.

Domain: ``ROS_DOMAIN_ID=142``, loopback only. The suite's own domain ids are 1..100 (from the
pytest process id, tests/conftest.py) and 101 (the status test's empty domain), so an id above
them keeps this run out of every other test's graph; ``rl-bringup`` takes an inherited id up to
232 as it is.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from rl_nodes import graph
from tests.processes import Child
from tests.service_calls import first_answer

pytestmark = pytest.mark.system

DOMAIN_ID = 142
RL_BRINGUP = str(Path(sys.executable).parent / "rl-bringup")
#: Nodes whose parameter services are measured (one per kind that the dispatch thread keeps busy).
PARAMETER_NODES = ("/trainer", "/robot_0/simulator", "/replay_buffer")
CALLS_PER_NODE = 50
#: Calls not counted after the first answer (tests/service_calls.first_answer, which waits for
#: discovery of the client's response reader): the client's first round trips warm up.
WARM_UP_CALLS = 2
#: The goal: outside requests answered within 20 ms at the 95th percentile while training.
P95_LIMIT_MS = 20.0
#: get_action runs node code, so it waits for the dispatch callback in progress (one gradient
#: step, 5-10 ms on the 2-core machine); it must still never wait for a queue of callbacks.
GET_ACTION_P95_LIMIT_MS = 50.0
CALLS_OF_GET_ACTION = 30
#: Rounds of those calls until one meets the limits: the machine is small and shared, and a
#: burst of other work can take the CPU from the run for a while (a thread preempted while it
#: holds the GIL stalls the process). The fault this test guards against (requests queued behind
#: the run's own work) fails every round by ~50x.
MEASURING_ROUNDS = 5
#: Other processes' CPU use (cores) above which a round says nothing about the run's latency.
#: When every round was that contended, the p95 limits are not judged (the test skips, saying
#: so), but the medians still must show that requests did not queue behind the run's work.
CONTENDED_CORES = 0.5
CONTENDED_MEDIAN_LIMIT_MS = 100.0
OUTSIDE_MESSAGES = 30
#: /diagnostics comes once a second: all messages counted within a few periods of the last one.
MESSAGES_TAKEN_WITHIN_S = 5.0
READY_TIMEOUT_S = 120.0
#: Diagnostics key of the trainer's count of the rejected outside messages (RLNode.reject).
REJECTION_KEY = "rejected episodes (non-finite return)"


@pytest.fixture
def busy_run(tmp_path: Path) -> Iterator[Child]:
    """A colocated cart-pole run that trains until it is stopped (by PID, in ``finally``)."""
    env = dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN_ID), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    # checkpoint_period 0: a checkpoint write is a long callback of its own, not what is measured.
    run = Child([RL_BRINGUP, "launch", "colocated", f"output_dir:={tmp_path / 'run'}",
                 "total_env_steps:=1000000", "checkpoint_period:=0.0"], env=env)
    try:
        yield run
    finally:
        run.stop(grace_s=20.0)


class Outside:
    """A node in this process (another process than the run) on the run's domain."""

    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, domain_id=DOMAIN_ID)
        self.node = Node("outside_input_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    def spin_until(self, condition: Callable[[], bool], timeout_s: float, run: Child,
                   what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert run.process.poll() is None, f"the run exited:\n{run.output()[-4000:]}"
            assert time.monotonic() < deadline, f"{what} not within {timeout_s:g} s:\n" \
                                                f"{run.output()[-3000:]}"
            self.executor.spin_once(timeout_sec=0.05)

    def call_latencies_ms(self, service_type: type, name: str, request: object, calls: int,
                          run: Child) -> list[float]:
        """Round trips of ``calls`` sequential requests, in milliseconds."""
        client = self.node.create_client(service_type, name)
        self.spin_until(client.service_is_ready, 30.0, run, f"service {name}")
        first_answer(client, request, lambda future, seconds:
                     self.executor.spin_until_future_complete(future, timeout_sec=seconds))
        latencies = []
        for _ in range(WARM_UP_CALLS + calls):
            start = time.perf_counter()
            future = client.call_async(request)
            self.executor.spin_until_future_complete(future, timeout_sec=5.0)
            assert future.done(), f"{name} did not answer within 5 s (queued behind the run?)"
            latencies.append((time.perf_counter() - start) * 1e3)
            counted = latencies[WARM_UP_CALLS:]
            if len(counted) >= 10 and statistics.median(counted) > CONTENDED_MEDIAN_LIMIT_MS:
                break  # queued behind the run's work: failed already, no need to wait for more
            time.sleep(0.01)  # requests spread over the run's work, as a tool's would be
        self.node.destroy_client(client)
        return latencies[WARM_UP_CALLS:]


class ForeignLoad:
    """Cores that processes other than the run and this test kept busy since construction."""

    def __init__(self, run: Child) -> None:
        self.run = run
        self._start = self._read()

    def _read(self) -> tuple[float, float, float]:
        with open("/proc/stat") as stat:
            values = [int(value) for value in stat.readline().split()[1:]]
        # user nice system irq softirq steal, in clock ticks
        busy = sum(values[i] for i in (0, 1, 2, 5, 6, 7) if i < len(values))
        ours = sum(os.times()[:2])  # this process (its threads)
        try:
            root = psutil.Process(self.run.pid)
            for process in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = process.cpu_times()
                    ours += times.user + times.system
        except psutil.Error:
            pass
        return time.monotonic(), busy / os.sysconf("SC_CLK_TCK"), ours

    def cores(self) -> float:
        end = self._read()
        busy, ours = end[1] - self._start[1], end[2] - self._start[2]
        return max(0.0, busy - ours) / max(end[0] - self._start[0], 1e-3)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def figures(values: list[float]) -> str:
    return (f"median {statistics.median(values):.1f} ms, p95 {p95(values):.1f} ms, "
            f"max {max(values):.1f} ms")


def test_a_busy_colocated_run_answers_outside_requests_promptly(busy_run: Child) -> None:
    from diagnostic_msgs.msg import DiagnosticArray
    from rcl_interfaces.srv import GetParameters

    from rl_interfaces.msg import EpisodeStatistics, ReplayStatus
    from rl_interfaces.srv import GetAction

    outside = Outside()
    try:
        statuses: list[ReplayStatus] = []
        outside.node.create_subscription(ReplayStatus, graph.REPLAY_STATUS.name, statuses.append,
                                         graph.REPLAY_STATUS.qos.profile())
        rejected: list[int] = []

        def on_diagnostics(msg: DiagnosticArray) -> None:
            for status in msg.status:
                if status.name == "/trainer":
                    values = {item.key: item.value for item in status.values}
                    rejected.append(int(values.get(REJECTION_KEY, 0)))

        outside.node.create_subscription(DiagnosticArray, graph.DIAGNOSTICS.name, on_diagnostics,
                                         graph.DIAGNOSTICS.qos.profile())

        def training() -> bool:
            return bool(statuses) and statuses[-1].total_inserted > statuses[-1].learning_starts \
                and statuses[-1].total_sampled > 0

        outside.spin_until(training, READY_TIMEOUT_S, busy_run, "training past learning_starts")
        sampled_before = statuses[-1].total_sampled

        request = GetParameters.Request(names=["use_sim_time"])
        action_request = GetAction.Request(obs_shape=[4], obs=[0.0] * 4, deterministic=True)
        rounds: list[tuple[float, dict[str, list[float]], list[float]]] = []
        for _ in range(MEASURING_ROUNDS):
            load = ForeignLoad(busy_run)
            parameters = {name: outside.call_latencies_ms(GetParameters, f"{name}/get_parameters",
                                                          request, CALLS_PER_NODE, busy_run)
                          for name in PARAMETER_NODES}
            get_action = outside.call_latencies_ms(
                GetAction, graph.service_name(graph.GET_ACTION, "/robot_0"), action_request,
                CALLS_OF_GET_ACTION, busy_run)
            rounds.append((load.cores(), parameters, get_action))
            if max(map(p95, parameters.values())) < P95_LIMIT_MS \
                    and p95(get_action) < GET_ACTION_P95_LIMIT_MS:
                break
            if max(map(statistics.median, [*parameters.values(), get_action])) \
                    > CONTENDED_MEDIAN_LIMIT_MS:
                break  # failed whatever the load: no point in another round

        # Messages from outside: episode statistics with a non-finite return, which the trainer
        # takes and rejects (counted on its /diagnostics), leaving its statistics untouched.
        publisher = outside.node.create_publisher(EpisodeStatistics, graph.EPISODES.name,
                                                  graph.EPISODES.qos.profile())
        outside.spin_until(lambda: publisher.get_subscription_count() > 0, 10.0, busy_run,
                           "the trainer's /episodes subscription")
        for _ in range(OUTSIDE_MESSAGES):
            publisher.publish(EpisodeStatistics(robot_id=0, env_ids=[0], returns=[math.nan],
                                                lengths=[1], successes=[False]))
            outside.executor.spin_once(timeout_sec=0.05)
        published_at = time.monotonic()
        outside.spin_until(lambda: bool(rejected) and rejected[-1] >= OUTSIDE_MESSAGES,
                           MESSAGES_TAKEN_WITHIN_S, busy_run,
                           f"{OUTSIDE_MESSAGES} outside messages taken (counted: "
                           f"{rejected[-1:] or 'none'})")
        taken_after_s = time.monotonic() - published_at
        sampled_after = statuses[-1].total_sampled
    finally:
        outside.close()

    def describe(load: float, parameters: dict[str, list[float]], get_action: list[float]) -> str:
        text = "; ".join(f"{name}: {figures(values)}" for name, values in parameters.items())
        return f"{text}; get_action: {figures(get_action)} (other processes: {load:.2f} cores)"

    report = "\n".join(f"round {number}: {describe(*measured)}"
                       for number, measured in enumerate(rounds, start=1))
    report += f"\n{OUTSIDE_MESSAGES} messages counted {taken_after_s:.1f} s after the last; " \
              f"batches sampled meanwhile: {sampled_after - sampled_before}"
    print(report)
    assert sampled_after > sampled_before, f"the run stopped training while measured:\n{report}"
    assert any("rejected episodes" in line for line in busy_run.lines), \
        "the trainer logged no rejection of the outside messages"
    assert not re.search(r"Traceback|failed \(\d+ so far\)", busy_run.output()), \
        busy_run.output()[-3000:]
    _, parameters, get_action = rounds[-1]
    for name, values in [*parameters.items(), ("get_action", get_action)]:
        assert statistics.median(values) < CONTENDED_MEDIAN_LIMIT_MS, \
            f"{name}: requests wait for the run's work:\n{report}"
    within_limits = max(map(p95, parameters.values())) < P95_LIMIT_MS \
        and p95(get_action) < GET_ACTION_P95_LIMIT_MS
    if not within_limits and min(measured[0] for measured in rounds) > CONTENDED_CORES:
        pytest.skip(f"other processes kept more than {CONTENDED_CORES} cores busy in every "
                    f"round; p95 limits not judged:\n{report}")
    for name, values in parameters.items():
        assert p95(values) < P95_LIMIT_MS, f"get_parameters on {name} too slow:\n{report}"
    assert p95(get_action) < GET_ACTION_P95_LIMIT_MS, f"get_action too slow:\n{report}"
