#!/usr/bin/env python3
"""SAC for a Discrete action and double DQN beside Stable-Baselines3's DQN, on gymnasium's
CartPole-v1 with one budget (issue 43 item 2: choose the discrete learner by measurement).

Per seed, one after the other: ``rl-train-bare``'s loop on ``config/cartpole_discrete.yaml``
(discrete SAC) and ``config/cartpole_dqn.yaml`` (double DQN, ``algorithm: dqn``), and SB3's DQN
with rl-baselines3-zoo's CartPole-v1 hyperparameters, each evaluated deterministically on 10
episodes every 5,000 transitions; SAC also with 3-step returns (``n_step``), and both through
the nodes in colocated mode (``rl-bringup launch colocated``, on the loopback with a
ROS_DOMAIN_ID of its own). The table gives per learner the median over seeds of the last
evaluation and of the best, how many seeds reached 500 at all, and the wall time. All train on
one torch thread.

Usage::

    .venv/bin/python benchmarks/discrete_actions.py --seeds 1-3 --markdown
    .venv/bin/python benchmarks/discrete_actions.py --seeds 1-3 --markdown --learners DQN
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from benchmarks.tables import LEFT, RIGHT, number, print_tables  # noqa: E402

BUDGET = 50_000
EVAL_PERIOD = 5_000
EVAL_EPISODES = 10
#: ROS_DOMAIN_ID of the colocated runs: this plus the seed.
DOMAIN_ID = 90
MAX_RETURN = 500.0
COLUMNS = [("learner", LEFT), ("seeds", RIGHT), ("last evaluation", RIGHT), ("best", RIGHT),
           ("seeds reaching 500", RIGHT), ("wall time", RIGHT)]


def discrete_sac(seed: int, n_step: int | None = 1, config: str = "cartpole_discrete"
                 ) -> tuple[list[float], float]:
    """The bare loop's evaluations of one seed, and its wall time (``config``: the scenario;
    ``n_step`` None: the scenario's, as ``cartpole_dqn``'s double DQN)."""
    from rl_core.config import NODE_CONFIGS, load_run_config
    from rl_core.learning.training import train

    overrides = {node: {"seed": seed} for node in NODE_CONFIGS}
    overrides["replay_buffer"]["total_env_steps"] = BUDGET
    overrides["trainer"].update(eval_period=EVAL_PERIOD, eval_episodes=EVAL_EPISODES,
                                **({} if n_step is None else {"n_step": n_step}))
    run_config = load_run_config(REPO / "config" / f"{config}.yaml", overrides)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as output:
        result = train(run_config, output, log=lambda _line: None)
    return [float(e["mean_return"]) for e in result.evaluations], time.monotonic() - started


def colocated_sac(seed: int, n_step: int | None = 1, config: str = "cartpole_discrete"
                  ) -> tuple[list[float], float]:
    """The same run through the nodes in colocated mode: its evaluations and its wall time
    (the process tree's, start and stop included)."""
    from benchmarks.seed_spread import Runner, run_one

    runner = Runner("colocated", 1, BUDGET, (f"eval_period:={EVAL_PERIOD}",
                                             f"eval_episodes:={EVAL_EPISODES}",
                                             *([] if n_step is None else [f"n_step:={n_step}"])))
    with tempfile.TemporaryDirectory() as output:
        result, wall, error = run_one(runner, REPO / "config" / f"{config}.yaml", seed,
                                      Path(output), DOMAIN_ID + seed)
    if result is None:
        raise RuntimeError(f"colocated seed {seed}: {error}")
    return [float(e["mean_return"]) for e in result["evaluations"]], wall


def sb3_dqn(seed: int) -> tuple[list[float], float]:
    """SB3 DQN (the zoo's CartPole-v1 settings): its evaluations of one seed, and its wall time."""
    import gymnasium
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    model = DQN("MlpPolicy", gymnasium.make("CartPole-v1"), learning_rate=2.3e-3, batch_size=64,
                buffer_size=100_000, learning_starts=1000, gamma=0.99, target_update_interval=10,
                train_freq=256, gradient_steps=128, exploration_fraction=0.16,
                exploration_final_eps=0.04, policy_kwargs={"net_arch": [256, 256]}, seed=seed)
    evaluation_env = gymnasium.make("CartPole-v1")
    returns = []
    started = time.monotonic()
    for _ in range(BUDGET // EVAL_PERIOD):
        model.learn(EVAL_PERIOD, reset_num_timesteps=False)
        mean, _ = evaluate_policy(model, evaluation_env, EVAL_EPISODES, deterministic=True)
        returns.append(float(mean))
    return returns, time.monotonic() - started


LEARNERS = {"discrete SAC (bare loop)": discrete_sac,
            "discrete SAC, n_step 3 (bare loop)": functools.partial(discrete_sac, n_step=3),
            "discrete SAC (colocated)": colocated_sac,
            "discrete SAC, n_step 3 (colocated)": functools.partial(colocated_sac, n_step=3),
            "double DQN, n_step 3 (bare loop)": functools.partial(
                discrete_sac, n_step=None, config="cartpole_dqn"),
            "double DQN, n_step 3 (colocated)": functools.partial(
                colocated_sac, n_step=None, config="cartpole_dqn"),
            "SB3 DQN (zoo settings)": sb3_dqn}


def seeds_of(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def summary_row(learner: str, runs: list[tuple[list[float], float]]) -> list[str]:
    """The page's row of one learner from its seeds' ``(evaluations, wall time)``."""
    lasts = [returns[-1] for returns, _ in runs]
    bests = [max(returns) for returns, _ in runs]
    reached = sum(best >= MAX_RETURN for best in bests)
    return [learner, str(len(runs)), number(statistics.median(lasts), 1),
            number(statistics.median(bests), 1), f"{reached} of {len(runs)}",
            f"{statistics.median(wall for _, wall in runs):.0f} s"]


def side_by_side(variants: dict[str, Callable[[int], tuple[Any, float]]], seeds: list[int],
                 row: Callable[[str, list[tuple[Any, float]]], list[str]],
                 describe: Callable[[Any], str]) -> list[list[str]]:
    """Run every variant on every seed in turn (``variant(seed)`` -> ``(evaluations, wall
    time)``), print each run, and return one table row per variant."""
    rows = []
    for name, variant in variants.items():
        runs = []
        for seed in seeds:
            evaluations, wall = variant(seed)
            print(f"{name} seed {seed}: {describe(evaluations)}, {wall:.0f} s", flush=True)
            runs.append((evaluations, wall))
        rows.append(row(name, runs))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-3", help="seeds, e.g. 1-3 (default)")
    parser.add_argument("--markdown", action="store_true", help="also print the page's table")
    parser.add_argument("--learners", default="",
                        help="only the learners whose name holds one of these comma-separated "
                             "words, e.g. 'SAC' (default: all)")
    args = parser.parse_args(argv)
    words = [w.strip() for w in args.learners.split(",") if w.strip()]
    learners = {name: run for name, run in LEARNERS.items()
                if not words or any(w in name for w in words)}
    rows = side_by_side(learners, seeds_of(args.seeds), summary_row,
                        lambda returns: f"evaluations {[round(r, 1) for r in returns]}")
    print_tables(COLUMNS, rows, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
