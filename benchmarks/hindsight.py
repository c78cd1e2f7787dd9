#!/usr/bin/env python3
"""Goals relabelled in hindsight (HER) against none, on the goal-conditioned KukaReach with its
sparse reward (issue 43: with HER in at most half the transitions it needs without).

Per seed, one after the other, the bare loop (the replay buffer and learner the nodes run) on
``config/kuka_reach_goal.yaml`` with its ``her_k`` and with ``her_k: 0``, and (``--sb3``)
Stable-Baselines3's SAC with its ``HerReplayBuffer`` on the same sizes and schedule, evaluated
on 20 episodes every 3,000 transitions (the config's). The table gives per variant the transitions at
the first evaluation with a success rate of at least 80 % (median over the seeds that got
there), how many seeds got there, the median last success rate and the wall time. ``--modes``
adds the HER runs through the nodes (``rl-bringup launch``, loopback, a domain per seed).

Usage::

    .venv/bin/python benchmarks/hindsight.py --seeds 1-3 --markdown
    .venv/bin/python benchmarks/hindsight.py --seeds 1-3 --stop-at-target --only-modes \
        --modes colocated,decoupled,hybrid --budget 60000
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from benchmarks.discrete_actions import seeds_of, side_by_side  # noqa: E402
from benchmarks.tables import LEFT, RIGHT, print_tables  # noqa: E402

CONFIG = REPO / "config" / "kuka_reach_goal.yaml"
#: The success rate that counts as learned (config/kuka_reach.yaml's criterion).
TARGET = 0.8
#: ROS_DOMAIN_ID of the runs through the nodes (``--modes``): this plus the seed.
DOMAIN_ID = 60
#: Transitions between evaluations, and episodes per evaluation (the config's).
PERIOD, EPISODES = 3_000, 20
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


def through_nodes(seed: int, mode: str, budget: int | None, stop_at_target: bool = False
                  ) -> tuple[list[tuple[int, float]], float]:
    """The same run with HER through the nodes (``rl-bringup launch MODE``; decoupled and hybrid
    with two robots, so the replay buffer follows each robot's episodes): its evaluations and
    the process tree's wall time."""
    from benchmarks.seed_spread import Runner, run_one

    stop = ("stop_at_target:=true", f"target_success_rate:={TARGET}") if stop_at_target else ()
    runner = Runner(mode, 1 if mode == "colocated" else 2, budget or None, stop)
    with tempfile.TemporaryDirectory() as output:
        result, wall, error = run_one(runner, CONFIG, seed, Path(output), DOMAIN_ID + seed)
    if result is None:
        raise RuntimeError(f"{mode} seed {seed}: {error}")
    return ([(int(e["env_steps"]), float(e["success_rate"] or 0.0))
             for e in result["evaluations"]], wall)


def sb3_her(seed: int, budget: int, stop_at_target: bool = False
            ) -> tuple[list[tuple[int, float]], float]:
    """SB3's SAC + HerReplayBuffer ("future", 4 goals) with the config's sizes: 4 envs, batch
    256, 256x256 networks, 0.5 updates per transition after 1,000, initial entropy 0.1; its
    deterministic evaluations ``(transitions, success rate)`` and its wall time."""
    import torch
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.env_util import make_vec_env

    from rl_core.envs import KUKA_REACH_GOAL_ID, register_envs

    register_envs()
    torch.set_num_threads(1)
    envs = make_vec_env(KUKA_REACH_GOAL_ID, n_envs=4, seed=seed)
    model = SAC("MultiInputPolicy", envs, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
                learning_starts=1000, batch_size=256, buffer_size=300_000, train_freq=1,
                gradient_steps=2, ent_coef="auto_0.1", policy_kwargs={"net_arch": [256, 256]},
                seed=seed)
    evaluation_env = gymnasium.make(KUKA_REACH_GOAL_ID)
    evaluations: list[tuple[int, float]] = []
    started = time.monotonic()
    for steps in range(PERIOD, budget + 1, PERIOD):
        model.learn(PERIOD, reset_num_timesteps=False)
        successes = 0
        for episode in range(EPISODES):
            obs, _ = evaluation_env.reset(seed=10_000 * seed + episode)
            done, info = False, {}
            while not done:
                action, _ = model.predict(obs, deterministic=True)
                obs, _, terminated, truncated, info = evaluation_env.step(action)
                done = terminated or truncated
            successes += bool(info.get("is_success"))
        evaluations.append((steps, successes / EPISODES))
        if stop_at_target and evaluations[-1][1] >= TARGET:
            break
    envs.close()
    evaluation_env.close()
    return evaluations, time.monotonic() - started


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
    parser.add_argument("--sb3", action="store_true",
                        help="also Stable-Baselines3's SAC + HerReplayBuffer on --budget")
    parser.add_argument("--only-sb3", action="store_true", help="only it")
    parser.add_argument("--modes", default="",
                        help="also SAC + HER through the nodes in these modes, e.g. "
                             "colocated,decoupled,hybrid (decoupled and hybrid with 2 robots)")
    parser.add_argument("--only-modes", action="store_true", help="only those (and SB3 with --sb3)")
    parser.add_argument("--markdown", action="store_true", help="also print the page's table")
    args = parser.parse_args(argv)
    stop = args.stop_at_target
    variants: dict[str, Callable[[int], tuple[list[tuple[int, float]], float]]] = {}
    if not (args.only_sb3 or args.only_modes):
        variants["SAC + HER (her_k 4)"] = functools.partial(
            run, her_k=None, budget=args.budget, stop_at_target=stop)
        variants["SAC, no relabelling"] = functools.partial(
            run, her_k=0, budget=args.budget_without or args.budget, stop_at_target=stop)
    if args.sb3 or args.only_sb3:
        variants["SB3 SAC + HerReplayBuffer (4 goals)"] = functools.partial(
            sb3_her, budget=args.budget or 60_000, stop_at_target=stop)
    for mode in filter(None, "" if args.only_sb3 else args.modes.split(",")):
        robots = "" if mode == "colocated" else ", robots:=2"
        variants[f"SAC + HER, {mode}{robots}"] = functools.partial(
            through_nodes, mode=mode, budget=args.budget, stop_at_target=stop)
    rows = side_by_side(variants, seeds_of(args.seeds), summary_row,
                        lambda evaluations: f"success rates {evaluations}")
    print_tables(COLUMNS, rows, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
