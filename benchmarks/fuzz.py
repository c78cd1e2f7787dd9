"""Random hostile service requests and parameter changes for a running deployment (the fuzzing
part of ``benchmarks/faults.py`` and ``benchmarks/soak.py``, issue 19 item 10, issue 41 item 11).

Every request is drawn from a seeded generator, so a failing schedule replays. Each must be
answered, and every parameter change must be refused: the values drawn are the kinds a node
must never take (a wrong type, a value outside the declared range or not finite, a new value
for a read-only or launch-only parameter, a parameter the node never declared). Service
requests carry random sizes, shapes, non-finite values and random paths; they may be refused or
served, but must be answered and must leave the node running. Besides the deployment's own
services:

- **lifecycle**: every managed node (one serving ``<node>/change_state``) gets ``change_state``
  requests with transition ids and labels its current state does not offer (asked first with
  ``get_available_transitions``), and never one that pauses or ends a node (deactivate,
  cleanup, shutdown: what those do from outside is the supervisors' business, rl_nodes.lifecycle,
  not this fuzzing's). Each must be refused, and ``get_state`` must say the same after;
- **composition**: a container serving ``load_node`` gets load requests for foreign packages,
  unknown plugins, or a real plugin with parameters a load may not set
  (rl_core.security.composition.LOAD_REFUSED_PARAMETERS, the launch-only ones), and ``unload_node``
  requests for ids it does not list. Each must be refused;
- **the replay buffer's files**: a ``save`` of a fresh name, the same again (within
  ``save_interval``: refused) and a ``load`` of it (the run is active: refused); the buffer's
  counters (held, inserted) must never go back over any ``save`` or ``load``.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Service calls and parameter changes drawn per service or node.
CALLS_PER_SERVICE = 12
CHANGES_PER_NODE = 24
#: change_state requests per managed node, and load/unload requests per container.
TRANSITIONS_PER_NODE = 6
COMPOSITION_CALLS = 6
_INT64 = (-(2**63), 2**63 - 1)
#: Transitions that pause or end a node (lifecycle_msgs/msg/Transition ids: cleanup,
#: deactivate, the three shutdowns; and their labels): never sent, whatever the state offers.
STOPPING_TRANSITIONS = frozenset((2, 4, 5, 6, 7))
STOPPING_LABELS = frozenset(("cleanup", "deactivate", "shutdown"))
CHANGE_STATE_TYPE = "lifecycle_msgs/srv/ChangeState"
LOAD_NODE_TYPE = "composition_interfaces/srv/LoadNode"
_CONTAINER_SERVICE = "/_container/"

Call = Callable[[Any, str, Any], Any]
#: ``(service name, its type names)`` of a graph (rclpy's get_service_names_and_types).
Services = list[tuple[str, list[str]]]
#: The replay buffer's counters as last reported: (transitions held, inserted in total).
Counters = Callable[[], tuple[int, int]]


@dataclass
class FuzzReport:
    """What the fuzzing sent and how it was answered."""

    service_calls: int = 0
    parameter_changes: int = 0
    refused_changes: int = 0
    #: change_state requests sent, and the managed nodes they went to.
    lifecycle_calls: int = 0
    managed_nodes: list[str] = field(default_factory=list)
    #: load_node/unload_node requests sent, and the containers that serve them.
    composition_calls: int = 0
    containers: list[str] = field(default_factory=list)
    #: save/load requests sent to the replay buffer.
    file_calls: int = 0
    #: Calls that got no answer, and changes a node took (each a line saying what was sent).
    unanswered: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    #: The replay buffer's counters going back over a save or load (what was seen).
    counter_regressions: list[str] = field(default_factory=list)


def _random_text(rng: random.Random, length: int) -> str:
    alphabet = string.ascii_letters + string.digits + "/._-~ $*\\\n\t" + "é中"
    return "".join(rng.choice(alphabet) for _ in range(length))


def _random_floats(rng: random.Random, count: int) -> list[float]:
    specials = (math.nan, math.inf, -math.inf, 3.4e38, -3.4e38, 0.0)
    return [rng.choice(specials) if rng.random() < 0.3 else rng.uniform(-1e6, 1e6)
            for _ in range(count)]


def _random_path(rng: random.Random) -> str:
    pieces = ["..", "/", "/tmp", "snapshot.npz", "rate_limiter.json", "replay_buffer.lock",
              ".hidden.npz", "inserts-00000000.log", "x" * 300, "a/../../b.npz", "\x00", ""]
    return "/".join(rng.choice(pieces) for _ in range(rng.randrange(1, 4))) or \
        _random_text(rng, rng.randrange(1, 64))


def service_requests(rng: random.Random, robot: int = 0, calls: int = CALLS_PER_SERVICE
                     ) -> list[tuple[str, str, Any]]:
    """``(service type name, service name, request)`` for every service of the deployment,
    ``calls`` of each."""
    from rl_interfaces.srv import BufferFile, GetAction, SampleBatch, UpdatePriorities

    requests: list[tuple[str, str, Any]] = []
    sizes = (0, 1, 2**16, 2**31, 2**32 - 1)
    for _ in range(calls):
        # Sizes a learner would never ask for (2^16 rows is still within the answer's bound for
        # cart-pole: such a call takes batches, as any well-formed caller may, see
        # docs/reliability.md). The request carries no budget: no call can end or extend a run.
        requests.append(("SampleBatch", "/replay_buffer/sample", SampleBatch.Request(
            batch_size=rng.choice(sizes[2:]), max_batches=rng.choice(sizes))))
        count = rng.randrange(0, 2000)
        requests.append(("UpdatePriorities", "/replay_buffer/update_priorities",
                         UpdatePriorities.Request(
                             indices=[rng.randrange(-2**40, 2**40) for _ in range(count)],
                             priorities=_random_floats(rng, rng.randrange(0, 2000)),
                             drawn_at=rng.randrange(2**64))))
        for name in ("save", "load"):
            requests.append(("BufferFile", f"/replay_buffer/{name}",
                             BufferFile.Request(path=_random_path(rng))))
        shape = [rng.choice((0, 1, 3, 4, 5, 2**20, 2**32 - 1))
                 for _ in range(rng.randrange(0, 4))]
        requests.append(("GetAction", f"/robot_{robot}/policy/get_action", GetAction.Request(
            obs_shape=shape, obs=_random_floats(rng, rng.randrange(0, 64)),
            deterministic=rng.random() < 0.5)))
    rng.shuffle(requests)
    return requests


def _value_of(type_id: int, rng: random.Random) -> Any:
    """A random ParameterValue of ``type_id``."""
    from rcl_interfaces.msg import ParameterType, ParameterValue

    kinds: dict[int, tuple[str, Callable[[], Any]]] = {
        ParameterType.PARAMETER_BOOL: ("bool_value", lambda: rng.random() < 0.5),
        ParameterType.PARAMETER_INTEGER: ("integer_value", lambda: rng.randrange(*_INT64)),
        ParameterType.PARAMETER_DOUBLE: ("double_value", lambda: _random_floats(rng, 1)[0]),
        ParameterType.PARAMETER_STRING: ("string_value",
                                         lambda: _random_text(rng, rng.randrange(0, 40))),
        ParameterType.PARAMETER_INTEGER_ARRAY: (
            "integer_array_value", lambda: [rng.randrange(-9, 9) for _ in range(3)]),
        ParameterType.PARAMETER_DOUBLE_ARRAY: ("double_array_value",
                                               lambda: _random_floats(rng, 3)),
        ParameterType.PARAMETER_STRING_ARRAY: ("string_array_value", lambda: ["a", "b"]),
    }
    name, draw = kinds[type_id]
    return ParameterValue(type=type_id, **{name: draw()})


def _out_of_range(descriptor: Any, current: Any, rng: random.Random) -> Any | None:
    """A value of the parameter's own type that its range refuses, or None (no range)."""
    from rcl_interfaces.msg import ParameterType, ParameterValue

    if descriptor.integer_range:
        low, high = descriptor.integer_range[0].from_value, descriptor.integer_range[0].to_value
        choices = [value for value in (high + 1 + rng.randrange(10**6),
                                       low - 1 - rng.randrange(10**6))
                   if _INT64[0] <= value <= _INT64[1]]
        return ParameterValue(type=ParameterType.PARAMETER_INTEGER,
                              integer_value=rng.choice(choices)) if choices else None
    if descriptor.floating_point_range:
        low = descriptor.floating_point_range[0].from_value
        high = descriptor.floating_point_range[0].to_value
        value = rng.choice((math.nan, high + abs(high) * rng.uniform(0.01, 10) + 1.0,
                            low - abs(low) * rng.uniform(0.01, 10) - 1.0))
        return ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=value)
    if current.type == ParameterType.PARAMETER_DOUBLE:
        return ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=math.nan)
    return None


def parameter_changes(rng: random.Random, names: list[str], descriptors: list[Any],
                      values: list[Any], launch_only: tuple[str, ...],
                      count: int = CHANGES_PER_NODE) -> list[tuple[str, Any]]:
    """``count`` ``(name, ParameterValue)`` changes a node must refuse, drawn from its own
    parameters."""
    from rcl_interfaces.msg import ParameterType

    typed = (ParameterType.PARAMETER_BOOL, ParameterType.PARAMETER_INTEGER,
             ParameterType.PARAMETER_DOUBLE, ParameterType.PARAMETER_STRING,
             ParameterType.PARAMETER_INTEGER_ARRAY, ParameterType.PARAMETER_DOUBLE_ARRAY,
             ParameterType.PARAMETER_STRING_ARRAY)
    changes: list[tuple[str, Any]] = []
    while len(changes) < count:
        roll = rng.random()
        if roll < 0.15:  # a parameter the node never declared
            name = "fuzz_" + "".join(rng.choice(string.ascii_lowercase) for _ in range(8))
            changes.append((name, _value_of(rng.choice(typed), rng)))
            continue
        index = rng.randrange(len(names))
        name, descriptor, current = names[index], descriptors[index], values[index]
        if current.type not in typed:
            continue
        if descriptor.read_only or name in launch_only:  # any new value of its own type
            changes.append((name, _value_of(current.type, rng)))
        elif roll < 0.55:  # the wrong type
            changes.append((name, _value_of(rng.choice([t for t in typed if t != current.type]),
                                            rng)))
        else:
            value = _out_of_range(descriptor, current, rng)
            if value is not None:
                changes.append((name, value))
    return changes


def fuzz_node_parameters(call: Call, node: str, rng: random.Random, report: FuzzReport,
                         launch_only: tuple[str, ...], count: int = CHANGES_PER_NODE) -> None:
    """Draw changes from ``node``'s own parameters, send them one by one, and check that each is
    refused and that no value changed."""
    from rcl_interfaces.msg import Parameter
    from rcl_interfaces.srv import (
        DescribeParameters,
        GetParameters,
        ListParameters,
        SetParameters,
    )

    names = sorted(call(ListParameters, f"{node}/list_parameters",
                        ListParameters.Request()).result.names)
    descriptors = call(DescribeParameters, f"{node}/describe_parameters",
                       DescribeParameters.Request(names=names)).descriptors
    before = call(GetParameters, f"{node}/get_parameters",
                  GetParameters.Request(names=names)).values
    for name, value in parameter_changes(rng, names, descriptors, before, launch_only, count):
        report.parameter_changes += 1
        answer = call(SetParameters, f"{node}/set_parameters",
                      SetParameters.Request(parameters=[Parameter(name=name, value=value)]))
        result = answer.results[0]
        if result.successful:
            report.accepted.append(f"{node} {name} := {value}")
        else:
            report.refused_changes += 1
    after = call(GetParameters, f"{node}/get_parameters",
                 GetParameters.Request(names=names)).values
    for name, old, new in zip(names, before, after):
        if old != new and not (_is_nan(old) and _is_nan(new)):
            report.accepted.append(f"{node} {name} changed from {old} to {new}")


def _is_nan(value: Any) -> bool:
    return isinstance(value.double_value, float) and math.isnan(value.double_value)


# --- lifecycle ----------------------------------------------------------------------------------

def managed_nodes(services: Services) -> list[str]:
    """The nodes of a graph that serve lifecycle's ``change_state``."""
    suffix = "/change_state"
    return sorted(name[:-len(suffix)] for name, types in services
                  if name.endswith(suffix) and CHANGE_STATE_TYPE in types)


def unavailable_transitions(rng: random.Random, available: list[tuple[int, str]], count: int
                            ) -> list[tuple[int, str]]:
    """``count`` ``(transition id, label)`` requests none of which the current state offers
    (``available``: its transitions' ids and labels) nor pauses or ends a node: an id alone
    (the label empty), or a label (which the node looks up instead of the id)."""
    offered_ids = {transition for transition, _ in available} | STOPPING_TRANSITIONS
    offered_labels = {label for _, label in available} | STOPPING_LABELS
    ids = [transition for transition in range(256) if transition not in offered_ids]
    known = ["configure", "activate", "create", "destroy", "transition_success",
             "transition_error", "unconfigured_shutdown", "active_shutdown"]
    requests: list[tuple[int, str]] = []
    while len(requests) < count:
        label = ""
        if rng.random() < 0.4:
            label = rng.choice(known) if rng.random() < 0.5 else \
                _random_text(rng, rng.randrange(1, 24))
            if label in offered_labels or not label.strip():
                continue
        requests.append((rng.choice(ids), label))
    return requests


def fuzz_lifecycle(call: Call, node: str, rng: random.Random, report: FuzzReport,
                   count: int = TRANSITIONS_PER_NODE) -> None:
    """Send ``node`` transitions its state does not offer; each must be refused and the state
    stay as it was."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetAvailableTransitions, GetState

    before = call(GetState, f"{node}/get_state", GetState.Request()).current_state
    offered = call(GetAvailableTransitions, f"{node}/get_available_transitions",
                   GetAvailableTransitions.Request()).available_transitions
    available = [(item.transition.id, item.transition.label) for item in offered]
    for transition, label in unavailable_transitions(rng, available, count):
        report.lifecycle_calls += 1
        answer = call(ChangeState, f"{node}/change_state",
                      ChangeState.Request(transition=Transition(id=transition, label=label)))
        if answer.success:
            report.accepted.append(f"{node} change_state id {transition} label {label!r} "
                                   f"(state {before.label}, offered {available})")
    after = call(GetState, f"{node}/get_state", GetState.Request()).current_state
    if after.id != before.id:
        report.accepted.append(f"{node} lifecycle state {before.label} -> {after.label}")


# --- composition --------------------------------------------------------------------------------

def containers(services: Services) -> list[str]:
    """The component managers of a graph that serve ``load_node`` (remote composition)."""
    suffix = _CONTAINER_SERVICE + "load_node"
    return sorted(name[:-len(suffix)] for name, types in services
                  if name.endswith(suffix) and LOAD_NODE_TYPE in types)


def refused_load_parameters(launch_only: tuple[str, ...]) -> list[str]:
    """Parameters a load request may not set: rl_core.security.composition's list (when this checkout
    has one) and the launch-only ones."""
    try:
        from rl_core.security.composition import LOAD_REFUSED_PARAMETERS
    except ImportError:  # a checkout from before issue 41
        return sorted(set(launch_only) | {"output_dir", "allow_unsigned"})
    return sorted(set(LOAD_REFUSED_PARAMETERS) | set(launch_only))


def composition_requests(rng: random.Random, container: str, loaded_ids: list[int],
                         refused_parameters: list[str], count: int = COMPOSITION_CALLS
                         ) -> list[tuple[str, str, Any]]:
    """``(service type name, service name, request)``: loads a container must refuse (a foreign
    package, an unknown plugin, or a real plugin with a parameter a load may not set) and
    unloads of ids it does not list."""
    from composition_interfaces.srv import LoadNode, UnloadNode
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue

    from rl_core.security.composition import PACKAGE, PLUGINS

    def parameter(name: str) -> Any:
        return Parameter(name=name, value=ParameterValue(
            type=ParameterType.PARAMETER_STRING, string_value=_random_path(rng)))

    base = f"{container}{_CONTAINER_SERVICE}"
    requests: list[tuple[str, str, Any]] = []
    for _ in range(count):
        if rng.random() < 0.3:
            unique_id = rng.randrange(2**64)
            if unique_id not in loaded_ids:
                requests.append(("UnloadNode", base + "unload_node",
                                 UnloadNode.Request(unique_id=unique_id)))
            continue
        request = LoadNode.Request(package_name=PACKAGE, plugin_name=rng.choice(sorted(PLUGINS)),
                                   node_namespace=f"/robot_{rng.randrange(100, 1000)}")
        roll = rng.random()
        if roll < 0.3:
            request.package_name = rng.choice(("rclcpp_components", "", PACKAGE + "_fuzz",
                                               _random_text(rng, 12)))
        elif roll < 0.5:
            request.plugin_name = PACKAGE + "::" + _random_text(rng, rng.randrange(0, 20))
        request.parameters = [parameter(rng.choice(refused_parameters))
                              for _ in range(rng.randrange(1, 3))]
        if rng.random() < 0.3:
            request.remap_rules = [rng.choice(("__ns:=/", "__node:=trainer", "/experience:=/x",
                                               _random_text(rng, 10)))]
        requests.append(("LoadNode", base + "load_node", request))
    return requests


def fuzz_composition(call: Call, container: str, rng: random.Random, report: FuzzReport,
                     launch_only: tuple[str, ...], count: int = COMPOSITION_CALLS) -> None:
    """Send ``container`` loads and unloads it must refuse."""
    from composition_interfaces import srv as composition
    from composition_interfaces.srv import ListNodes

    listed = call(ListNodes, f"{container}{_CONTAINER_SERVICE}list_nodes", ListNodes.Request())
    for type_name, service, request in composition_requests(
            rng, container, list(listed.unique_ids), refused_load_parameters(launch_only),
            count):
        report.composition_calls += 1
        answer = call(getattr(composition, type_name), service, request)
        if answer.success:
            report.accepted.append(f"{service}: {request}"[:300])


# --- the replay buffer's files ------------------------------------------------------------------

def file_requests(rng: random.Random) -> list[tuple[str, str]]:
    """``(save|load, path)``: a fresh name saved twice (the second within save_interval) and
    loaded (while the run is active), then a load of a random path."""
    name = f"fuzz-{rng.randrange(16**8):08x}.npz"
    return [("save", name), ("save", name), ("load", name), ("load", _random_path(rng))]


class CounterWatch:
    """Notes the replay buffer's counters around each save and load; any that went back is a
    regression (a load that replaced newer contents, a save that lost some)."""

    def __init__(self, counters: Counters | None, report: FuzzReport) -> None:
        self.counters, self.report = counters, report
        self.highest = counters() if counters else (0, 0)

    def check(self, what: str) -> None:
        if self.counters is None:
            return
        now = self.counters()
        if now[0] < self.highest[0] or now[1] < self.highest[1]:
            self.report.counter_regressions.append(
                f"after {what}: held/inserted {now} after {self.highest}")
        self.highest = (max(now[0], self.highest[0]), max(now[1], self.highest[1]))


def fuzz_replay_files(call: Call, rng: random.Random, report: FuzzReport,
                      watch: CounterWatch) -> None:
    """Save and load (file_requests): answered; two saves in a row and a load while the run is
    active may not both succeed; the counters never go back."""
    from rl_interfaces.srv import BufferFile

    succeeded: list[str] = []
    for name, path in file_requests(rng):
        report.file_calls += 1
        answer = call(BufferFile, f"/replay_buffer/{name}", BufferFile.Request(path=path))
        watch.check(f"{name} {path!r} ({answer.message})")
        if answer.success:
            succeeded.append(name)
    if succeeded.count("save") > 1:
        report.accepted.append("two saves of the replay buffer within save_interval")
    if "load" in succeeded:
        report.accepted.append("a load of the replay buffer while the run is active")


# --- everything ---------------------------------------------------------------------------------

def fuzz(call: Call, seed: int, nodes: tuple[str, ...], launch_only: tuple[str, ...],
         services: Services = (), counters: Counters | None = None,
         calls_per_service: int = CALLS_PER_SERVICE, changes_per_node: int = CHANGES_PER_NODE
         ) -> FuzzReport:
    """Send the services' random requests, the nodes' hostile parameter changes, lifecycle
    transitions to every managed node of ``services`` (the graph's), loads and unloads to its
    containers, and the replay buffer's save/load sequence.

    :param counters: the replay buffer's counters as last reported (None: not watched).
    """
    from rl_interfaces import srv

    rng = random.Random(seed)
    report = FuzzReport()
    watch = CounterWatch(counters, report)
    for type_name, service, request in service_requests(rng, calls=calls_per_service):
        report.service_calls += 1
        try:
            call(getattr(srv, type_name), service, request)
        except TimeoutError as error:
            report.unanswered.append(f"{service} {request}: {error}"[:300])
        if type_name == "BufferFile":
            watch.check(f"{service} {request.path!r}")
    for node in nodes:
        try:
            fuzz_node_parameters(call, node, rng, report, launch_only, changes_per_node)
        except TimeoutError as error:  # the node stopped answering (or the run ended)
            report.unanswered.append(f"{node} parameters: {error}")
    report.managed_nodes = managed_nodes(list(services))
    for node in report.managed_nodes:
        try:
            fuzz_lifecycle(call, node, rng, report)
        except TimeoutError as error:
            report.unanswered.append(f"{node} lifecycle: {error}")
    report.containers = containers(list(services))
    for container in report.containers:
        try:
            fuzz_composition(call, container, rng, report, launch_only)
        except TimeoutError as error:
            report.unanswered.append(f"{container} composition: {error}")
    try:
        fuzz_replay_files(call, rng, report, watch)
    except TimeoutError as error:
        report.unanswered.append(f"replay buffer save/load: {error}")
    return report
