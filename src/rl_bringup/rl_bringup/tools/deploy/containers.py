"""A deployment plan as container images run it: the part shared by ``rl-bringup k8s`` and
``rl-bringup compose``.

Both generators start from :func:`rl_bringup.plan.deployment.make_plan` and split its processes
into the **learner** (every process hosting the replay buffer or the trainer; the trainer's is
the *main* one, whose exit 0 ends the run) and the **robot template**: robot 0's processes with
``/robot_0`` replaced by :data:`rl_bringup.run.replica.PLACEHOLDER`, which each replica fills in
with its own ``/robot_k``; the orchestrator's replica count says how many robots run. The
learner's ``deployment_robots`` is ``max_robots``, so scaling up to it needs no change to it.
Executables run directly, not through ``ros2 run``, so the orchestrator's SIGTERM reaches them;
CPU pinning is left out (``cpus:=none``), as host CPU numbers mean nothing in a container.

Only decoupled robot containers get an action key (:func:`needs_action_key`), and it is the run's
key, not their robot's, since a replica learns its index only when it starts; containers hosting
a robot's simulator and policy together need none. Why: docs/kubernetes.md, "The action key".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rl_bringup.plan import paths
from rl_bringup.plan.deployment import (
    DEFAULT_CONFIG,
    MAX_ROBOTS,
    Plan,
    PlanError,
    ProcessSpec,
    make_plan,
    parse_robots,
)
from rl_bringup.plan.discovery import PROFILES_VARIABLE
from rl_bringup.plan.layouts import MODES
from rl_bringup.plan.run_key import ACTING_KINDS
from rl_bringup.run import replica
from rl_bringup.tools.subcommand import ToolError, int_value
from rl_core.security import action_auth, weights_auth
from rl_nodes import graph
from rl_nodes.graph import robot_namespace

#: Where the learner writes checkpoints, the replay snapshot and results inside its container.
OUTPUT_DIR = "/runs"
DEFAULT_IMAGE = "rl_ros2:latest"
#: The domain id of generated deployments; an isolated network (compose's internal bridge, the
#: Kubernetes network policy and discovery server) keeps other ROS systems out, so a fixed id
#: keeps the generated files reproducible.
DEFAULT_DOMAIN_ID = 42
#: The colcon install of the image (docker/Dockerfile: ``WORKDIR /ws``, ``colcon build``).
IMAGE_INSTALL = "/ws/install"
#: The scenario files in the image (rl_bringup's share folder).
IMAGE_CONFIG_DIR = f"{IMAGE_INSTALL}/rl_bringup/share/rl_bringup/config"
#: Environment every node container gets on top of the plan's.
CONTAINER_ENVIRONMENT = {
    # Compose containers and Kubernetes pods have IPC namespaces of their own; Fast DDS's
    # shared-memory transport cannot cross them, and the network policy covers UDP only. Use
    # UDP, as separate hosts do.
    "FASTDDS_BUILTIN_TRANSPORTS": "UDPv4",
    # The multi-host profile (UDPv4, sends that never block a node), at its place in the image.
    PROFILES_VARIABLE: f"{IMAGE_CONFIG_DIR}/{paths.FASTDDS_MULTIHOST_PROFILE}",
}
#: The replica step that every robot container runs first (see :mod:`rl_bringup.run.replica`).
REPLICA_MODULE = "rl_bringup.run.replica"
#: Kinds whose processes run in the learner's container (the aggregator with them).
LEARNING_KINDS = (graph.REPLAY_BUFFER, graph.TRAINER, graph.DIAGNOSTICS_AGGREGATOR)


@dataclass(frozen=True)
class Container:
    """One container of a deployment: a plan process and where it runs.

    :param name: the container's (or compose service's) name: the plan's process name for
        learner processes, ``robot`` for a robot container hosting several nodes, else the
        node kind (``simulator``, ``policy``).
    :param process: the plan's process; for robots, robot 0's with its namespace replaced by
        :data:`rl_bringup.run.replica.PLACEHOLDER`.
    :param robot: whether it is part of the robot template (one copy per robot).
    :param main: whether it hosts the trainer (its exit 0 ends the run).
    """

    name: str
    process: ProcessSpec
    robot: bool
    main: bool

    @property
    def kinds(self) -> list[str]:
        """Node kinds hosted by the container, in plan order."""
        return [kind for kind, _ in self.process.hosted_nodes()]

    def overrides_name(self) -> str:
        """File name of the container's parameter overrides (``learner.parameters.yaml``)."""
        return f"{self.name}.parameters.yaml"

    def command(self, params_file: str, overrides_path: str) -> list[str]:
        """The node command line, with the executable's path in the image.

        :param params_file: the scenario file's path inside the container.
        :param overrides_path: the overrides file's path inside the container (used when the
            process has parameter overrides).
        """
        process = dataclasses.replace(self.process, params_file=params_file)
        return process.argv(image_bin_dir(process.package), overrides_path=overrides_path)


@dataclass(frozen=True)
class ContainerLayout:
    """A plan split into learner containers (the main one first) and the robot template."""

    plan: Plan
    learner: list[Container]
    robots: list[Container]
    max_robots: int

    @property
    def needs_action_key(self) -> bool:
        """Whether any container gets the run action key (:func:`needs_action_key`)."""
        return any(needs_action_key(container) for container in self.containers)

    @property
    def containers(self) -> list[Container]:
        """Every container: learner ones first."""
        return [*self.learner, *self.robots]

    @property
    def main(self) -> Container:
        """The container hosting the trainer: the run ends with it."""
        return next(container for container in self.learner if container.main)

    @property
    def scenario_name(self) -> str:
        """File name of the plan's scenario file (``cartpole.yaml``)."""
        return Path(self.plan.config_file).name


def image_bin_dir(package: str) -> str:
    """Where the image's colcon install keeps ``package``'s executables."""
    return f"{IMAGE_INSTALL}/{package}/lib/{package}"


def replica_command(command: Sequence[str], source: Sequence[str], max_robots: int) -> list[str]:
    """``command`` run through the replica step.

    :param source: where the replica's index comes from (``--pod-name-variable VAR`` or
        ``--claim-dir DIR``).
    """
    return ["python3", "-m", REPLICA_MODULE, *source, "--max-robots", str(max_robots), "--",
            *command]


def _robot_template(process: ProcessSpec) -> ProcessSpec:
    """Robot 0's process with :data:`rl_bringup.run.replica.PLACEHOLDER` for its namespace."""
    first = robot_namespace(0)
    placeholder = replica.PLACEHOLDER

    def swap(namespace: str) -> str:
        return placeholder if namespace == first else namespace

    template = dataclasses.replace(
        process,
        namespace=swap(process.namespace),
        nodes=[(kind, swap(namespace)) for kind, namespace in process.nodes],
        arguments=[argument.removesuffix(f"@{first}") + f"@{placeholder}"
                   if argument.endswith(f"@{first}") else argument
                   for argument in process.arguments],
    )
    if any(first in argument for argument in template.argv()):
        raise PlanError(f"cannot make a robot template of {process.name}: {first} remains in "
                        f"{template.command_line()}")
    return template


_ROBOT_NAMESPACES = frozenset(robot_namespace(index) for index in range(MAX_ROBOTS))


def _is_robot_process(process: ProcessSpec) -> bool:
    """Whether every node of ``process`` lives in a robot namespace."""
    return all(namespace in _ROBOT_NAMESPACES for _, namespace in process.hosted_nodes())


def container_layout(mode: str, robots: int | str, *, config: str, max_robots: int,
                     discovery: str, domain_id: int = DEFAULT_DOMAIN_ID) -> ContainerLayout:
    """Plan the deployment and split it into containers.

    :param max_robots: the learner's ``deployment_robots``: the most robots the deployment can
        be scaled to without regenerating it.
    :param discovery: the plan's discovery setting (``subnet``, ``server:HOST:PORT``).
    :raises PlanError: on invalid input, naming the valid choices.
    """
    robot_count = parse_robots(robots)
    if not robot_count <= max_robots <= MAX_ROBOTS:
        raise PlanError(f"max_robots must be from robots:={robot_count} to {MAX_ROBOTS}, "
                        f"got {max_robots}")
    # The caller's environment must not leak into generated files (its ROS_DOMAIN_ID, ...).
    plan = make_plan(mode, robot_count, config, output_dir=OUTPUT_DIR, domain_id=domain_id,
                     discovery=discovery, cpus="none", environ={})
    first = robot_namespace(0)
    learner: list[Container] = []
    template: list[Container] = []
    for process in plan.processes:
        kinds = {kind for kind, _ in process.hosted_nodes()}
        if _is_robot_process(process):
            if all(namespace == first for _, namespace in process.hosted_nodes()):
                name = "robot" if process.is_container else process.executable
                template.append(Container(name, _robot_template(process), robot=True,
                                          main=False))
            continue
        if not kinds & set(LEARNING_KINDS):
            raise PlanError(f"process {process.name} ({sorted(kinds)}) is neither a robot's "
                            "nor the learner's; container deployments cannot place it")
        parameters = {**process.parameters, "deployment_robots": max_robots}
        learner.append(Container(process.name, dataclasses.replace(process, parameters=parameters),
                                 robot=False, main=graph.TRAINER in kinds))
    learner.sort(key=lambda container: not container.main)
    return ContainerLayout(plan=plan, learner=learner, robots=template, max_robots=max_robots)


def layout_from_values(values: dict[str, str], *, discovery: str,
                       domain_id: int = DEFAULT_DOMAIN_ID) -> tuple[str, ContainerLayout]:
    """The mode and layout of a ``k8s`` / ``compose`` command line's values.

    :param values: parsed ``key:=value`` arguments with the mode under ``"mode"``.
    :raises ToolError: for a missing mode.
    """
    mode = values.get("mode")
    if not mode:
        raise ToolError(f"missing MODE; valid modes: {', '.join(MODES)}")
    robots = parse_robots(values.get("robots", "1"))
    max_robots = int_value(values, "max_robots", MAX_ROBOTS, 1, MAX_ROBOTS)
    layout = container_layout(mode, robots, config=values.get("config", DEFAULT_CONFIG),
                              max_robots=max_robots, discovery=discovery, domain_id=domain_id)
    return mode, layout


def image_from_values(values: dict[str, str]) -> str:
    """The ``image:=`` of a command line (:data:`DEFAULT_IMAGE` when absent).

    :raises ToolError: for an empty reference or one with spaces.
    """
    image = values.get("image", DEFAULT_IMAGE).strip()
    if not image or any(character.isspace() for character in image):
        raise ToolError(f"image:= must be an image reference such as {DEFAULT_IMAGE}, "
                        f"got {image!r}")
    return image


def weights_key_file(directory: Path) -> Path:
    """The run's weights key next to the generated files: written (mode 0600) unless it exists.

    :raises ToolError: when it cannot be written.
    """
    try:
        return weights_auth.create_key_file(directory)
    except OSError as error:
        raise ToolError(f"cannot write the weights key into {directory}: {error}", 1) from None


def needs_action_key(container: Container) -> bool:
    """Whether ``container`` gets the run action key: it hosts a simulator or a policy whose
    counterpart runs in another container, so that their action MACs must share a key. A
    container with both (hybrid ``robot``, colocated ``container``) authenticates with its own
    process' key, and one with neither (the learner) has no actions to authenticate."""
    acting = ACTING_KINDS & set(container.kinds)
    return bool(acting) and acting != ACTING_KINDS


def action_key_environment(key_file: str) -> dict[str, str]:
    """The action key variables of a container that reads the run key from ``key_file``; the
    others are emptied, as the run key and a robot's own key would win over the file."""
    return {action_auth.KEY_VARIABLE: "", action_auth.KEY_FILE_VARIABLE: key_file,
            action_auth.ROBOT_KEYS_VARIABLE: ""}


def action_key_file(directory: Path) -> Path:
    """The run's action key next to the generated files: written (mode 0600) unless it exists.

    :raises ToolError: when it cannot be written.
    """
    try:
        return action_auth.create_key_file(directory)
    except OSError as error:
        raise ToolError(f"cannot write the action key into {directory}: {error}", 1) from None
