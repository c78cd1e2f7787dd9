"""The container's component manager: ROS composition's services, so ``ros2 component
list|load|unload`` and launch_ros's ``LoadComposableNodes`` work against a running container.

Serves ``~/_container/load_node``, ``unload_node`` and ``list_nodes`` (composition_interfaces)
as rclcpp's component container does, in the namespace its nodes share. A loaded node (plugin
names: :data:`rl_core.security.composition.PLUGINS`) is built in this process, so it joins the
zero-copy hand-offs of the nodes already there; unloading closes it. Without
composition_interfaces (a pip install without ROS) the container runs without these services.

Remote composition is off unless the container was started with ``--remote-composition``:
anyone on the domain can call these services (issue 41), and a loaded node runs in a process that
holds the run's signing key. Off, only ``list_nodes`` is served. On, a load may not set the
parameters :data:`rl_core.security.composition.LOAD_REFUSED_PARAMETERS` names, and the learning
nodes cannot be unloaded (their process would keep beating its heartbeat with learning stopped);
a lifecycle shutdown restarts their process instead. Details: docs/composition.md.
"""

from __future__ import annotations

import itertools
from typing import Any

from rclpy.executors import Executor
from rclpy.logging import LoggingSeverity
from rclpy.node import Node
from rclpy.parameter import Parameter

from rl_core.config import ConfigError
from rl_core.names.node_kinds import LEARNING_KINDS
from rl_core.security.composition import LoadRequestError, check_load_request, plugin_of
from rl_nodes import graph
from rl_nodes.base import robot_id_from_namespace
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.lifecycle import EXIT_RESTART
from rl_nodes.runtime import autostart, make_node

DEPLOYMENT_ROBOTS = "deployment_robots"


class ComponentManager(Node):
    """The component manager of a container process hosting ``nodes``.

    :param executor: the process' executor (loaded nodes join it).
    :param nodes: the process' nodes; loading appends, unloading removes (the process closes
        what is left when it ends).
    :param remote: serve ``load_node`` and ``unload_node`` too (``list_nodes`` always).
    """

    def __init__(self, executor: Executor, nodes: list[Any], namespace: str,
                 remote: bool = False) -> None:
        from composition_interfaces.srv import ListNodes, LoadNode, UnloadNode

        super().__init__(graph.COMPONENT_MANAGER, namespace=namespace)
        self.executor = executor
        self.nodes = nodes
        self._ids = itertools.count(1)
        self.components: dict[int, Any] = {next(self._ids): node for node in nodes}
        if remote:
            self.create_service(LoadNode, "~/_container/load_node", self._load)
            self.create_service(UnloadNode, "~/_container/unload_node", self._unload)
        self.create_service(ListNodes, "~/_container/list_nodes", self._list)

    def _load(self, request: Any, response: Any) -> Any:
        try:
            spec = check_load_request(
                request.package_name, request.plugin_name, request.node_name,
                request.node_namespace, list(request.remap_rules),
                {argument.name: Parameter.from_parameter_msg(argument).value
                 for argument in request.extra_arguments},
                [parameter.name for parameter in request.parameters])
            node = self._build(spec.kind, spec.namespace, request)
        except (LoadRequestError, ConfigError, RuntimeError) as error:
            response.success, response.error_message = False, str(error)
            self.get_logger().error(f"load of {request.plugin_name} refused: {error}")
            return response
        unique_id = next(self._ids)
        self.components[unique_id] = node
        response.success, response.unique_id = True, unique_id
        response.full_node_name = node.get_fully_qualified_name()
        self.get_logger().info(f"loaded {plugin_of(spec.kind)} as {response.full_node_name} "
                               f"(id {unique_id})")
        return response

    def _build(self, kind: str, namespace: str, request: Any) -> Any:
        """Create and add a node of ``kind``, configured and activated as its ``autostart``
        says (:func:`rl_nodes.runtime.autostart`)."""
        # The node reads the process' arguments (parameter files, remaps, log level) like the
        # container's --node nodes; its own name and namespace win over a container-wide
        # __node/__ns remap (a ComposableNodeContainer names the process' node so).
        rules = [f"__node:={kind}", f"__ns:={namespace}",
                 *(rule for rule in request.remap_rules
                   if not rule.startswith(("__ns:=", "__node:=")))]
        options: dict[str, Any] = {
            "namespace": namespace,
            "cli_args": ["--ros-args", *(arg for rule in rules for arg in ("-r", rule))],
            "parameter_overrides": [Parameter.from_parameter_msg(parameter)
                                    for parameter in request.parameters]}
        node = make_node(kind, **options)
        if request.log_level:
            node.get_logger().set_level(LoggingSeverity(request.log_level))
        self.executor.add_node(node)
        self.nodes.append(node)
        self._admit_robot(node)  # before it acts: its first experience is taken
        try:
            autostart([node])
        except (ConfigError, RuntimeError):
            self._remove(node)
            raise
        return node

    def _admit_robot(self, node: Any) -> None:
        """A robot's node loaded: raise ``deployment_robots`` of this process' learning nodes
        to take its experience and episodes; a learner elsewhere is the user's to raise."""
        if node.get_name() not in graph.PER_ROBOT_KINDS:
            return
        robot = robot_id_from_namespace(node.get_namespace())
        learners = [other for other in self.nodes if other.get_name() in LEARNING_KINDS]
        for learner in learners:
            robots = learner.get_parameter(DEPLOYMENT_ROBOTS).value
            if 0 < robots <= robot:
                learner.set_parameters([Parameter(DEPLOYMENT_ROBOTS, value=robot + 1)])
                self.get_logger().info(f"{learner.get_fully_qualified_name()}: "
                                       f"{DEPLOYMENT_ROBOTS} {robots} -> {robot + 1}")
        if not learners:
            self.get_logger().info(
                f"robot {robot} joined; where the learner runs in another process, raise its "
                f"{DEPLOYMENT_ROBOTS} to at least {robot + 1} (ros2 param set /replay_buffer "
                f"{DEPLOYMENT_ROBOTS} {robot + 1}, and /trainer) so that it takes this robot's "
                f"experience")

    def _unload(self, request: Any, response: Any) -> Any:
        node = self.components.get(request.unique_id)
        response.success = False
        if node is None:
            response.error_message = (f"no node with id {request.unique_id}; "
                                      f"ids: {sorted(self.components)}")
            return response
        name = node.get_fully_qualified_name()
        if node.get_name() in LEARNING_KINDS:
            response.error_message = (
                f"{name} is not unloaded: the run would stop learning, and its robots with it, "
                f"while this process lives on; to restart it, ros2 lifecycle set {name} "
                f"shutdown (the process exits with code {EXIT_RESTART} and is restarted, and the "
                "run resumes from its checkpoint and replay snapshot)")
            self.get_logger().error(f"unload of {name} refused")
            return response
        del self.components[request.unique_id]
        self._remove(node)
        response.success = True
        self.get_logger().info(f"unloaded {name} (id {request.unique_id})")
        return response

    def _remove(self, node: Any) -> None:
        getattr(node, "release", node.close)()
        IntraProcessManager.for_context(self.context).forget_node(node)
        self.executor.remove_node(node)
        self.nodes.remove(node)
        node.destroy_node()

    def _list(self, _request: Any, response: Any) -> Any:
        response.unique_ids = list(self.components)
        response.full_node_names = [node.get_fully_qualified_name()
                                    for node in self.components.values()]
        return response


def serve_composition(executor: Executor, nodes: list[Any], remote: bool = False
                      ) -> Node | None:
    """A :class:`ComponentManager` for the process' ``nodes`` in the namespace they share, added
    to ``executor``; ``None`` (with a note on stderr) where composition_interfaces is missing.

    :param remote: serve ``load_node`` and ``unload_node`` (remote composition).
    """
    try:
        import composition_interfaces.srv  # noqa: F401
    except ImportError:
        print("composition_interfaces is not installed: this container serves no composition "
              "services (ros2 component); its nodes run as usual", flush=True)
        return None
    namespaces = [node.get_namespace().rstrip("/").split("/") for node in nodes] or [[""]]
    shared = [parts[0] for parts in zip(*namespaces) if len(set(parts)) == 1]
    manager = ComponentManager(executor, nodes, "/".join(shared) or "/", remote)
    executor.add_node(manager)
    return manager
