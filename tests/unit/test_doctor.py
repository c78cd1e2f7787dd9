"""``rl-bringup doctor``'s checks on their own, without ROS: the expected graph against
docs/graph.md, the environment checks, and the graph checks on hand-made snapshots."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rl_bringup.tools.operate.doctor.environment import check_discovery, check_domain_id
from rl_bringup.tools.operate.doctor.graph import (
    ROSOUT_TOPIC,
    Endpoint,
    GraphSnapshot,
    TopicSpec,
    check_layout,
    check_nodes,
    check_services,
    check_wire_versions,
    expected_graph,
)
from rl_bringup.tools.operate.doctor.rates import check_rates
from rl_bringup.tools.operate.doctor.report import Check, Level, format_report
from rl_nodes import graph
from rl_nodes.graph import GUID_PREFIX_BYTES

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
MODES = ("colocated", "decoupled", "hybrid")
ROBOTS = 2


def documented(section: str, robots: int) -> dict[str, str]:
    """``name -> type`` (type '' for nodes) of a docs/graph.md table, ``{k}`` expanded (as
    tests/system/test_graph.py reads it)."""
    text = (REPO_ROOT / "docs" / "graph.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    entries: dict[str, str] = {}
    for name, kind in re.findall(r"^\| `([^`]+)` \| (?:`([^`]+)`)?", body, flags=re.M):
        names = [name.replace("{k}", str(k)) for k in range(robots)] if "{k}" in name else [name]
        entries.update({expanded: kind for expanded in names})
    return entries


@pytest.mark.parametrize("mode", ["colocated", "decoupled", "hybrid"])
def test_expected_graph_is_the_documented_graph(mode: str) -> None:
    graph = expected_graph(ROBOTS, mode)
    assert set(graph.nodes) == set(documented("Nodes", ROBOTS))
    assert {topic.name: topic.type for topic in graph.topics} == documented("Topics", ROBOTS)
    assert {service.name: service.type for service in graph.services} == \
        documented("Services", ROBOTS)
    assert set().union(*graph.processes) == set(graph.nodes)


def test_image_side_topics_are_the_documented_ones() -> None:
    expected = {graph.resolve(topic.name, "/robot_{k}") if topic.per_robot else topic.name:
                topic.type for topic in graph.IMAGE_TOPICS}
    expected = {name.replace("{k}", str(k)): kind for name, kind in expected.items()
                for k in range(ROBOTS)}
    assert expected == documented("Image topics", ROBOTS)


def test_robot_boundary_endpoints_are_the_documented_ones() -> None:
    expected = {graph.resolve(topic.name, "/robot_{k}") if topic.per_robot else topic.name:
                topic.type for topic in graph.boundary_topics("{controller}")}
    expected[graph.resolve(graph.RESET_ROBOT.name, "/robot_{k}", graph.SIM_ROBOT)] = \
        graph.RESET_ROBOT.type
    expected = {name.replace("{k}", str(k)): kind for name, kind in expected.items()
                for k in range(ROBOTS)}
    assert expected == documented("Robot boundary", ROBOTS)


def test_operator_topics_are_the_documented_ones() -> None:
    expected = {graph.resolve(topic.name, f"/robot_{k}"): topic.type
                for topic in graph.OPERATOR_TOPICS for k in range(ROBOTS)}
    assert expected == documented("People in the loop", ROBOTS)


def test_process_layouts_differ_by_mode() -> None:
    layouts = {mode: set(expected_graph(ROBOTS, mode).processes)
               for mode in ("colocated", "decoupled", "hybrid")}
    # decoupled: 2 simulators, 2 policies, replay_buffer, trainer, diagnostics_aggregator.
    assert [len(layouts[mode]) for mode in ("colocated", "decoupled", "hybrid")] == [1, 7, 3]


def test_environment_checks_warn_or_fail_with_a_fix() -> None:
    assert check_domain_id({}, {}).level is Level.WARN
    assert check_domain_id({}, {"ROS_DOMAIN_ID": "500"}).level is Level.FAIL
    # The launches use the caller's domain as is up to 232; above 101 it is a risk, not an error.
    assert check_domain_id({}, {"ROS_DOMAIN_ID": "150"}).level is Level.WARN
    assert check_domain_id({}, {"ROS_DOMAIN_ID": "7"}).level is Level.PASS
    unset = check_discovery({}, {})
    assert [check.level for check in unset] == [Level.WARN] and "LOCALHOST" in unset[0].fix
    assert check_discovery({}, {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"})[0].level is Level.WARN
    assert check_discovery({"discovery": "subnet"}, {})[0].level is Level.PASS
    assert check_discovery({}, {"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"})[0].level is Level.FAIL
    report = format_report([Check(Level.FAIL, "x", "broken", "do this")])
    assert "FAIL  x" in report and "fix: do this" in report and "1 failed" in report


# --- graph checks on hand-made snapshots ---------------------------------------------------------


def snapshot(processes: list[frozenset[str]] | tuple[frozenset[str], ...],
             extra_nodes: tuple[str, ...] = ()) -> GraphSnapshot:
    """A graph whose nodes run in ``processes``: each process is one DDS participant, seen
    through the GUID prefix of its nodes' /rosout publishers."""
    rosout = [Endpoint(node, qos=None, type="rcl_interfaces/msg/Log",
                       gid=bytes([index]) * GUID_PREFIX_BYTES + bytes([position]) * 4)
              for index, process in enumerate(processes)
              for position, node in enumerate(sorted(process))]
    nodes = sorted(node for process in processes for node in process) + list(extra_nodes)
    return GraphSnapshot(nodes=nodes, topics={}, publishers={ROSOUT_TOPIC: rosout},
                         subscriptions={}, services={})


@pytest.mark.parametrize("mode", MODES)
def test_the_process_layout_names_the_mode_it_matches(mode: str) -> None:
    graph = snapshot(expected_graph(ROBOTS, mode).processes)
    assert check_layout(graph, ROBOTS, mode).level is Level.PASS
    unnamed = check_layout(graph, ROBOTS, None)
    assert unnamed.level is Level.PASS and f"the {mode} mode" in unnamed.message
    other = next(candidate for candidate in MODES if candidate != mode)
    mismatch = check_layout(graph, ROBOTS, other)
    assert mismatch.level is Level.WARN and f"pass mode:={mode}" in mismatch.fix


def test_missing_doubled_and_extra_nodes_are_reported() -> None:
    expected = expected_graph(ROBOTS, "decoupled")
    present = [name for name in expected.nodes if name != "/trainer"]
    graph = snapshot([frozenset(present)], extra_nodes=("/replay_buffer", "/robot_5/policy"))
    missing, doubled, extra = check_nodes(expected, graph, 7, "decoupled", ROBOTS)
    assert (missing.level, missing.name) == (Level.FAIL, "nodes")
    assert missing.message.endswith("/trainer")
    assert "rl-bringup launch decoupled robots:=2 domain_id:=7" in missing.fix
    assert (doubled.level, doubled.name) == (Level.FAIL, "duplicate nodes")
    assert "/replay_buffer" in doubled.message
    assert (extra.level, extra.name) == (Level.WARN, "nodes")
    assert "/robot_5/policy" in extra.message


def test_a_service_must_be_served_by_its_node_with_its_type() -> None:
    expected = expected_graph(1, "decoupled")
    graph = snapshot([frozenset(expected.nodes)])
    graph.services = {spec.name: [spec.type] for spec in expected.services}
    for spec in expected.services:
        if spec.name != "/replay_buffer/save":
            graph.services_by_node.setdefault(spec.server, {})[spec.name] = [spec.type]
    levels = {check.name: check.level for check in check_services(expected, graph)}
    assert levels.pop("service /replay_buffer/save") is Level.FAIL
    assert set(levels.values()) == {Level.PASS}


@pytest.mark.parametrize(("rate_hz", "level"), [(0.0, Level.FAIL), (0.2, Level.WARN),
                                                (1.0, Level.PASS)])
def test_rates_are_checked_against_the_topic_band(rate_hz: float, level: Level) -> None:
    spec = TopicSpec("/replay_status", "rl_interfaces/msg/ReplayStatus", ("/replay_buffer",),
                     rate_hz=(0.5, float("inf")))
    unmeasured = TopicSpec("/episodes", "rl_interfaces/msg/EpisodeStatistics", (),
                           rate_hz=(0.0, float("inf")))
    (check,) = check_rates([spec, unmeasured], {"/replay_status": rate_hz}, window_s=3.0)
    assert (check.name, check.level) == ("rate /replay_status", level)
    assert (check.fix != "") is (level is not Level.PASS)


def test_endpoints_with_another_definition_of_a_message_are_named() -> None:
    """A robot updated without the learner (or the other way round): one wire version per
    deployment, and the nodes that differ are named."""
    def endpoint(node: str, type_hash: str, kind: str = "rl_interfaces/msg/ExperienceBatch"
                 ) -> Endpoint:
        return Endpoint(node, qos=None, gid=b"", type=kind, type_hash=type_hash)

    old, new = "RIHS01_" + "a" * 64, "RIHS01_" + "b" * 64
    graph = GraphSnapshot(
        nodes=[], topics={"/experience": ["rl_interfaces/msg/ExperienceBatch"],
                          "/rosout": ["rcl_interfaces/msg/Log"]},
        publishers={"/experience": [endpoint("/robot_0/simulator", new),
                                    endpoint("/robot_1/simulator", old)],
                    "/rosout": [endpoint("/x", old, "rcl_interfaces/msg/Log"),
                                endpoint("/y", new, "rcl_interfaces/msg/Log")]},
        subscriptions={"/experience": [endpoint("/replay_buffer", new)]}, services={})
    [check] = check_wire_versions(graph)
    assert (check.level, check.name) == (Level.FAIL, "wire version /experience")
    assert "/robot_1/simulator (RIHS01_aaaaaaaaaaa...)" in check.message
    assert "/robot_0" not in check.message and "install one rl_interfaces" in check.fix
    graph.publishers["/experience"][1] = endpoint("/robot_1/simulator", new)
    assert [c.level for c in check_wire_versions(graph)] == [Level.PASS]
