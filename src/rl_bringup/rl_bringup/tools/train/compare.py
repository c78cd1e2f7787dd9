"""``rl-bringup compare``: train the same task in every mode, one after the other, and tabulate.

Usage::

    rl-bringup compare [modes:=bare,colocated,decoupled,hybrid] [robots:=2] [config:=cartpole]
                       [total_env_steps:=N] [repeats:=1] [output:=DIR] [json:=FILE]
                       [timeout:=SECONDS] [domain_id:=N]

Each run is a fresh process tree started the way users start it (the bare loop, or
``rl_bringup.cli launch MODE`` on a domain of its own), in rounds that run every mode once, so a
slow drift of a shared machine hits all modes alike; a mode's row holds the median of its rounds
(see :data:`COLUMNS`). CPU time is measured here, with ``resource.getrusage(RUSAGE_CHILDREN)``
around each run. It starts subprocesses only and imports no rclpy; a run is stopped by
:func:`rl_bringup.run.processes.stop_process`. How the runs are started and what each column
means: docs/tools.md, "advise". Exit codes: 0 every run completed; 1 some run failed; 2 bad input.
"""

from __future__ import annotations

import json
import math
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rl_bringup.plan.deployment import DEFAULT_CONFIG, MAX_ROBOTS, MIN_ROBOTS
from rl_bringup.plan.discovery import MAX_DOMAIN_ID, MIN_DOMAIN_ID, RANDOM_DOMAIN_ID_RANGE
from rl_bringup.plan.layouts import MODES as ROS_MODES
from rl_bringup.run.processes import describe_exit, stop_process
from rl_bringup.tools.common import load_config
from rl_bringup.tools.subcommand import (
    EXIT_FAILURE,
    PROGRAM,
    SubparsersAction,
    ToolError,
    add_tool,
    int_value,
)

COMMAND = "compare"
KEYS: tuple[str, ...] = ("modes", "robots", "config", "total_env_steps", "repeats", "output",
                         "json", "timeout", "domain_id", "cpus")
BARE = "bare"
ALL_MODES: tuple[str, ...] = (BARE, *ROS_MODES)
DEFAULT_ROBOTS = 2
#: Modes that run one robot whatever ``robots:=`` says (the bare loop has no robots; colocated is
#: the one-process deployment of one robot).
SINGLE_ROBOT_MODES: tuple[str, ...] = (BARE, "colocated")
DEFAULT_TIMEOUT_S = 3600.0
#: Seconds a run gets after SIGINT before SIGKILL; above the supervisor's own grace period (10 s)
#: plus its SIGTERM phase, so it can stop its children cleanly first.
STOP_GRACE_S = 30.0
RESULT_FILE = "result.json"
LOG_FILE = "output.log"
#: result.json keys a run must write; the others are optional (older writers lack them).
REQUIRED_KEYS: tuple[str, ...] = ("env_steps", "updates", "wall_time_s", "eval_mean_return")
#: The table's columns, as docs/results.md#learning-per-mode shows them (a unit test holds both
#: equal): the last three before the note are where the learner's wall time went.
COLUMNS: tuple[tuple[str, str], ...] = (
    # (header, markdown alignment)
    ("mode", "---"), ("robots", "---:"), ("runs", "---:"), ("wall time", "---:"),
    ("wall time x bare", "---:"), ("first solved", "---:"), ("eval return", "---:"),
    ("sample efficiency", "---:"), ("updates/transition", "---:"), ("env steps/s", "---:"),
    ("CPU utilisation", "---:"), ("gradient steps", "---:"), ("getting batches", "---:"),
    ("other", "---:"), ("note", "---"),
)
#: The learner's time parts the table shows, as result.json's learner_time_shares names them
#: (rl_core.learning.learner, not imported: it brings torch); "other" is the rest of its wall
#: time (evaluation hand-off, weights and checkpoints, in one process acting).
GRADIENT_STEPS, GETTING_BATCHES = "gradient steps", "getting batches"

Log = Callable[[str], None]


# --- what one run reports ------------------------------------------------------------------------


@dataclass(frozen=True)
class RunMetrics:
    """The figures of one run's ``result.json``, with fallbacks for optional keys.

    :param env_steps: transitions collected (all robots).
    :param updates: gradient steps made.
    :param wall_time_s: the run's own training time for the budget (evaluation included).
    :param eval_mean_return: mean return of the final deterministic evaluation.
    :param updates_per_transition: ``updates_per_transition`` if written, else updates/env_steps.
    :param solved_at_s: seconds until the task was first solved; ``None`` if never or unknown.
    :param solved_at_env_steps: env steps at that moment; ``None`` if never or unknown.
    :param reported_cpu_time_s: ``cpu_time_s`` as the run wrote it, if it did.
    :param learner_utilisation: the learner's share of its wall time in gradient steps, if
        written.
    :param learner_time_shares: where the learner's wall time went (``result.json``'s
        ``learner_time_shares``: part -> share), if written.
    """

    env_steps: int
    updates: int
    wall_time_s: float
    eval_mean_return: float
    updates_per_transition: float | None
    solved_at_s: float | None = None
    solved_at_env_steps: int | None = None
    reported_cpu_time_s: float | None = None
    learner_utilisation: float | None = None
    learner_time_shares: Mapping[str, float] | None = None

    @property
    def env_steps_per_s(self) -> float | None:
        """Transitions over wall time (``None`` for a zero wall time)."""
        return self.env_steps / self.wall_time_s if self.wall_time_s > 0 else None


def _optional_number(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _shares(data: Mapping[str, Any], key: str) -> dict[str, float] | None:
    """``data[key]`` as part -> share, its non-numbers left out; None without one."""
    value = data.get(key)
    if not isinstance(value, Mapping):
        return None
    shares = {str(part): _optional_number(value, part) for part in value}
    return {part: share for part, share in shares.items() if share is not None} or None


def parse_result(data: Mapping[str, Any]) -> RunMetrics:
    """Read a run's ``result.json`` (already decoded).

    :raises ValueError: when a key of :data:`REQUIRED_KEYS` is missing or not a number.
    """
    missing = [key for key in REQUIRED_KEYS if _optional_number(data, key) is None]
    if missing:
        raise ValueError(f"{RESULT_FILE} lacks {', '.join(missing)} (or holds no number there)")
    env_steps, updates = int(data["env_steps"]), int(data["updates"])
    ratio = _optional_number(data, "updates_per_transition")
    if ratio is None and env_steps > 0:
        ratio = updates / env_steps
    solved_steps = _optional_number(data, "solved_at_env_steps")
    return RunMetrics(
        env_steps=env_steps, updates=updates, wall_time_s=float(data["wall_time_s"]),
        eval_mean_return=float(data["eval_mean_return"]), updates_per_transition=ratio,
        solved_at_s=_optional_number(data, "solved_at_s"),
        solved_at_env_steps=None if solved_steps is None else int(solved_steps),
        reported_cpu_time_s=_optional_number(data, "cpu_time_s"),
        learner_utilisation=_optional_number(data, "learner_utilisation"),
        learner_time_shares=_shares(data, "learner_time_shares"))


def cpu_utilisation(cpu_time_s: float, wall_time_s: float, cores: int) -> float:
    """CPU time over wall time over cores: 1.0 means every core busy the whole time.

    :raises ValueError: for a non-positive wall time or core count, or a negative CPU time.
    """
    if wall_time_s <= 0 or cores < 1 or cpu_time_s < 0:
        raise ValueError(f"need wall time > 0, cores >= 1, CPU time >= 0; got {wall_time_s!r}, "
                         f"{cores!r}, {cpu_time_s!r}")
    return cpu_time_s / wall_time_s / cores


def available_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass
class RunOutcome:
    """One run: where it ran, how it ended, and its figures when it completed.

    :param error: why the run failed (``None`` when it completed and wrote a usable result).
    """

    mode: str
    robots: int
    round_index: int
    output_dir: str
    process_wall_s: float = 0.0
    cpu_time_s: float = 0.0
    cores: int = 1
    returncode: int | None = None
    error: str | None = None
    metrics: RunMetrics | None = None

    @property
    def cpu_utilisation(self) -> float | None:
        """CPU utilisation of the run's process tree (``None`` when nothing was measured)."""
        if self.process_wall_s <= 0:
            return None
        return cpu_utilisation(self.cpu_time_s, self.process_wall_s, self.cores)


# --- the table -----------------------------------------------------------------------------------


@dataclass
class ModeRow:
    """One table row: the medians of a mode's completed runs and the ratios to the bare loop.

    ``solved_at_s`` is the median with "never solved" counted as infinitely late, so a mode that
    solved in fewer than half its runs shows ``None``.
    """

    mode: str
    robots: int
    completed: int
    runs: int
    wall_time_s: float | None = None
    solved_at_s: float | None = None
    solved_at_env_steps: int | None = None
    eval_return: float | None = None
    sample_efficiency: float | None = None
    updates_per_transition: float | None = None
    env_steps_per_s: float | None = None
    cpu_utilisation: float | None = None
    learner_utilisation: float | None = None
    #: Median share of the learner's wall time per part (``result.json``'s
    #: ``learner_time_shares``), in the runs' order of parts.
    learner_time_shares: dict[str, float] = field(default_factory=dict)
    wall_time_x_bare: float | None = None
    note: str = ""


def median_or_none(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not ``None``; ``None`` when there are none."""
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def median_shares(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per part, the median of its share over the runs that report it (parts in first-seen
    order)."""
    parts = list(dict.fromkeys(part for shares in runs for part in shares))
    return {part: statistics.median(shares[part] for shares in runs if part in shares)
            for part in parts}


def median_time_to_solve(times: Sequence[float | None]) -> float | None:
    """The median of times to solve with ``None`` ("never") as infinitely late.

    :return: ``None`` when there are no times or the median is "never".
    """
    if not times:
        return None
    middle = statistics.median([math.inf if value is None else value for value in times])
    return None if math.isinf(middle) else middle


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference <= 0:
        return None
    return value / reference


def summarise(outcomes: Sequence[RunOutcome], modes: Sequence[str]) -> list[ModeRow]:
    """One :class:`ModeRow` per mode, in the order of ``modes``, ratios relative to ``bare``."""
    rows: list[ModeRow] = []
    for mode in modes:
        runs = [outcome for outcome in outcomes if outcome.mode == mode]
        done = [outcome for outcome in runs if outcome.metrics is not None]
        metrics = [outcome.metrics for outcome in done if outcome.metrics is not None]
        row = ModeRow(mode, runs[0].robots if runs else 0, len(done), len(runs))
        errors = [f"round {outcome.round_index + 1}: {outcome.error}" for outcome in runs
                  if outcome.error is not None]
        row.note = "; ".join(errors)
        if metrics:
            row.wall_time_s = median_or_none(m.wall_time_s for m in metrics)
            row.solved_at_s = median_time_to_solve([m.solved_at_s for m in metrics])
            steps = median_time_to_solve([None if m.solved_at_env_steps is None
                                          else float(m.solved_at_env_steps) for m in metrics])
            row.solved_at_env_steps = None if steps is None else round(steps)
            row.eval_return = median_or_none(m.eval_mean_return for m in metrics)
            row.updates_per_transition = median_or_none(m.updates_per_transition for m in metrics)
            row.env_steps_per_s = median_or_none(m.env_steps_per_s for m in metrics)
            row.cpu_utilisation = median_or_none(outcome.cpu_utilisation for outcome in done)
            row.learner_utilisation = median_or_none(m.learner_utilisation for m in metrics)
            row.learner_time_shares = median_shares(
                [m.learner_time_shares for m in metrics if m.learner_time_shares])
        rows.append(row)
    bare = next((row for row in rows if row.mode == BARE), None)
    if bare is not None:
        for row in rows:
            row.sample_efficiency = _ratio(row.eval_return, bare.eval_return)
            row.wall_time_x_bare = _ratio(row.wall_time_s, bare.wall_time_s)
    return rows


def _number(value: float | None, text: str) -> str:
    return "-" if value is None else text.format(value)


def _percent(share: float | None) -> str:
    return _number(None if share is None else share * 100, "{:.0f} %")


def learner_time(row: ModeRow) -> tuple[float | None, float | None, float | None]:
    """The learner's shares of its wall time: gradient steps (the learner utilisation where a
    run wrote no shares), getting batches, and the rest."""
    gradient = row.learner_time_shares.get(GRADIENT_STEPS, row.learner_utilisation)
    getting = row.learner_time_shares.get(GETTING_BATCHES)
    other = None if gradient is None or getting is None else max(0.0, 1.0 - gradient - getting)
    return gradient, getting, other


def format_row(row: ModeRow) -> list[str]:
    """The cells of ``row`` in :data:`COLUMNS` order ("-" where a figure is missing)."""
    solved = "-"
    if row.solved_at_s is not None:
        solved = f"{row.solved_at_s:,.1f} s"
        if row.solved_at_env_steps is not None:
            solved += f" ({row.solved_at_env_steps:,} steps)"
    return [
        row.mode, str(row.robots), f"{row.completed}/{row.runs}",
        _number(row.wall_time_s, "{:,.1f} s"), _number(row.wall_time_x_bare, "{:.2f}x"), solved,
        _number(row.eval_return, "{:,.1f}"), _number(row.sample_efficiency, "{:.2f}"),
        _number(row.updates_per_transition, "{:.2f}"), _number(row.env_steps_per_s, "{:,.0f}"),
        _percent(row.cpu_utilisation), *(_percent(share) for share in learner_time(row)),
        row.note.replace("|", "/"),
    ]


def format_table(rows: Sequence[ModeRow]) -> str:
    """The rows as a markdown table (headers of :data:`COLUMNS`)."""
    lines = ["| " + " | ".join(header for header, _ in COLUMNS) + " |",
             "|" + "|".join(alignment for _, alignment in COLUMNS) + "|"]
    lines.extend("| " + " | ".join(format_row(row)) + " |" for row in rows)
    return "\n".join(lines)


# --- settings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareSettings:
    """What a comparison runs (validated by :func:`settings_from_values`).

    :param config_file: the scenario YAML, resolved.
    :param domain_id: the first ROS run's ROS_DOMAIN_ID (later ROS runs count up from it);
        ``None``: each ROS run picks a different random one.
    """

    modes: tuple[str, ...]
    robots: int
    config: str
    config_file: str
    total_env_steps: int
    repeats: int
    output_dir: str
    json_file: str | None
    timeout_s: float
    domain_id: int | None = None
    cores: int = field(default_factory=available_cores)
    #: CPU sets of the ROS runs (``cpus:=`` of rl-bringup launch; None: not pinned).
    cpus: str | None = None


def parse_modes(text: str) -> tuple[str, ...]:
    """``bare,colocated`` -> ``("bare", "colocated")``.

    :raises ToolError: for unknown, repeated or no modes.
    """
    modes = tuple(part.strip().lower() for part in text.split(",") if part.strip())
    valid = ", ".join(ALL_MODES)
    if not modes:
        raise ToolError(f"modes:= names no mode; valid modes: {valid}")
    if unknown := [mode for mode in modes if mode not in ALL_MODES]:
        raise ToolError(f"unknown mode(s) {', '.join(unknown)} in modes:=; valid modes: {valid}")
    if len(set(modes)) != len(modes):
        raise ToolError(f"modes:= names a mode twice ({text!r}); use repeats:= for more runs")
    return modes


def settings_from_values(values: Mapping[str, str]) -> CompareSettings:
    """Validate ``key:=value`` arguments (see :data:`KEYS`) into :class:`CompareSettings`.

    :raises ToolError: (exit 2) naming the bad argument.
    """
    modes = parse_modes(values.get("modes", ",".join(ALL_MODES)))
    config_value = values.get("config", DEFAULT_CONFIG)
    config_file, run_config = load_config(config_value)
    timeout_text = values.get("timeout", str(DEFAULT_TIMEOUT_S))
    try:
        timeout_s = float(timeout_text)
    except ValueError:
        timeout_s = math.nan
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ToolError(f"timeout:= must be a positive number of seconds, got {timeout_text!r}")
    domain_id = (int_value(values, "domain_id", 0, MIN_DOMAIN_ID, MAX_DOMAIN_ID)
                 if "domain_id" in values else None)
    output = values.get("output") or f"runs/compare-{time.strftime('%Y%m%d-%H%M%S')}"
    return CompareSettings(
        modes=modes,
        robots=int_value(values, "robots", DEFAULT_ROBOTS, MIN_ROBOTS, MAX_ROBOTS),
        config=config_value,
        config_file=str(config_file),
        total_env_steps=int_value(values, "total_env_steps", run_config.replay.total_env_steps,
                                  1, 10**12),
        repeats=int_value(values, "repeats", 1, 1, 1000),
        output_dir=os.path.abspath(output),
        json_file=values.get("json") or None,
        timeout_s=timeout_s,
        domain_id=domain_id,
        cpus=values.get("cpus") or None,
    )


def domain_ids(count: int, first: int | None, rng: random.Random | None = None) -> list[int]:
    """``count`` ROS domain ids, one per ROS run, all different while there are enough.

    :param first: count up from it (wrapping in ``MIN_DOMAIN_ID..MAX_DOMAIN_ID``); ``None``: random
        distinct picks in :data:`~rl_bringup.plan.discovery.RANDOM_DOMAIN_ID_RANGE`, as a launch
        picks one.
    """
    if first is not None:
        span = MAX_DOMAIN_ID - MIN_DOMAIN_ID + 1
        return [MIN_DOMAIN_ID + (first - MIN_DOMAIN_ID + index) % span for index in range(count)]
    picker = rng if rng is not None else random.SystemRandom()
    pool = list(range(RANDOM_DOMAIN_ID_RANGE[0], RANDOM_DOMAIN_ID_RANGE[1] + 1))
    picker.shuffle(pool)
    return [pool[index % len(pool)] for index in range(count)]


# --- running -------------------------------------------------------------------------------------


def run_command(mode: str, robots: int, settings: CompareSettings, output_dir: str,
                domain_id: int | None) -> list[str]:
    """The command line of one run (the interpreter running this module starts it)."""
    if mode == BARE:
        return [sys.executable, "-m", "rl_core.learning.training", "--config", settings.config_file,
                "--output", output_dir, "--total-env-steps", str(settings.total_env_steps)]
    return [sys.executable, "-m", "rl_bringup.cli", "launch", mode, f"robots:={robots}",
            f"config:={settings.config_file}", f"output_dir:={output_dir}",
            f"total_env_steps:={settings.total_env_steps}", f"domain_id:={domain_id}",
            *([f"cpus:={settings.cpus}"] if settings.cpus else [])]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _read_metrics(output_dir: Path) -> RunMetrics:
    path = output_dir / RESULT_FILE
    if not path.is_file():
        raise ValueError(f"no {RESULT_FILE} written")
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{RESULT_FILE} is unreadable: {error}") from error
    if not isinstance(data, dict):
        raise ValueError(f"{RESULT_FILE} holds no JSON object")
    return parse_result(data)


def run_once(mode: str, round_index: int, settings: CompareSettings, domain_id: int | None
             ) -> RunOutcome:
    """Start one run, wait for it (up to the timeout), and read its result.

    The caller must not reap other children meanwhile: the CPU time is a RUSAGE_CHILDREN delta.
    """
    robots = 1 if mode in SINGLE_ROBOT_MODES else settings.robots
    output_dir = Path(settings.output_dir) / f"{mode}-r{round_index + 1}"
    output_dir.mkdir(parents=True)
    outcome = RunOutcome(mode, robots, round_index, str(output_dir), cores=settings.cores)
    environment = {**os.environ, "PYTHONUNBUFFERED": "1",
                   "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    if domain_id is not None:
        environment["ROS_DOMAIN_ID"] = str(domain_id)
    argv = run_command(mode, robots, settings, str(output_dir), domain_id)
    with open(output_dir / LOG_FILE, "wb") as log_file:
        log_file.write(("$ " + " ".join(argv) + "\n").encode())
        log_file.flush()
        cpu_before, started = _children_cpu_s(), time.monotonic()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                   stderr=subprocess.STDOUT, env=environment,
                                   start_new_session=True)
        try:
            process.wait(timeout=settings.timeout_s)
        except subprocess.TimeoutExpired:
            outcome.error = f"timed out after {settings.timeout_s:g} s"
        finally:
            stop_process(process, STOP_GRACE_S)
            outcome.returncode = process.returncode
            outcome.process_wall_s = time.monotonic() - started
            outcome.cpu_time_s = _children_cpu_s() - cpu_before
    if outcome.error is None and outcome.returncode != 0:
        outcome.error = describe_exit(outcome.returncode or 0)
    if outcome.error is None:
        try:
            outcome.metrics = _read_metrics(output_dir)
        except ValueError as error:
            outcome.error = str(error)
    if outcome.error is not None:
        outcome.error += f" (log: {output_dir / LOG_FILE})"
    return outcome


def run_comparison(settings: CompareSettings, log: Log = print) -> list[RunOutcome]:
    """Run every mode ``settings.repeats`` times, in rounds; returns the outcomes in run order.

    :raises ToolError: when the output folder already holds runs of an earlier comparison.
    """
    output = Path(settings.output_dir)
    clashes = [f"{mode}-r{index + 1}" for mode in settings.modes
               for index in range(settings.repeats) if (output / f"{mode}-r{index + 1}").exists()]
    if clashes:
        raise ToolError(f"output:={settings.output_dir} already holds {', '.join(clashes)}; "
                        "choose another folder")
    ros_runs = sum(mode != BARE for mode in settings.modes) * settings.repeats
    ids = iter(domain_ids(ros_runs, settings.domain_id))
    outcomes: list[RunOutcome] = []
    for round_index in range(settings.repeats):
        for mode in settings.modes:
            domain_id = None if mode == BARE else next(ids)
            where = "" if domain_id is None else f", ROS_DOMAIN_ID={domain_id}"
            log(f"[{PROGRAM} {COMMAND}] round {round_index + 1}/{settings.repeats}: {mode}"
                f"{where}, {settings.total_env_steps} env steps ...")
            outcome = run_once(mode, round_index, settings, domain_id)
            outcomes.append(outcome)
            if outcome.metrics is not None:
                log(f"[{PROGRAM} {COMMAND}]   done in {outcome.process_wall_s:.1f} s: evaluation "
                    f"return {outcome.metrics.eval_mean_return:.1f}")
            else:
                log(f"[{PROGRAM} {COMMAND}]   failed: {outcome.error}")
    return outcomes


def report(settings: CompareSettings, outcomes: Sequence[RunOutcome]) -> tuple[str, dict[str, Any]]:
    """The printed report (table and a settings line) and its JSON form."""
    rows = summarise(outcomes, settings.modes)
    rounds = f"median of {settings.repeats} rounds" if settings.repeats > 1 else "1 round"
    text = (f"{format_table(rows)}\n\nconfig {settings.config}, {settings.total_env_steps:,} env "
            f"steps per run, {rounds}, {settings.cores} cores; runs in {settings.output_dir}")
    if BARE not in settings.modes:
        text += "\nsample efficiency and wall time x bare are relative to bare: add it to modes:="
    document = {
        "settings": {key: value for key, value in asdict(settings).items()},
        "rows": [asdict(row) for row in rows],
        "runs": [{**asdict(outcome), "cpu_utilisation": outcome.cpu_utilisation}
                 for outcome in outcomes],
    }
    return text, document


# --- the subcommand ------------------------------------------------------------------------------


def execute(settings: CompareSettings, log: Log = print) -> int:
    """Run the comparison, print the table, write the JSON; the exit code (0, or 1 on failures)."""
    outcomes: list[RunOutcome] = []
    interrupted = False
    try:
        outcomes = run_comparison(settings, log)
    except KeyboardInterrupt:
        # run_once has stopped the run in progress; report what completed before the interrupt.
        interrupted = True
    text, document = report(settings, outcomes)
    Path(settings.output_dir).mkdir(parents=True, exist_ok=True)
    (Path(settings.output_dir) / "table.md").write_text(text + "\n")
    (Path(settings.output_dir) / "compare.json").write_text(json.dumps(document, indent=2))
    if settings.json_file:
        try:
            Path(settings.json_file).write_text(json.dumps(document, indent=2))
        except OSError as error:
            raise ToolError(f"cannot write json:={settings.json_file}: {error}",
                            EXIT_FAILURE) from error
    log("")
    log(text)
    if interrupted:
        log(f"[{PROGRAM} {COMMAND}] interrupted; the table holds the runs that completed")
        return 128 + signal.SIGINT
    return EXIT_FAILURE if any(outcome.error for outcome in outcomes) else 0


def compare(values: dict[str, str]) -> int:
    """``rl-bringup compare [modes:=...] [robots:=N] ...`` (see the module docstring)."""
    return execute(settings_from_values(values), lambda line: print(line, flush=True))


def register(subparsers: SubparsersAction) -> None:
    """Add ``compare`` to the ``rl-bringup`` subcommands."""
    add_tool(
        subparsers, COMMAND, compare, keys=KEYS,
        help="train the same task in bare/colocated/decoupled/hybrid mode and tabulate learning",
        description="Train one task in each mode, one run after the other, in rounds, and print a "
        "markdown table per mode: wall time (and x bare), first-solved time, evaluation return, "
        "sample efficiency (vs bare), updates per transition, env steps/s, CPU utilisation, and "
        "the learner's shares of its wall time (gradient steps, getting batches, other). "
        f"key:=value arguments: modes:={','.join(ALL_MODES)} (default all), robots:=N "
        f"(decoupled and hybrid; default {DEFAULT_ROBOTS}), config:=NAME|PATH (default "
        f"{DEFAULT_CONFIG}), total_env_steps:=N (default the config's), repeats:=N (rounds; "
        "median per mode; default 1), output:=DIR (default runs/compare-<time>), json:=FILE, "
        "cpus:=auto|KIND=LIST;... (CPU sets of the ROS runs, as rl-bringup launch), "
        f"timeout:=SECONDS per run (default {DEFAULT_TIMEOUT_S:g}), domain_id:=N (the first ROS "
        "run's; default random per run). Exit 1 when a run fails.",
    )
