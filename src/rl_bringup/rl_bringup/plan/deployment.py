"""The deployment plan: mode, robots, config -> the processes to start and their environment.

The single source of truth for both front ends: the ``launch/*.launch.py`` files (through
:mod:`rl_bringup.launch_helpers`) and the ``rl-bringup`` supervisor turn the same :class:`Plan`
into running processes. It imports neither rclpy nor launch, so it is unit-tested with plain
pytest. :func:`make_plan` puts together one module per concern of :mod:`rl_bringup.plan`:
:mod:`.layouts` (which process hosts which node), :mod:`.discovery` (domain id and DDS
discovery), :mod:`.cpu_sets` (CPUs and torch threads), :mod:`.parameter_overrides` (the
parameters on top of the scenario file) and :mod:`.robot_plan` (``sim_robot`` processes).
:class:`ProcessSpec` and :class:`PlanError` live in the leaf module :mod:`.process_spec`, which
those modules import; callers import them from here.

``robots:=auto`` (hybrid only) plans ``max_robots`` robot processes; the supervisor starts
``min_robots`` of them and :mod:`rl_bringup.run.elastic` the others as they pay
(:attr:`Plan.autoscale`).
"""

from __future__ import annotations

import dataclasses
import os
import random
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from rl_bringup.plan import paths, robot_plan
from rl_bringup.plan.autoscale import AutoscaleSettings, settings_from_text
from rl_bringup.plan.cpu_sets import DEFAULT_CPUS, assign_cpus, choose_cpus, cpu_environment
from rl_bringup.plan.discovery import (
    CALLER_DISCOVERY,
    DISCOVERY_RANGE_VARIABLE,
    DISCOVERY_SERVER_VARIABLE,
    DOMAIN_ID_VARIABLE,
    run_environment,
)
from rl_bringup.plan.layouts import (
    DEFAULT_POLICY_LAYOUT,
    MODES,
    POLICY_LAYOUTS,
    central_policy_note,
    layout_processes,
    parse_namespace,
    place_in_namespace,
    robot_process_name,
    sim_robot_processes,
)
from rl_bringup.plan.parameter_overrides import learning_overrides, node_overrides
from rl_bringup.plan.process_spec import PlanError, ProcessSpec
from rl_bringup.plan.robot_plan import parse_flag
from rl_core.config import ConfigError
from rl_core.learning.cpus import available_cpus, format_cpu_list

DEFAULT_CONFIG = "cartpole"
MIN_ROBOTS = 1
MAX_ROBOTS = 64
#: ``robots:=auto``: an elastic robot count (hybrid mode; see the module docstring).
AUTO_ROBOTS = "auto"

# Respawn policy shared by both front ends (launch: respawn_delay / respawn_max_retries).
RESPAWN_DELAY_S = 2.0
MAX_RESPAWNS = 5


@dataclass
class Plan:
    """A whole deployment: the processes and the environment they share.

    :param mode: one of :data:`MODES`.
    :param robots: number of robots.
    :param config_file: absolute path of the parameter file every process loads.
    :param processes: the processes to start, in start order.
    :param environment: variables every process gets (also copied into each ``ProcessSpec.env``).
    :param domain_id: the ROS_DOMAIN_ID of the run.
    :param domain_id_source: ``"argument"``, ``"environment"``, ``"random"`` or
        ``"ros_default"``.
    :param discovery: the discovery setting as given (``environment``, ``localhost``,
        ``subnet``, ``server:HOST:PORT``).
    :param notes: things the user must know to run or attach to the deployment.
    :param cpus: the CPU setting in canonical form (``none``, ``auto`` or ``KIND=LIST;...``).
    :param cpus_source: ``"argument"``, ``"config"`` (the ``/rl_bringup`` block) or
        ``"default"``.
    :param cpu_sets: CPUs of each pinned node kind; kinds not listed are not pinned.
    :param policy_layout: one of :data:`POLICY_LAYOUTS`.
    :param autoscale: the elastic range and rule of ``robots:=auto``; ``None`` for a fixed
        count. :attr:`robots` is then ``max_robots``.
    :param namespace: the deployment's namespace (``/`` for none; :func:`parse_namespace`).
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
    namespace: str = "/"

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
            "random": "no ROS_DOMAIN_ID set: rl-bringup picked one at random for this run, so "
                      "that its runs stay apart; export ROS_DOMAIN_ID or give domain_id:= to "
                      "choose",
            "ros_default": "no ROS_DOMAIN_ID set: ROS's default",
        }[self.domain_id_source]
        return [
            f"mode {self.mode}, {self.robots_text()}, config {self.config_file}"
            + (f", namespace {self.namespace}" if self.namespace != "/" else ""),
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
            "namespace": self.namespace,
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


def make_plan(
    mode: str,
    robots: int | str = 1,
    config: str | os.PathLike[str] = DEFAULT_CONFIG,
    output_dir: str | os.PathLike[str] | None = None,
    domain_id: int | str | None = None,
    discovery: str = CALLER_DISCOVERY,
    extra_parameters: Mapping[str, Any] | None = None,
    cpus: str | None = None,
    policy_layout: str = DEFAULT_POLICY_LAYOUT,
    autoscale: Mapping[str, Any] | None = None,
    robot_interface: str | None = None,
    sim_robot: bool | str = True,
    task: str | None = None,
    use_sim_time: bool | str = False,
    namespace: str | None = None,
    log_level: str | None = None,
    params_file: str | os.PathLike[str] | None = None,
    autostart: bool | str = True,
    *,
    environ: Mapping[str, str] | None = None,
    rng: random.Random | None = None,
    machine_cpus: Iterable[int] | None = None,
    random_domain: bool = True,
) -> Plan:
    """Build the deployment plan.

    Every argument may be text (as launch and ``key:=value`` arguments arrive); empty
    ``output_dir`` / ``domain_id`` mean "not given".

    :param mode: one of :data:`MODES`.
    :param robots: number of robots, ``MIN_ROBOTS..MAX_ROBOTS``, or ``auto`` (hybrid only): an
        elastic count between ``min_robots`` and ``max_robots`` (see ``autoscale``).
    :param config: parameter file: a path or a name in the config folder (``cartpole``).
    :param output_dir: the learning processes' ``output_dir`` (made absolute); ``None``: the
        trainer's own default.
    :param domain_id: ROS_DOMAIN_ID; ``None``: the caller's (at most ``MAX_INHERITED_DOMAIN_ID``),
        else a random pick or ROS's default 0 (``random_domain``;
        :func:`.discovery.run_environment`).
    :param discovery: ``environment`` (the caller's discovery variables, else loopback only),
        ``localhost``, ``subnet`` or ``server:HOST:PORT`` (:mod:`.discovery`).
    :param extra_parameters: parameter overrides (:meth:`ProcessSpec.overrides_file`).
    :param cpus: ``none``, ``auto`` or ``KIND=LIST;...`` (:func:`.cpu_sets.cpu_sets`);
        ``None`` or empty: the scenario file's ``/rl_bringup`` block, else :data:`DEFAULT_CPUS`.
    :param policy_layout: ``per_robot`` (a policy node per robot) or ``central`` (one
        ``/policy`` batching every robot's inference; placed by :mod:`.layouts`).
    :param autoscale: with ``robots:=auto``: ``min_robots``, ``max_robots`` and
        ``autoscale_<setting>`` values (:func:`parse_elastic_robots`).
    :param robot_interface: ``in_process`` or ``ros2_control`` (the simulators drive robots
        through ros2_control's topics); ``None``: the scenario file's, else ``in_process``.
    :param sim_robot: with ros2_control, start a pybullet ``sim_robot`` per robot
        (:mod:`.robot_plan`); false: the robots come from elsewhere.
    :param task: the task every node learns (their ``env_id``): a gymnasium id or a task's
        entry point ``module:TaskClass``; ``None``: the scenario file's.
    :param use_sim_time: every node follows ``/clock`` (robot 0's sim_robot publishes it).
    :param namespace: put the whole deployment under this namespace (robot k in
        ``/NS/robot_k``, the learner nodes in ``/NS``, the shared topics remapped under it), so
        that deployments share a domain; ``None`` or empty: none.
    :param log_level: rcl's log level of every node (``debug``, ``info``, ``warn``, ``error``,
        ``fatal``); ``None`` or empty: rcl's default.
    :param params_file: a parameter file of the caller's, layered over ``config`` (key:=value
        overrides still win); ``None`` or empty: none.
    :param autostart: every node configures and activates itself when its process starts
        (rl_nodes.lifecycle); false leaves them unconfigured for an orchestrator.
    :param environ: the caller's environment (``os.environ`` when ``None``); read for
        ``ROS_DOMAIN_ID`` and for variables that would contradict the plan.
    :param rng: random generator for the domain-id pick.
    :param machine_cpus: the CPUs the run may use (the planning process's affinity when
        ``None``); ``auto`` splits them and listed CPUs must be among them.
    :param random_domain: with no domain id given or inherited, pick one at random
        (``rl-bringup``: its concurrent runs stay apart) rather than ROS's default 0
        (``ros2 launch``: a plain ``ros2 topic list`` in another shell sees the run).
    :raises PlanError: on invalid input, naming the valid choices.
    """
    mode_text = _choice(mode, MODES, f"unknown mode {mode!r}; valid modes")
    layout_text = _choice(policy_layout, POLICY_LAYOUTS,
                          f"unknown policy_layout {policy_layout!r}; valid")
    robot_count, autoscale_settings = parse_elastic_robots(mode_text, robots, layout_text,
                                                           autoscale, machine_cpus)
    config_file = _config_file(config)
    environment, chosen_domain_id, domain_id_source, notes = run_environment(
        discovery, domain_id, os.environ if environ is None else environ, rng, random_domain)
    cpus_text, cpus_source, sets = choose_cpus(cpus, config_file, machine_cpus)
    shared_parameters, sim_robots = node_overrides(
        config_file, extra_parameters, robot_count, robot_interface, task, use_sim_time, sim_robot)
    try:
        if not parse_flag("autostart", autostart):
            shared_parameters["autostart"] = False
            notes.append("autostart:=false: every node waits unconfigured; bring them up with "
                         "`ros2 lifecycle set NODE configure` then `activate` (replay_buffer and "
                         "trainer first), or an orchestrator")
    except ConfigError as error:
        raise PlanError(str(error)) from None

    processes = layout_processes(mode_text, robot_count, central=layout_text == "central")
    if layout_text == "central":
        notes.append(central_policy_note(robot_count))
    _configure_processes(processes, config_file, shared_parameters, output_dir, robot_count, sets,
                         environment)
    processes += sim_robot_processes(sim_robots, environment, notes)
    namespace_text = parse_namespace(namespace)
    place_in_namespace(processes, namespace_text)
    level, user_file = _log_level(log_level), _user_params_file(params_file)
    for process in processes:
        process.log_level, process.user_params_file = level, user_file
    return Plan(
        mode=mode_text, robots=robot_count, config_file=config_file, processes=processes,
        environment=environment, domain_id=chosen_domain_id, domain_id_source=domain_id_source,
        discovery=str(discovery).strip(), notes=notes, cpus=cpus_text, cpus_source=cpus_source,
        cpu_sets=sets, policy_layout=layout_text, autoscale=autoscale_settings,
        namespace=namespace_text,
    )


def _choice(value: str, choices: tuple[str, ...], unknown: str) -> str:
    """``value`` stripped and lower-cased when it is one of ``choices``.

    :param unknown: start of the error message, followed by the choices.
    :raises PlanError: otherwise.
    """
    text = str(value).strip().lower()
    if text not in choices:
        raise PlanError(f"{unknown}: {', '.join(choices)}")
    return text


LOG_LEVELS: tuple[str, ...] = ("debug", "info", "warn", "error", "fatal")


def _log_level(value: str | None) -> str:
    """``log_level:=`` checked and lower-cased; empty for rcl's default."""
    text = (value or "").strip().lower()
    if text and text not in LOG_LEVELS:
        raise PlanError(f"unknown log_level {value!r}; valid: {', '.join(LOG_LEVELS)}")
    return text


def _user_params_file(value: str | os.PathLike[str] | None) -> str:
    """The absolute path of ``params_file:=``, checked to be a ROS parameter file; empty for
    none.

    :raises PlanError: naming the file and what is wrong with it.
    """
    text = str(value or "").strip()
    if not text:
        return ""
    path = os.path.abspath(os.path.expanduser(text))
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except OSError as error:
        raise PlanError(f"params_file {text!r} cannot be read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise PlanError(f"params_file {text!r} is not YAML: {error}") from None
    if not isinstance(document, dict) or not document or not all(
            _holds_parameters(block) for block in document.values()):
        raise PlanError(f"params_file {text!r} is not a ROS parameter file: expected node blocks "
                        f"such as '/**/trainer: {{ros__parameters: {{batch_size: 256}}}}'")
    return path


def _holds_parameters(block: Any) -> bool:
    """Whether a node block of a parameter file (or a namespace block holding node blocks) has
    ``ros__parameters``."""
    return isinstance(block, dict) and ("ros__parameters" in block or any(
        _holds_parameters(inner) for inner in block.values()))


def _config_file(config: str | os.PathLike[str]) -> str:
    """The absolute path of the parameter file ``config`` names (a path or a config name)."""
    try:
        return str(paths.resolve_config(config))
    except FileNotFoundError as error:
        raise PlanError(str(error)) from None


#: Parameters a deployment's simulators get unless the caller sets them: they wait for the replay
#: buffer's first status (the rate limiter holds acting from the first step; a simulator started
#: alone, as the gym bridge drives it, acts at once).
ROBOT_DEFAULTS: dict[str, Any] = {"await_replay_status": True}


def estop_parameters(config_file: str, learning_parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A simulator that drives a robot (ros2_control) keeps its e-stop's state in the run
    directory, so that it survives a respawn (rl_core.robot.estop)."""
    interface = robot_plan.effective_parameter(
        "robot_interface", config_file, learning_parameters, robot_plan.DEFAULT_ROBOT_INTERFACE)
    if "output_dir" not in learning_parameters or interface != "ros2_control":
        return {}
    return {"estop_dir": os.path.join(str(learning_parameters["output_dir"]), "estop")}


def _configure_processes(processes: list[ProcessSpec], config_file: str,
                         shared_parameters: Mapping[str, Any],
                         output_dir: str | os.PathLike[str] | None, robot_count: int,
                         sets: Mapping[str, frozenset[int]],
                         environment: Mapping[str, str]) -> None:
    """Give each process of a layout its parameter file, parameters, CPUs and environment (the
    processes hosting the trainer or the replay buffer also get ``output_dir`` and
    ``deployment_robots``)."""
    learning_parameters = learning_overrides(shared_parameters, output_dir)
    for process in processes:
        process.params_file = config_file
        hosts_learning = any(kind in ("trainer", "replay_buffer")
                             for kind, _ in process.hosted_nodes())
        # The layout's own parameters (the central policy's robots:=N) win over the shared ones.
        hosts_simulator = any(kind == "simulator" for kind, _ in process.hosted_nodes())
        process.parameters = {
            **(ROBOT_DEFAULTS if hosts_simulator else {}),
            **(estop_parameters(config_file, learning_parameters) if hosts_simulator else {}),
            **(learning_parameters if hosts_learning else shared_parameters),
            **({"deployment_robots": robot_count} if hosts_learning else {}),
            **process.parameters,
        }
        assign_cpus(process, sets)
        process.env = {**environment, **cpu_environment(process)}
