"""CPU sets: which CPUs each node kind may use, and what each process is told of them.

``cpus:=`` (or ``cpus`` in the scenario file's ``/rl_bringup`` block) gives each node kind the
CPUs it may use: ``none`` (the default: no pinning), ``auto`` (:func:`split_cores` splits the
machine between the acting and the learning kinds) or ``KIND=LIST;...``. A process gets the
union of its nodes' sets and a torch thread count (:func:`assign_cpus`) as environment variables
(:func:`cpu_environment`), which ``rl_nodes.process_settings`` applies at process start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rl_bringup.plan.process_spec import PlanError
from rl_core.config import LAUNCHER_NODE, ConfigError, load_yaml
from rl_core.learning.cpus import (
    CPUS_VARIABLE,
    LEARNER_CPUS_VARIABLE,
    OMP_THREADS_VARIABLE,
    TORCH_THREADS_VARIABLE,
    available_cpus,
    format_cpu_list,
    parse_cpu_list,
)
from rl_core.names import node_kinds
from rl_core.names.node_kinds import LEARNING_KINDS, NODE_KINDS, PER_ROBOT_KINDS

if TYPE_CHECKING:
    from rl_bringup.plan.process_spec import ProcessSpec

#: No pinning: every process may run anywhere, as the operating system schedules it.
DEFAULT_CPUS = "none"
CPUS_FORMS = (
    "valid: auto, none, or KIND=LIST;KIND=LIST... with KIND one of "
    f"{', '.join(NODE_KINDS)} and LIST CPU numbers and ranges "
    "(e.g. simulator=0;policy=0;replay_buffer=1;trainer=1)"
)


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
            # The kinds that act (step envs, infer actions) and those that learn.
            sets = {kind: acting for kind in PER_ROBOT_KINDS}
            sets.update((kind, learning) for kind in LEARNING_KINDS)
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


def config_cpus(config_file: str) -> Any | None:
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


def choose_cpus(
    cpus: str | None, config_file: str, machine_cpus: Iterable[int] | None
) -> tuple[str, str, dict[str, frozenset[int]]]:
    """The CPU setting of a run and where it came from (argument, scenario file, default)."""
    if cpus is not None and str(cpus).strip() != "":
        text, sets = cpu_sets(str(cpus), machine_cpus)
        return text, "argument", sets
    configured = config_cpus(config_file)
    if configured is not None:
        text, sets = cpu_sets(configured, machine_cpus)
        return text, "config", sets
    return DEFAULT_CPUS, "default", {}


#: Node kinds without CPU sets of their own, and the kind whose CPUs they use.
SHARES_CPUS_WITH: dict[str, str] = {node_kinds.DIAGNOSTICS_AGGREGATOR: node_kinds.REPLAY_BUFFER}


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
    # The diagnostics aggregator (a little work once a second) runs on the replay buffer's CPUs.
    kinds = {SHARES_CPUS_WITH.get(kind, kind) for kind, _ in process.hosted_nodes()}
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
