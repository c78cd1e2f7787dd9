"""The deployment plan: mode, robots, config -> the processes to start and their environment.

This module is the single source of truth for both front ends: the ``launch/*.launch.py`` files
(through :mod:`rl_bringup.launch_helpers`) and the ``rl-bringup`` supervisor turn the same
:class:`Plan` into running processes. It imports neither rclpy nor launch, so it is unit-tested
with plain pytest.

Layouts (robot ``k`` lives in namespace ``/robot_k``; replay_buffer and trainer in ``/``):

============  =================================================================================
colocated     one ``container`` process: simulator + policy per robot, replay_buffer, trainer
decoupled     one process per node: per robot ``simulator`` and ``policy``, one
              ``replay_buffer``, one ``trainer``
hybrid        per robot one ``container`` (simulator + policy), one learner ``container``
              (replay_buffer + trainer)
============  =================================================================================

Processes that only hold robot nodes (simulator, policy) are respawned when they crash: a
simulator restart loses at most an episode. Processes holding the trainer or the replay buffer are
*required*: the run ends when one of them exits, with its exit code (the trainer exits 0 when
training is complete).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
import hashlib
import ipaddress
import os
from pathlib import Path
import random
import re
import shlex
import tempfile
from typing import Any

import yaml

from rl_bringup import paths

MODES: tuple[str, ...] = ("colocated", "decoupled", "hybrid")
NODE_KINDS: tuple[str, ...] = ("simulator", "policy", "replay_buffer", "trainer")
ROBOT_NODE_KINDS: tuple[str, ...] = ("simulator", "policy")
CONTAINER_EXECUTABLE = "container"
NODES_PACKAGE = paths.NODES_PACKAGE
DEFAULT_CONFIG = "cartpole"
DEFAULT_DISCOVERY = "localhost"

MIN_ROBOTS = 1
MAX_ROBOTS = 64
# 0..101 is the range ROS 2 documents as safe on Linux: higher ids push the DDS ports into the
# ephemeral port range.
MIN_DOMAIN_ID = 0
MAX_DOMAIN_ID = 101
# A per-run pick avoids 0 (the id every unconfigured ROS 2 shell uses) and 101 (the edge).
RANDOM_DOMAIN_ID_RANGE = (1, 100)

# Respawn policy shared by both front ends (launch: respawn_delay / respawn_max_retries).
RESPAWN_DELAY_S = 2.0
MAX_RESPAWNS = 5

DISCOVERY_RANGE_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
DISCOVERY_SERVER_VARIABLE = "ROS_DISCOVERY_SERVER"
DOMAIN_ID_VARIABLE = "ROS_DOMAIN_ID"
RMW_IMPLEMENTATION = "rmw_fastrtps_cpp"

_PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_HOST_LABEL}(?:\.{_HOST_LABEL})*$")


class PlanError(ValueError):
    """Invalid deployment input; the message names the valid choices."""


@dataclass
class ProcessSpec:
    """One operating-system process of a deployment.

    :param name: label of the process in logs and plans (``simulator_robot_0``, ``learner``).
    :param executable: console script of ``package`` (``simulator``, ``container``, ...).
    :param package: package that installs the executable (for ``ros2 run`` / launch_ros).
    :param arguments: program arguments before ``--ros-args`` (the container's ``--node``s).
    :param namespace: ROS namespace of a single-node process; empty for containers, whose nodes
        carry their own namespaces (a ``__ns`` remap would move every node in the process).
    :param params_file: parameter file passed with ``--params-file``.
    :param parameters: parameter overrides passed with ``-p name:=value``.
    :param env: environment variables the process needs on top of the caller's environment.
    :param respawn: restart the process when it exits.
    :param required: end the whole run when the process exits.
    :param nodes: ``(kind, namespace)`` of each node a container hosts; empty for single nodes.
    """

    name: str
    executable: str
    package: str = NODES_PACKAGE
    arguments: list[str] = field(default_factory=list)
    namespace: str = ""
    params_file: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    respawn: bool = False
    required: bool = False
    nodes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def is_container(self) -> bool:
        """Whether the process hosts several nodes given by ``--node`` arguments."""
        return bool(self.nodes)

    def hosted_nodes(self) -> list[tuple[str, str]]:
        """``(kind, namespace)`` of every node in this process (containers and single nodes)."""
        if self.nodes:
            return list(self.nodes)
        return [(os.path.basename(self.executable), self.namespace or "/")]

    def ros_arguments(self) -> list[str]:
        """The arguments after ``--ros-args``: namespace remap, parameter file, overrides."""
        arguments: list[str] = []
        if self.namespace not in ("", "/") and not self.is_container:
            arguments += ["-r", f"__ns:={self.namespace}"]
        if self.params_file:
            arguments += ["--params-file", self.params_file]
        if self.parameters:
            arguments += ["--params-file", self.overrides_file()]
        return arguments

    def overrides_file(self) -> str:
        """A parameter file holding :attr:`parameters` for each node of this process.

        ``-p name:=value`` cannot be used: rcl files it under ``/**``, and a node-specific block
        of the scenario file (``/**/trainer``) would beat it. A later file with the same
        node-specific keys wins instead. The file is named by its content, so writing it again
        is harmless.
        """
        document = {f"/**/{kind}": {"ros__parameters": dict(self.parameters)}
                    for kind in sorted({kind for kind, _ in self.hosted_nodes()})}
        text = yaml.safe_dump(document, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / f"rl_bringup_overrides_{digest}.yaml"
        if not path.is_file():
            temporary = path.with_name(f".{path.name}.{os.getpid()}")
            temporary.write_text(text)
            os.replace(temporary, path)
        return str(path)

    def argv(self, python_bin_dir: str | os.PathLike[str] | None = None) -> list[str]:
        """The full command line of the process.

        :param python_bin_dir: folder holding the executable (a virtualenv's ``bin`` or a colcon
            ``lib/rl_nodes``); the bare executable name, found on ``PATH``, when ``None``.
        :return: ``[program, *arguments, "--ros-args", ...]``.
        """
        program = self.executable
        if python_bin_dir is not None and not os.path.isabs(program):
            program = os.path.join(os.fspath(python_bin_dir), program)
        ros_arguments = self.ros_arguments()
        if not ros_arguments:
            return [program, *self.arguments]
        return [program, *self.arguments, "--ros-args", *ros_arguments]

    def command_line(self, python_bin_dir: str | os.PathLike[str] | None = None) -> str:
        """:meth:`argv` quoted for a POSIX shell (for printing plans)."""
        return shlex.join(self.argv(python_bin_dir))

    def to_dict(self) -> dict[str, Any]:
        """A plain, YAML-friendly description of the process."""
        return {
            "name": self.name,
            "package": self.package,
            "executable": self.executable,
            "namespace": self.namespace,
            "nodes": [f"{kind}@{namespace}" for kind, namespace in self.hosted_nodes()],
            "respawn": self.respawn,
            "required": self.required,
            "params_file": self.params_file,
            "parameters": dict(self.parameters),
            "argv": self.argv(),
        }


@dataclass
class Plan:
    """A whole deployment: the processes and the environment they share.

    :param mode: one of :data:`MODES`.
    :param robots: number of robots.
    :param config_file: absolute path of the parameter file every process loads.
    :param processes: the processes to start, in start order.
    :param environment: variables every process gets (also copied into each ``ProcessSpec.env``).
    :param domain_id: the ROS_DOMAIN_ID of the run.
    :param domain_id_source: ``"argument"``, ``"environment"`` or ``"random"``.
    :param discovery: the discovery setting as given (``localhost``, ``subnet``,
        ``server:HOST:PORT``).
    :param notes: things the user must know to run or attach to the deployment.
    """

    mode: str
    robots: int
    config_file: str
    processes: list[ProcessSpec]
    environment: dict[str, str]
    domain_id: int
    domain_id_source: str
    discovery: str
    notes: list[str] = field(default_factory=list)

    def hosted_nodes(self) -> list[tuple[str, str]]:
        """``(kind, namespace)`` of every node of the deployment, in process order."""
        return [node for process in self.processes for node in process.hosted_nodes()]

    def attach_command(self) -> str:
        """Shell line that lets ROS tools (ros2 topic, rviz2, rqt) see this run's graph."""
        variables = {DOMAIN_ID_VARIABLE: str(self.domain_id)}
        for name in (DISCOVERY_RANGE_VARIABLE, DISCOVERY_SERVER_VARIABLE):
            if name in self.environment:
                variables[name] = self.environment[name]
        assignments = (f"{name}={shlex.quote(value)}" for name, value in variables.items())
        return "export " + " ".join(assignments)

    def to_dict(self) -> dict[str, Any]:
        """A plain, YAML-friendly description of the plan."""
        return {
            "mode": self.mode,
            "robots": self.robots,
            "config_file": self.config_file,
            "domain_id": self.domain_id,
            "domain_id_source": self.domain_id_source,
            "discovery": self.discovery,
            "environment": dict(self.environment),
            "notes": list(self.notes),
            "processes": [process.to_dict() for process in self.processes],
        }


def format_parameter_value(value: Any) -> str:
    """Render a parameter value for ``-p name:=value``.

    rcl parses the text after ``:=`` as YAML, so strings that YAML would read as another type
    (``"1"``, ``"true"``, ``"null"``) are quoted to stay strings.

    :param value: bool, int, float, str or a list of those.
    :raises PlanError: for other types (ROS 2 parameters cannot hold them).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, str) and parsed == value:
            return value
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_parameter_value(item) for item in value) + "]"
    raise PlanError(
        f"parameter value {value!r} of type {type(value).__name__} is not a ROS 2 parameter "
        f"type; use bool, int, float, str or a list of those"
    )


def robot_namespace(robot: int) -> str:
    """Namespace of robot ``robot`` (the simulator derives its robot id from it)."""
    return f"/robot_{robot}"


def parse_robots(value: int | str) -> int:
    """Validate a robot count given as int or text.

    :raises PlanError: when it is not an integer in ``MIN_ROBOTS..MAX_ROBOTS``.
    """
    message = f"robots must be an integer from {MIN_ROBOTS} to {MAX_ROBOTS}, got {value!r}"
    if isinstance(value, bool):
        raise PlanError(message)
    try:
        robots = value if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise PlanError(message) from None
    if not MIN_ROBOTS <= robots <= MAX_ROBOTS:
        raise PlanError(message)
    return robots


def parse_domain_id(value: int | str, source: str = "domain_id") -> int:
    """Validate a ROS domain id given as int or text.

    :param value: the value.
    :param source: what the value came from, for the error message.
    :raises PlanError: when it is not an integer in ``MIN_DOMAIN_ID..MAX_DOMAIN_ID``.
    """
    message = f"{source} must be an integer from {MIN_DOMAIN_ID} to {MAX_DOMAIN_ID}, got {value!r}"
    if isinstance(value, bool):
        raise PlanError(message)
    try:
        domain_id = value if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise PlanError(message) from None
    if not MIN_DOMAIN_ID <= domain_id <= MAX_DOMAIN_ID:
        raise PlanError(message)
    return domain_id


def discovery_environment(discovery: str) -> tuple[dict[str, str], list[str]]:
    """Environment variables and notes for a discovery setting.

    * ``localhost`` (default): ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``; nothing leaves the
      machine (DESIGN.md, "Network safety").
    * ``subnet``: ``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``; multicast discovery on the local
      subnet, an explicit multi-host choice.
    * ``server:HOST:PORT``: ``ROS_DISCOVERY_SERVER=HOST:PORT`` and the range left to the
      middleware (``SYSTEM_DEFAULT``): Fast DDS then runs as a discovery-server client that
      discovers by unicast to the server only. (In tests across network namespaces a client
      with a ``LOCALHOST`` range still reached the server, but what the range means with a
      discovery server is the middleware's business, so the plan states none.)

    :raises PlanError: naming the valid forms.
    """
    valid = "valid: localhost, subnet, server:HOST:PORT (e.g. server:127.0.0.1:11811)"
    text = discovery.strip()
    lowered = text.lower()
    if lowered == "localhost":
        return {DISCOVERY_RANGE_VARIABLE: "LOCALHOST"}, []
    if lowered == "subnet":
        return {DISCOVERY_RANGE_VARIABLE: "SUBNET"}, [
            "discovery:=subnet: DDS discovery multicasts on the local subnet (multi-host); "
            "use it only on a network meant for this run"
        ]
    if lowered.startswith("server:"):
        parts = text.split(":")
        if len(parts) != 3:
            raise PlanError(f"bad discovery {discovery!r}: expected server:HOST:PORT; {valid}")
        _, host, port_text = parts
        if not _is_host(host):
            raise PlanError(
                f"bad discovery {discovery!r}: {host!r} is not an IPv4 address or host name; "
                f"{valid}"
            )
        try:
            port = int(port_text)
        except ValueError:
            port = -1
        if not 1 <= port <= 65535:
            raise PlanError(f"bad discovery {discovery!r}: port must be 1..65535; {valid}")
        environment = {
            DISCOVERY_SERVER_VARIABLE: f"{host}:{port}",
            DISCOVERY_RANGE_VARIABLE: "SYSTEM_DEFAULT",
        }
        return environment, [
            f"discovery:={text}: start the Fast DDS discovery server first, on {host}: "
            f"fastdds discovery -i 0 -l {host} -p {port}",
            f"tools attaching to this run need {DISCOVERY_SERVER_VARIABLE}={host}:{port} "
            f"(and ROS_SUPER_CLIENT=TRUE for ros2 topic list / rqt_graph)",
        ]
    raise PlanError(f"bad discovery {discovery!r}; {valid}")


def _is_host(host: str) -> bool:
    """Whether ``host`` is an IPv4 address or a DNS host name."""
    try:
        ipaddress.IPv4Address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME.match(host))


def _choose_domain_id(
    domain_id: int | str | None, environ: Mapping[str, str], rng: random.Random | None
) -> tuple[int, str]:
    """The domain id of a run and where it came from (argument, caller's environment, random)."""
    if domain_id is not None and str(domain_id).strip() != "":
        return parse_domain_id(domain_id), "argument"
    inherited = environ.get(DOMAIN_ID_VARIABLE, "").strip()
    if inherited:
        source = f"{DOMAIN_ID_VARIABLE} in the environment"
        return parse_domain_id(inherited, source=source), "environment"
    # A per-run pick keeps concurrent runs (and CI jobs) on one machine out of each other's graphs.
    picker = rng if rng is not None else random.SystemRandom()
    return picker.randint(*RANDOM_DOMAIN_ID_RANGE), "random"


def _check_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Validate parameter overrides (names and value types) before they reach a command line."""
    checked: dict[str, Any] = {}
    for name, value in parameters.items():
        if not isinstance(name, str) or not _PARAMETER_NAME.match(name):
            raise PlanError(
                f"bad parameter name {name!r}: use letters, digits, '_' and '.' separators, "
                f"starting with a letter or '_'"
            )
        format_parameter_value(value)  # raises PlanError for unsupported types
        checked[name] = value
    return checked


def make_plan(
    mode: str,
    robots: int | str = 1,
    config: str | os.PathLike[str] = DEFAULT_CONFIG,
    output_dir: str | os.PathLike[str] | None = None,
    domain_id: int | str | None = None,
    discovery: str = DEFAULT_DISCOVERY,
    extra_parameters: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    rng: random.Random | None = None,
) -> Plan:
    """Build the deployment plan.

    Text values are accepted for every argument (launch arguments and ``key:=value`` command-line
    arguments arrive as text); empty ``output_dir`` / ``domain_id`` mean "not given".

    :param mode: one of :data:`MODES`.
    :param robots: number of robots, ``MIN_ROBOTS..MAX_ROBOTS``.
    :param config: parameter file: a path or a name in the config folder (``cartpole``).
    :param output_dir: where the trainer writes checkpoints and results (``-p output_dir:=``);
        the trainer's own default when ``None``. Made absolute so every process agrees on it.
    :param domain_id: ROS_DOMAIN_ID; the caller's ``ROS_DOMAIN_ID`` or a random pick in
        :data:`RANDOM_DOMAIN_ID_RANGE` when ``None``.
    :param discovery: ``localhost``, ``subnet`` or ``server:HOST:PORT``
        (see :func:`discovery_environment`).
    :param extra_parameters: parameter overrides for every process (``-p name:=value``).
    :param environ: the caller's environment (``os.environ`` when ``None``); read for
        ``ROS_DOMAIN_ID`` and for variables that would contradict the plan.
    :param rng: random generator for the domain-id pick (tests pass a seeded one).
    :return: the plan.
    :raises PlanError: on invalid input, naming the valid choices.
    """
    environ = os.environ if environ is None else environ
    mode_text = str(mode).strip().lower()
    if mode_text not in MODES:
        raise PlanError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    robot_count = parse_robots(robots)
    try:
        config_file = str(paths.resolve_config(config))
    except FileNotFoundError as error:
        raise PlanError(str(error)) from None
    discovery_env, notes = discovery_environment(str(discovery))
    chosen_domain_id, domain_id_source = _choose_domain_id(domain_id, environ, rng)

    environment: dict[str, str] = {
        DOMAIN_ID_VARIABLE: str(chosen_domain_id),
        "RMW_IMPLEMENTATION": RMW_IMPLEMENTATION,
        # Node output goes through pipes (supervisor) or launch; unbuffered keeps logs timely.
        "PYTHONUNBUFFERED": "1",
        **discovery_env,
    }
    if DISCOVERY_SERVER_VARIABLE not in discovery_env and environ.get(DISCOVERY_SERVER_VARIABLE):
        notes.append(
            f"{DISCOVERY_SERVER_VARIABLE} is set in your environment and is inherited by every "
            f"process; unset it for discovery:={discovery}"
        )

    shared_parameters = _check_parameters(extra_parameters or {})
    trainer_parameters = dict(shared_parameters)
    if output_dir is not None and str(output_dir).strip() != "":
        absolute = os.path.abspath(os.path.expanduser(os.fspath(output_dir)))
        trainer_parameters["output_dir"] = absolute

    layout = _LAYOUTS[mode_text]
    processes = layout(robot_count)
    for process in processes:
        process.params_file = config_file
        hosts_trainer = any(kind == "trainer" for kind, _ in process.hosted_nodes())
        process.parameters = dict(trainer_parameters if hosts_trainer else shared_parameters)
        process.env = dict(environment)
    return Plan(
        mode=mode_text,
        robots=robot_count,
        config_file=config_file,
        processes=processes,
        environment=environment,
        domain_id=chosen_domain_id,
        domain_id_source=domain_id_source,
        discovery=str(discovery).strip(),
        notes=notes,
    )


def _container(
    name: str, nodes: list[tuple[str, str]], *, respawn: bool, required: bool
) -> ProcessSpec:
    """A container process hosting ``nodes`` (``--node KIND@NAMESPACE`` each)."""
    arguments = [
        argument for kind, namespace in nodes for argument in ("--node", f"{kind}@{namespace}")
    ]
    return ProcessSpec(
        name=name,
        executable=CONTAINER_EXECUTABLE,
        arguments=arguments,
        nodes=list(nodes),
        respawn=respawn,
        required=required,
    )


def _robot_nodes(robot: int) -> list[tuple[str, str]]:
    """The per-robot nodes of robot ``robot``."""
    return [(kind, robot_namespace(robot)) for kind in ROBOT_NODE_KINDS]


def _colocated_layout(robots: int) -> list[ProcessSpec]:
    """One container with every node; it holds the trainer, so it is required."""
    nodes = [node for robot in range(robots) for node in _robot_nodes(robot)]
    nodes += [("replay_buffer", "/"), ("trainer", "/")]
    return [_container("container", nodes, respawn=False, required=True)]


def _decoupled_layout(robots: int) -> list[ProcessSpec]:
    """One process per node; robot nodes respawn, replay_buffer and trainer are required.

    The replay buffer is required rather than respawned: a restarted buffer comes back empty and
    the trainer would silently starve, so a crash ends the run loudly instead.
    """
    processes = [
        ProcessSpec(
            name=f"{kind}_robot_{robot}",
            executable=kind,
            namespace=namespace,
            respawn=True,
        )
        for robot in range(robots)
        for kind, namespace in _robot_nodes(robot)
    ]
    for kind in ("replay_buffer", "trainer"):
        processes.append(ProcessSpec(name=kind, executable=kind, namespace="/", required=True))
    return processes


def _hybrid_layout(robots: int) -> list[ProcessSpec]:
    """Per robot one respawning container, one required learner container."""
    processes = [
        _container(f"robot_{robot}", _robot_nodes(robot), respawn=True, required=False)
        for robot in range(robots)
    ]
    learner_nodes = [("replay_buffer", "/"), ("trainer", "/")]
    processes.append(_container("learner", learner_nodes, respawn=False, required=True))
    return processes


_LAYOUTS = {
    "colocated": _colocated_layout,
    "decoupled": _decoupled_layout,
    "hybrid": _hybrid_layout,
}


def default_config_path() -> Path:
    """The default scenario's parameter file (``cartpole.yaml``).

    :raises PlanError: when it cannot be found.
    """
    try:
        return paths.resolve_config(DEFAULT_CONFIG)
    except FileNotFoundError as error:
        raise PlanError(str(error)) from None
