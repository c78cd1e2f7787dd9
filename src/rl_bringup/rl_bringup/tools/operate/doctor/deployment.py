"""The checks of a running deployment, in order: wait for its nodes, read the graph once, check
nodes, topics, services, QoS and process layout, then measure the rates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rl_bringup.run.ros_session import RosSession, graph_node_names, join_name
from rl_bringup.tools.operate.doctor.graph import (
    ExpectedGraph,
    check_layout,
    check_nodes,
    check_services,
    check_topics,
    check_wire_versions,
    expected_graph,
    take_snapshot,
)
from rl_bringup.tools.operate.doctor.qos import check_qos
from rl_bringup.tools.operate.doctor.rates import check_rates, measure_rates
from rl_bringup.tools.operate.doctor.report import Check, Level

if TYPE_CHECKING:  # pragma: no cover - typing only
    from rclpy.node import Node


def _rl_nodes(names: Sequence[str]) -> list[str]:
    core = {"/replay_buffer", "/trainer"}
    return [name for name in names if name in core or
            (name.startswith("/robot_") and name.endswith(("/simulator", "/policy")))]


def _robots_in_graph(names: Sequence[str]) -> int:
    from rl_bringup.tools.operate.status import robots_in  # noqa: PLC0415

    indices = robots_in(names)
    return max(indices) + 1 if indices else 0


def deployment_checks(session: RosSession, domain_id: int, mode: str | None,
                      robots: int | None, wait_s: float, window_s: float) -> list[Check]:
    """The graph checks of a running deployment (see :mod:`rl_bringup.tools.operate.doctor`)."""
    node = session.node
    if robots is not None:
        target = set(expected_graph(robots, mode or "colocated").nodes)
        session.spin_until(lambda: target <= set(graph_node_names(node)), wait_s)
    else:
        # Count robots once the deployment's nodes show up and their number is stable.
        seen: list[int] = []

        def settled() -> bool:
            seen.append(len(_rl_nodes(graph_node_names(node))))
            return len(seen) > 10 and seen[-1] > 0 and seen[-1] == seen[-11]

        session.spin_until(settled, wait_s)
        robots = _robots_in_graph(graph_node_names(node))
        if not _rl_nodes(graph_node_names(node)) and mode is None:
            return [Check(Level.WARN, "deployment", f"no rl_ros2 nodes in domain {domain_id} "
                          f"after {wait_s:g} s; graph checks skipped",
                          "start one (rl-bringup launch MODE domain_id:=N) or attach with its "
                          "domain and discovery settings; pass mode:= to make a missing "
                          "deployment a failure")]
        robots = max(robots, 1)
    expected = expected_graph(robots, mode or "colocated")
    # Endpoints are discovered a moment after their nodes.
    session.spin_until(lambda: _endpoints_known(node, expected), wait_s)
    graph = take_snapshot(node, expected)
    checks = check_nodes(expected, graph, domain_id, mode or "MODE", robots)
    if not set(expected.nodes) & set(graph.nodes):
        checks.append(Check(Level.FAIL, "deployment", "no node of the deployment runs; topic, "
                            "service, QoS and rate checks skipped", "see the nodes check above"))
        return checks
    checks += check_topics(expected, graph)
    checks += check_wire_versions(graph)
    checks += check_services(expected, graph)
    checks += check_qos(graph)
    checks.append(check_layout(graph, robots, mode))
    rated = [spec for spec in expected.topics if spec.rate_hz is not None]
    checks += check_rates(rated, measure_rates(session, graph, rated, window_s), window_s)
    return checks


def _endpoints_known(node: Node, expected: ExpectedGraph) -> bool:
    """Whether every present node's expected publishers and subscriptions were discovered
    (DDS discovers a participant's writers and readers separately, each a moment later)."""
    present = set(graph_node_names(node))
    for spec in expected.topics:
        for wanted_names, lookup in ((spec.publishers, node.get_publishers_info_by_topic),
                                     (spec.subscribers, node.get_subscriptions_info_by_topic)):
            wanted = {name for name in wanted_names if name in present}
            if not wanted:
                continue
            found = {join_name(info.node_namespace, info.node_name) for info in lookup(spec.name)}
            if not wanted <= found:
                return False
    return True
