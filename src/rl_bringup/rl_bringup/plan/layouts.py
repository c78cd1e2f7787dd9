"""The process layout of each mode: which process hosts which node.

Robot ``k`` lives in namespace ``/robot_k``, replay_buffer and trainer in ``/``. colocated runs
every node in one ``container`` process; decoupled runs one process per node; hybrid runs one
``container`` per robot (simulator + policy) and one learner ``container`` (replay_buffer,
trainer, diagnostics_aggregator). ``policy_layout:=central`` replaces the per-robot policies by
one central ``/policy`` node that batches every robot's observations into one forward pass, and
``robot_interface:=ros2_control`` adds a ``sim_robot`` process per robot
(:func:`sim_robot_processes`). The tables: docs/architecture.md, "The nodes of each mode".

Every process respawns when it crashes; processes holding the trainer or the replay buffer are
also *required*: a clean exit ends the run with that code, while after a crash they resume from
``output_dir`` and the step budget continues. A layout says only where the nodes run:
:func:`.deployment.make_plan` gives the processes their parameters, CPUs and environment, and
:func:`place_in_namespace` moves a whole deployment under ``namespace:=NS``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from rl_bringup.plan import robot_plan
from rl_bringup.plan.process_spec import PlanError, ProcessSpec
from rl_core.names import node_kinds
from rl_nodes import graph
from rl_nodes.graph import robot_namespace

MODES: tuple[str, ...] = ("colocated", "decoupled", "hybrid")
CONTAINER_EXECUTABLE = "container"
#: Where inference runs: a policy node per robot, or one central policy serving every robot.
POLICY_LAYOUTS: tuple[str, ...] = ("per_robot", "central")
DEFAULT_POLICY_LAYOUT = "per_robot"
CENTRAL_POLICY_NAMESPACE = "/"
AGGREGATOR = node_kinds.DIAGNOSTICS_AGGREGATOR
#: The deployment's own nodes where a process hosts the learning side: replay buffer, trainer
#: and the diagnostics aggregator (/diagnostics_agg for rqt_robot_monitor). Decoupled runs each
#: in a process of its own.
LEARNER_NODES: tuple[tuple[str, str], ...] = (("replay_buffer", "/"), ("trainer", "/"),
                                              (AGGREGATOR, "/"))


def layout_processes(mode: str, robots: int, central: bool = False) -> list[ProcessSpec]:
    """The processes of ``mode`` with ``robots`` robots, in start order, each with its nodes and
    its respawn and required flags.

    :param mode: one of :data:`MODES`.
    :param central: one central policy (``policy_layout:=central``) instead of one per robot.
    """
    return LAYOUTS[mode](robots, central)


def robot_process_name(robot: int) -> str:
    """The hybrid process of robot ``robot`` (its simulator and policy)."""
    return f"robot_{robot}"


def central_policy_note(robots: int) -> str:
    """What a plan with a central policy tells the user: which policy serves which robots."""
    return (
        f"policy_layout:=central: one policy node /policy serves /robot_0 .. "
        f"/robot_{robots - 1} (batched inference); its get_action service is "
        f"{graph.service_name(graph.GET_ACTION)}"
    )


def sim_robot_processes(sim_robots: list[dict[str, Any]], environment: Mapping[str, str],
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


_NAMESPACE_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_namespace(value: str | None) -> str:
    """The deployment namespace of ``namespace:=VALUE``: ``/`` when empty, else absolute
    (``lab`` and ``/lab/`` -> ``/lab``).

    :raises PlanError: for a name ROS would refuse.
    """
    text = (value or "").strip().strip("/")
    if not text:
        return "/"
    if not all(_NAMESPACE_TOKEN.fullmatch(token) for token in text.split("/")):
        raise PlanError(f"bad namespace {value!r}: use names of letters, digits and underscores "
                        f"that do not start with a digit, joined by '/' (e.g. lab_a or "
                        f"site_1/cell_2)")
    return f"/{text}"


def place_in_namespace(processes: list[ProcessSpec], namespace: str) -> None:
    """Move every node of ``processes`` under ``namespace`` and remap the names the deployment
    shares (:data:`rl_nodes.graph.SHARED_NAMES`) under it too, in every process."""
    if namespace == "/":
        return
    remaps = [(name, graph.in_namespace(namespace, name)) for name in graph.SHARED_NAMES]
    for process in processes:
        if process.is_container:
            process.nodes = [(kind, graph.in_namespace(namespace, node_namespace))
                             for kind, node_namespace in process.nodes]
            process.arguments = _node_arguments(process.nodes)
        else:
            process.namespace = graph.in_namespace(namespace, process.namespace or "/")
        process.remaps = list(remaps)


def _node_arguments(nodes: list[tuple[str, str]]) -> list[str]:
    """The container's ``--node KIND@NAMESPACE`` arguments."""
    return [argument for kind, namespace in nodes
            for argument in ("--node", f"{kind}@{namespace}")]


def _container(
    name: str, nodes: list[tuple[str, str]], *, respawn: bool, required: bool
) -> ProcessSpec:
    """A container process hosting ``nodes`` (``--node KIND@NAMESPACE`` each)."""
    return ProcessSpec(
        name=name,
        executable=CONTAINER_EXECUTABLE,
        arguments=_node_arguments(nodes),
        nodes=list(nodes),
        respawn=respawn,
        required=required,
    )


def _robot_nodes(robot: int, central: bool = False) -> list[tuple[str, str]]:
    """The per-robot nodes of robot ``robot``: its simulator, and its policy unless central."""
    kinds = ("simulator",) if central else node_kinds.PER_ROBOT_KINDS
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
    nodes += LEARNER_NODES
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
    processes.append(ProcessSpec(name=AGGREGATOR, executable=AGGREGATOR, namespace="/",
                                 respawn=True))
    return processes


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
    processes.append(_container("learner", list(LEARNER_NODES), respawn=True, required=True))
    return processes


LAYOUTS: dict[str, Callable[[int, bool], list[ProcessSpec]]] = {
    "colocated": _colocated_layout,
    "decoupled": _decoupled_layout,
    "hybrid": _hybrid_layout,
}
