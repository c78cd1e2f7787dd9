"""Small deployments and operator-tool command lines for the tool tests (record, status, doctor),
and the check that a running deployment's graph is the one ``rl_nodes.graph`` describes.

A deployment is started with ``rl-bringup launch`` in the test run's own domain, kept light for
a 2-core machine shared with other work (no gradient updates, a capped control rate), and is
"ready" when every robot's policy answers observations and the replay buffer reports — checked
from this process with a raw rclpy subscription, not with the tools under test.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy

from rl_nodes import graph as graph_module
from tests.processes import Child

BIN = Path(sys.executable).parent
RL_BRINGUP = str(BIN / "rl-bringup")
#: No SAC updates (they are not what the tools look at) and a capped step rate: the deployment
#: stays cheap while other tests share the machine.
LIGHT_PARAMETERS = ("total_env_steps:=1000000000", "learning_starts:=1000000000",
                    "max_rate_hz:=100.0")
READY_TIMEOUT_S = 180.0


def tool_argv(name: str) -> list[str]:
    """Command line of ``rl-bringup NAME``."""
    return [RL_BRINGUP, name]


def wait_until_stepping(domain_id: int, robots: int, timeout_s: float, run: Child) -> None:
    """Return once each robot's actions flow and /replay_status arrives; fail with the launch
    output when ``timeout_s`` passes or the deployment exits."""
    from rl_interfaces.msg import ActionBatch, ReplayStatus

    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    node = rclpy.create_node("_deployment_readiness", context=context)
    counts = {f"/robot_{k}/actions": 0 for k in range(robots)}
    counts["/replay_status"] = 0

    def counter(topic: str):
        def count(_: bytes) -> None:
            counts[topic] += 1
        return count

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    for topic in counts:
        msg_type = ReplayStatus if topic == "/replay_status" else ActionBatch
        node.create_subscription(msg_type, topic, counter(topic), qos, raw=True)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + timeout_s
        while min(counts.values()) < 3:
            assert run.process.poll() is None, f"deployment exited:\n{run.output()[-4000:]}"
            assert time.monotonic() < deadline, (
                f"deployment not stepping after {timeout_s:g} s ({counts}):\n"
                f"{run.output()[-4000:]}")
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)


@contextlib.contextmanager
def deployment(mode: str, robots: int, ros_env: dict[str, str], output_dir: Path
               ) -> Iterator[Child]:
    """A running, stepping deployment; stopped by PID (SIGINT, grace, SIGKILL) afterwards."""
    domain_id = int(ros_env["ROS_DOMAIN_ID"])
    run = Child([RL_BRINGUP, "launch", mode, f"robots:={robots}", *LIGHT_PARAMETERS,
                 f"output_dir:={output_dir}", f"domain_id:={domain_id}"], env=ros_env)
    try:
        wait_until_stepping(domain_id, robots, READY_TIMEOUT_S, run)
        yield run
    finally:
        run.stop(grace_s=20.0)


# --- the live graph against rl_nodes.graph ------------------------------------------------------

STANDARD_TOPICS = {"/rosout", "/parameter_events"}
#: Every node's parameter services, every managed node's lifecycle services and transition
#: events (rl_nodes.graph.LIFECYCLE_SERVICES), and the containers' component managers with their
#: composition services (rl_nodes.graph.COMPONENT_SERVICES) are not in the tables.
PARAMETER_SERVICES = re.compile(r"/(describe_parameters|get_parameter_types|get_parameters|"
                                r"list_parameters|set_parameters|set_parameters_atomically|"
                                r"get_type_description|" +
                                "|".join(name.removeprefix("~/") for name in
                                         (*graph_module.LIFECYCLE_SERVICES,
                                          *graph_module.COMPONENT_SERVICES)) + r")$")
LIFECYCLE_EVENTS = graph_module.LIFECYCLE_TRANSITION_EVENT.name.removeprefix("~")
GRAPH_TIMEOUT_S = 90.0


def live_graph(node: rclpy.node.Node) -> tuple[set[str], dict[str, str], dict[str, str]]:
    """Nodes, topics with types and services with types that ``node`` sees, less its own and
    the standard ones."""
    nodes = {(ns.rstrip("/") + "/" + name) for name, ns in node.get_node_names_and_namespaces()
             if name not in (node.get_name(), graph_module.COMPONENT_MANAGER)}
    topics = {name: ",".join(types) for name, types in node.get_topic_names_and_types()
              if name not in STANDARD_TOPICS and not name.endswith(LIFECYCLE_EVENTS)}
    services = {name: ",".join(types) for name, types in node.get_service_names_and_types()
                if not PARAMETER_SERVICES.search(name)}
    return nodes, topics, services


def assert_graph_is_documented(mode: str, robots: int, domain_id: int, run: Child) -> None:
    """Fail unless the running deployment ``run`` shows exactly the nodes, topics and services
    (with types) of ``rl_nodes.graph`` for ``mode`` and ``robots`` (docs/graph.md)."""
    from rl_bringup.tools.operate.doctor.graph import expected_graph

    expected = expected_graph(robots, mode)
    want = (set(expected.nodes), {topic.name: topic.type for topic in expected.topics},
            {service.name: service.type for service in expected.services})
    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    observer = rclpy.create_node("graph_observer", context=context)
    try:
        deadline = time.monotonic() + GRAPH_TIMEOUT_S
        seen = live_graph(observer)
        while time.monotonic() < deadline and not (
                seen[0] >= want[0] and set(seen[1]) >= set(want[1])
                and set(seen[2]) >= set(want[2])):
            assert run.process.poll() is None, run.output()[-4000:]
            time.sleep(0.5)
            seen = live_graph(observer)
    finally:
        observer.destroy_node()
        rclpy.try_shutdown(context=context)
    assert seen[0] == want[0], f"nodes: {sorted(seen[0] ^ want[0])}\n{run.output()[-3000:]}"
    assert seen[1] == want[1], f"topics differ: {set(seen[1].items()) ^ set(want[1].items())}"
    assert seen[2] == want[2], f"services differ: {set(seen[2].items()) ^ set(want[2].items())}"
