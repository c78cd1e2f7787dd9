"""``rl-bringup doctor``: check the ROS setup and a running deployment, and say how to fix it.

Usage::

    rl-bringup doctor [mode:=colocated|decoupled|hybrid] [robots:=N] [domain_id:=N]
                      [discovery:=localhost|subnet|server:HOST:PORT] [wait:=S] [window:=S]

Prints one ``PASS`` / ``WARN`` / ``FAIL`` line per check, each ``WARN`` and ``FAIL`` followed by
a ``fix:`` line; exits 1 when any check failed, else 0.

Environment: rclpy and the RMW load, ``RMW_IMPLEMENTATION``, ``ROS_DOMAIN_ID`` (set, in range),
``ROS_AUTOMATIC_DISCOVERY_RANGE`` (``LOCALHOST`` unless multi-host is an explicit choice, see
DESIGN.md "Network safety"), ``/dev/shm`` (Fast DDS' shared-memory transport).

Deployment (in the domain): the nodes, topics (with types, publishers, subscribers) and services
of :func:`expected_graph` — the table of docs/graph.md for ``robots`` robots, node layout from
:func:`rl_bringup.plan.make_plan` — are present; no node name is taken twice (two deployments in
one domain); publishers and subscribers of every topic have compatible QoS (reliability,
durability, ...); which nodes share a process (one DDS participant per process) matches
``mode``; and over ``window`` seconds observations and actions flow and ``/replay_status``
arrives at about 1 Hz. Without ``mode:=`` the robots are counted from the graph and a domain
without a deployment is only a warning; with ``mode:=`` it is a failure naming the missing nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
import enum
import os
from pathlib import Path
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any, TextIO

from rl_bringup.plan import (DISCOVERY_RANGE_VARIABLE, DISCOVERY_SERVER_VARIABLE,
                             DOMAIN_ID_VARIABLE, MODES, RMW_IMPLEMENTATION, PlanError, make_plan,
                             parse_domain_id, parse_robots, robot_namespace)
from rl_bringup.tools.common import ToolError, parse_tokens, tool_handler
from rl_bringup.tools.ros_session import (ATTACH_KEYS, SUPER_CLIENT_VARIABLE, TOOL_NODE_PREFIX,
                                          RosSession, attach_settings, graph_node_names,
                                          join_name, parse_seconds, standalone_main)

if TYPE_CHECKING:  # pragma: no cover - typing only
    import argparse

    from rclpy.node import Node

KEYS: tuple[str, ...] = ("mode", "robots", "wait", "window", *ATTACH_KEYS)
DEFAULT_WAIT_S = 5.0
DEFAULT_WINDOW_S = 3.0
#: The replay buffer publishes /replay_status every second, and at once whenever its rate
#: limiter pauses or resumes acting (rl_nodes.replay_buffer), so only the floor is a contract.
REPLAY_STATUS_RATE_HZ = (0.5, float("inf"))
#: Below this much free space in /dev/shm large messages may not fit Fast DDS' segments.
MIN_SHM_FREE_BYTES = 64 * 1024 * 1024
SHM_PATH = "/dev/shm"
#: Bytes of an endpoint GID that identify its DDS participant (the GUID prefix); rmw_fastrtps
#: creates one participant per rclpy context, i.e. per process.
PARTICIPANT_PREFIX_BYTES = 12
ROSOUT_TOPIC = "/rosout"
#: Scalars the trainer publishes as ``/trainer/<name>`` (std_msgs/Float64), as
#: ``rl_nodes.trainer.METRICS`` lists them; not imported from there because rl_nodes pulls in
#: rclpy and torch, and ``rl-bringup plan`` imports this module.
TRAINER_METRICS: tuple[str, ...] = ("critic_loss", "actor_loss", "alpha", "q_mean", "entropy",
                                    "mean_return", "updates_per_s", "env_steps_per_s",
                                    "updates_per_transition", "policy_lag", "acting_blocked_s",
                                    "learner_blocked_s")


class Level(enum.Enum):
    """Outcome of one check."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass
class Check:
    """One line of the report.

    :param level: PASS, WARN or FAIL.
    :param name: what was checked (``rmw``, ``node``, ``topic /experience``).
    :param message: what was found.
    :param fix: how to fix it (WARN and FAIL).
    """

    level: Level
    name: str
    message: str
    fix: str = ""


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
    """The graph of a deployment of ``robots`` robots, as docs/graph.md documents it.

    The graph is the same in every mode; ``mode`` only chooses which nodes share a process
    (:attr:`ExpectedGraph.processes`, from :func:`rl_bringup.plan.make_plan`). A unit test
    compares this with the tables of docs/graph.md, so the two change together.

    :raises rl_bringup.plan.PlanError: for a bad mode or robot count.
    """
    plan = make_plan(mode, robots=robots, domain_id=0, environ={})
    processes = tuple(frozenset(join_name(namespace, kind) for kind, namespace in
                                process.hosted_nodes()) for process in plan.processes)
    nodes = tuple(sorted(name for process in processes for name in process))
    simulators = tuple(f"{robot_namespace(k)}/simulator" for k in range(plan.robots))
    policies = tuple(f"{robot_namespace(k)}/policy" for k in range(plan.robots))
    topics: list[TopicSpec] = []
    services: list[ServiceSpec] = []
    for robot in range(plan.robots):
        namespace = robot_namespace(robot)
        simulator, policy = f"{namespace}/simulator", f"{namespace}/policy"
        topics += [
            TopicSpec(f"{namespace}/observations", "rl_interfaces/msg/ObservationBatch",
                      (simulator,), (policy,), rate_hz=(0.0, float("inf"))),
            TopicSpec(f"{namespace}/actions", "rl_interfaces/msg/ActionBatch",
                      (policy,), (simulator,), rate_hz=(0.0, float("inf"))),
            # For rviz; joint states and markers are only built while someone listens.
            TopicSpec(f"{namespace}/robot_description", "std_msgs/msg/String", (simulator,),
                      latched=True),
            TopicSpec(f"{namespace}/joint_states", "sensor_msgs/msg/JointState", (simulator,)),
            TopicSpec(f"{namespace}/markers", "visualization_msgs/msg/MarkerArray", (simulator,)),
        ]
        services.append(ServiceSpec(f"{namespace}/get_action", "rl_interfaces/srv/GetAction",
                                    policy))
    topics += [
        # The trainer also subscribes /experience when it interleaves updates (colocated).
        TopicSpec("/experience", "rl_interfaces/msg/ExperienceBatch", simulators,
                  ("/replay_buffer",), rate_hz=(0.0, float("inf"))),
        TopicSpec("/episodes", "rl_interfaces/msg/EpisodeStatistics", simulators, ("/trainer",)),
        TopicSpec("/policy_weights", "rl_interfaces/msg/PolicyWeights", ("/trainer",), policies,
                  latched=True),
        TopicSpec("/replay_status", "rl_interfaces/msg/ReplayStatus", ("/replay_buffer",),
                  (*simulators, "/trainer"), rate_hz=REPLAY_STATUS_RATE_HZ),
        TopicSpec("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", nodes),
        *(TopicSpec(f"/trainer/{metric}", "std_msgs/msg/Float64", ("/trainer",))
          for metric in TRAINER_METRICS),
    ]
    services += [
        ServiceSpec("/replay_buffer/sample", "rl_interfaces/srv/SampleBatch", "/replay_buffer"),
        ServiceSpec("/replay_buffer/save", "rl_interfaces/srv/BufferFile", "/replay_buffer"),
        ServiceSpec("/replay_buffer/load", "rl_interfaces/srv/BufferFile", "/replay_buffer"),
    ]
    return ExpectedGraph(nodes, tuple(topics), tuple(services), processes)


# --- environment checks (no rclpy needed to test them) --------------------------------------


def check_rclpy() -> tuple[list[Check], str | None]:
    """rclpy imports and an RMW implementation loads; returns the checks and the RMW name."""
    try:
        import rclpy  # noqa: F401, PLC0415
        from rclpy.utilities import get_rmw_implementation_identifier  # noqa: PLC0415

        identifier = get_rmw_implementation_identifier()
    except Exception as error:  # ImportError, or rmw_implementation failing to load the RMW
        return [Check(Level.FAIL, "rclpy", f"cannot import rclpy or load the RMW: {error}",
                      "install the project into a virtualenv (scripts/setup.sh) and use its "
                      "python, or source your ROS 2 install (source /opt/ros/kilted/setup.bash); "
                      "if RMW_IMPLEMENTATION names an RMW that is not installed, unset it")], None
    return [Check(Level.PASS, "rclpy", f"rclpy imports, RMW {identifier} loads")], identifier


def check_rmw(environ: Mapping[str, str], identifier: str | None) -> Check:
    """``RMW_IMPLEMENTATION``: deployments use rmw_fastrtps_cpp; mixing RMWs breaks discovery
    of some endpoints and shared memory."""
    chosen = environ.get("RMW_IMPLEMENTATION", "")
    effective = chosen or identifier or "the default"
    if effective == RMW_IMPLEMENTATION:
        source = "RMW_IMPLEMENTATION" if chosen else "the default RMW"
        return Check(Level.PASS, "rmw", f"{source} is {RMW_IMPLEMENTATION}, as in the "
                     f"deployments")
    return Check(Level.WARN, "rmw", f"this shell uses {effective}; rl-bringup deployments use "
                 f"{RMW_IMPLEMENTATION}, and different RMWs do not reliably talk to each other",
                 f"export RMW_IMPLEMENTATION={RMW_IMPLEMENTATION}")


def check_domain_id(values: Mapping[str, str], environ: Mapping[str, str]) -> Check:
    """``ROS_DOMAIN_ID`` set (or ``domain_id:=`` given) and in 0..101."""
    if values.get("domain_id", "").strip():
        return Check(Level.PASS, "domain id", f"domain_id:={values['domain_id']} given")
    text = environ.get(DOMAIN_ID_VARIABLE, "").strip()
    if not text:
        return Check(Level.WARN, "domain id",
                     f"{DOMAIN_ID_VARIABLE} is not set: this shell uses domain 0, while "
                     f"rl-bringup launch picks a random domain for each run unless given one",
                     "run the 'export ROS_DOMAIN_ID=...' line the launch header prints, or pass "
                     "domain_id:=N (to the launch and to the tools)")
    try:
        domain_id = parse_domain_id(text, source=DOMAIN_ID_VARIABLE)
    except PlanError as error:
        return Check(Level.FAIL, "domain id", str(error),
                     f"export {DOMAIN_ID_VARIABLE}=N with N from 0 to 101 (higher ids push DDS "
                     f"ports into the ephemeral range)")
    return Check(Level.PASS, "domain id", f"{DOMAIN_ID_VARIABLE}={domain_id}")


def check_discovery(values: Mapping[str, str], environ: Mapping[str, str]) -> list[Check]:
    """Discovery stays on this machine unless multi-host was chosen explicitly."""
    localhost_fix = (f"export {DISCOVERY_RANGE_VARIABLE}=LOCALHOST (the default of rl-bringup "
                     f"launch and tools); for several hosts choose discovery:=subnet or a "
                     f"discovery server explicitly (docs/multihost.md)")
    if values.get("discovery", "").strip():
        return [Check(Level.PASS, "discovery", f"discovery:={values['discovery']} given "
                      f"(an explicit choice)")]
    checks: list[Check] = []
    if environ.get("ROS_LOCALHOST_ONLY"):
        checks.append(Check(Level.WARN, "discovery", "ROS_LOCALHOST_ONLY is set; it is "
                            f"deprecated and overridden by {DISCOVERY_RANGE_VARIABLE}",
                            "unset ROS_LOCALHOST_ONLY; " + localhost_fix))
    server = environ.get(DISCOVERY_SERVER_VARIABLE, "")
    value = environ.get(DISCOVERY_RANGE_VARIABLE, "")
    if server:
        checks.append(Check(Level.PASS, "discovery", f"{DISCOVERY_SERVER_VARIABLE}={server} "
                            f"(discovery server: an explicit multi-host choice)"))
        if environ.get(SUPER_CLIENT_VARIABLE, "").upper() != "TRUE":
            checks.append(Check(Level.WARN, "discovery", f"{SUPER_CLIENT_VARIABLE} is not TRUE: "
                                f"a plain discovery-server client does not see the whole graph "
                                f"(node and topic lists stay incomplete)",
                                f"export {SUPER_CLIENT_VARIABLE}=TRUE for introspection tools, "
                                f"or pass discovery:=server:HOST:PORT to the rl-bringup tools"))
        return checks
    if value == "LOCALHOST":
        checks.append(Check(Level.PASS, "discovery", f"{DISCOVERY_RANGE_VARIABLE}=LOCALHOST"))
    elif not value:
        checks.append(Check(Level.WARN, "discovery",
                            f"{DISCOVERY_RANGE_VARIABLE} is not set: other ROS 2 programs in "
                            f"this shell multicast discovery on the subnet (ROS 2's default); "
                            f"rl-bringup tools use LOCALHOST", localhost_fix))
    elif value in ("SUBNET", "SYSTEM_DEFAULT"):
        checks.append(Check(Level.WARN, "discovery",
                            f"{DISCOVERY_RANGE_VARIABLE}={value}: DDS discovery multicasts out "
                            f"of every interface", localhost_fix))
    elif value == "OFF":
        checks.append(Check(Level.FAIL, "discovery", f"{DISCOVERY_RANGE_VARIABLE}=OFF: no "
                            f"discovery at all, not even on this machine", localhost_fix))
    else:
        checks.append(Check(Level.FAIL, "discovery", f"{DISCOVERY_RANGE_VARIABLE}={value!r} is "
                            f"not one of LOCALHOST, SUBNET, OFF, SYSTEM_DEFAULT", localhost_fix))
    return checks


def check_shared_memory(path: str = SHM_PATH) -> Check:
    """``/dev/shm`` exists, is writable and has room (Fast DDS' shared-memory transport)."""
    fix_container = ("in a container run it with --shm-size=1g (or --ipc=host); on a host, "
                     "mount a tmpfs on /dev/shm")
    folder = Path(path)
    if not folder.is_dir():
        return Check(Level.FAIL, "shared memory", f"{path} does not exist: Fast DDS cannot use "
                     f"its shared-memory transport", fix_container)
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix="rl_bringup_doctor_") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
    except OSError as error:
        return Check(Level.FAIL, "shared memory", f"{path} is not writable ({error}): Fast DDS "
                     f"falls back to UDP and large messages slow down or fail",
                     f"make {path} writable for this user (mode 1777); {fix_container}")
    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    if free < MIN_SHM_FREE_BYTES:
        return Check(Level.WARN, "shared memory", f"{path} has only {free / 2**20:.0f} MiB free: "
                     f"policy weights and experience batches may not fit Fast DDS' segments",
                     f"{fix_container}; remove stale segments with 'fastdds shm clean'")
    return Check(Level.PASS, "shared memory", f"{path} writable, {free / 2**20:.0f} MiB free")


# --- graph checks ---------------------------------------------------------------------------


@dataclass
class Endpoint:
    """A publisher or subscription as the graph reports it."""

    node: str
    qos: Any
    gid: bytes
    type: str


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
                     bytes(info.endpoint_gid), info.topic_type)
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
            except Exception:  # the node left between the two calls; reported as missing
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


def _policy(value: Any) -> str:
    return str(getattr(value, "name", value)).lower()


def check_qos(graph: GraphSnapshot,
              compatible: Callable[[Any, Any], tuple[Any, str]] | None = None) -> list[Check]:
    """Every publisher/subscription pair of every topic can talk (reliability, durability,
    deadline, liveliness), as rmw judges it; one line per topic with a problem, one in all when
    there is none."""
    from rclpy.qos import QoSCompatibility, qos_check_compatible  # noqa: PLC0415

    compatible = qos_check_compatible if compatible is None else compatible
    checks: list[Check] = []
    pairs = 0
    for topic in sorted(graph.topics):
        errors: list[str] = []
        warnings: list[str] = []
        for publisher in graph.publishers.get(topic, []):
            for subscription in graph.subscriptions.get(topic, []):
                pairs += 1
                result, reason = compatible(publisher.qos, subscription.qos)
                if result == QoSCompatibility.OK:
                    continue
                pair = (f"{publisher.node} offers {_policy(publisher.qos.reliability)}/"
                        f"{_policy(publisher.qos.durability)}, {subscription.node} requests "
                        f"{_policy(subscription.qos.reliability)}/"
                        f"{_policy(subscription.qos.durability)}: {reason.strip()}")
                (errors if result == QoSCompatibility.ERROR else warnings).append(pair)
        fix = ("make the subscription's request no stricter than the offer: best_effort "
               "publishers need best_effort subscriptions, volatile publishers volatile ones")
        if errors:
            checks.append(Check(Level.FAIL, f"qos {topic}", "incompatible, no messages flow: "
                                + "; ".join(sorted(set(errors))), fix))
        if warnings:
            checks.append(Check(Level.WARN, f"qos {topic}", "compatibility unknown: "
                                + "; ".join(sorted(set(warnings))),
                                "give both sides explicit QoS policies instead of system "
                                "defaults"))
    if not checks:
        checks.append(Check(Level.PASS, "qos", f"all {pairs} publisher/subscription pairs on "
                            f"{len(graph.topics)} topics are compatible"))
    return checks


def observed_processes(graph: GraphSnapshot) -> list[frozenset[str]]:
    """Nodes grouped by DDS participant (the GUID prefix of their endpoints): one group per
    process, as rmw_fastrtps makes one participant per rclpy context."""
    groups: dict[bytes, set[str]] = {}
    for topic in (ROSOUT_TOPIC, *sorted(graph.publishers)):
        for endpoint in graph.publishers.get(topic, []):
            groups.setdefault(endpoint.gid[:PARTICIPANT_PREFIX_BYTES], set()).add(endpoint.node)
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


def measure_rates(session: RosSession, graph: GraphSnapshot, specs: Sequence[TopicSpec],
                  window_s: float) -> dict[str, float]:
    """Messages per second on each topic over ``window_s``, received raw (not decoded) with
    best-effort subscriptions, which match reliable and best-effort publishers alike."""
    import importlib  # noqa: PLC0415

    from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: PLC0415

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    arrivals: dict[str, list[float]] = {}
    subscriptions = []
    for spec in specs:
        if graph.topics.get(spec.name) != [spec.type]:
            continue
        package, _, name = spec.type.split("/")
        msg_class = getattr(importlib.import_module(f"{package}.msg"), name)
        times = arrivals.setdefault(spec.name, [])
        subscriptions.append(session.node.create_subscription(
            msg_class, spec.name, lambda data, times=times: times.append(time.monotonic()),
            qos, raw=True))
    started = time.monotonic()
    session.spin_for(window_s)
    elapsed = max(time.monotonic() - started, 1e-6)
    for subscription in subscriptions:
        session.node.destroy_subscription(subscription)
    rates: dict[str, float] = {}
    for topic, times in arrivals.items():
        if len(times) >= 3:  # from the spacing, so a late-matched subscription does not read low
            rates[topic] = (len(times) - 1) / max(times[-1] - times[0], 1e-6)
        else:
            rates[topic] = len(times) / elapsed
    return rates


def check_rates(specs: Sequence[TopicSpec], rates: Mapping[str, float],
                window_s: float) -> list[Check]:
    """Observed rates within each topic's expected band (``> 0`` when the band starts at 0)."""
    checks: list[Check] = []
    for spec in specs:
        if spec.rate_hz is None or spec.name not in rates:
            continue
        low, high = spec.rate_hz
        rate = rates[spec.name]
        band = "> 0 Hz" if low == 0.0 and high == float("inf") else f"{low:g}..{high:g} Hz"
        name = f"rate {spec.name}"
        if rate == 0.0:
            checks.append(Check(Level.FAIL, name, f"no messages in {window_s:g} s (expected "
                                f"{band})", _rate_fix(spec)))
        elif (low == 0.0 or rate >= low) and rate <= high:
            checks.append(Check(Level.PASS, name, f"{rate:.1f} Hz"))
        else:
            checks.append(Check(Level.WARN, name, f"{rate:.2f} Hz, expected {band}",
                                _rate_fix(spec)))
    return checks


def _rate_fix(spec: TopicSpec) -> str:
    if spec.name.endswith(("/observations", "/actions")):
        return ("the robot is not stepping: check the launch log of its simulator and policy "
                "(a policy without weights, a crashed env); the run may also have finished "
                "(total_env_steps reached)")
    if spec.name == "/experience":
        return "the simulators are not stepping: check their logs in the launch output"
    return f"{', '.join(spec.publishers)} is stalled or overloaded: check its log"


# --- the command ----------------------------------------------------------------------------


def format_report(checks: Sequence[Check]) -> str:
    """The report: one line per check, a ``fix:`` line under each WARN and FAIL, a summary."""
    width = max([len(check.name) for check in checks] + [4])
    lines = []
    for check in checks:
        lines.append(f"{check.level.value}  {check.name:<{width}}  {check.message}")
        if check.fix and check.level is not Level.PASS:
            lines.append(f"{'':4}  {'':<{width}}  fix: {check.fix}")
    counts = Counter(check.level for check in checks)
    lines.append(f"{counts[Level.PASS]} passed, {counts[Level.WARN]} warning(s), "
                 f"{counts[Level.FAIL]} failed")
    return "\n".join(lines)


def _rl_nodes(names: Sequence[str]) -> list[str]:
    core = {"/replay_buffer", "/trainer"}
    return [name for name in names if name in core or
            (name.startswith("/robot_") and name.endswith(("/simulator", "/policy")))]


def _robots_in_graph(names: Sequence[str]) -> int:
    from rl_bringup.tools.status import robots_in  # noqa: PLC0415

    indices = robots_in(names)
    return max(indices) + 1 if indices else 0


def deployment_checks(session: RosSession, domain_id: int, mode: str | None,
                      robots: int | None, wait_s: float, window_s: float) -> list[Check]:
    """The graph checks of a running deployment (see the module docstring)."""
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


def doctor(values: dict[str, str], out: TextIO = sys.stdout) -> int:
    """Run ``rl-bringup doctor`` with parsed ``key:=value`` arguments; returns the exit code
    (0: no FAIL, 1: at least one).

    :raises ToolError: for bad arguments (exit code 2).
    """
    mode = values.get("mode", "").strip().lower() or None
    if mode is not None and mode not in MODES:
        raise ToolError(f"unknown mode {values['mode']!r}; valid modes: {', '.join(MODES)}")
    robots = parse_robots(values["robots"]) if "robots" in values else None
    wait_s = parse_seconds("wait", values.get("wait", str(DEFAULT_WAIT_S)))
    window_s = parse_seconds("window", values.get("window", str(DEFAULT_WINDOW_S)))
    if values.get("domain_id", "").strip():
        parse_domain_id(values["domain_id"])  # a bad argument is a usage error (exit 2)

    # The environment as the user has it, before the tool applies its own defaults.
    checks, identifier = check_rclpy()
    checks.append(check_rmw(os.environ, identifier))
    domain_check = check_domain_id(values, os.environ)
    checks.append(domain_check)
    checks += check_discovery(values, os.environ)
    checks.append(check_shared_memory())
    header = f"rl-bringup doctor  {mode or 'any mode'}, " \
             f"{robots if robots is not None else 'any number of'} robot(s)"
    if identifier is None or domain_check.level is Level.FAIL:
        checks.append(Check(Level.FAIL, "deployment", "graph checks skipped: fix the "
                            "environment first", "see the failures above"))
    else:
        settings = attach_settings(values)
        header += f"  domain {settings.domain_id}"
        try:
            with RosSession("doctor", settings.domain_id) as session:
                checks += deployment_checks(session, settings.domain_id, mode, robots, wait_s,
                                            window_s)
        except Exception as error:  # rclpy.init or the middleware failing: report, don't crash
            checks.append(Check(Level.FAIL, "ros", f"could not start ROS in domain "
                                f"{settings.domain_id}: {error}",
                                "check RMW_IMPLEMENTATION and the Fast DDS environment "
                                "(FASTRTPS_DEFAULT_PROFILES_FILE, ROS_DISCOVERY_SERVER)"))
    print(header, file=out)
    print(format_report(checks), file=out, flush=True)
    return 1 if any(check.level is Level.FAIL for check in checks) else 0


@tool_handler("doctor")
def _handle(arguments: argparse.Namespace, tokens: list[str]) -> int:
    return doctor(parse_tokens(tokens, KEYS))


def register(subparsers: Any) -> None:
    """Add ``doctor`` to the ``rl-bringup`` subcommands."""
    parser = subparsers.add_parser(
        "doctor",
        help="check the ROS environment and a running deployment; say how to fix problems",
        description="Check rclpy/RMW, ROS_DOMAIN_ID, discovery range, /dev/shm and, in the "
        "domain, the deployment's nodes, topics, services, QoS compatibility, process layout "
        "and topic rates. Exit code 1 when a check fails. key:=value arguments: mode:=MODE "
        f"({', '.join(MODES)}; makes a missing deployment a failure), robots:=N (default: "
        f"counted from the graph), domain_id:=N (default $ROS_DOMAIN_ID), "
        "discovery:=localhost|subnet|server:HOST:PORT, wait:=S (discovery wait, default "
        f"{DEFAULT_WAIT_S:g}), window:=S (rate window, default {DEFAULT_WINDOW_S:g}).",
    )
    parser.add_argument("arguments", nargs="*", metavar="key:=value")
    parser.set_defaults(handler=_handle)


if __name__ == "__main__":
    sys.exit(standalone_main(register))
