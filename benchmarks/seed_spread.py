#!/usr/bin/env python3
"""Spread of the final and the best policy over seeds: one training run per seed, per config.

One training run is one draw from a distribution: the final actor of SAC on cart-pole evaluates
anywhere from about 175 to 200 depending on the seed
(docs/history/benchmarks-2026-12.md#spread-of-the-final-policy-over-seeds-benchmarksseed_spreadpy).
This benchmark measures that distribution, so that a budget, a hyperparameter or a single-run
threshold can be judged against it rather than against one lucky or unlucky run.

``--mode bare`` (the default): every (config, seed) pair is one ``rl-train-bare`` process
(``python -m rl_core.learning.training``) with ``--seed`` and ``--total-env-steps``; ``--jobs`` of them run
at once (each trains on one torch thread, as the configs set), seeds interleaved across configs so
that every config sees the same machine load.

``--mode colocated|decoupled|hybrid`` is its distributed counterpart: every pair is one
``rl-bringup launch MODE robots:=N seed:=S`` (one at a time unless ``--jobs`` says otherwise;
each run takes every core it can get), with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a
``ROS_DOMAIN_ID`` of its own. Message timing decides what each batch holds, so even a repeated
seed is a fresh draw there.

A line prints as each run ends; the table gives, per config: runs, median, minimum and maximum of
the final evaluation, the same for the best checkpoint's evaluation (what the learning tests
assert, docs/architecture.md "The best checkpoint"), and how many runs reached the config's
``solve_return`` with each.

Usage::

    .venv/bin/python benchmarks/seed_spread.py                              # cartpole, seeds 1-16
    .venv/bin/python benchmarks/seed_spread.py --seeds 1-24 --total-env-steps 12000
    .venv/bin/python benchmarks/seed_spread.py --config cartpole --config /tmp/gamma098.yaml
    .venv/bin/python benchmarks/seed_spread.py --mode hybrid --robots 2 --seeds 1-24 \
        --total-env-steps 12000
    .venv/bin/python benchmarks/seed_spread.py --mode colocated --seeds 1-24 \
        --launch-arg robot_interface:=ros2_control

It is a benchmark, not a test: it prints figures; the exit code is 1 only when a run fails (its
line says why), 2 on bad flags. Only the distributed modes start ROS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from rl_bringup.plan.discovery import RANDOM_DOMAIN_ID_RANGE
from rl_bringup.plan.layouts import MODES as ROS_MODES
from rl_bringup.run.processes import describe_exit, stop_process
from rl_bringup.tools.common import load_config
from rl_bringup.tools.subcommand import ToolError

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is a package at the repository root
    sys.path.insert(0, str(REPO))
from benchmarks.tables import LEFT, RIGHT, markdown_table  # noqa: E402

#: Seconds one run may take before it is stopped and reported as failed.
RUN_TIMEOUT_S = 3600.0
#: Seconds a launched run gets to shut down after SIGINT before its process group is killed.
STOP_GRACE_S = 20.0
BARE = "bare"


@dataclass
class Outcome:
    """One seed's run: its evaluation, or why there is none."""

    config: str
    seed: int
    eval_mean_return: float | None = None
    best_eval_mean_return: float | None = None
    solved_at_env_steps: int | None = None
    wall_time_s: float = 0.0
    error: str = ""


def parse_seeds(text: str) -> list[int]:
    """``"1-16"``, ``"3,7,9"`` or a mix (``"1-4,9"``) -> the seeds, in order, without repeats."""
    seeds: list[int] = []
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise argparse.ArgumentTypeError(f"seeds: {part!r} is not N or N-M") from None
        if first < 0 or last < first:
            raise argparse.ArgumentTypeError(f"seeds: {part!r} must be non-negative, low to high")
        seeds += [seed for seed in range(first, last + 1) if seed not in seeds]
    if not seeds:
        raise argparse.ArgumentTypeError("seeds: give at least one, e.g. 1-16")
    return seeds


def launch_argument(text: str) -> str:
    """A ``--launch-arg``: ``NAME:=VALUE``, as ``rl-bringup launch`` takes it."""
    if ":=" not in text:
        raise argparse.ArgumentTypeError(f"takes NAME:=VALUE, e.g. robot_interface:=ros2_control, "
                                         f"got {text!r}")
    return text


@dataclass(frozen=True)
class Runner:
    """How every run starts: the mode, its robots and the budget (None: each config's)."""

    mode: str = BARE
    robots: int = 1
    steps: int | None = None
    #: More ``name:=value`` launch arguments of every distributed run, e.g.
    #: ``robot_interface:=ros2_control`` to measure the boundary's learning tests.
    launch_arguments: tuple[str, ...] = ()

    def command(self, config: Path, seed: int, output: Path, domain_id: int) -> list[str]:
        if self.mode == BARE:
            return [sys.executable, "-m", "rl_core.learning.training", "--config", str(config),
                    "--output", str(output), "--seed", str(seed),
                    *(["--total-env-steps", str(self.steps)] if self.steps else [])]
        return [sys.executable, "-m", "rl_bringup.cli", "launch", self.mode,
                f"robots:={self.robots}", f"config:={config}", f"output_dir:={output}",
                f"domain_id:={domain_id}", f"seed:={seed}",
                *([f"total_env_steps:={self.steps}"] if self.steps else []),
                *self.launch_arguments]


def run_one(runner: Runner, config: Path, seed: int, output: Path, domain_id: int
            ) -> tuple[dict | None, float, str]:
    """Run one seed in its own process tree (its log in ``output/run.log``): its
    ``result.json``, seconds and why it failed ('' = it did not); a run past
    :data:`RUN_TIMEOUT_S` is stopped by its process group."""
    output.mkdir(parents=True, exist_ok=True)
    command = runner.command(config, seed, output, domain_id)
    environment = {**os.environ, "PYTHONUNBUFFERED": "1",
                   "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_DOMAIN_ID": str(domain_id)}
    began = time.monotonic()
    error = ""
    log = output / "run.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file,
                                   stderr=subprocess.STDOUT, env=environment,
                                   start_new_session=True)
        try:
            process.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            error = f"no result after {RUN_TIMEOUT_S:.0f} s"
        finally:
            stop_process(process, STOP_GRACE_S)
    wall_time_s = time.monotonic() - began
    result_file = output / "result.json"
    if not error and (process.returncode != 0 or not result_file.is_file()):
        error = f"{describe_exit(process.returncode or 0)}, no result.json"
    if error:
        return None, wall_time_s, f"{error} (log: {log})"
    return json.loads(result_file.read_text()), wall_time_s, ""


def train_one(runner: Runner, config: Path, seed: int, output: Path, domain_id: int) -> Outcome:
    """One seed's run (:func:`run_one`) and the evaluations of its ``result.json``."""
    result, wall_time_s, error = run_one(runner, config, seed, output, domain_id)
    outcome = Outcome(str(config), seed, wall_time_s=wall_time_s, error=error)
    if result is not None:
        outcome.eval_mean_return = result.get("eval_mean_return")
        outcome.best_eval_mean_return = result.get("best_eval_mean_return")
        outcome.solved_at_env_steps = result.get("solved_at_env_steps")
    return outcome


#: The table's columns: each config's runs, then the final and the best evaluation's spread.
COLUMNS = (("config", LEFT), ("solve_return", RIGHT), ("runs", RIGHT),
           *((header, RIGHT) for header in ("final: median", "min", "max", "reached",
                                            "best: median", "min", "max", "reached")))


def spread(values: list[float], threshold: float) -> list[str]:
    """``median``, ``min``, ``max``, ``reached/runs`` cells of one column of returns."""
    if not values:
        return ["-"] * 4
    reached = sum(value >= threshold for value in values)
    return [f"{statistics.median(values):.1f}", f"{min(values):.1f}", f"{max(values):.1f}",
            f"{reached}/{len(values)}"]


def table(configs: dict[str, float], outcomes: list[Outcome]) -> str:
    """One markdown row per config: runs, then median/min/max and runs reaching ``solve_return``
    for the final evaluation and for the best checkpoint's."""
    cells = []
    for name, threshold in configs.items():
        mine = [o for o in outcomes if o.config == name and not o.error]
        final = [o.eval_mean_return for o in mine if o.eval_mean_return is not None]
        best = [o.best_eval_mean_return for o in mine if o.best_eval_mean_return is not None]
        cells.append([Path(name).name, f"{threshold:g}", str(len(mine)),
                      *spread(final, threshold), *spread(best, threshold)])
    return markdown_table(COLUMNS, cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", action="append",
                        help="scenario name in config/ or a YAML path; repeat to compare "
                        "(default cartpole)")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-16"),
                        help="N-M and/or comma-separated seeds (default 1-16)")
    parser.add_argument("--total-env-steps", type=int, default=None,
                        help="budget of every run (default: each config's)")
    parser.add_argument("--mode", choices=(BARE, *ROS_MODES), default=BARE,
                        help="bare loop (default) or a deployment started by rl-bringup launch")
    parser.add_argument("--robots", type=int, default=2,
                        help="robots of decoupled and hybrid runs (default 2)")
    parser.add_argument("--launch-arg", action="append", default=[], metavar="NAME:=VALUE",
                        type=launch_argument,
                        help="one more launch argument of every distributed run; repeatable "
                        "(e.g. robot_interface:=ros2_control)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="runs at once (default: the CPU count for bare, else 1)")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID of the first ROS run, counting up (default random)")
    parser.add_argument("--output", type=Path, default=None,
                        help="folder for the runs (default runs/seeds-<time>)")
    parser.add_argument("--json", type=Path, default=None, help="write every run's outcome here")
    args = parser.parse_args(argv)
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1) if args.mode == BARE else 1
    if jobs < 1 or args.robots < 1 or (args.total_env_steps is not None
                                       and args.total_env_steps < 1):
        parser.error("--jobs, --robots and --total-env-steps must be positive")
    low, high = RANDOM_DOMAIN_ID_RANGE
    first_domain = args.domain_id if args.domain_id is not None else random.randint(low, high)
    if not low <= first_domain <= high:
        parser.error(f"--domain-id must be in {low}..{high}")
    if args.launch_arg and args.mode == BARE:
        parser.error("--launch-arg is for the distributed modes; the bare loop takes a --config")
    robots = 1 if args.mode in (BARE, "colocated") else args.robots
    runner = Runner(args.mode, robots, args.total_env_steps, tuple(args.launch_arg))
    try:
        configs = {str(path): config.trainer.solve_return
                   for path, config in (load_config(value) for value in args.config or ["cartpole"])}
    except ToolError as error:
        parser.error(str(error))
    output = args.output or Path(f"runs/seeds-{time.strftime('%Y%m%d-%H%M%S')}")
    print(f"{len(configs)} config(s) x {len(args.seeds)} seeds, mode {args.mode}"
          f"{f' robots:={robots}' if robots > 1 else ''}{''.join(' ' + a for a in args.launch_arg)}"
          f", {jobs} at once, output {output}",
          flush=True)

    outcomes: list[Outcome] = []
    pairs = [(seed, index, config) for seed in args.seeds for index, config in enumerate(configs)]
    span = high - low + 1
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = [pool.submit(train_one, runner, Path(config), seed,
                            output / f"{index}-{Path(config).stem}" / f"seed{seed}",
                            low + (first_domain - low + number) % span)
                for number, (seed, index, config) in enumerate(pairs)]
        for future in as_completed(runs):
            outcome = future.result()
            outcomes.append(outcome)
            figure = (f"evaluation {outcome.eval_mean_return}, best "
                      f"{outcome.best_eval_mean_return}, solved at "
                      f"{outcome.solved_at_env_steps} steps, {outcome.wall_time_s:.0f} s"
                      if not outcome.error else f"FAILED: {outcome.error}")
            print(f"{Path(outcome.config).name} seed {outcome.seed}: {figure}", flush=True)

    outcomes.sort(key=lambda o: (list(configs).index(o.config), o.seed))
    print(table(configs, outcomes))
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
    return 1 if any(o.error for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
