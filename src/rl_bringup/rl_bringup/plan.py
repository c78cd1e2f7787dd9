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

``robots:=auto`` (hybrid only) makes the robots elastic: the plan holds ``max_robots`` robot
processes (and ``deployment_robots = max_robots``), the supervisor starts the learner and
``min_robots`` of them and keeps the others on standby, and :mod:`rl_bringup.elastic` starts and
retires them by the rule of :mod:`rl_bringup.autoscale` (:attr:`Plan.autoscale`).

``policy_layout:=central`` replaces the per-robot policies by one central policy node ``/policy``
(parameter ``robots:=N``) that batches all robots' observations into one forward pass (SEED RL
shape): decoupled runs it as one ``policy`` process, hybrid as one ``policy`` process beside the
simulator-only robot containers, colocated as one ``policy@/`` node in the container.

Every process is respawned when it crashes. Robot processes (simulator, policy) lose at most an
episode. Processes holding the trainer or the replay buffer are also *required*: a clean exit
(the trainer's exit 0 when training is complete) ends the run with that code, while a crash
respawns them and they resume — the replay buffer from its latest snapshot, the trainer from the
newest valid checkpoint in ``output_dir`` — so the step budget continues (both need
``output_dir``, which the plan passes to them).

CPU sets (``cpus:=``, or ``cpus`` in the scenario file's ``/rl_bringup`` block) give each node
kind the CPUs it may use; a process gets the union of its nodes' sets and its torch thread count
as environment variables (:func:`cpu_environment`), which ``rl_nodes.process_settings`` applies
at process start.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import ipaddress
import os
import random
import re
import shlex
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rl_bringup import paths, robot_plan
from rl_bringup.autoscale import AutoscaleSettings, settings_from_text
from rl_core import node_kinds
from rl_core.config import LAUNCHER_NODE, ConfigError, load_yaml
from rl_core.cpus import (
    CPUS_VARIABLE,
    LEARNER_CPUS_VARIABLE,
    OMP_THREADS_VARIABLE,
    TORCH_THREADS_VARIABLE,
    available_cpus,
    format_cpu_list,
    parse_cpu_list,
)
from rl_nodes import graph
from rl_nodes.graph import robot_namespace

MODES: tuple[str, ...] = ("colocated", "decoupled", "hybrid")
NODE_KINDS: tuple[str, ...] = node_kinds.NODE_KINDS
ROBOT_NODE_KINDS: tuple[str, ...] = node_kinds.PER_ROBOT_KINDS
#: Kinds that act (step envs, infer actions) and kinds that learn; ``cpus:=auto`` splits the
#: machine's cores between the two groups.
ACTING_NODE_KINDS: tuple[str, ...] = ROBOT_NODE_KINDS
LEARNING_NODE_KINDS: tuple[str, ...] = node_kinds.LEARNING_KINDS
CONTAINER_EXECUTABLE = "container"
#: Where inference runs: a policy node per robot, or one central policy serving every robot.
POLICY_LAYOUTS: tuple[str, ...] = ("per_robot", "central")
DEFAULT_POLICY_LAYOUT = "per_robot"
CENTRAL_POLICY_NAMESPACE = "/"
NODES_PACKAGE = paths.NODES_PACKAGE
DEFAULT_CONFIG = "cartpole"
DEFAULT_DISCOVERY = "localhost"
#: No pinning: every process may run anywhere, as the operating system schedules it.
DEFAULT_CPUS = "none"
CPUS_FORMS = (
    "valid: auto, none, or KIND=LIST;KIND=LIST... with KIND one of "
    f"{', '.join(NODE_KINDS)} and LIST CPU numbers and ranges "
    "(e.g. simulator=0;policy=0;replay_buffer=1;trainer=1)"
)

MIN_ROBOTS = 1
MAX_ROBOTS = 64
#: ``robots:=auto``: an elastic robot count (hybrid mode; see the module docstring).
AUTO_ROBOTS = "auto"
# 0..101 is the range ROS 2 documents as safe on Linux: higher ids push the DDS ports into the
# ephemeral port range.
MIN_DOMAIN_ID = 0
MAX_DOMAIN_ID = 101
# The highest id DDS can map to UDP ports at all (ROS 2, "About Domain ID"). A caller's
# ROS_DOMAIN_ID is used as is up to it: their other ROS tools run in that domain already.
MAX_INHERITED_DOMAIN_ID = 232
# A per-run pick avoids 0 (the id every unconfigured ROS 2 shell uses) and 101 (the edge).
RANDOM_DOMAIN_ID_RANGE = (1, 100)

# Respawn policy shared by both front ends (launch: respawn_delay / respawn_max_retries).
RESPAWN_DELAY_S = 2.0
MAX_RESPAWNS = 5

DISCOVERY_RANGE_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
DISCOVERY_SERVER_VARIABLE = "ROS_DISCOVERY_SERVER"
PROFILES_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
#: Fast DDS profile variables a user may have set (the second is Fast DDS 2's name).
USER_PROFILES_VARIABLES = (PROFILES_VARIABLE, "FASTRTPS_DEFAULT_PROFILES_FILE")
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
    :param parameters: parameter overrides, passed as a parameter file for each node of the
        process (:meth:`overrides_file`).
    :param env: environment variables the process needs on top of the caller's environment.
    :param respawn: restart the process when it exits.
    :param required: end the whole run when the process exits.
    :param nodes: ``(kind, namespace)`` of each node a container hosts; empty for single nodes.
    :param cpus: CPUs the process may run on; ``None`` when it is not pinned.
    :param learner_cpus: CPUs of the trainer's learner thread where they differ from
        :attr:`cpus` (a process hosting acting and learning nodes); ``None`` otherwise.
    :param torch_threads: torch intra-op threads of the process; ``None`` when the plan sets
        none (no CPU sets).
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
    cpus: frozenset[int] | None = None
    learner_cpus: frozenset[int] | None = None
    torch_threads: int | None = None

    @property
    def is_container(self) -> bool:
        """Whether the process hosts several nodes given by ``--node`` arguments."""
        return bool(self.nodes)

    def hosted_nodes(self) -> list[tuple[str, str]]:
        """``(kind, namespace)`` of every node in this process (containers and single nodes)."""
        if self.nodes:
            return list(self.nodes)
        return [(os.path.basename(self.executable), self.namespace or "/")]

    def ros_arguments(self, overrides_path: str | None = None) -> list[str]:
        """The arguments after ``--ros-args``: namespace remap, parameter file, overrides.

        :param overrides_path: where the process finds :meth:`overrides_document` (a file
            mounted into a container); ``None`` writes it here (:meth:`overrides_file`).
        """
        arguments: list[str] = []
        if self.namespace not in ("", "/") and not self.is_container:
            arguments += ["-r", f"__ns:={self.namespace}"]
        if self.params_file:
            arguments += ["--params-file", self.params_file]
        if self.parameters:
            arguments += ["--params-file", overrides_path or self.overrides_file()]
        return arguments

    def overrides_document(self) -> str:
        """:attr:`parameters` as a parameter file (YAML text) with a block for each node kind of
        this process.

        ``-p name:=value`` cannot be used: rcl files it under ``/**``, and a node-specific block
        of the scenario file (``/**/trainer``) would beat it. A later file with the same
        node-specific keys wins instead.
        """
        # A copy per block: one shared list would be dumped as a YAML alias, which rcl refuses.
        document = {f"/**/{kind}": {"ros__parameters": copy.deepcopy(dict(self.parameters))}
                    for kind in sorted({kind for kind, _ in self.hosted_nodes()})}
        return yaml.safe_dump(document, sort_keys=True)

    def overrides_file(self) -> str:
        """:meth:`overrides_document` written to a temporary file; its path.

        The file is named by its content, so writing it again is harmless.
        """
        text = self.overrides_document()
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / f"rl_bringup_overrides_{digest}.yaml"
        if not path.is_file():
            temporary = path.with_name(f".{path.name}.{os.getpid()}")
            temporary.write_text(text)
            os.replace(temporary, path)
        return str(path)

    def argv(self, python_bin_dir: str | os.PathLike[str] | None = None, *,
             overrides_path: str | None = None) -> list[str]:
        """The full command line of the process.

        :param python_bin_dir: folder holding the executable (a virtualenv's ``bin`` or a colcon
            ``lib/rl_nodes``); the bare executable name, found on ``PATH``, when ``None``.
        :param overrides_path: see :meth:`ros_arguments`.
        :return: ``[program, *arguments, "--ros-args", ...]``.
        """
        program = self.executable
        if python_bin_dir is not None and not os.path.isabs(program):
            program = os.path.join(os.fspath(python_bin_dir), program)
        ros_arguments = self.ros_arguments(overrides_path)
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
            "cpus": _cpu_text(self.cpus),
            "learner_cpus": _cpu_text(self.learner_cpus),
            "torch_threads": self.torch_threads,
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
    :param cpus: the CPU setting in canonical form (``none``, ``auto`` or ``KIND=LIST;...``).
    :param cpus_source: ``"argument"``, ``"config"`` (the ``/rl_bringup`` block) or
        ``"default"``.
    :param cpu_sets: CPUs of each pinned node kind; kinds not listed are not pinned.
    :param policy_layout: one of :data:`POLICY_LAYOUTS`.
    :param autoscale: the elastic range and rule of ``robots:=auto``; ``None`` for a fixed
        count. :attr:`robots` is then ``max_robots``.
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
    cpus: str = DEFAULT_CPUS
    cpus_source: str = "default"
    cpu_sets: dict[str, frozenset[int]] = field(default_factory=dict)
    policy_layout: str = DEFAULT_POLICY_LAYOUT
    autoscale: AutoscaleSettings | None = None

    def elastic_robot_processes(self) -> list[str]:
        """Names of the robot processes an elastic run starts and retires, robot 0 first;
        empty for a fixed robot count."""
        if self.autoscale is None:
            return []
        return [robot_process_name(robot) for robot in range(self.robots)]

    def standby_processes(self) -> list[str]:
        """Processes the supervisor does not start with the run (robots past ``min_robots``)."""
        if self.autoscale is None:
            return []
        return self.elastic_robot_processes()[self.autoscale.min_robots:]

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

    def robots_text(self) -> str:
        """``3 robot(s)``, or ``robots auto (1..4)`` for an elastic count."""
        if self.autoscale is None:
            return f"{self.robots} robot(s)"
        return f"robots auto ({self.autoscale.min_robots}..{self.autoscale.max_robots})"

    def header_lines(self) -> list[str]:
        """What both front ends print before a run starts: layout, domain id and where it came
        from, how to attach tools, and the notes."""
        source = {
            "argument": "given",
            "environment": "from your ROS_DOMAIN_ID, as is",
            "random": "no ROS_DOMAIN_ID set: picked at random for this run",
        }[self.domain_id_source]
        return [
            f"mode {self.mode}, {self.robots_text()}, config {self.config_file}",
            *([f"autoscale settings: {self.autoscale.describe()}"] if self.autoscale else []),
            f"ROS_DOMAIN_ID={self.domain_id} ({source})",
            f"attach ROS tools (ros2 topic, rviz2, rqt) with: {self.attach_command()}",
            *(f"note: {note}" for note in self.notes),
        ]

    def to_dict(self) -> dict[str, Any]:
        """A plain, YAML-friendly description of the plan."""
        return {
            "mode": self.mode,
            "robots": self.robots,
            "policy_layout": self.policy_layout,
            "config_file": self.config_file,
            "domain_id": self.domain_id,
            "domain_id_source": self.domain_id_source,
            "discovery": self.discovery,
            "environment": dict(self.environment),
            "notes": list(self.notes),
            "cpus": {
                "setting": self.cpus,
                "source": self.cpus_source,
                "sets": {kind: format_cpu_list(cpus) for kind, cpus in self.cpu_sets.items()},
            },
            "autoscale": (dataclasses.asdict(self.autoscale) if self.autoscale is not None
                          else None),
            "processes": [process.to_dict() for process in self.processes],
        }


def format_parameter_value(value: Any) -> str:
    """Render a parameter value as ROS command-line text (the ``value`` of ``name:=value``); the
    plan also calls it to refuse values no ROS 2 parameter can hold.

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


def parse_elastic_robots(
    mode: str, robots: int | str, policy_layout: str, autoscale: Mapping[str, Any] | None,
    machine_cpus: Iterable[int] | None,
) -> tuple[int, AutoscaleSettings | None]:
    """The robot count of the plan and the autoscaler's settings when ``robots`` is ``auto``.

    :param autoscale: ``min_robots``, ``max_robots`` and ``autoscale_<setting>`` values (text or
        numbers); only with ``robots:=auto``. ``max_robots`` defaults to the run's CPU count.
    :raises PlanError: for a fixed count out of range, ``auto`` outside hybrid per-robot mode,
        or settings without ``auto``.
    """
    given = {key: value for key, value in (autoscale or {}).items()
             if value is not None and str(value).strip() != ""}
    if str(robots).strip().lower() != AUTO_ROBOTS:
        if given:
            raise PlanError(f"{', '.join(sorted(given))} need robots:={AUTO_ROBOTS}")
        return parse_robots(robots), None
    if mode != "hybrid" or policy_layout != DEFAULT_POLICY_LAYOUT:
        raise PlanError(
            f"robots:={AUTO_ROBOTS} scales hybrid deployments with a policy in each robot "
            f"process (mode hybrid, policy_layout {DEFAULT_POLICY_LAYOUT}); got mode {mode}, "
            f"policy_layout {policy_layout}")
    machine = frozenset(machine_cpus) if machine_cpus is not None else available_cpus()
    try:
        settings = settings_from_text({key: str(value) for key, value in given.items()},
                                      default_max_robots=min(MAX_ROBOTS, len(machine)))
    except ValueError as error:
        raise PlanError(str(error)) from None
    if settings.max_robots > MAX_ROBOTS:
        raise PlanError(f"max_robots must be at most {MAX_ROBOTS}, got {settings.max_robots}")
    return settings.max_robots, settings


def parse_domain_id(value: int | str, source: str = "domain_id",
                    maximum: int = MAX_DOMAIN_ID) -> int:
    """Validate a ROS domain id given as int or text.

    :param value: the value.
    :param source: what the value came from, for the error message.
    :param maximum: the highest id accepted (:data:`MAX_INHERITED_DOMAIN_ID` for the caller's
        ``ROS_DOMAIN_ID``).
    :raises PlanError: when it is not an integer in ``MIN_DOMAIN_ID..maximum``.
    """
    message = f"{source} must be an integer from {MIN_DOMAIN_ID} to {maximum}, got {value!r}"
    if isinstance(value, bool):
        raise PlanError(message)
    try:
        domain_id = value if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise PlanError(message) from None
    if not MIN_DOMAIN_ID <= domain_id <= maximum:
        raise PlanError(message)
    return domain_id


def discovery_environment(discovery: str, environ: Mapping[str, str] | None = None
                          ) -> tuple[dict[str, str], list[str]]:
    """Environment variables and notes for a discovery setting.

    * ``localhost`` (default): ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``; nothing leaves the
      machine (docs/architecture.md, "Network safety").
    * ``subnet``: ``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``; multicast discovery on the local
      subnet, an explicit multi-host choice.
    * ``server:HOST:PORT``: ``ROS_DISCOVERY_SERVER=HOST:PORT`` and the range left to the
      middleware (``SYSTEM_DEFAULT``): Fast DDS then runs as a discovery-server client that
      discovers by unicast to the server only. (In tests across network namespaces a client
      with a ``LOCALHOST`` range still reached the server, but what the range means with a
      discovery server is the middleware's business, so the plan states none.)

    Both multi-host settings also set ``FASTDDS_DEFAULT_PROFILES_FILE`` to
    ``config/fastdds_multihost.xml``: UDPv4 with non-blocking sends, so that a process whose link
    drops keeps running (see the file). A Fast DDS profile the user set in ``environ`` (default
    ``os.environ``) is kept instead, with a note.

    :raises PlanError: naming the valid forms.
    """
    environ = os.environ if environ is None else environ
    valid = "valid: localhost, subnet, server:HOST:PORT (e.g. server:127.0.0.1:11811)"
    text = discovery.strip()
    lowered = text.lower()
    if lowered == "localhost":
        return {DISCOVERY_RANGE_VARIABLE: "LOCALHOST"}, []
    if lowered == "subnet":
        profile, notes = _multihost_profile(environ)
        return {DISCOVERY_RANGE_VARIABLE: "SUBNET", **profile}, [
            "discovery:=subnet: DDS discovery multicasts on the local subnet (multi-host); "
            "use it only on a network meant for this run", *notes
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
        profile, notes = _multihost_profile(environ)
        environment = {
            DISCOVERY_SERVER_VARIABLE: f"{host}:{port}",
            DISCOVERY_RANGE_VARIABLE: "SYSTEM_DEFAULT",
            **profile,
        }
        return environment, [
            f"discovery:={text}: start the Fast DDS discovery server first, on {host}: "
            f"{shlex.join(discovery_server_argv(host, port))}",
            f"tools attaching to this run need {DISCOVERY_SERVER_VARIABLE}={host}:{port} "
            f"(and ROS_SUPER_CLIENT=TRUE for ros2 topic list / rqt_graph)",
            *notes,
        ]
    raise PlanError(f"bad discovery {discovery!r}; {valid}")


def _multihost_profile(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``FASTDDS_DEFAULT_PROFILES_FILE`` of multi-host discovery settings, or, when ``environ``
    holds a profile of the user's, nothing and a note."""
    try:
        profile = str(paths.fastdds_multihost_profile())
    except FileNotFoundError as error:
        raise PlanError(str(error)) from None
    users = [name for name in USER_PROFILES_VARIABLES if environ.get(name)]
    if not users:
        return {PROFILES_VARIABLE: profile}, []
    return {}, [
        f"{users[0]} is set in your environment: your Fast DDS profile is kept instead of "
        f"{profile}; give its UDP transport <non_blocking_send>true</non_blocking_send>, or a "
        f"robot whose link drops stops inside its next publish until the link returns"
    ]


def discovery_server_argv(listen_address: str, port: int) -> list[str]:
    """The command line of a Fast DDS discovery server (server id 0, the first and only entry of
    ``ROS_DISCOVERY_SERVER``) listening on ``listen_address:port`` over UDP."""
    return ["fastdds", "discovery", "-i", "0", "-l", listen_address, "-p", str(port)]


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
        return (parse_domain_id(inherited, source=source, maximum=MAX_INHERITED_DOMAIN_ID),
                "environment")
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


def _cpu_text(cpus: frozenset[int] | None) -> str | None:
    """A CPU set as a CPU list (``"0-1"``), ``None`` for "not pinned"."""
    return None if cpus is None else format_cpu_list(cpus)


def split_cores(cores: Iterable[int]) -> tuple[frozenset[int], frozenset[int]]:
    """The ``cpus:=auto`` rule: the machine's cores split into ``(acting, learning)`` sets.

    With one core both groups share it. With n >= 2 cores learning gets the upper ceil(n/2)
    cores and acting the lower floor(n/2): 2 cores give acting {0} and learning {1}, 3 give {0}
    and {1, 2}, 4 give {0, 1} and {2, 3}. Learning gets the larger half because it is the side
    that can use more cores: a SAC update (forward and backward passes of actor and critics on a
    batch) runs torch's intra-op threads, while acting is a Python loop of small steps and
    single-batch inference that a second core barely speeds up. Disjoint halves keep the
    learner's OpenMP threads from spinning on the cores the acting loop needs.

    :param cores: the CPUs to split (the planning process's affinity); at least one.
    :raises PlanError: for an empty set.
    """
    ordered = sorted(set(cores))
    if not ordered:
        raise PlanError("no CPU to split between acting and learning nodes")
    if len(ordered) == 1:
        return frozenset(ordered), frozenset(ordered)
    acting_count = len(ordered) // 2
    return frozenset(ordered[:acting_count]), frozenset(ordered[acting_count:])


def _cpu_list_of(value: Any, where: str, machine_cpus: frozenset[int]) -> frozenset[int]:
    """A CPU set from a CPU list text, a CPU number or a list of CPU numbers (YAML), checked
    against the CPUs of the machine."""
    if isinstance(value, (list, tuple)) and value:
        value = ",".join(str(item) for item in value)
    if isinstance(value, bool) or not isinstance(value, (str, int, list, tuple)):
        raise PlanError(f"bad CPU list {value!r} for {where}; {CPUS_FORMS}")
    try:
        cpus = parse_cpu_list(str(value))
    except ValueError as error:
        raise PlanError(f"{where}: {error}; {CPUS_FORMS}") from None
    if missing := cpus - machine_cpus:
        raise PlanError(
            f"{where}: CPU {format_cpu_list(missing)} not available; this machine offers CPUs "
            f"{format_cpu_list(machine_cpus)}"
        )
    return cpus


def cpu_sets(
    setting: str | Mapping[str, Any], machine_cpus: Iterable[int] | None = None
) -> tuple[str, dict[str, frozenset[int]]]:
    """Parse a CPU setting into its canonical text and the CPUs of each pinned node kind.

    :param setting: ``none`` (no pinning), ``auto`` (:func:`split_cores`), ``KIND=LIST;...``
        (``simulator=0;policy=0;replay_buffer=1;trainer=1``), or a mapping ``{KIND: LIST}`` as
        the ``/rl_bringup`` block of a scenario file holds it. Kinds left out are not pinned.
    :param machine_cpus: the CPUs the run may use (the planning process's affinity when
        ``None``); every listed CPU must be one of them.
    :return: ``(text, {kind: cpus})``; an empty mapping for ``none``.
    :raises PlanError: for unknown kinds, malformed lists or unavailable CPUs, naming the valid
        forms.
    """
    machine = frozenset(machine_cpus) if machine_cpus is not None else available_cpus()
    if isinstance(setting, Mapping):
        entries = [(str(kind).strip(), value) for kind, value in setting.items()]
        if not entries:
            raise PlanError(f"empty cpus mapping; {CPUS_FORMS}")
    else:
        text = str(setting).strip()
        if text.lower() == "none":
            return "none", {}
        if text.lower() == "auto":
            acting, learning = split_cores(machine)
            sets = {kind: acting for kind in ACTING_NODE_KINDS}
            sets.update((kind, learning) for kind in LEARNING_NODE_KINDS)
            return "auto", sets
        entries = []
        for item in text.split(";"):
            if not item.strip():
                continue  # tolerate a trailing ';'
            kind, separator, value = item.partition("=")
            if not separator:
                raise PlanError(f"bad cpus entry {item.strip()!r} in {text!r}; {CPUS_FORMS}")
            entries.append((kind.strip(), value.strip()))
        if not entries:
            raise PlanError(f"bad cpus {text!r}; {CPUS_FORMS}")
    sets: dict[str, frozenset[int]] = {}
    for kind, value in entries:
        if kind not in NODE_KINDS:
            raise PlanError(f"unknown node kind {kind!r} in cpus; {CPUS_FORMS}")
        if kind in sets:
            raise PlanError(f"node kind {kind!r} is given twice in cpus; {CPUS_FORMS}")
        sets[kind] = _cpu_list_of(value, f"cpus of {kind}", machine)
    ordered = {kind: sets[kind] for kind in NODE_KINDS if kind in sets}
    canonical = ";".join(f"{kind}={format_cpu_list(cpus)}" for kind, cpus in ordered.items())
    return canonical, ordered


def _config_cpus(config_file: str) -> Any | None:
    """The ``cpus`` setting of the scenario file's ``/rl_bringup`` block; ``None`` without one.

    The block has the shape of a node's parameters so that rcl's parameter-file parser accepts
    the file; it configures the plan, not a node (:data:`rl_core.config.LAUNCHER_NODE`).
    """
    try:
        document = load_yaml(config_file)
    except ConfigError as error:
        raise PlanError(str(error)) from None
    settings: dict[str, Any] = {}
    for key, block in document.items():
        # Same rule as rl_core.config: the last name of the key is the node (/**/x names x).
        if str(key).strip("/").split("/")[-1] != LAUNCHER_NODE:
            continue
        parameters = block.get("ros__parameters") if isinstance(block, Mapping) else None
        if not isinstance(parameters, Mapping):
            raise PlanError(
                f"block {key!r} of {config_file} must contain a 'ros__parameters' mapping"
            )
        settings.update(parameters)
    if unknown := sorted(set(settings) - {"cpus"}):
        raise PlanError(
            f"unknown setting(s) {unknown} in the /{LAUNCHER_NODE} block of {config_file}; "
            f"valid: cpus"
        )
    if "cpus" in settings and settings["cpus"] is None:
        raise PlanError(f"cpus in the /{LAUNCHER_NODE} block of {config_file} is empty; "
                        f"{CPUS_FORMS}")
    return settings.get("cpus")


def _choose_cpus(
    cpus: str | None, config_file: str, machine_cpus: Iterable[int] | None
) -> tuple[str, str, dict[str, frozenset[int]]]:
    """The CPU setting of a run and where it came from (argument, scenario file, default)."""
    if cpus is not None and str(cpus).strip() != "":
        text, sets = cpu_sets(str(cpus), machine_cpus)
        return text, "argument", sets
    configured = _config_cpus(config_file)
    if configured is not None:
        text, sets = cpu_sets(configured, machine_cpus)
        return text, "config", sets
    return DEFAULT_CPUS, "default", {}


def assign_cpus(process: ProcessSpec, sets: Mapping[str, frozenset[int]]) -> None:
    """Set the CPU fields of ``process`` from the CPUs of each node kind.

    * ``cpus``: the union of its nodes' sets; ``None`` (not pinned) when one of its nodes is
      not pinned.
    * ``torch_threads``: the size of the trainer's set in the process hosting the trainer, 1
      elsewhere (acting needs no intra-op parallelism, and idle OpenMP workers spin against the
      other processes).
    * ``learner_cpus``: the trainer's set where it differs from ``cpus`` (colocated: the
      learner thread pins itself apart from the acting loop).

    :param sets: CPUs per pinned kind (:func:`cpu_sets`); empty means no CPU settings at all.
    """
    if not sets:
        process.cpus = process.learner_cpus = process.torch_threads = None
        return
    kinds = {kind for kind, _ in process.hosted_nodes()}
    if all(kind in sets for kind in kinds):
        process.cpus = frozenset().union(*(sets[kind] for kind in kinds))
    else:
        process.cpus = None
    trainer_cpus = sets.get("trainer") if "trainer" in kinds else None
    process.torch_threads = len(trainer_cpus) if trainer_cpus else 1
    process.learner_cpus = trainer_cpus if trainer_cpus != process.cpus else None


def cpu_environment(process: ProcessSpec) -> dict[str, str]:
    """The environment variables that carry the CPU fields of ``process`` to it."""
    environment: dict[str, str] = {}
    if process.cpus is not None:
        environment[CPUS_VARIABLE] = format_cpu_list(process.cpus)
    if process.learner_cpus is not None:
        environment[LEARNER_CPUS_VARIABLE] = format_cpu_list(process.learner_cpus)
    if process.torch_threads is not None:
        environment[TORCH_THREADS_VARIABLE] = str(process.torch_threads)
        # OpenMP (torch's and the BLAS libraries' pools) sizes itself from this at start.
        environment[OMP_THREADS_VARIABLE] = str(process.torch_threads)
    return environment



def _plan_environment(discovery: str, domain_id: int | str | None, environ: Mapping[str, str],
                      rng: random.Random | None) -> tuple[dict[str, str], int, str, list[str]]:
    """The environment every process shares (domain id, RMW, discovery), the chosen domain id
    and where it came from, and the notes the choice raises."""
    discovery_env, notes = discovery_environment(str(discovery), environ)
    chosen_domain_id, domain_id_source = _choose_domain_id(domain_id, environ, rng)
    if chosen_domain_id > MAX_DOMAIN_ID:
        notes.append(
            f"{DOMAIN_ID_VARIABLE}={chosen_domain_id} is above {MAX_DOMAIN_ID}: its DDS ports lie "
            f"in Linux's ephemeral port range and may clash with other programs' ports"
        )
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
    return environment, chosen_domain_id, domain_id_source, notes


def _configure_processes(processes: list[ProcessSpec], config_file: str,
                         shared_parameters: Mapping[str, Any],
                         trainer_parameters: Mapping[str, Any], robot_count: int,
                         sets: Mapping[str, frozenset[int]],
                         environment: Mapping[str, str]) -> None:
    """Give each process of a layout its parameter file, parameters, CPUs and environment."""
    for process in processes:
        process.params_file = config_file
        hosts_learning = any(kind in ("trainer", "replay_buffer")
                             for kind, _ in process.hosted_nodes())
        # The layout's own parameters (the central policy's robots:=N) win over the shared ones.
        process.parameters = {
            **(trainer_parameters if hosts_learning else shared_parameters),
            **({"deployment_robots": robot_count} if hosts_learning else {}),
            **process.parameters,
        }
        assign_cpus(process, sets)
        process.env = {**environment, **cpu_environment(process)}


def _sim_robot_processes(sim_robots: list[dict[str, Any]], environment: Mapping[str, str],
                         notes: list[str]) -> list[ProcessSpec]:
    """A sim_robot process per robot (robot_interface:=ros2_control with sim_robot:=true)."""
    processes = [ProcessSpec(name=f"sim_robot_robot_{robot}", executable=graph.SIM_ROBOT,
                             namespace=robot_namespace(robot), parameters=parameters,
                             respawn=True, env=dict(environment))
                 for robot, parameters in enumerate(sim_robots)]
    if processes:
        notes.append(f"robot_interface:=ros2_control: {len(processes)} sim_robot process"
                     f"{'es' if len(processes) > 1 else ''} ({robot_plan.SIM_ROBOT_MODE}) behind "
                     "ros2_control's topics; sim_robot:=false to bring your own robots")
    return processes


def make_plan(
    mode: str,
    robots: int | str = 1,
    config: str | os.PathLike[str] = DEFAULT_CONFIG,
    output_dir: str | os.PathLike[str] | None = None,
    domain_id: int | str | None = None,
    discovery: str = DEFAULT_DISCOVERY,
    extra_parameters: Mapping[str, Any] | None = None,
    cpus: str | None = None,
    policy_layout: str = DEFAULT_POLICY_LAYOUT,
    autoscale: Mapping[str, Any] | None = None,
    robot_interface: str | None = None,
    sim_robot: bool | str = True,
    task: str | None = None,
    use_sim_time: bool | str = False,
    *,
    environ: Mapping[str, str] | None = None,
    rng: random.Random | None = None,
    machine_cpus: Iterable[int] | None = None,
) -> Plan:
    """Build the deployment plan.

    Text values are accepted for every argument (launch arguments and ``key:=value`` command-line
    arguments arrive as text); empty ``output_dir`` / ``domain_id`` mean "not given".

    :param mode: one of :data:`MODES`.
    :param robots: number of robots, ``MIN_ROBOTS..MAX_ROBOTS``, or ``auto`` (hybrid only): an
        elastic count between ``min_robots`` and ``max_robots`` (see ``autoscale``).
    :param config: parameter file: a path or a name in the config folder (``cartpole``).
    :param output_dir: where the trainer writes checkpoints and results (the ``output_dir``
        parameter of the learning processes);
        the trainer's own default when ``None``. Made absolute so every process agrees on it.
    :param domain_id: ROS_DOMAIN_ID; when ``None``, the caller's ``ROS_DOMAIN_ID`` as is (up to
        :data:`MAX_INHERITED_DOMAIN_ID`, with a note above :data:`MAX_DOMAIN_ID`), else a random
        pick in :data:`RANDOM_DOMAIN_ID_RANGE`.
    :param discovery: ``localhost``, ``subnet`` or ``server:HOST:PORT``
        (see :func:`discovery_environment`).
    :param extra_parameters: parameter overrides for every process (see
        :meth:`Process.overrides_file`).
    :param cpus: CPU sets per node kind, ``none``, ``auto`` or ``KIND=LIST;...`` (see
        :func:`cpu_sets`); when ``None`` or empty, the ``cpus`` of the scenario file's
        ``/rl_bringup`` block, else :data:`DEFAULT_CPUS`.
    :param policy_layout: ``per_robot`` (a policy node per robot, in its namespace) or
        ``central`` (one policy node ``/policy`` with ``robots:=N`` serving every robot with
        batched inference; see the module docstring for where each mode puts it).
    :param autoscale: with ``robots:=auto``: ``min_robots``, ``max_robots`` and
        ``autoscale_<setting>`` values (:func:`parse_elastic_robots`).
    :param robot_interface: ``in_process`` or ``ros2_control`` (the simulators drive robots
        through ros2_control's topics); ``None``: the scenario file's, else ``in_process``.
    :param sim_robot: with ros2_control, start a pybullet ``sim_robot`` per robot
        (:mod:`rl_bringup.robot_plan`); false: the robots come from elsewhere.
    :param task: the task every node learns (their ``env_id``): a gymnasium id or a task's
        entry point ``module:TaskClass``; ``None``: the scenario file's.
    :param use_sim_time: every node follows ``/clock`` (robot 0's sim_robot publishes it).
    :param environ: the caller's environment (``os.environ`` when ``None``); read for
        ``ROS_DOMAIN_ID`` and for variables that would contradict the plan.
    :param rng: random generator for the domain-id pick (tests pass a seeded one).
    :param machine_cpus: the CPUs the run may use (the planning process's affinity when
        ``None``); ``auto`` splits them and listed CPUs must be among them.
    :return: the plan.
    :raises PlanError: on invalid input, naming the valid choices.
    """
    environ = os.environ if environ is None else environ
    mode_text = str(mode).strip().lower()
    if mode_text not in MODES:
        raise PlanError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    layout_text = str(policy_layout).strip().lower()
    if layout_text not in POLICY_LAYOUTS:
        raise PlanError(
            f"unknown policy_layout {policy_layout!r}; valid: {', '.join(POLICY_LAYOUTS)}"
        )
    robot_count, autoscale_settings = parse_elastic_robots(mode_text, robots, layout_text,
                                                           autoscale, machine_cpus)
    try:
        config_file = str(paths.resolve_config(config))
    except FileNotFoundError as error:
        raise PlanError(str(error)) from None
    environment, chosen_domain_id, domain_id_source, notes = _plan_environment(
        discovery, domain_id, environ, rng)
    cpus_text, cpus_source, sets = _choose_cpus(cpus, config_file, machine_cpus)

    shared_parameters = _check_parameters(extra_parameters or {})
    try:
        shared_parameters.update(robot_plan.shared_overrides(robot_interface, task, use_sim_time))
        sim_robots = robot_plan.sim_robots(config_file, shared_parameters, robot_count, sim_robot)
    except ConfigError as error:
        raise PlanError(str(error)) from None
    trainer_parameters = dict(shared_parameters)
    if output_dir is not None and str(output_dir).strip() != "":
        absolute = os.path.abspath(os.path.expanduser(os.fspath(output_dir)))
        trainer_parameters["output_dir"] = absolute

    layout = _LAYOUTS[mode_text]
    processes = layout(robot_count, layout_text == "central")
    if layout_text == "central":
        notes.append(
            f"policy_layout:=central: one policy node /policy serves /robot_0 .. "
            f"/robot_{robot_count - 1} (batched inference); its get_action service is "
            f"{graph.service_name(graph.GET_ACTION)}"
        )
    _configure_processes(processes, config_file, shared_parameters, trainer_parameters,
                         robot_count, sets, environment)
    processes += _sim_robot_processes(sim_robots, environment, notes)
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
        cpus=cpus_text,
        cpus_source=cpus_source,
        cpu_sets=sets,
        policy_layout=layout_text,
        autoscale=autoscale_settings,
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


def _robot_nodes(robot: int, central: bool = False) -> list[tuple[str, str]]:
    """The per-robot nodes of robot ``robot``: its simulator, and its policy unless central."""
    kinds = ("simulator",) if central else ROBOT_NODE_KINDS
    return [(kind, robot_namespace(robot)) for kind in kinds]


def _central_policy_parameters(robots: int) -> dict[str, Any]:
    """Parameters that turn the policy node into the central policy of ``robots`` robots."""
    return {"robots": robots}


def _central_policy_process(robots: int) -> ProcessSpec:
    """The central policy as a process of its own: ``policy`` in ``/``, respawned like robots."""
    return ProcessSpec(
        name="policy",
        executable="policy",
        namespace=CENTRAL_POLICY_NAMESPACE,
        parameters=_central_policy_parameters(robots),
        respawn=True,
    )


def _colocated_layout(robots: int, central: bool = False) -> list[ProcessSpec]:
    """One container with every node; it holds the trainer, so it is required.

    Central: the simulators, one ``policy@/`` with ``robots:=N``, replay_buffer and trainer. The
    container's parameter overrides reach every node kind in it; only the policy declares
    ``robots``, the other nodes leave it unused.
    """
    nodes = [node for robot in range(robots) for node in _robot_nodes(robot, central)]
    if central:
        nodes.append(("policy", CENTRAL_POLICY_NAMESPACE))
    nodes += [("replay_buffer", "/"), ("trainer", "/")]
    container = _container("container", nodes, respawn=True, required=True)
    if central:
        container.parameters = _central_policy_parameters(robots)
    return [container]


def _decoupled_layout(robots: int, central: bool = False) -> list[ProcessSpec]:
    """One process per node; every process respawns, replay_buffer and trainer are also required.

    A respawned replay buffer reloads its latest snapshot and a respawned trainer resumes from
    its newest checkpoint (both in ``output_dir``); a clean exit of either ends the run. Central: one
    ``policy`` process (respawned: the simulators' watchdogs resend what it missed) instead of
    one per robot.
    """
    processes = [
        ProcessSpec(
            name=f"{kind}_robot_{robot}",
            executable=kind,
            namespace=namespace,
            respawn=True,
        )
        for robot in range(robots)
        for kind, namespace in _robot_nodes(robot, central)
    ]
    if central:
        processes.append(_central_policy_process(robots))
    for kind in ("replay_buffer", "trainer"):
        processes.append(ProcessSpec(name=kind, executable=kind, namespace="/", respawn=True,
                                     required=True))
    return processes


def robot_process_name(robot: int) -> str:
    """The hybrid process of robot ``robot`` (its simulator and policy)."""
    return f"robot_{robot}"


def _hybrid_layout(robots: int, central: bool = False) -> list[ProcessSpec]:
    """Per robot one respawning container, one required learner container.

    Central: the robot containers hold only their simulators, and the central policy runs in a
    process of its own rather than in the learner container, because

    * the trainer's gradient steps would hold the learner process' GIL and delay every robot's
      actions, and a 2-core machine cannot hide that;
    * a policy crash would restart the learner with it (the whole process respawns); alone, it
      respawns like the robot processes, and the simulators' watchdogs resend what it missed;
    * it gains nothing from the learner's zero-copy channel: the observations of every robot
      cross DDS anyway, and the weights come over the latched ``/policy_weights`` a few times
      a second;
    * CPU sets pin it with the acting kinds, apart from the learning ones.
    """
    processes = [
        _container(robot_process_name(robot), _robot_nodes(robot, central), respawn=True,
                   required=False)
        for robot in range(robots)
    ]
    if central:
        processes.append(_central_policy_process(robots))
    learner_nodes = [("replay_buffer", "/"), ("trainer", "/")]
    processes.append(_container("learner", learner_nodes, respawn=True, required=True))
    return processes


_LAYOUTS = {
    "colocated": _colocated_layout,
    "decoupled": _decoupled_layout,
    "hybrid": _hybrid_layout,
}
