"""Turn the deployment plan into ``launch`` / ``launch_ros`` actions (the ros2 launch front end).

The four files in ``launch/`` call :func:`generate_mode_launch_description` and nothing else, so
the plan (:mod:`rl_bringup.plan`) stays the single source of the process layout.

``launch`` and ``launch_ros`` are imported inside the functions: they exist only in a ROS 2
install, and importing them late lets ``rl_bringup`` import everywhere (and lets tests substitute
small recording fakes).
"""

from __future__ import annotations

from typing import Any

from rl_bringup.plan import (
    DEFAULT_CONFIG,
    DEFAULT_DISCOVERY,
    DEFAULT_POLICY_LAYOUT,
    MAX_DOMAIN_ID,
    MAX_RESPAWNS,
    MAX_ROBOTS,
    MIN_DOMAIN_ID,
    MIN_ROBOTS,
    MODES,
    POLICY_LAYOUTS,
    RESPAWN_DELAY_S,
    Plan,
    ProcessSpec,
    make_plan,
)

# name -> (default value, description). Defaults are text: launch arguments are substitutions.
LAUNCH_ARGUMENTS: dict[str, tuple[str, str]] = {
    "robots": (
        "1",
        f"Number of robots ({MIN_ROBOTS}..{MAX_ROBOTS}); robot k runs in namespace /robot_k.",
    ),
    "config": (
        DEFAULT_CONFIG,
        "Parameter file: a path, or a name in rl_bringup's config folder (cartpole, kuka_reach).",
    ),
    "output_dir": (
        "",
        "Folder for the trainer's checkpoints and results (trainer parameter output_dir); "
        "empty: the trainer's default.",
    ),
    "domain_id": (
        "",
        f"ROS_DOMAIN_ID of the run ({MIN_DOMAIN_ID}..{MAX_DOMAIN_ID}); empty: the caller's "
        f"ROS_DOMAIN_ID, else a random pick in 1..100.",
    ),
    "discovery": (
        DEFAULT_DISCOVERY,
        "DDS discovery: localhost (default, nothing leaves the machine), subnet (multicast on the "
        "local subnet), or server:HOST:PORT (Fast DDS discovery server).",
    ),
    "cpus": (
        "",
        "CPU sets per node kind: auto (acting and learning nodes on separate halves of the "
        "cores), none, or 'KIND=LIST;...' (e.g. 'simulator=0;policy=0;replay_buffer=1;"
        "trainer=1'); empty: the config's /rl_bringup block, else none.",
    ),
    "policy_layout": (
        DEFAULT_POLICY_LAYOUT,
        f"Where inference runs ({', '.join(POLICY_LAYOUTS)}): per_robot, a policy node in each "
        "robot's namespace; central, one policy node /policy serving every robot with one "
        "batched forward pass (get_action at /policy/get_action).",
    ),
}
MODE_ARGUMENT_DESCRIPTION = (
    "Deployment mode: colocated (one process), decoupled (one process per node) or hybrid "
    "(a process per robot plus one learner process)."
)


def declare_arguments(with_mode: bool) -> list[Any]:
    """``DeclareLaunchArgument`` actions, each with a description.

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
    for name, (default_value, description) in LAUNCH_ARGUMENTS.items():
        actions.append(
            DeclareLaunchArgument(name, default_value=default_value, description=description)
        )
    return actions


def plan_from_context(context: Any, mode: str | None) -> Plan:
    """Build the plan from the launch configurations of ``context``.

    :param context: the ``launch.LaunchContext`` given to an ``OpaqueFunction``.
    :param mode: the mode fixed by the launch file, or ``None`` to read the ``mode`` argument.
    :raises rl_bringup.plan.PlanError: for invalid arguments (launch reports it and exits 1).
    """
    configurations = context.launch_configurations

    def value(name: str, default: str) -> str:
        return str(configurations.get(name, default))

    return make_plan(
        mode if mode is not None else value("mode", MODES[0]),
        robots=value("robots", "1"),
        config=value("config", DEFAULT_CONFIG),
        output_dir=value("output_dir", "") or None,
        domain_id=value("domain_id", "") or None,
        discovery=value("discovery", DEFAULT_DISCOVERY),
        cpus=value("cpus", "") or None,
        policy_layout=value("policy_layout", DEFAULT_POLICY_LAYOUT),
    )


def node_action(process: ProcessSpec) -> Any:
    """The ``launch_ros.actions.Node`` of one planned process.

    Containers get no ``namespace`` (a ``__ns`` remap would move every node in the process);
    their nodes' namespaces travel in the ``--node KIND@NAMESPACE`` arguments. A required process
    shuts the launch down when it exits, like the supervisor does.
    """
    from launch.actions import Shutdown
    from launch_ros.actions import Node

    parameters: list[Any] = [process.params_file]
    if process.parameters:
        parameters.append(dict(process.parameters))
    single_node_namespace = process.namespace not in ("", "/") and not process.is_container
    options: dict[str, Any] = {
        "package": process.package,
        "executable": process.executable,
        "namespace": process.namespace if single_node_namespace else None,
        "parameters": parameters,
        "arguments": list(process.arguments),
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
    """``OpaqueFunction`` body: the plan's processes as launch actions, after a summary line."""
    from launch.actions import LogInfo

    plan = plan_from_context(context, mode)
    summary = (
        f"rl_bringup: mode {plan.mode}, {plan.robots} robot(s), config {plan.config_file}, "
        f"ROS_DOMAIN_ID={plan.domain_id} ({plan.domain_id_source}); attach tools with: "
        f"{plan.attach_command()}"
    )
    actions: list[Any] = [LogInfo(msg=summary)]
    actions.extend(LogInfo(msg=f"rl_bringup note: {note}") for note in plan.notes)
    actions.extend(node_action(process) for process in plan.processes)
    return actions


def generate_mode_launch_description(mode: str | None) -> Any:
    """The whole ``LaunchDescription`` of a launch file.

    :param mode: the fixed mode, or ``None`` for a ``mode:=`` argument (multi_robot.launch.py).
    """
    from launch import LaunchDescription
    from launch.actions import OpaqueFunction

    return LaunchDescription(
        [
            *declare_arguments(with_mode=mode is None),
            OpaqueFunction(function=launch_setup, kwargs={"mode": mode}),
        ]
    )
