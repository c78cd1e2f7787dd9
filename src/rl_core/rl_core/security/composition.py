"""What a component container may load: ROS composition's plugin names for rl_ros2's node kinds,
and the checks of a ``composition_interfaces/srv/LoadNode`` request (plain values, no ROS).

``ros2 component load /container rl_nodes rl_nodes::Simulator -r __ns:=/robot_1`` (or
``--node-namespace /robot_1``) asks a running container for another simulator; the container
(rl_nodes.component_manager) builds it in its process, where it shares the zero-copy channel with
the nodes already there.

A request's parameters override the process' own for the loaded node, and the process holds the
run's private signing key. So a request may not set :data:`LOAD_REFUSED_PARAMETERS`: the
files a node reads or writes, the switches that open a robot to anyone on the domain, and the
robot boundary's physical settings (issue 41). They come from the deployment's parameter files
and launch arguments, which the loaded node reads like the container's other nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rl_core.config import RENAMED_PARAMETERS, BoundaryConfig
from rl_core.names import node_kinds

#: The package whose plugins a container loads.
PACKAGE = "rl_nodes"
#: Plugin name -> node kind (CamelCase of the kind, as rclcpp components are named).
PLUGINS: dict[str, str] = {
    f"{PACKAGE}::{''.join(part.title() for part in kind.split('_'))}": kind
    for kind in node_kinds.NODE_CLASSES
}
#: ``extra_arguments`` a request may carry, as rclcpp's container reads them.
INTRA_PROCESS_ARGUMENT = "use_intra_process_comms"

_PATH = "a file or folder the node reads or writes"
_OPENS = "development switch: anyone on the domain could then"
#: Parameters a load request may not set, with the reason: every one of the robot boundary's
#: (physical units, controllers and limits of a real robot) and these.
LOAD_REFUSED_PARAMETERS: dict[str, str] = {
    **{field.name: "a robot boundary setting (physical units, controller, limits)"
       for field in dataclasses.fields(BoundaryConfig)},
    "output_dir": f"{_PATH} (checkpoints, snapshots, results)",
    "resume": f"{_PATH} (a checkpoint to load)",
    "checkpoint": f"{_PATH} (a checkpoint to load)",
    "onnx_model": f"{_PATH} (a model to act with)",
    "demos": f"{_PATH} (demonstrations to learn from)",
    "teleop_mapping": f"{_PATH} (a joystick mapping)",
    "analyzers_file": f"{_PATH} (diagnostic analyzers)",
    "allow_unsigned": f"{_OPENS} reprogram, pause or drive the robot",
    "teleop": f"{_OPENS} drive the robot",
    "operator_success": f"{_OPENS} end its episodes",
    "use_sim_time": "hands the node's timers to whoever publishes /clock",
}


class LoadRequestError(ValueError):
    """A load request the container cannot follow; the message says why and what works."""


@dataclass(frozen=True)
class LoadSpec:
    """A checked load request: the node kind and the namespace to build it in."""

    kind: str
    namespace: str


def plugin_of(kind: str) -> str:
    """The plugin name of node ``kind`` (``simulator`` -> ``rl_nodes::Simulator``)."""
    return next(plugin for plugin, known in PLUGINS.items() if known == kind)


def check_load_request(package: str, plugin: str, node_name: str, namespace: str,
                       remap_rules: Sequence[str], extra_arguments: Mapping[str, object],
                       parameter_names: Sequence[str] = ()) -> LoadSpec:
    """The node a LoadNode request asks for.

    :param remap_rules: ``from:=to`` rules; ``__ns:=`` sets the namespace (as ``ros2 component
        load -r __ns:=/robot_1`` sends it), ``__node:=`` must keep the kind's name.
    :param extra_arguments: by name; ``use_intra_process_comms`` must not be false.
    :param parameter_names: the request's parameters; none of :data:`LOAD_REFUSED_PARAMETERS`.
    :raises LoadRequestError: naming what is wrong and the valid choices.
    """
    check_load_parameters(parameter_names)
    if package != PACKAGE:
        raise LoadRequestError(f"this container loads {PACKAGE}'s nodes, not {package!r}")
    if plugin not in PLUGINS:
        raise LoadRequestError(f"unknown plugin {plugin!r}; valid: {', '.join(PLUGINS)}")
    kind = PLUGINS[plugin]
    for rule in remap_rules:
        source, _, target = rule.partition(":=")
        if source == "__ns":
            namespace = target
        elif source == "__node":
            node_name = target
    if node_name not in ("", kind):
        raise LoadRequestError(f"rl_ros2 nodes keep their names ({kind}); put a second one in "
                               f"another namespace instead of naming it {node_name!r}")
    if extra_arguments.get(INTRA_PROCESS_ARGUMENT, True) is False:
        raise LoadRequestError(
            f"{INTRA_PROCESS_ARGUMENT}: false is not supported: every node of this container "
            "shares its zero-copy channel; to have a node talk over DDS, run it in a process of "
            f"its own (ros2 run {PACKAGE} {kind}, or mode decoupled)")
    namespace = "/" + namespace.strip().strip("/") if namespace.strip("/ ") else "/"
    return LoadSpec(kind, namespace)


def check_load_parameters(names: Sequence[str]) -> None:
    """Refuse a load request that sets any of :data:`LOAD_REFUSED_PARAMETERS` (a renamed
    parameter's former name counts as the new one).

    :raises LoadRequestError: naming each refused parameter and why.
    """
    refused = sorted({name for name in names
                      if RENAMED_PARAMETERS.get(name, name) in LOAD_REFUSED_PARAMETERS})
    if refused:
        reasons = "; ".join(f"{name}: {LOAD_REFUSED_PARAMETERS[RENAMED_PARAMETERS.get(name, name)]}"
                            for name in refused)
        raise LoadRequestError(
            f"a load request may not set {', '.join(refused)} ({reasons}); set them in the "
            "deployment's parameter file or launch arguments, which the loaded node reads like "
            "the container's other nodes, and restart the container")
