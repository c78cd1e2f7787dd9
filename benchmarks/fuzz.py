"""Random hostile service requests and parameter changes for a running deployment (the fuzzing
part of ``benchmarks/faults.py``, issue 19 item 10).

Every request is drawn from a seeded generator, so a failing schedule replays. Each must be
answered, and every parameter change must be refused: the values drawn are the kinds a node
must never take (a wrong type, a value outside the declared range or not finite, a new value
for a read-only or launch-only parameter, a parameter the node never declared). Service
requests carry random sizes, shapes, non-finite values and random paths; they may be refused or
served, but must be answered and must leave the node running.
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
_INT64 = (-(2**63), 2**63 - 1)

Call = Callable[[Any, str, Any], Any]


@dataclass
class FuzzReport:
    """What the fuzzing sent and how it was answered."""

    service_calls: int = 0
    parameter_changes: int = 0
    refused_changes: int = 0
    #: Calls that got no answer, and changes a node took (each a line saying what was sent).
    unanswered: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)


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


def service_requests(rng: random.Random, robot: int = 0) -> list[tuple[str, str, Any]]:
    """``(service type name, service name, request)`` for every service of the deployment."""
    from rl_interfaces.srv import BufferFile, GetAction, SampleBatch, UpdatePriorities

    requests: list[tuple[str, str, Any]] = []
    sizes = (0, 1, 2**16, 2**31, 2**32 - 1)
    for _ in range(CALLS_PER_SERVICE):
        # Sizes a learner would never ask for (2^16 rows is still within the answer's bound for
        # cart-pole: such a call takes batches, as any well-formed caller may, see
        # docs/reliability.md). A budget below the run's must not end it; a larger one may
        # still extend it (the deprecated trainer budget, docs/reliability.md "Still open").
        requests.append(("SampleBatch", "/replay_buffer/sample", SampleBatch.Request(
            batch_size=rng.choice(sizes[2:]), max_batches=rng.choice(sizes),
            weights_version=rng.randrange(2**64), insert_budget=rng.choice((0, 1, 1000)))))
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
                      values: list[Any], launch_only: tuple[str, ...]) -> list[tuple[str, Any]]:
    """``(name, ParameterValue)`` changes a node must refuse, drawn from its own parameters."""
    from rcl_interfaces.msg import ParameterType

    typed = (ParameterType.PARAMETER_BOOL, ParameterType.PARAMETER_INTEGER,
             ParameterType.PARAMETER_DOUBLE, ParameterType.PARAMETER_STRING,
             ParameterType.PARAMETER_INTEGER_ARRAY, ParameterType.PARAMETER_DOUBLE_ARRAY,
             ParameterType.PARAMETER_STRING_ARRAY)
    changes: list[tuple[str, Any]] = []
    while len(changes) < CHANGES_PER_NODE:
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
                         launch_only: tuple[str, ...]) -> None:
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
    for name, value in parameter_changes(rng, names, descriptors, before, launch_only):
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


def fuzz(call: Call, seed: int, nodes: tuple[str, ...], launch_only: tuple[str, ...]
         ) -> FuzzReport:
    """Send the services' random requests and the nodes' hostile parameter changes."""
    from rl_interfaces import srv

    rng = random.Random(seed)
    report = FuzzReport()
    for type_name, service, request in service_requests(rng):
        report.service_calls += 1
        try:
            call(getattr(srv, type_name), service, request)
        except TimeoutError as error:
            report.unanswered.append(f"{service} {request}: {error}"[:300])
    for node in nodes:
        try:
            fuzz_node_parameters(call, node, rng, report, launch_only)
        except TimeoutError as error:  # the node stopped answering (or the run ended)
            report.unanswered.append(f"{node} parameters: {error}")
    return report
