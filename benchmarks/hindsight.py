#!/usr/bin/env python3
"""Goals relabelled in hindsight (HER) against none, on the goal-conditioned KukaReach with its
sparse reward (issue 43: with HER in at most half the transitions it needs without).

Per seed, one after the other, the bare loop (the replay buffer and learner the nodes run) on
``config/kuka_reach_goal.yaml`` with its ``her_k`` and with ``her_k: 0``, evaluated on 20
episodes every 3,000 transitions (the config's). The table gives per variant the transitions at
the first evaluation with a success rate of at least 80 % (median over the seeds that got
there), how many seeds got there, the median last success rate and the wall time. No ROS.

Usage::

    .venv/bin/python benchmarks/hindsight.py --seeds 1-3 --markdown
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from benchmarks.discrete_actions import seeds_of, side_by_side  # noqa: E402
from benchmarks.tables import LEFT, RIGHT, print_tables  # noqa: E402

CONFIG = REPO / "config" / "kuka_reach_goal.yaml"
#: The success rate that counts as learned (config/kuka_reach.yaml's criterion).
TARGET = 0.8
COLUMNS = [("variant", LEFT), ("seeds", RIGHT), ("transitions to 80 % success", RIGHT),
           ("seeds reaching it", RIGHT), ("last success rate", RIGHT), ("wall time", RIGHT)]


def run(seed: int, her_k: int | None, budget: int | None, stop_at_target: bool = False
        ) -> tuple[list[tuple[int, float]], float]:
    """One bare run (``her_k`` None: the config's): its evaluations ``(transitions, success
    rate)`` and its wall time; with ``stop_at_target`` it ends at the first evaluation with
    :data:`TARGET`."""
    from rl_core.config import NODE_CONFIGS, load_run_config
    from rl_core.learning.training import train

    overrides: dict = {node: {"seed": seed} for node in NODE_CONFIGS}
    if her_k is not None:
        overrides["replay_buffer"]["her_k"] = her_k
    if budget:
        overrides["replay_buffer"]["total_env_steps"] = budget
    if stop_at_target:
        overrides["trainer"].update(stop_at_target=True, target_success_rate=TARGET)
    config = load_run_config(CONFIG, overrides)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as output:
        result = train(config, output, log=lambda _line: None)
    return ([(int(e["env_steps"]), float(e["success_rate"] or 0.0)) for e in result.evaluations],
            time.monotonic() - started)


def summary_row(variant: str, runs: list[tuple[list[tuple[int, float]], float]]) -> list[str]:
    """The page's row of one variant from its seeds' ``(evaluations, wall time)``."""
    reached = [next(steps for steps, rate in evaluations if rate >= TARGET)
               for evaluations, _ in runs if any(rate >= TARGET for _, rate in evaluations)]
    lasts = [evaluations[-1][1] if evaluations else 0.0 for evaluations, _ in runs]
    return [variant, str(len(runs)),
            f"{statistics.median(reached):,.0f}" if reached else "not reached",
            f"{len(reached)} of {len(runs)}", f"{statistics.median(lasts):.2f}",
            f"{statistics.median(wall for _, wall in runs):.0f} s"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-3", help="seeds, e.g. 1-3 (default)")
    parser.add_argument("--budget", type=int, default=0,
                        help="transitions per run (default: the config's)")
    parser.add_argument("--budget-without", type=int, default=0,
                        help="transitions per run without relabelling (default: --budget), "
                             "e.g. twice it, to see whether it needs more than twice as many")
    parser.add_argument("--stop-at-target", action="store_true",
                        help="end a run at its first evaluation with 80 %% success")
    parser.add_argument("--markdown", action="store_true", help="also print the page's table")
    args = parser.parse_args(argv)
    stop = args.stop_at_target
    variants = {"SAC + HER (her_k 4)": functools.partial(run, her_k=None, budget=args.budget,
                                                         stop_at_target=stop),
                "SAC, no relabelling": functools.partial(
                    run, her_k=0, budget=args.budget_without or args.budget, stop_at_target=stop)}
    rows = side_by_side(variants, seeds_of(args.seeds), summary_row,
                        lambda evaluations: f"success rates {evaluations}")
    print_tables(COLUMNS, rows, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
