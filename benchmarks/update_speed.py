#!/usr/bin/env python3
"""Gradient updates per second of our SAC against Stable-Baselines3's SAC and the machine's limit.

Both learners do the same work per update: sample a batch from their own replay buffer (filled
with random transitions of the task's sizes) and take one gradient step of twin critics, actor
and entropy temperature, with Polyak-averaged target critics. Sizes are the shipped configs':

* ``cartpole``: observation 4, action 1, hidden 64x64, batch 128 (``config/cartpole.yaml``);
* ``kuka``: observation 23, action 7, hidden 256x256, batch 256 (``config/kuka_reach.yaml``).

Each repeat times ours and SB3's one after the other (the order alternates), so both see the
same machine; the table gives medians of the repeats and the ratio. The machine's limit is the
FLOPs of one update (the linear layers' multiply-adds of every forward and backward pass,
counted in :func:`update_flops`) divided by the rate at which this core multiplies 256x256
matrices (measured in each repeat): updates per second no implementation could beat here.

Usage::

    .venv/bin/python benchmarks/update_speed.py                     # both sizes, 1 thread
    .venv/bin/python benchmarks/update_speed.py --size kuka --repeats 7 --threads 2
    .venv/bin/python benchmarks/update_speed.py --compile    # and ours with compile_update
    .venv/bin/python benchmarks/update_speed.py --compile --bfloat16   # and mixed precision

With ``--compile`` a third learner, ours with ``compile_update`` (the gradient step as one
compiled graph), joins the repeats; the seconds its first update took to compile are printed per
size. ``--bfloat16`` adds ours with ``update_precision: bfloat16`` (eager, and compiled with
``--compile``), and a second limit: the update's FLOPs at this core's bfloat16 rate for 256x256
matrices (the ``bfloat16 limit`` column; the ``/ limit`` ratios of the mixed-precision learners
are against it).

A benchmark, not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is a package at the repository root
    sys.path.insert(0, str(REPO))
from benchmarks.tables import LEFT, RIGHT, bold, markdown_table, number, times  # noqa: E402


@dataclass(frozen=True)
class Size:
    obs_dim: int
    action_dim: int
    hidden: tuple[int, ...]
    batch: int


SIZES = {
    "cartpole": Size(4, 1, (64, 64), 128),
    "kuka": Size(23, 7, (256, 256), 256),
}
#: Transitions in each learner's replay buffer.
BUFFER_ROWS = 20_000


def update_flops(size: Size) -> float:
    """FLOPs of one SAC update's linear layers (2 per multiply-add).

    Per update: the actor forward on next observations and on observations (2 F_a), its
    backward (weights and inputs, 2 F_a); the target critics forward (F_q for both), the
    critics forward and backward for the critic loss (3 F_q), and the critics forward on the
    actor's actions with the backward to those actions only (2 F_q, the weight gradients are
    not needed). F_a, F_q: one forward pass of the actor and of both critics on a batch.
    """
    def forward(inputs: int, outputs: int) -> float:
        widths = [inputs, *size.hidden, outputs]
        return 2.0 * size.batch * sum(a * b for a, b in zip(widths, widths[1:]))
    actor = forward(size.obs_dim, 2 * size.action_dim)
    critics = 2 * forward(size.obs_dim + size.action_dim, 1)
    return 4 * actor + 6 * critics


def square_matmul_rate(n: int, seconds: float, dtype: torch.dtype = torch.float32) -> float:
    """FLOP/s of this core on n x n matrix products."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        torch.mm(a, b)
        calls += 1
    return calls * 2.0 * n ** 3 / (time.perf_counter() - start)


def ours(size: Size, compile_update: bool = False,
         update_precision: str = "float32") -> Callable[[], None]:
    from rl_core.algorithms.sac import SAC
    from rl_core.config import SACConfig
    from rl_core.replay import ReplayBuffer
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(size.obs_dim, size.action_dim, BUFFER_ROWS, seed=0)
    buffer.add(rng.standard_normal((BUFFER_ROWS, size.obs_dim), dtype=np.float32),
               rng.uniform(-1, 1, (BUFFER_ROWS, size.action_dim)).astype(np.float32),
               rng.standard_normal(BUFFER_ROWS, dtype=np.float32),
               rng.standard_normal((BUFFER_ROWS, size.obs_dim), dtype=np.float32),
               rng.random(BUFFER_ROWS) < 0.01)
    sac = SAC(size.obs_dim, size.action_dim,
              SACConfig(hidden_sizes=size.hidden, compile_update=compile_update,
                        update_precision=update_precision))
    return lambda: sac.update(buffer.sample(size.batch))


def stable_baselines3(size: Size) -> Callable[[], None]:
    import gymnasium as gym
    from stable_baselines3 import SAC as SB3SAC

    class Sizes(gym.Env):  # spaces only: SB3 builds its networks and buffer from them
        observation_space = gym.spaces.Box(-np.inf, np.inf, (size.obs_dim,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (size.action_dim,), np.float32)

    model = SB3SAC("MlpPolicy", Sizes(), buffer_size=BUFFER_ROWS, batch_size=size.batch,
                   policy_kwargs={"net_arch": list(size.hidden)}, seed=0, device="cpu",
                   verbose=0)
    rng = np.random.default_rng(0)
    for _ in range(BUFFER_ROWS):
        model.replay_buffer.add(rng.standard_normal((1, size.obs_dim), dtype=np.float32),
                                rng.standard_normal((1, size.obs_dim), dtype=np.float32),
                                rng.uniform(-1, 1, (1, size.action_dim)).astype(np.float32),
                                rng.standard_normal(1).astype(np.float32),
                                rng.random(1) < 0.01, [{}])
    from stable_baselines3.common.logger import Logger
    model.set_logger(Logger(folder=None, output_formats=[]))  # no output, no folder in /tmp
    return lambda: model.train(gradient_steps=1, batch_size=size.batch)


def rate(step: Callable[[], None], seconds: float) -> float:
    """Updates per second of ``step`` over about ``seconds`` (after a short warm-up)."""
    for _ in range(20):
        step()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        count += 1
    return count / (time.perf_counter() - start)


#: Our learners of the page's table (``--compile --bfloat16``): what each name measures.
LEARNERS = ("ours", "compiled", "ours bf16", "compiled bf16")
#: Issue 21 item 3's goal: an update rate of this many times SB3's.
GOAL_X_SB3 = 2.0
#: docs/results.md's "Update speed" table.
RESULTS_COLUMNS = (("run", LEFT), ("size", LEFT), *((name, RIGHT) for name in LEARNERS),
                   ("SB3", RIGHT), *((f"{name} / SB3", RIGHT) for name in
                                     ("ours", "compiled", "compiled bf16")),
                   ("compiled bf16 / bf16 limit", RIGHT))


@dataclass(frozen=True)
class SizeResult:
    """One size's medians: ``rates`` updates/s per learner (:data:`LEARNERS` measured, and
    ``sb3``), ``limits`` the machine's updates/s per precision (``float32``, ``bfloat16``)."""

    name: str
    size: Size
    rates: Mapping[str, float]
    limits: Mapping[str, float]


def results_table(results: Sequence[SizeResult], run: int = 1) -> str:
    """docs/results.md's "Update speed" table: per size the updates/s of each learner and SB3,
    the ratios to SB3 (the best one bold where it meets :data:`GOAL_X_SB3`) and compiled
    bfloat16's share of the bfloat16 limit; ``-`` for a learner not measured."""
    cells = []
    for result in results:
        rates, sb3 = result.rates, result.rates.get("sb3")
        over_sb3 = {name: rates[name] / sb3 for name in ("ours", "compiled", "compiled bf16")
                    if name in rates and sb3}
        best = max(over_sb3.values(), default=0.0)
        limit = result.limits.get("bfloat16")
        size = result.size
        cells.append([
            str(run), f"{result.name} ({'x'.join(map(str, size.hidden))}, batch {size.batch})",
            *(number(rates.get(name)) for name in LEARNERS), number(sb3),
            *(bold(times(over_sb3[name]), over_sb3[name] == best and best >= GOAL_X_SB3)
              if name in over_sb3 else "-" for name in ("ours", "compiled", "compiled bf16")),
            f"{rates['compiled bf16'] / limit:.2f}" if "compiled bf16" in rates and limit else "-",
        ])
    return markdown_table(RESULTS_COLUMNS, cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), action="append",
                        help="sizes to measure (default: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--compile", action="store_true",
                        help="also measure ours with compile_update (torch.compile)")
    parser.add_argument("--bfloat16", action="store_true",
                        help="also measure ours with update_precision: bfloat16")
    parser.add_argument("--markdown", action="store_true",
                        help="also print docs/results.md's table of the figures measured")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}, {args.threads} thread(s), {os.cpu_count()} CPUs, "
          f"{args.repeats} repeats of {args.seconds:.0f} s; 256x256 matmul: "
          f"{square_matmul_rate(256, 1.0) / 1e9:.1f} GFLOP/s"
          + (f", in bfloat16 {square_matmul_rate(256, 1.0, torch.bfloat16) / 1e9:.1f} GFLOP/s"
             if args.bfloat16 else ""))
    # Ours in each variant: (compile_update, update_precision).
    variants = {"ours": (False, "float32")}
    if args.compile:
        variants["compiled"] = (True, "float32")
    if args.bfloat16:
        variants["ours bf16"] = (False, "bfloat16")
        if args.compile:
            variants["compiled bf16"] = (True, "bfloat16")
    precisions = sorted({precision for _, precision in variants.values()}, reverse=True)
    print("| size |" + "".join(f" {key} updates/s |" for key in variants) + " SB3 updates/s |"
          + "".join(f" {key} / SB3 |" for key in variants)
          + "".join(f" {'' if p == 'float32' else p + ' '}limit updates/s |" for p in precisions)
          + "".join(f" {key} / limit |" for key in variants))
    print("|---|" + "---:|" * (3 * len(variants) + 1 + len(precisions)))
    results: list[SizeResult] = []
    for name in args.size or sorted(SIZES):
        size = SIZES[name]
        learners = {key: ours(size, *variant) for key, variant in variants.items()}
        learners["sb3"] = stable_baselines3(size)
        for key, (compiled, _) in variants.items():
            if compiled:
                start = time.perf_counter()
                learners[key]()
                print(f"{name}: the first update of {key} took {time.perf_counter() - start:.0f} "
                      f"s", flush=True)
        rates: dict[str, list[float]] = {key: [] for key in learners}
        limits: dict[str, list[float]] = {precision: [] for precision in precisions}
        for repeat in range(args.repeats):
            order = list(learners) if repeat % 2 == 0 else list(reversed(learners))
            for key in order:
                rates[key].append(rate(learners[key], args.seconds))
            for precision in precisions:
                limits[precision].append(square_matmul_rate(256, 1.0, getattr(torch, precision))
                                         / update_flops(size))
        median = {key: statistics.median(values) for key, values in rates.items()}
        limit = {precision: statistics.median(values) for precision, values in limits.items()}
        print(f"| {name} ({size.obs_dim}/{size.action_dim}, "
              f"{'x'.join(map(str, size.hidden))}, batch {size.batch}) |"
              + "".join(f" {median[key]:,.0f} |" for key in variants)
              + f" {median['sb3']:,.0f} |"
              + "".join(f" {median[key] / median['sb3']:.2f}x |" for key in variants)
              + "".join(f" {limit[precision]:,.0f} |" for precision in precisions)
              + "".join(f" {median[key] / limit[variant[1]]:.2f} |"
                        for key, variant in variants.items()), flush=True)
        results.append(SizeResult(name, size, median, limit))
    if args.markdown:
        print("\n" + results_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
