#!/usr/bin/env python3
r"""How much people in the loop save: transitions and wall time until KukaReach meets its
success criterion, with 0, 5 and 20 demonstration episodes and with scripted interventions.

Every run trains ``config/kuka_reach_demos.yaml`` (RLPD's settings: layer-normalised critics, 2
updates per transition, no random actions, learning from 256 transitions; 20 evaluation
episodes every 1,000 transitions) and ends at the first periodic evaluation with a success
rate >= 80 % (``stop_at_target``) or at the budget. What differs between the variants of one
seed is only what people put in:

* ``none``: nothing, the baseline;
* ``N demos``: ``demos:=`` N episodes of the scripted expert (``rl_core.acting.experts``, with action
  noise 0.1), recorded here for each seed without ROS and written as ``rl-bringup record``
  writes ``/experience`` (an MCAP file of ``rl_interfaces/msg/ExperienceBatch``); the 5 are the
  first 5 of the 20;
* ``interventions``: no demonstrations; the scripted expert takes over a share of the episodes
  that start in the first transitions of each simulator (``expert_interventions`` and
  ``expert_interventions_steps``), as an operator would, and those steps are stored among the
  demonstrations.

Runs are one at a time (each takes every core it can get), seeds in the outer loop so that a cut
short benchmark still compares the variants on the same seeds, each with
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a ``ROS_DOMAIN_ID`` of its own. A line prints as
each run ends; the table gives per mode and variant the runs that met the criterion, the median
transitions and seconds until they did (a run that did not counts as its budget, a lower bound:
the cell says so with ">="), and both as a ratio of the same mode's ``none``.

Usage::

    .venv/bin/python benchmarks/human_in_loop.py --json hil.json
    .venv/bin/python benchmarks/human_in_loop.py --modes colocated --seeds 1-3 --demos 0,20 \
        --interventions 0

It is a benchmark, not a test: it prints figures; the exit code is 1 only when a run fails (its
line says why), 2 on bad flags.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rl_bringup.plan.discovery import RANDOM_DOMAIN_ID_RANGE
from rl_bringup.plan.layouts import MODES as ROS_MODES
from rl_core.acting.experts import KukaReachExpert
from rl_core.envs import KUKA_REACH_ID, make_env
from rl_core.wire.messages import Experience

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is a package at the repository root
    sys.path.insert(0, str(REPO))
from benchmarks.seed_spread import (  # noqa: E402
    Runner,
    launch_argument,
    parse_seeds,
    run_one,
)
from benchmarks.tables import LEFT, RIGHT, bold, markdown_table, number, plain_table  # noqa: E402

CONFIG = REPO / "config" / "kuka_reach_demos.yaml"
NONE = "none"
INTERVENTIONS = "interventions"
#: Transitions of each simulator in which scripted interventions may start (the early episodes).
INTERVENTION_STEPS = 5000


@dataclass
class Outcome:
    """One run: when it met the criterion, or why it has no result."""

    mode: str
    variant: str
    seed: int
    budget: int
    target_env_steps: int | None = None
    target_wall_time_s: float | None = None
    env_steps: int = 0
    wall_time_s: float = 0.0
    demo_transitions: int = 0
    error: str = ""


def expert_episodes(episodes: int, seed: int, noise: float = 0.1) -> list[Experience]:
    """``episodes`` of the scripted KukaReach expert on the in-process task, each one batch of
    its transitions (one robot, env 0)."""
    env = make_env(KUKA_REACH_ID)
    expert = KukaReachExpert(noise=noise, seed=seed)
    recorded = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed * 1000 + episode)
            rows: list[tuple] = []
            done = False
            while not done:
                action = expert.act(np.asarray(obs, dtype=np.float32)[None])[0]
                next_obs, reward, terminated, truncated, _ = env.step(action)
                rows.append((obs, action, reward, next_obs, terminated, truncated))
                obs, done = next_obs, terminated or truncated
            columns = [np.asarray(column) for column in zip(*rows)]
            recorded.append(Experience(
                0, columns[0].astype(np.float32), columns[1].astype(np.float32),
                columns[2].astype(np.float32), columns[3].astype(np.float32),
                columns[4].astype(bool), columns[5].astype(bool), sequence=episode,
                env_ids=np.zeros(len(rows), dtype=np.uint32)))
    finally:
        env.close()
    return recorded


def write_demonstrations(path: Path, batches: list[Experience]) -> int:
    """``batches`` as ``/experience`` messages in an MCAP file, as ``rl-bringup record`` writes
    them; returns the transitions written."""
    from mcap.well_known import MessageEncoding, SchemaEncoding
    from mcap.writer import Writer
    from rclpy.serialization import serialize_message

    from rl_bringup.tools.operate.message_types import full_message_definition
    from rl_nodes.messages import experience_to_msg

    type_name = "rl_interfaces/msg/ExperienceBatch"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as stream:
        writer = Writer(stream)
        writer.start(profile="ros2", library="rl_ros2 benchmarks/human_in_loop.py")
        schema = writer.register_schema(type_name, SchemaEncoding.ROS2,
                                        full_message_definition(type_name).encode())
        channel = writer.register_channel("/experience", MessageEncoding.CDR, schema)
        now = time.time_ns()
        for number, batch in enumerate(batches):
            writer.add_message(channel, log_time=now + number, publish_time=now + number,
                               sequence=number, data=serialize_message(experience_to_msg(batch)))
        writer.finish()
    return sum(len(batch) for batch in batches)


def run(runner: Runner, variant: str, seed: int, output: Path,
        domain_id: int, budget: int) -> Outcome:
    """One training run of ``variant`` and the figures of its ``result.json``."""
    result, wall_time_s, error = run_one(runner, CONFIG, seed, output, domain_id)
    outcome = Outcome(runner.mode, variant, seed, budget, wall_time_s=wall_time_s, error=error)
    if result is not None:
        outcome.target_env_steps = result.get("target_env_steps")
        outcome.target_wall_time_s = result.get("target_wall_time_s")
        outcome.env_steps = int(result["env_steps"])
    return outcome


def runner_for(mode: str, robots: int, budget: int, variant: str, demos: Path | None,
               share: float, extra: tuple[str, ...] = ()) -> Runner:
    """How a run of ``variant`` starts: ``extra`` launch arguments (``--launch-arg``), then the
    variant's own (its demonstrations, or the scripted interventions' share)."""
    if variant == INTERVENTIONS:
        own: tuple[str, ...] = (f"expert_interventions:={share}",
                                f"expert_interventions_steps:={INTERVENTION_STEPS}")
    else:
        own = (f"demos:={demos}",) if demos is not None else ()
    return Runner(mode, robots, budget, (*extra, *own))


#: Issue 22's goal: this many demonstrations in at most this share of the transitions of none.
GOAL_DEMOS, GOAL_RATIO = 20, 0.5
#: docs/results.md's "People in the loop" table.
COLUMNS = (("mode", LEFT), ("variant", LEFT), ("met", RIGHT),
           ("transitions to criterion, median", RIGHT), ("x none", RIGHT),
           ("seconds, median", RIGHT), ("x none", RIGHT))


def cell(values: list[float], lower_bound: bool) -> str:
    if not values:
        return "-"
    return (">=" if lower_bound else "") + number(statistics.median(values))


def table_rows(outcomes: list[Outcome], variants: list[str], modes: list[str],
               robots: int = 2) -> list[list[str]]:
    """Per mode and variant: runs meeting the criterion, median transitions and seconds until
    they did (the budget and the run's time where one did not: then a lower bound), and the
    ratio of both medians to the same mode's baseline (bold where :data:`GOAL_DEMOS`
    demonstrations meet the goal)."""
    rows = []
    for mode in modes:
        label = mode if mode == "colocated" else f"{mode} robots:={robots}"
        baseline: tuple[float, float] | None = None
        for variant in variants:
            mine = [o for o in outcomes if (o.mode, o.variant) == (mode, variant) and not o.error]
            if not mine:
                continue
            met = [o for o in mine if o.target_env_steps is not None]
            steps = [float(o.target_env_steps if o.target_env_steps is not None else o.budget)
                     for o in mine]
            seconds = [float(o.target_wall_time_s if o.target_wall_time_s is not None
                             else o.wall_time_s) for o in mine]
            # Medians of censored runs are lower bounds once half or more of them are censored.
            censored = 2 * (len(mine) - len(met)) >= len(mine)
            medians = (statistics.median(steps), statistics.median(seconds))
            if variant == NONE:
                baseline = medians
            ratios = ["-", "-"]
            if baseline is not None and variant != NONE:
                ratios = [f"{medians[k] / baseline[k]:.2f}" for k in range(2)]
                ratios[0] = bold(ratios[0], variant == f"{GOAL_DEMOS} demos"
                                 and medians[0] <= GOAL_RATIO * baseline[0])
            rows.append([label, variant, f"{len(met)}/{len(mine)}", cell(steps, censored),
                         ratios[0], cell(seconds, censored), ratios[1]])
    return rows


def table(outcomes: list[Outcome], variants: list[str], modes: list[str],
          robots: int = 2) -> str:
    """docs/results.md's "People in the loop" table of :func:`table_rows`."""
    return markdown_table(COLUMNS, table_rows(outcomes, variants, modes, robots))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", choices=ROS_MODES, default=["colocated", "hybrid"],
                        help="deployments to measure (default colocated hybrid)")
    parser.add_argument("--robots", type=int, default=2,
                        help="robots of decoupled and hybrid runs (default 2)")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-3"),
                        help="N-M and/or comma-separated seeds (default 1-3)")
    parser.add_argument("--demos", default="0,5,20",
                        help="demonstration episodes of each variant, comma-separated; 0 is "
                        "the baseline (default 0,5,20)")
    parser.add_argument("--interventions", type=float, default=0.1,
                        help="share of the early episodes the scripted expert takes over "
                        "(default 0.1; 0: no interventions variant)")
    parser.add_argument("--total-env-steps", type=int, default=None,
                        help="budget of a run that does not meet the criterion (default the "
                        "config's)")
    parser.add_argument("--launch-arg", action="append", default=[], metavar="NAME:=VALUE",
                        type=launch_argument,
                        help="one more launch argument of every run, e.g. eval_period:=500; "
                        "repeatable")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID of the first run, counting up (default random)")
    parser.add_argument("--output", type=Path, default=None,
                        help="folder for the runs (default runs/hil-<time>)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write every run's outcome here (rewritten as each run ends)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the table as docs/results.md shows it")
    args = parser.parse_args(argv)
    try:
        demo_counts = sorted({int(part) for part in args.demos.split(",") if part.strip()})
    except ValueError:
        parser.error(f"--demos takes comma-separated episode counts, got {args.demos!r}")
    if any(count < 0 for count in demo_counts) or not 0.0 <= args.interventions <= 1.0:
        parser.error("--demos must be >= 0 and --interventions in [0, 1]")
    low, high = RANDOM_DOMAIN_ID_RANGE
    first_domain = args.domain_id if args.domain_id is not None else random.randint(low, high)
    if not low <= first_domain <= high:
        parser.error(f"--domain-id must be in {low}..{high}")
    from rl_core.config import load_run_config
    budget = args.total_env_steps or load_run_config(CONFIG).replay.total_env_steps
    variants = [NONE if count == 0 else f"{count} demos" for count in demo_counts]
    if args.interventions > 0.0:
        variants.append(INTERVENTIONS)
    output = args.output or Path(f"runs/hil-{time.strftime('%Y%m%d-%H%M%S')}")
    print(f"{CONFIG.name}: {', '.join(variants)} x seeds {args.seeds} x {', '.join(args.modes)}"
          f" (robots:={args.robots} where distributed), budget {budget}, output {output}"
          + "".join(f", {argument}" for argument in args.launch_arg), flush=True)

    outcomes: list[Outcome] = []
    number = 0
    for seed in args.seeds:
        recorded = expert_episodes(max(demo_counts), seed) if max(demo_counts) else []
        for mode in args.modes:
            robots = 1 if mode == "colocated" else args.robots
            for variant, count in zip(variants, [*demo_counts, 0]):
                demos = None
                if count and variant != INTERVENTIONS:
                    demos = output / f"seed{seed}" / f"demos{count}.mcap"
                    if not demos.is_file():
                        write_demonstrations(demos, recorded[:count])
                runner = runner_for(mode, robots, budget, variant, demos, args.interventions,
                                    tuple(args.launch_arg))
                folder = output / f"seed{seed}" / mode / variant.replace(" ", "_")
                outcome = run(runner, variant, seed, folder,
                              low + (first_domain - low + number) % (high - low + 1), budget)
                outcome.demo_transitions = sum(len(batch) for batch in recorded[:count]) \
                    if demos is not None else 0
                number += 1
                outcomes.append(outcome)
                figure = (f"criterion met at {outcome.target_env_steps} transitions, "
                          f"{outcome.target_wall_time_s:.0f} s"
                          if outcome.target_env_steps is not None and outcome.target_wall_time_s
                          is not None else f"criterion not met in {outcome.env_steps}")
                print(f"seed {seed} {mode} {variant}: "
                      f"{figure if not outcome.error else 'FAILED: ' + outcome.error} "
                      f"(run {outcome.wall_time_s:.0f} s)", flush=True)
                if args.json is not None:
                    args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
    rows = table_rows(outcomes, variants, args.modes, args.robots)
    print(plain_table(COLUMNS, rows))
    if args.markdown:
        print("\n" + markdown_table(COLUMNS, rows))
    return 1 if any(o.error for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
