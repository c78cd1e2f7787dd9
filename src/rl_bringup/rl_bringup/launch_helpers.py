"""Turn the deployment plan into ``launch`` / ``launch_ros`` actions (the ros2 launch front end).

Each file in ``launch/`` lists the nodes its mode starts and builds its description from two
pieces of this module: :func:`declare_arguments`, then an ``OpaqueFunction`` running
:func:`launch_setup`, which turns the plan's processes into ``Node`` actions once the arguments'
values are known. So the plan (:mod:`rl_bringup.plan`) stays the single source of the process
layout, and :mod:`rl_bringup.plan.arguments` the single source of the arguments ``rl-bringup``
takes too.

``launch`` and ``launch_ros`` are imported inside the functions: they exist only in a ROS 2
install, and importing them late lets ``rl_bringup`` import everywhere (and lets tests substitute
small recording fakes).
"""

from __future__ import annotations

import os
from typing import Any

from rl_bringup.plan.arguments import (
    DEPLOYMENT_ARGUMENTS,
    DEPLOYMENT_KEYS,
    PARAMETER_KEYS,
    parameter_description,
    parameter_keys_by_node,
    plan_from_arguments,
)
from rl_bringup.plan.deployment import MAX_RESPAWNS, RESPAWN_DELAY_S, Plan, PlanError, ProcessSpec
from rl_bringup.plan.layouts import MODES
from rl_bringup.plan.robot_plan import parse_flag
from rl_bringup.plan.run_key import with_weights_key
from rl_core.config import ConfigError
from rl_core.names.node_kinds import DIAGNOSTICS_AGGREGATOR, POLICY, REPLAY_BUFFER, SIMULATOR, TRAINER
from rl_nodes.graph import COMPONENT_MANAGER, in_namespace

#: The order in which LoadComposableNodes loads a container's nodes (use_composition): the
#: replay buffer first, the trainer once the simulators' experience publishers exist.
LOAD_ORDER = (REPLAY_BUFFER, DIAGNOSTICS_AGGREGATOR, POLICY, SIMULATOR, TRAINER)

#: Arguments of the ros2 launch front end alone: name -> (default, description).
LAUNCH_ONLY_ARGUMENTS: dict[str, tuple[str, str]] = {
    "use_composition": (
        "false",
        "Container processes (colocated; hybrid's robot and learner processes) as launch_ros "
        "ComposableNodeContainers whose nodes LoadComposableNodes loads (plugins rl_nodes::"
        "Simulator, ...), as ROS composition does; a crashed container is then not respawned "
        "(launch_ros does not reload its nodes). false (default): the container starts its "
        "nodes itself and respawns with them. true switches remote_composition on.",
    ),
    "remote_composition": (
        "false",
        "Containers serve ROS composition's load_node and unload_node, so ros2 component "
        "load|unload work against them (a robot added to a running run). false (default): "
        "they serve list_nodes alone, since anyone on the domain could call the others; "
        "use_composition:=true needs them and switches them on.",
    ),
}
#: The container's command-line switch for remote composition (rl_nodes.container).
REMOTE_COMPOSITION_FLAG = "--remote-composition"
MODE_ARGUMENT_DESCRIPTION = (
    "Deployment mode: colocated (one process), decoupled (one process per node) or hybrid "
    "(a process per robot plus one learner process)."
)


def declare_arguments(with_mode: bool) -> list[Any]:
    """``DeclareLaunchArgument`` actions, each with a description: the deployment arguments, then
    every node parameter grouped by node kind (empty default: the config file's value), so
    ``--show-args`` lists all that ``ros2 launch`` honours, the deployment first.

    :param with_mode: also declare ``mode`` (for ``multi_robot.launch.py``).
    """
    from launch.actions import DeclareLaunchArgument

    actions = []
    if with_mode:
        actions.append(
            DeclareLaunchArgument(
                "mode",
                default_value=MODES[0],
                description=MODE_ARGUMENT_DESCRIPTION,
                choices=list(MODES),
            )
        )
    for name, (default_value, description) in {**DEPLOYMENT_ARGUMENTS,
                                               **LAUNCH_ONLY_ARGUMENTS}.items():
        actions.append(
            DeclareLaunchArgument(name, default_value=default_value, description=description)
        )
    for name in parameter_keys_by_node():
        actions.append(
            DeclareLaunchArgument(name, default_value="", description=parameter_description(name))
        )
    return actions


def plan_from_context(context: Any, mode: str | None) -> Plan:
    """Build the plan from the launch configurations of ``context``.

    Configurations that are neither deployment arguments nor node parameters are left alone: a
    launch file that includes this one may hold configurations of its own.

    :param context: the ``launch.LaunchContext`` given to an ``OpaqueFunction``.
    :param mode: the mode fixed by the launch file, or ``None`` to read the ``mode`` argument.
    :raises rl_bringup.plan.deployment.PlanError: for invalid arguments (launch reports it and
        exits 1).
    """
    configurations = context.launch_configurations
    values = {name: str(configurations[name]) for name in DEPLOYMENT_KEYS + PARAMETER_KEYS
              if name in configurations}
    # A namespace pushed by an including launch file (PushRosNamespace) goes in front of ours.
    pushed = str(configurations.get("ros_namespace") or "").strip()
    if pushed.strip("/"):
        values["namespace"] = in_namespace("/" + pushed.strip("/"),
                                           "/" + values.get("namespace", "").strip().strip("/"))
    chosen_mode = mode if mode is not None else str(configurations.get("mode", MODES[0]))
    # ROS conventions: with no ROS_DOMAIN_ID the run is on ROS's default domain 0, where a plain
    # `ros2 topic list` in another shell looks.
    plan = plan_from_arguments(chosen_mode, values, random_domain=False)
    if plan.autoscale is not None:
        # Launch starts every action of the description at once and cannot hold robots back.
        raise PlanError("robots:=auto needs `rl-bringup launch hybrid robots:=auto`: its "
                        "supervisor starts and retires the robot processes; ros2 launch cannot")
    return plan


def node_action(process: ProcessSpec, composable: bool = False,
                remote_composition: bool = False) -> Any:
    """The ``launch_ros.actions.Node`` of one planned process, or with ``composable`` and a
    container process its ``ComposableNodeContainer`` (:func:`composable_options`). With
    ``remote_composition`` a container serves load_node and unload_node (a composable one
    always does: LoadComposableNodes calls them).

    Containers get no ``namespace`` (a ``__ns`` remap would move every node in the process);
    their nodes' namespaces travel in the ``--node KIND@NAMESPACE`` arguments. A required process
    shuts the launch down when it exits, like the supervisor does.
    """
    from launch.actions import Shutdown
    from launch_ros.actions import Node

    parameters: list[Any] = [path for path in (process.params_file, process.user_params_file)
                             if path]
    if process.has_overrides:
        # A file, not a dict: launch_ros files a dict under /**, where the scenario file's
        # node-specific blocks (/**/trainer: batch_size) would beat it. The plan's overrides
        # file names each node kind, as the supervisor passes it too.
        parameters.append(process.overrides_file())
    single_node_namespace = process.namespace not in ("", "/") and not process.is_container
    composable = composable and process.is_container
    options: dict[str, Any] = {
        "package": process.package,
        "executable": process.executable,
        "namespace": process.namespace if single_node_namespace else None,
        "parameters": parameters,
        "arguments": [*process.arguments,
                      *([REMOTE_COMPOSITION_FLAG] if remote_composition and process.is_container
                        else [])],
        "remappings": list(process.remaps),
        "ros_arguments": ["--log-level", process.log_level] if process.log_level else [],
        "additional_env": dict(process.env),
        "output": "screen",
        "respawn": process.respawn,
    }
    if process.respawn:
        options["respawn_delay"] = RESPAWN_DELAY_S
        options["respawn_max_retries"] = MAX_RESPAWNS
    if process.required and process.respawn:
        # Like the supervisor: a clean exit (training complete) ends the launch, a crash respawns.
        def on_exit(event: Any, _context: Any) -> list[Any] | None:
            if event.returncode == 0:
                return [Shutdown(reason=f"required process {process.name} finished")]
            return None

        options["on_exit"] = on_exit
    elif process.required:
        options["on_exit"] = [Shutdown(reason=f"required process {process.name} exited")]
    if composable:
        from launch_ros.actions import ComposableNodeContainer

        return ComposableNodeContainer(**composable_options(process, options))
    return Node(**options)


def composable_options(process: ProcessSpec, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` of a container process turned into a ``ComposableNodeContainer``'s: the
    container starts empty (no ``--node``) as ``container`` in the namespace its nodes share,
    and LoadComposableNodes loads each node through its ``~/_container/load_node``, the
    learning side first and the trainer last (it picks its update mode from the experience
    publishers it finds in the process). Parameters, remaps and log level stay the process'
    (the loaded nodes read the process' arguments, as ``--node`` ones do), so each
    ComposableNode names only its plugin, name and namespace. Not respawned: launch_ros
    would not load the nodes again. Started with remote composition on: LoadComposableNodes
    calls load_node."""
    from launch.actions import Shutdown
    from launch_ros.descriptions import ComposableNode

    from rl_core.security.composition import INTRA_PROCESS_ARGUMENT, PACKAGE, plugin_of

    nodes = sorted(process.nodes, key=lambda node: LOAD_ORDER.index(node[0])
                   if node[0] in LOAD_ORDER else 0)
    descriptions = [ComposableNode(package=PACKAGE, plugin=plugin_of(kind), name=kind,
                                   namespace=namespace,
                                   extra_arguments=[{INTRA_PROCESS_ARGUMENT: True}])
                    for kind, namespace in nodes]
    shared = os.path.commonpath([namespace for _, namespace in process.nodes])
    composed = {**options, "name": COMPONENT_MANAGER, "namespace": shared,
                "arguments": [REMOTE_COMPOSITION_FLAG],
                "respawn": False, "composable_node_descriptions": descriptions}
    for respawn_option in ("respawn_delay", "respawn_max_retries", "on_exit"):
        composed.pop(respawn_option, None)
    if process.required:
        composed["on_exit"] = [Shutdown(reason=f"required process {process.name} exited")]
    return composed


def launch_setup(context: Any, mode: str | None = None) -> list[Any]:
    """``OpaqueFunction`` body: the plan's processes as launch actions, after the lines both
    front ends print first (layout, domain and how to attach, notes).

    Like ``rl-bringup``, it gives the run a weights key
    (:func:`rl_bringup.plan.run_key.with_weights_key`).
    """
    from launch.actions import GroupAction, LogInfo, OpaqueFunction

    plan = plan_from_context(context, mode)
    key_file = str(context.launch_configurations.get("weights_key", "")).strip() or None
    plan = with_weights_key(plan, key_file)
    actions: list[Any] = [LogInfo(msg=f"rl_bringup: {line}") for line in plan.header_lines()]
    # The plan holds the pushed namespace already (plan_from_context), and every node carries its
    # full namespace: launch_ros must not add the pushed one again, least of all to a container
    # (a __ns remap would move all of its nodes into one namespace). Scoped: the including file
    # keeps its namespace.
    composable, remote = (_launch_flag(context, name)
                          for name in ("use_composition", "remote_composition"))
    actions.append(GroupAction(scoped=True, actions=[
        OpaqueFunction(function=_forget_pushed_namespace),
        *(node_action(process, composable, remote) for process in plan.processes),
    ]))
    return actions


def _launch_flag(context: Any, name: str) -> bool:
    """The true/false launch argument ``name`` (its declared default when not given).

    :raises PlanError: for a value other than true or false.
    """
    default = LAUNCH_ONLY_ARGUMENTS[name][0]
    try:
        return parse_flag(name, context.launch_configurations.get(name, default))
    except ConfigError as error:
        raise PlanError(str(error)) from None


def _forget_pushed_namespace(context: Any) -> None:
    context.launch_configurations.pop("ros_namespace", None)
