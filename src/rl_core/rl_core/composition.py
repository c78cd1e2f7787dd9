"""What a component container may load: ROS composition's plugin names for rl_ros2's node kinds,
and the checks of a ``composition_interfaces/srv/LoadNode`` request (plain values, no ROS).

``ros2 component load /container rl_nodes rl_nodes::Simulator -r __ns:=/robot_1`` (or
``--node-namespace /robot_1``) asks a running container for another simulator; the container
(rl_nodes.component_manager) builds it in its process, where it shares the zero-copy channel with
the nodes already there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rl_core import node_kinds

#: The package whose plugins a container loads.
PACKAGE = "rl_nodes"
#: Plugin name -> node kind (CamelCase of the kind, as rclcpp components are named).
PLUGINS: dict[str, str] = {
    f"{PACKAGE}::{''.join(part.title() for part in kind.split('_'))}": kind
    for kind in node_kinds.NODE_CLASSES
}
#: ``extra_arguments`` a request may carry, as rclcpp's container reads them.
INTRA_PROCESS_ARGUMENT = "use_intra_process_comms"


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
                       remap_rules: Sequence[str], extra_arguments: Mapping[str, object]
                       ) -> LoadSpec:
    """The node a LoadNode request asks for.

    :param remap_rules: ``from:=to`` rules; ``__ns:=`` sets the namespace (as ``ros2 component
        load -r __ns:=/robot_1`` sends it), ``__node:=`` must keep the kind's name.
    :param extra_arguments: by name; ``use_intra_process_comms`` must not be false.
    :raises LoadRequestError: naming what is wrong and the valid choices.
    """
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
