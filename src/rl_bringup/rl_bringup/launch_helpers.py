"""Turn the deployment plan into ``launch`` / ``launch_ros`` actions (the ros2 launch front end).

Each file in ``launch/`` lists the nodes its mode starts and builds its description from two
pieces of this module: :func:`declare_arguments`, then an ``OpaqueFunction`` running
:func:`launch_setup`, which turns the plan's processes into ``Node`` actions once the arguments'
values are known. So the plan (:mod:`rl_bringup.plan`) stays the single source of the process
layout, and :mod:`rl_bringup.arguments` the single source of the arguments ``rl-bringup`` takes
too.

``launch`` and ``launch_ros`` are imported inside the functions: they exist only in a ROS 2
install, and importing them late lets ``rl_bringup`` import everywhere (and lets tests substitute
small recording fakes).
"""

from __future__ import annotations

from typing import Any

from rl_bringup.arguments import (
    DEPLOYMENT_ARGUMENTS,
    DEPLOYMENT_KEYS,
    PARAMETER_KEYS,
    parameter_description,
    parameter_keys_by_node,
    plan_from_arguments,
)
from rl_bringup.layouts import MODES
from rl_bringup.plan import MAX_RESPAWNS, RESPAWN_DELAY_S, Plan, PlanError, ProcessSpec
from rl_bringup.run_key import with_weights_key
from rl_nodes.graph import in_namespace

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
    for name, (default_value, description) in DEPLOYMENT_ARGUMENTS.items():
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
    :raises rl_bringup.plan.PlanError: for invalid arguments (launch reports it and exits 1).
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


def node_action(process: ProcessSpec) -> Any:
    """The ``launch_ros.actions.Node`` of one planned process.

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
    options: dict[str, Any] = {
        "package": process.package,
        "executable": process.executable,
        "namespace": process.namespace if single_node_namespace else None,
        "parameters": parameters,
        "arguments": list(process.arguments),
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
    return Node(**options)


def launch_setup(context: Any, mode: str | None = None) -> list[Any]:
    """``OpaqueFunction`` body: the plan's processes as launch actions, after the lines both
    front ends print first (layout, domain and how to attach, notes).

    Like ``rl-bringup``, it gives the run a weights key (:func:`rl_bringup.run_key.with_weights_key`).
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
    actions.append(GroupAction(scoped=True, actions=[
        OpaqueFunction(function=_forget_pushed_namespace),
        *(node_action(process) for process in plan.processes),
    ]))
    return actions


def _forget_pushed_namespace(context: Any) -> None:
    context.launch_configurations.pop("ros_namespace", None)
