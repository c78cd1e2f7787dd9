#!/usr/bin/env python3
"""Spread of the final policy over seeds: the bare loop trained once per seed, per config.

One training run is one draw from a distribution: the final actor of SAC on cart-pole evaluates
anywhere from about 175 to 200 depending on the seed (docs/benchmarks.md, "Spread of the final
policy over seeds"). This benchmark measures that distribution, so that a budget, a hyperparameter
or a single-run threshold can be judged against it rather than against one lucky or unlucky run.

Every (config, seed) pair is one ``rl-train-bare`` process (``python -m rl_core.training``) with
``--seed`` and ``--total-env-steps``; ``--jobs`` of them run at once (each trains on one torch
thread, as the configs set), seeds interleaved across configs so that every config sees the same
machine load. A line prints as each run ends; the table gives, per config: runs, median, minimum
and maximum of the evaluation return, and how many runs reached the config's ``solve_return`` (the
threshold the learning tests assert).

Usage::

    .venv/bin/python benchmarks/seed_spread.py                              # cartpole, seeds 1-16
    .venv/bin/python benchmarks/seed_spread.py --seeds 1-24 --total-env-steps 12000
    .venv/bin/python benchmarks/seed_spread.py --config cartpole --config /tmp/gamma098.yaml

It is a benchmark, not a test: it prints figures; the exit code is 1 only when a run fails (its
line says why), 2 on bad flags. No ROS is started.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from rl_bringup.tools.common import load_config
from rl_bringup.tools.subcommand import ToolError

#: Seconds one bare run may take before it is stopped and reported as failed.
RUN_TIMEOUT_S = 3600.0


@dataclass
class Outcome:
    """One seed's run: its evaluation, or why there is none."""

    config: str
    seed: int
    eval_mean_return: float | None = None
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


def train_one(config: Path, seed: int, steps: int | None, output: Path) -> Outcome:
    """Run the bare loop for one seed in its own process and read its ``result.json``."""
    command = [sys.executable, "-m", "rl_core.training", "--config", str(config),
               "--output", str(output), "--seed", str(seed)]
    if steps:
        command += ["--total-env-steps", str(steps)]
    began = time.monotonic()
    outcome = Outcome(str(config), seed)
    try:
        finished = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                  check=False)
    except subprocess.TimeoutExpired:  # subprocess.run kills its own child by PID
        outcome.error = f"no result after {RUN_TIMEOUT_S:.0f} s"
        return outcome
    outcome.wall_time_s = time.monotonic() - began
    result_file = output / "result.json"
    if finished.returncode != 0 or not result_file.is_file():
        tail = (finished.stderr or finished.stdout).strip().splitlines()[-1:] or ["no output"]
        outcome.error = f"exit {finished.returncode}: {tail[0]}"
        return outcome
    result = json.loads(result_file.read_text())
    outcome.eval_mean_return = float(result["eval_mean_return"])
    outcome.solved_at_env_steps = result.get("solved_at_env_steps")
    return outcome


def table(configs: dict[str, float], outcomes: list[Outcome]) -> str:
    """One markdown row per config: runs, median/min/max evaluation, runs reaching the threshold."""
    lines = ["| config | runs | median | min | max | >= solve_return |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, threshold in configs.items():
        returns = [o.eval_mean_return for o in outcomes
                   if o.config == name and o.eval_mean_return is not None]
        if not returns:
            lines.append(f"| {Path(name).name} | 0 | - | - | - | - |")
            continue
        reached = sum(value >= threshold for value in returns)
        lines.append(f"| {Path(name).name} | {len(returns)} | {statistics.median(returns):.1f} | "
                     f"{min(returns):.1f} | {max(returns):.1f} | "
                     f"{reached}/{len(returns)} (>= {threshold:g}) |")
    return "\n".join(lines)


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
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="runs at once (default: the CPU count)")
    parser.add_argument("--output", type=Path, default=None,
                        help="folder for the runs (default runs/seeds-<time>)")
    parser.add_argument("--json", type=Path, default=None, help="write every run's outcome here")
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.total_env_steps is not None and args.total_env_steps < 1):
        parser.error("--jobs and --total-env-steps must be positive")
    try:
        configs = {str(path): config.trainer.solve_return
                   for path, config in (load_config(value) for value in args.config or ["cartpole"])}
    except ToolError as error:
        parser.error(str(error))
    output = args.output or Path(f"runs/seeds-{time.strftime('%Y%m%d-%H%M%S')}")
    print(f"{len(configs)} config(s) x {len(args.seeds)} seeds, {args.jobs} at once, output "
          f"{output}", flush=True)

    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = [pool.submit(train_one, Path(config), seed, args.total_env_steps,
                            output / f"{index}-{Path(config).stem}" / f"seed{seed}")
                for seed in args.seeds for index, config in enumerate(configs)]
        for future in as_completed(runs):
            outcome = future.result()
            outcomes.append(outcome)
            figure = (f"evaluation {outcome.eval_mean_return:.1f}, solved at "
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
