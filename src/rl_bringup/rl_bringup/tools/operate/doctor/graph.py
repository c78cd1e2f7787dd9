"""The graph a deployment should show, and the checks of the graph a deployment does show.

:func:`expected_graph` is the table of docs/graph.md for a number of robots, with the node layout
of :func:`rl_bringup.plan.deployment.make_plan`; :func:`take_snapshot` reads the live graph once;
the ``check_*`` functions compare the two (nodes, topics, services, which nodes share a process).
The checks take plain snapshots, so they are tested without a running deployment.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rl_bringup.plan.deployment import make_plan
from rl_bringup.plan.layouts import MODES
from rl_bringup.run.ros_session import TOOL_NODE_PREFIX, graph_node_names, join_name
from rl_bringup.tools.operate.doctor.report import Check, Level
from rl_nodes import graph
from rl_nodes.graph import GUID_PREFIX_BYTES

if TYPE_CHECKING:  # pragma: no cover - typing only
    from rclpy.node import Node

ROSOUT_TOPIC = "/rosout"


# --- the expected graph ---------------------------------------------------------------------


@dataclass(frozen=True)
class TopicSpec:
    """A topic of the documented graph (docs/graph.md, "Topics").

    :param name: fully qualified name.
    :param type: ``pkg/msg/Type``.
    :param publishers: nodes that must publish it.
    :param subscribers: nodes that must subscribe to it (others may too).
    :param latched: publishers must offer transient-local durability.
    :param rate_hz: (min, max) message rate a running deployment shows; ``None``: not checked.
    """

    name: str
    type: str
    publishers: tuple[str, ...]
    subscribers: tuple[str, ...] = ()
    latched: bool = False
    rate_hz: tuple[float, float] | None = None


@dataclass(frozen=True)
class ServiceSpec:
    """A service of the documented graph (docs/graph.md, "Services")."""

    name: str
    type: str
    server: str


@dataclass(frozen=True)
class ExpectedGraph:
    """What a running deployment shows (docs/graph.md) and how its nodes share processes.

    :param nodes: full node names.
    :param topics: the documented topics.
    :param services: the documented services.
    :param processes: the node names of each process of the deployment plan.
    """

    nodes: tuple[str, ...]
    topics: tuple[TopicSpec, ...]
    services: tuple[ServiceSpec, ...]
    processes: tuple[frozenset[str], ...]


def expected_graph(robots: int, mode: str = "colocated") -> ExpectedGraph:
    """The graph of a deployment of ``robots`` robots: :mod:`rl_nodes.graph` with the robots
    expanded (docs/graph.md documents the same, checked by a unit test).

    The graph is the same in every mode; ``mode`` only chooses which nodes share a process
    (:attr:`ExpectedGraph.processes`, from :func:`rl_bringup.plan.deployment.make_plan`).

    :raises rl_bringup.plan.deployment.PlanError: for a bad mode or robot count.
    """
    plan = make_plan(mode, robots=robots, domain_id=0, environ={})
    processes = tuple(frozenset(join_name(namespace, kind) for kind, namespace in
                                process.hosted_nodes()) for process in plan.processes)
    nodes = tuple(sorted(name for process in processes for name in process))
    namespaces = [graph.robot_namespace(k) for k in range(plan.robots)]

    def nodes_of(kinds: tuple[str, ...], namespace: str | None) -> tuple[str, ...]:
        """Node names of ``kinds``: in ``namespace`` for per-robot kinds, or of every robot."""
        if kinds == ("*",):
            return nodes
        names: list[str] = []
        for kind in kinds:
            if kind not in graph.PER_ROBOT_KINDS:
                names.append(graph.node_name(kind))
            elif namespace is not None:
                names.append(graph.node_name(kind, namespace))
            else:
                names += [graph.node_name(kind, ns) for ns in namespaces]
        return tuple(names)

    def spec(topic: graph.Topic, namespace: str | None) -> TopicSpec:
        return TopicSpec(graph.resolve(topic.name, namespace or "/"), topic.type,
                         nodes_of(topic.publishers, namespace),
                         nodes_of(topic.subscribers, namespace), topic.qos.latched,
                         topic.rate_hz)

    topics = [spec(topic, namespace) for namespace in namespaces
              for topic in graph.TOPICS if topic.per_robot]
    topics += [spec(topic, None) for topic in graph.TOPICS if not topic.per_robot]
    services = [ServiceSpec(graph.service_name(service, namespace), service.type,
                            graph.node_name(service.server, namespace))
                for service in graph.SERVICES
                for namespace in (namespaces if service.server in graph.PER_ROBOT_KINDS
                                  else ["/"])]
    return ExpectedGraph(nodes, tuple(topics), tuple(services), processes)


# --- graph checks ---------------------------------------------------------------------------


@dataclass
class Endpoint:
    """A publisher or subscription as the graph reports it."""

    node: str
    qos: Any
    gid: bytes
    type: str
    #: The message definition's hash (``RIHS01_...``; '' when the middleware gives none).
    type_hash: str = ""


@dataclass
class GraphSnapshot:
    """The graph as seen once, tool nodes left out."""

    nodes: list[str]
    topics: dict[str, list[str]]
    publishers: dict[str, list[Endpoint]]
    subscriptions: dict[str, list[Endpoint]]
    services: dict[str, list[str]]
    services_by_node: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def _endpoints(infos: Sequence[Any]) -> list[Endpoint]:
    return [Endpoint(join_name(info.node_namespace, info.node_name), info.qos_profile,
                     bytes(info.endpoint_gid), info.topic_type,
                     str(getattr(info, "topic_type_hash", "") or ""))
            for info in infos if not info.node_name.startswith(TOOL_NODE_PREFIX)]


def take_snapshot(node: Node, expected: ExpectedGraph | None) -> GraphSnapshot:
    """Nodes, topics, endpoints (with QoS and GIDs) and services of the graph."""
    nodes = graph_node_names(node)
    topics = {name: list(types) for name, types in node.get_topic_names_and_types()}
    publishers = {topic: _endpoints(node.get_publishers_info_by_topic(topic)) for topic in topics}
    subscriptions = {topic: _endpoints(node.get_subscriptions_info_by_topic(topic))
                     for topic in topics}
    services = {name: list(types) for name, types in node.get_service_names_and_types()}
    by_node: dict[str, dict[str, list[str]]] = {}
    for spec in expected.services if expected else ():
        if spec.server in nodes and spec.server not in by_node:
            namespace, _, name = spec.server.rpartition("/")
            try:
                by_node[spec.server] = {
                    service: list(types) for service, types in
                    node.get_service_names_and_types_by_node(name, namespace or "/")}
            except Exception:  # noqa: BLE001 - the node left between the two calls; reported as missing
                by_node[spec.server] = {}
    return GraphSnapshot(nodes, topics, publishers, subscriptions, services, by_node)


def check_nodes(expected: ExpectedGraph, graph: GraphSnapshot, domain_id: int,
                mode: str, robots: int) -> list[Check]:
    """Expected nodes present; none running twice; no robots beyond ``robots``."""
    checks: list[Check] = []
    present = set(graph.nodes)
    missing = [name for name in expected.nodes if name not in present]
    launch = f"rl-bringup launch {mode} robots:={robots} domain_id:={domain_id}"
    if missing:
        checks.append(Check(
            Level.FAIL, "nodes", f"{len(missing)} of {len(expected.nodes)} expected nodes missing "
            f"in domain {domain_id}: {', '.join(missing)}",
            f"start the deployment ({launch}); if it runs, attach with the same domain and "
            f"discovery settings (the 'export ...' line its header prints); a missing robot node "
            f"that keeps restarting shows why in the launch log"))
    else:
        checks.append(Check(Level.PASS, "nodes", f"all {len(expected.nodes)} expected nodes "
                            f"present: {', '.join(expected.nodes)}"))
    duplicates = sorted(name for name, count in Counter(graph.nodes).items() if count > 1)
    if duplicates:
        checks.append(Check(
            Level.FAIL, "duplicate nodes", f"node names used more than once: "
            f"{', '.join(duplicates)}: two deployments (or a leftover process) share domain "
            f"{domain_id}", "stop the other deployment, or give each run its own domain_id:=N"))
    expected_set = set(expected.nodes)
    extra_robots = sorted(name for name in present - expected_set
                          if name.startswith("/robot_") and name.endswith(("/simulator", "/policy")))
    if extra_robots:
        checks.append(Check(Level.WARN, "nodes", f"robot nodes beyond robots:={robots}: "
                            f"{', '.join(extra_robots)}",
                            "pass the deployment's robot count (robots:=N), or stop the extra "
                            "robots"))
    return checks


def check_topics(expected: ExpectedGraph, graph: GraphSnapshot) -> list[Check]:
    """Each documented topic exists with its type, publishers, subscribers and durability.

    Endpoints of nodes that are missing altogether are not reported again (``nodes`` did).
    """
    from rclpy.qos import DurabilityPolicy  # noqa: PLC0415

    checks: list[Check] = []
    present = set(graph.nodes)
    for spec in expected.topics:
        name = f"topic {spec.name}"
        needed_publishers = [node for node in spec.publishers if node in present]
        needed_subscribers = [node for node in spec.subscribers if node in present]
        if not needed_publishers and not needed_subscribers:
            continue  # every node of this topic is missing: already a FAIL under "nodes"
        types = graph.topics.get(spec.name)
        if types is None:
            checks.append(Check(Level.FAIL, name, f"not in the graph although "
                                f"{', '.join(needed_publishers + needed_subscribers)} run",
                                "those nodes run a different version of the code: reinstall "
                                "(scripts/setup.sh or colcon build) and restart the deployment"))
            continue
        if types != [spec.type]:
            checks.append(Check(Level.FAIL, name, f"type {', '.join(types)}, expected {spec.type}",
                                "every process must use the same rl_interfaces: rebuild and "
                                "reinstall it (scripts/setup.sh) everywhere, then restart"))
            continue
        publishing = {endpoint.node for endpoint in graph.publishers.get(spec.name, [])}
        subscribing = {endpoint.node for endpoint in graph.subscriptions.get(spec.name, [])}
        problems = [f"{node} does not publish it" for node in needed_publishers
                    if node not in publishing]
        problems += [f"{node} does not subscribe to it" for node in needed_subscribers
                     if node not in subscribing]
        if spec.latched:
            volatile = sorted(endpoint.node for endpoint in graph.publishers.get(spec.name, [])
                              if endpoint.qos.durability != DurabilityPolicy.TRANSIENT_LOCAL)
            problems += [f"{node} publishes it volatile (late joiners miss the latest message)"
                         for node in volatile]
        if problems:
            checks.append(Check(Level.FAIL, name, "; ".join(problems),
                                "restart the named nodes; if it persists they run other code "
                                "than this checkout: reinstall and relaunch"))
        else:
            checks.append(Check(Level.PASS, name, f"{spec.type}, {len(publishing)} publisher(s), "
                                f"{len(subscribing)} subscriber(s)"))
    return checks


def check_wire_versions(graph: GraphSnapshot) -> list[Check]:
    """Every endpoint of an rl_interfaces topic uses one definition of its type (one type hash):
    a deployment runs one wire version, and DDS does not connect endpoints whose definitions
    differ, without saying why. The definition most endpoints use is taken for the right one."""
    checks: list[Check] = []
    for topic in sorted(graph.topics):
        endpoints = [endpoint for endpoint in (*graph.publishers.get(topic, []),
                                               *graph.subscriptions.get(topic, []))
                     if endpoint.type.startswith("rl_interfaces/") and endpoint.type_hash]
        by_hash = Counter(endpoint.type_hash for endpoint in endpoints)
        if len(by_hash) < 2:
            continue
        usual = by_hash.most_common(1)[0][0]
        others = sorted({f"{endpoint.node} ({endpoint.type_hash[:18]}...)"
                         for endpoint in endpoints if endpoint.type_hash != usual})
        checks.append(Check(
            Level.FAIL, f"wire version {topic}",
            f"{endpoints[0].type} is defined otherwise in {', '.join(others)} than in the "
            f"other {by_hash[usual]} endpoint(s) ({usual[:18]}...): their messages do not reach "
            "each other", "install one rl_interfaces everywhere (scripts/setup.sh, or the same "
            "image on every host) and restart the named nodes; stored experience and "
            "checkpoints stay where they are"))
    if not checks:
        checks.append(Check(Level.PASS, "wire version", "every rl_interfaces endpoint uses one "
                            "definition of its type"))
    return checks


def check_services(expected: ExpectedGraph, graph: GraphSnapshot) -> list[Check]:
    """Each documented service exists with its type, served by its node."""
    checks: list[Check] = []
    present = set(graph.nodes)
    for spec in expected.services:
        if spec.server not in present:
            continue  # reported under "nodes"
        name = f"service {spec.name}"
        types = graph.services.get(spec.name)
        served = graph.services_by_node.get(spec.server, {})
        if types is None or spec.name not in served:
            checks.append(Check(Level.FAIL, name, f"not served by {spec.server}",
                                f"restart {spec.server}; if it persists it runs other code than "
                                f"this checkout: reinstall and relaunch"))
        elif types != [spec.type]:
            checks.append(Check(Level.FAIL, name, f"type {', '.join(types)}, expected {spec.type}",
                                "rebuild and reinstall rl_interfaces everywhere, then restart"))
        else:
            checks.append(Check(Level.PASS, name, f"{spec.type} served by {spec.server}"))
    return checks


def observed_processes(graph: GraphSnapshot) -> list[frozenset[str]]:
    """Nodes grouped by DDS participant (the GUID prefix of their endpoints): one group per
    process, as rmw_fastrtps makes one participant per rclpy context."""
    groups: dict[bytes, set[str]] = {}
    for topic in (ROSOUT_TOPIC, *sorted(graph.publishers)):
        for endpoint in graph.publishers.get(topic, []):
            groups.setdefault(endpoint.gid[:GUID_PREFIX_BYTES], set()).add(endpoint.node)
    return [frozenset(group) for group in groups.values()]


def check_layout(graph: GraphSnapshot, robots: int, mode: str | None) -> Check:
    """Which nodes share a process matches ``mode`` (or, without a mode, which mode it is)."""
    expected_nodes = set(expected_graph(robots).nodes)
    observed = {group & expected_nodes for group in observed_processes(graph)} - {frozenset()}
    matching = [candidate for candidate in MODES
                if set(expected_graph(robots, candidate).processes) == observed]
    described = "; ".join(sorted("{" + ", ".join(sorted(group)) + "}" for group in observed))
    if mode is None:
        if matching:
            return Check(Level.PASS, "process layout", f"{len(observed)} process(es), as in "
                         f"the {' / '.join(matching)} mode")
        return Check(Level.WARN, "process layout", f"nodes per process match no mode: {described}",
                     "stop stray processes and relaunch the deployment")
    if mode in matching:
        return Check(Level.PASS, "process layout", f"{len(observed)} process(es), as the {mode} "
                     f"mode places them")
    hint = (f"the graph looks like mode {' / '.join(matching)}: pass mode:={matching[0]}"
            if matching else "stop stray processes and relaunch the deployment")
    return Check(Level.WARN, "process layout", f"nodes per process do not match the {mode} mode: "
                 f"{described}", hint)
