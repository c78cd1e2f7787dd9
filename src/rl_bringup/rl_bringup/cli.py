"""The ``rl-bringup`` command: run or print a deployment plan without ``ros2 launch``.

Usage::

    rl-bringup launch MODE [robots:=N|auto] [config:=FILE] [output_dir:=DIR] [domain_id:=N]
        [discovery:=environment|localhost|subnet|server:HOST:PORT] [weights_key:=FILE]
        [cpus:=auto|none|'KIND=LIST;KIND=LIST...'] [policy_layout:=per_robot|central]
        [min_robots:=N] [max_robots:=N] [autoscale_SETTING:=VALUE] [PARAMETER:=VALUE ...]
    rl-bringup train [MODE] [key:=value ...]    # launch; mode colocated, config cartpole by default
    rl-bringup plan MODE [key:=value ...] [--format table|yaml|nodes]    # dry run: print the plan

Both front ends take the same ``key:=value`` keys (:mod:`rl_bringup.plan.arguments`;
``PARAMETER`` is any node parameter), so the same line works with ``ros2 launch rl_bringup``;
unknown keys and bad input exit here with code 2. Subcommands register through
:data:`SUBCOMMANDS`; their shared pieces live in :mod:`rl_bringup.tools.subcommand`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import yaml

from rl_bringup.plan import paths
from rl_bringup.plan.arguments import DEPLOYMENT_KEYS, ELASTIC_KEYS, PARAMETER_KEYS, plan_from_arguments
from rl_bringup.plan.deployment import DEFAULT_CONFIG, MAX_RESPAWNS, RESPAWN_DELAY_S, Plan, ProcessSpec
from rl_bringup.plan.layouts import MODES
from rl_bringup.plan.run_key import with_weights_key
from rl_bringup.run.supervisor import Supervisor
from rl_bringup.tools.deploy import advise, compose, k8s
from rl_bringup.tools.operate import doctor, estop, record, status
from rl_bringup.tools.subcommand import (
    EXIT_FAILURE,
    PROGRAM,
    CliError,
    Handler,
    SubparsersAction,
    add_subcommand,
    new_parser,
    parse_key_values,
    run_parser,
)
from rl_bringup.tools.train import compare, evaluate, export
from rl_core.learning.cpus import format_cpu_list
from rl_core.monitoring import heartbeat

DEFAULT_TRAIN_MODE = "colocated"


def _plan_from_tokens(tokens: Sequence[str], default_mode: str | None) -> Plan:
    """Build the plan of a ``launch`` / ``train`` / ``plan`` command line.

    :raises CliError: for a missing mode or bad tokens (unknown keys among them).
    :raises rl_bringup.plan.deployment.PlanError: for invalid values.
    """
    mode, values = parse_key_values(tokens, DEPLOYMENT_KEYS + ELASTIC_KEYS + PARAMETER_KEYS,
                                    positional_mode=True)
    if mode is None:
        if default_mode is None:
            raise CliError(f"missing MODE; valid modes: {', '.join(MODES)}")
        mode = default_mode
    return plan_from_arguments(mode, values)


def _print_run_header(plan: Plan, out: TextIO) -> None:
    """What a user needs before a run starts: layout, domain id and how to attach tools."""
    for line in plan.header_lines():
        print(f"[{PROGRAM}] {line}", file=out)
    out.flush()


def _resolve_executables(plan: Plan) -> Plan:
    """Point every process at the installed executable (colcon lib/ folder, venv, PATH).

    :raises FileNotFoundError: naming the missing executables and how to install them.
    """
    processes = []
    missing: list[str] = []
    for process in plan.processes:
        found = paths.find_executable(process.executable, process.package)
        if found is None:
            missing.append(f"{process.executable} ({process.package})")
            continue
        processes.append(dataclasses.replace(process, executable=str(found)))
    if missing:
        raise FileNotFoundError(
            f"executables not found: {', '.join(sorted(set(missing)))}; install rl_nodes "
            f"(scripts/setup.sh for the virtualenv, or colcon build and source install/setup.bash)"
        )
    return dataclasses.replace(plan, processes=processes)


def _run_plan(plan: Plan, arguments: argparse.Namespace, key_file: str | None = None) -> int:
    """Run ``plan`` under the supervisor until it ends; returns its exit code."""
    plan = with_weights_key(plan, key_file)
    try:
        plan = _resolve_executables(plan)
    except FileNotFoundError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    _print_run_header(plan, sys.stdout)
    supervisor = Supervisor(
        plan.processes,
        environment=plan.environment,
        grace_period=arguments.grace_period,
        heartbeat_timeout=arguments.heartbeat_timeout,
        respawn_delay=arguments.respawn_delay,
        label=PROGRAM,
        standby=plan.standby_processes(),
        unfinished=_unfinished_check(plan),
    )
    if plan.autoscale is None:
        return supervisor.run()
    # Only elastic runs load rclpy into this process (the autoscaler's ROS participant).
    from rl_bringup.run.elastic import ElasticRobots  # noqa: PLC0415

    with ElasticRobots(supervisor, plan):
        return supervisor.run()


def _unfinished_check(plan: Plan) -> Callable[[str], str | None]:
    """Why a clean exit of the process hosting the trainer came before the run's end: the
    trainer writes ``result.json`` when it finishes, so a container stopped from outside
    (``docker stop``, a SIGTERM) leaves none."""
    started = time.time()
    learners = {process.name: process.parameters.get("output_dir") for process in plan.processes
                if any(kind == "trainer" for kind, _ in process.hosted_nodes())}

    def unfinished(name: str) -> str | None:
        output_dir = learners.get(name)
        if not output_dir:
            return None
        result = Path(output_dir) / "result.json"
        if result.is_file() and result.stat().st_mtime >= started - 1.0:
            return None
        return f"no {result} from this run: was it stopped from outside?"

    return unfinished


def _weights_key_file(tokens: Sequence[str]) -> str | None:
    """The ``weights_key:=FILE`` token's value (validated with the others by the plan)."""
    return next((token.split(":=", 1)[1] for token in tokens
                 if token.startswith("weights_key:=")), None)


def _handle_launch(arguments: argparse.Namespace, tokens: list[str]) -> int:
    """``rl-bringup launch MODE key:=value ...``."""
    return _run_plan(_plan_from_tokens(tokens, default_mode=None), arguments,
                     _weights_key_file(tokens))


def _handle_train(arguments: argparse.Namespace, tokens: list[str]) -> int:
    """``rl-bringup train [MODE] key:=value ...``: the default training run."""
    return _run_plan(_plan_from_tokens(tokens, default_mode=DEFAULT_TRAIN_MODE), arguments,
                     _weights_key_file(tokens))


def _process_cpus_text(process: ProcessSpec) -> str:
    """The CPU line of a process: its CPUs, the learner thread's, its torch threads."""
    text = "cpus " + ("any" if process.cpus is None else format_cpu_list(process.cpus))
    if process.learner_cpus is not None:
        text += f", learner thread cpus {format_cpu_list(process.learner_cpus)}"
    return f"{text}, torch threads {process.torch_threads}"


#: The columns of :func:`format_node_table`.
NODE_TABLE_COLUMNS = ("PROCESS", "KIND", "NAMESPACE", "EXECUTABLE")


def format_node_table(plan: Plan) -> str:
    """The nodes of ``plan`` as an aligned text table, one row per node in start order: the
    process hosting it, its kind, its namespace and the executable of the process
    (``container`` for a process hosting several nodes)."""
    rows = [NODE_TABLE_COLUMNS, *(
        (process.name, kind, namespace, os.path.basename(process.executable))
        for process in plan.processes for kind, namespace in process.hosted_nodes()
    )]
    widths = [max(len(row[column]) for row in rows) for column in range(len(NODE_TABLE_COLUMNS))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in rows)


def format_plan_table(plan: Plan) -> str:
    """The plan as an aligned, human-readable text table."""
    robots = (plan.robots_text() if plan.autoscale is not None
              else f"{plan.robots} robot{'s' if plan.robots != 1 else ''}")
    lines = [
        f"mode         {plan.mode} ({robots})",
        f"config       {plan.config_file}",
        f"domain id    {plan.domain_id} ({plan.domain_id_source})",
        f"discovery    {plan.discovery}",
        f"cpus         {plan.cpus} ({plan.cpus_source})",
        *([f"autoscale    {plan.autoscale.describe()}"] if plan.autoscale is not None else []),
        f"attach with  {plan.attach_command()}",
        "environment",
        *(f"  {name}={value}" for name, value in plan.environment.items()),
        "nodes",
        *(f"  {line}" for line in format_node_table(plan).splitlines()),
        "processes",
    ]
    name_width = max(len("NAME"), *(len(process.name) for process in plan.processes))
    lines.append(f"  {'NAME':<{name_width}}  RESPAWN  REQUIRED  NODES")
    standby = set(plan.standby_processes())
    for process in plan.processes:
        nodes = ", ".join(f"{kind}@{namespace}" for kind, namespace in process.hosted_nodes())
        lines.append(
            f"  {process.name:<{name_width}}  {'yes' if process.respawn else 'no':<7}  "
            f"{'yes' if process.required else 'no':<8}  {nodes}"
        )
        if process.name in standby:
            lines.append(f"  {'':<{name_width}}  standby: started when the autoscaler adds it")
        if process.torch_threads is not None:
            lines.append(f"  {'':<{name_width}}  {_process_cpus_text(process)}")
        lines.append(f"  {'':<{name_width}}  $ {process.command_line()}")
    if plan.notes:
        lines.append("notes")
        lines.extend(f"  - {note}" for note in plan.notes)
    return "\n".join(lines)


def _handle_plan(arguments: argparse.Namespace, tokens: list[str]) -> int:
    """``rl-bringup plan MODE key:=value ... [--format table|yaml|nodes]``: print, start
    nothing."""
    plan = _plan_from_tokens(tokens, default_mode=None)
    if arguments.format == "yaml":
        sys.stdout.write(yaml.safe_dump(plan.to_dict(), sort_keys=False))
    elif arguments.format == "nodes":
        print(format_node_table(plan))
    else:
        print(format_plan_table(plan))
    return 0


_KEYS_HELP = (
    "key:=value arguments: robots:=N (1..64) or robots:=auto (hybrid: robots are added while "
    "they raise throughput, with min_robots:=N (default 1), max_robots:=N (default: the CPU "
    "count) and autoscale_SETTING:=VALUE, see docs/elastic.md), "
    "config:=NAME|PATH (default cartpole), "
    "output_dir:=DIR, domain_id:=N (0..101; default: $ROS_DOMAIN_ID or a random pick), "
    "discovery:=environment|localhost|subnet|server:HOST:PORT (default environment: your "
    "ROS_AUTOMATIC_DISCOVERY_RANGE, else localhost), "
    "cpus:=auto|none|'KIND=LIST;...' (CPU sets per node kind, e.g. "
    "'simulator=0;policy=0;replay_buffer=1;trainer=1'; default: the config's /rl_bringup block, "
    "else none), policy_layout:=per_robot|central (default per_robot; central: one policy node "
    "batching every robot's observations), weights_key:=FILE (default: a fresh key per run), "
    "and any node parameter as NAME:=VALUE (e.g. total_env_steps:=20000; "
    "`ros2 launch rl_bringup colocated.launch.py --show-args` lists them)"
)


def _add_run_command(subparsers: SubparsersAction, name: str, handler: Handler, *,
                     help: str, description: str, metavar: str) -> None:
    """Add a subcommand that starts processes (``launch``, ``train``)."""
    parser = add_subcommand(subparsers, name, handler, help=help, description=description,
                            metavar=metavar)
    parser.add_argument(
        "--grace-period",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="time the processes get to shut down after SIGINT before SIGTERM/SIGKILL (default 10)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=_heartbeat_timeout,
        default=heartbeat.HEARTBEAT_TIMEOUT_S,
        metavar="SECONDS",
        help="kill and respawn a node process whose heartbeat stopped this long (a hung node; "
        f"default {heartbeat.HEARTBEAT_TIMEOUT_S:g}, at least {MIN_HEARTBEAT_TIMEOUT_S:g}; 0 = "
        "never)",
    )

    parser.add_argument(
        "--respawn-delay",
        type=_respawn_delay,
        default=RESPAWN_DELAY_S,
        metavar="SECONDS",
        help="delay before a crashed process's first restart; it doubles per consecutive "
        f"restart, up to 30 s, and a process is given up after {MAX_RESPAWNS} (default "
        f"{RESPAWN_DELAY_S:g}, from 0.1 to 30)",
    )


def _respawn_delay(text: str) -> float:
    """``--respawn-delay``: from 0.1 s (no restart storm) to the 30 s the delay doubles up to."""
    value = float(text)
    if not 0.1 <= value <= 30.0:
        raise argparse.ArgumentTypeError(f"{text}: give from 0.1 to 30 seconds")
    return value


#: The shortest ``--heartbeat-timeout``: many beats, so a loaded machine's delays are no hang.
MIN_HEARTBEAT_TIMEOUT_S = 10.0


def _heartbeat_timeout(text: str) -> float:
    """``--heartbeat-timeout``: 0 (off) or at least MIN_HEARTBEAT_TIMEOUT_S, so that a busy
    but live node (beating once a second) is never taken for a hung one."""
    value = float(text)
    if value != 0 and not MIN_HEARTBEAT_TIMEOUT_S <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"{text}: give 0 (off) or at least {MIN_HEARTBEAT_TIMEOUT_S:g} seconds")
    return value


def register_launch(subparsers: SubparsersAction) -> None:
    """Add ``launch``."""
    _add_run_command(
        subparsers, "launch", _handle_launch,
        help="run a deployment (like ros2 launch rl_bringup MODE.launch.py)",
        description=f"Run a deployment MODE ({', '.join(MODES)}) with prefixed logs, respawn and "
        f"signal forwarding. {_KEYS_HELP}.",
        metavar="MODE|key:=value",
    )


def register_train(subparsers: SubparsersAction) -> None:
    """Add ``train``."""
    _add_run_command(
        subparsers, "train", _handle_train,
        help=f"train the default task ({DEFAULT_CONFIG}, {DEFAULT_TRAIN_MODE} mode unless given)",
        description=f"Launch a training run; MODE defaults to {DEFAULT_TRAIN_MODE} and config to "
        f"{DEFAULT_CONFIG}. {_KEYS_HELP}.",
        metavar="[MODE]|key:=value",
    )


def register_plan(subparsers: SubparsersAction) -> None:
    """Add ``plan``."""
    parser = add_subcommand(
        subparsers, "plan", _handle_plan,
        help="print the nodes, processes, command lines and environment of a deployment "
        "(dry run)",
        description=f"Print the deployment plan of MODE ({', '.join(MODES)}) without starting "
        f"anything. {_KEYS_HELP}.",
        metavar="MODE|key:=value",
    )
    parser.add_argument(
        "--format", choices=("table", "yaml", "nodes"), default="table",
        help="output format: table (the whole plan, default), yaml, or nodes (the node table only)",
    )


# Every subcommand registers itself here; advise, doctor, eval, status and record slot in alike.
SUBCOMMANDS: list[Callable[[SubparsersAction], None]] = [
    register_launch,
    register_train,
    register_plan,
    advise.register,
    evaluate.register,
    export.register,
    record.register,
    status.register,
    doctor.register,
    compare.register,
    k8s.register,
    compose.register,
    estop.register,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``rl-bringup`` argument parser with every registered subcommand."""
    parser, subparsers = new_parser(
        "Run rl_ros2 deployments (colocated, decoupled, hybrid) without ros2 launch.")
    for register in SUBCOMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``rl-bringup``.

    :param argv: arguments without the program name (``sys.argv[1:]`` when ``None``).
    :return: the exit code.
    """
    return run_parser(build_parser(), sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
