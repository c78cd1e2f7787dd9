"""Every mode's live graph (nodes, topics, services with types) equals the graph of
``rl_nodes.graph`` (which docs/graph.md documents; tests/unit/test_doctor.py checks the two)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
import rclpy

from rl_bringup.tools.operate.doctor.graph import expected_graph
from rl_nodes import graph as graph_module
from tests.processes import Child

pytestmark = pytest.mark.system
ROBOTS = 2
STANDARD_TOPICS = {"/rosout", "/parameter_events"}
# Every node's parameter services, every managed node's lifecycle services and transition
# events (rl_nodes.graph.LIFECYCLE_SERVICES), and the containers' component managers with their
# composition services (rl_nodes.graph.COMPONENT_SERVICES) are not in the tables.
PARAMETER_SERVICES = re.compile(r"/(describe_parameters|get_parameter_types|get_parameters|"
                                r"list_parameters|set_parameters|set_parameters_atomically|"
                                r"get_type_description|" +
                                "|".join(name.removeprefix("~/") for name in
                                         (*graph_module.LIFECYCLE_SERVICES,
                                          *graph_module.COMPONENT_SERVICES)) + r")$")
LIFECYCLE_EVENTS = graph_module.LIFECYCLE_TRANSITION_EVENT.name.removeprefix("~")


def live_graph(node: rclpy.node.Node) -> tuple[set[str], dict[str, str], dict[str, str]]:
    nodes = {(ns.rstrip("/") + "/" + name) for name, ns in node.get_node_names_and_namespaces()
             if name not in (node.get_name(), graph_module.COMPONENT_MANAGER)}
    topics = {name: ",".join(types) for name, types in node.get_topic_names_and_types()
              if name not in STANDARD_TOPICS and not name.endswith(LIFECYCLE_EVENTS)}
    services = {name: ",".join(types) for name, types in node.get_service_names_and_types()
                if not PARAMETER_SERVICES.search(name)}
    return nodes, topics, services


@pytest.mark.parametrize("mode", ["colocated", "decoupled", "hybrid"])
def test_live_graph_matches_the_graph_module(mode: str, ros_env, tmp_path: Path) -> None:
    expected = expected_graph(ROBOTS, mode)
    expected_nodes = set(expected.nodes)
    expected_topics = {topic.name: topic.type for topic in expected.topics}
    expected_services = {service.name: service.type for service in expected.services}
    run = Child([str(Path(sys.executable).parent / "rl-bringup"), "launch", mode,
                 f"robots:={ROBOTS}", "total_env_steps:=1000000000",
                 f"output_dir:={tmp_path / 'run'}", f"domain_id:={ros_env['ROS_DOMAIN_ID']}"],
                env=ros_env)
    rclpy.init(args=[])
    observer = rclpy.create_node("graph_observer")
    try:
        deadline = time.monotonic() + 90.0
        graph = live_graph(observer)
        while time.monotonic() < deadline:
            graph = live_graph(observer)
            if (graph[0] >= expected_nodes and set(graph[1]) >= set(expected_topics)
                    and set(graph[2]) >= set(expected_services)):
                break
            assert run.process.poll() is None, run.output()
            time.sleep(0.5)
        nodes, topics, services = live_graph(observer)
    finally:
        observer.destroy_node()
        rclpy.try_shutdown()
        code = run.stop(grace_s=20.0)
    assert nodes == expected_nodes, run.output()[-3000:]
    assert topics == expected_topics
    assert services == expected_services
    assert code in (0, 130), run.output()[-3000:]
