"""Every mode's live graph (nodes, topics, services with types) equals docs/graph.md."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
import rclpy

from tests.processes import REPO, Child

pytestmark = pytest.mark.system
ROBOTS = 2
STANDARD_TOPICS = {"/rosout", "/parameter_events"}
PARAMETER_SERVICES = re.compile(r"/(describe_parameters|get_parameter_types|get_parameters|"
                                r"list_parameters|set_parameters|set_parameters_atomically|"
                                r"get_type_description)$")


def documented(section: str) -> dict[str, str]:
    """``name -> type`` (type '' for nodes) from a table of docs/graph.md, robots expanded."""
    text = (REPO / "docs" / "graph.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    entries: dict[str, str] = {}
    for row in re.findall(r"^\| `([^`]+)` \| (?:`([^`]+)`)?", body, flags=re.M):
        name, kind = row
        names = [name.replace("{k}", str(k)) for k in range(ROBOTS)] if "{k}" in name else [name]
        entries.update({n: kind for n in names})
    return entries


def live_graph(node: rclpy.node.Node) -> tuple[set[str], dict[str, str], dict[str, str]]:
    nodes = {(ns.rstrip("/") + "/" + name) for name, ns in node.get_node_names_and_namespaces()
             if name != node.get_name()}
    topics = {name: ",".join(types) for name, types in node.get_topic_names_and_types()
              if name not in STANDARD_TOPICS}
    services = {name: ",".join(types) for name, types in node.get_service_names_and_types()
                if not PARAMETER_SERVICES.search(name)}
    return nodes, topics, services


@pytest.mark.parametrize("mode", ["colocated", "decoupled", "hybrid"])
def test_live_graph_matches_the_documented_table(mode: str, ros_env, tmp_path: Path) -> None:
    expected_nodes = set(documented("Nodes"))
    expected_topics = documented("Topics")
    expected_services = documented("Services")
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
