#!/usr/bin/env python3
"""Inference and update speed of the SAC networks on the CPU vs a CUDA GPU (``device:=``).

What the policy node and the trainer do per call, without ROS:

* ``inference``  ``SquashedGaussianActor.act(obs)`` (stochastic, as the policy node acts) on a batch
                 of observations: numpy in, numpy out, so each GPU call includes both transfers.
                 Batch 1 is a robot with one environment; large batches are a central policy
                 (``robots:=N``) answering many robots with one forward pass. The ``onnx`` column
                 is the exported deterministic policy under onnxruntime on the CPU (the robot-side
                 install).
* ``update``     one ``SAC.update(batch)`` (critics, actor, temperature, target networks) on a
                 numpy batch, as the trainer runs it: the batch crosses to the device once.

Each cell is the median over ``--repeats`` windows of ``--duration`` seconds after a warm-up.
Without a CUDA device the GPU column reads ``no CUDA device: skipped`` (with torch's reason).

Usage::

    .venv/bin/python benchmarks/device.py                          # cart-pole sizes, 256x256
    .venv/bin/python benchmarks/device.py --env kuka --json out.json
    .venv/bin/python benchmarks/device.py --batches 1,64,4096 --update-batches 256,1024

A benchmark, not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from rl_core.algorithms.sac import SAC
from rl_core.config import SACConfig
from rl_core.learning.device import cuda_unavailable_reason, describe
from rl_core.robot.tasks import space_shapes
from rl_core.runs.export import export_onnx
from rl_core.runs.onnx_policy import OnnxPolicy
from rl_core.wire.messages import Batch

ENV_ALIASES = {"cartpole": "rl_ros2/CartPoleBalance-v0", "kuka": "rl_ros2/KukaReach-v0"}
SKIPPED = "no CUDA device: skipped"


def calls_per_second(call: Callable[[], object], duration_s: float, repeats: int,
                     warmup_calls: int) -> float:
    """Median rate of ``call`` over ``repeats`` windows of ``duration_s`` (after a warm-up)."""
    for _ in range(warmup_calls):
        call()
    rates = []
    for _ in range(repeats):
        calls, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < duration_s:
            call()
            calls += 1
        rates.append(calls / elapsed)
    return statistics.median(rates)


def random_batch(rows: int, obs_dim: int, action_dim: int, rng: np.random.Generator) -> Batch:
    return Batch(obs=rng.normal(size=(rows, obs_dim)).astype(np.float32),
                 actions=rng.uniform(-1, 1, (rows, action_dim)).astype(np.float32),
                 rewards=rng.normal(size=rows).astype(np.float32),
                 next_obs=rng.normal(size=(rows, obs_dim)).astype(np.float32),
                 terminated=(rng.uniform(size=rows) < 0.05).astype(np.float32),
                 indices=np.arange(rows, dtype=np.int64), weights=np.ones(rows, np.float32))


def measure(options: argparse.Namespace) -> list[dict[str, object]]:
    """One row per (kind, batch): calls/s on each device (None where skipped)."""
    env_id = ENV_ALIASES.get(options.env, options.env)
    obs_shape, action_shape = space_shapes(env_id)
    obs_dim, action_dim = int(np.prod(obs_shape)), int(np.prod(action_shape))
    config = SACConfig(hidden_sizes=tuple(options.hidden))
    devices = ["cpu"] + ([] if cuda_unavailable_reason() else ["cuda"])
    learners = {device: SAC(obs_dim, action_dim, config, seed=0, device=device)
                for device in devices}
    rng = np.random.default_rng(0)
    timing = dict(duration_s=options.duration, repeats=options.repeats, warmup_calls=20)
    with tempfile.TemporaryDirectory() as folder:
        onnx = OnnxPolicy(export_onnx(learners["cpu"].actor, Path(folder) / "policy.onnx"))
    rows: list[dict[str, object]] = []
    for batch_size in options.batches:
        obs = rng.normal(size=(batch_size, obs_dim)).astype(np.float32)
        row: dict[str, object] = {"kind": "inference", "batch": batch_size}
        for device, sac in learners.items():
            row[device] = calls_per_second(lambda sac=sac, obs=obs: sac.actor.act(obs), **timing)
        row["onnx"] = calls_per_second(lambda obs=obs: onnx.act(obs), **timing)
        rows.append(row)
        print_row(row)
    for batch_size in options.update_batches:
        batch = random_batch(batch_size, obs_dim, action_dim, rng)
        row = {"kind": "update", "batch": batch_size}
        for device, sac in learners.items():
            row[device] = calls_per_second(lambda sac=sac, batch=batch: sac.update(batch), **timing)
        rows.append(row)
        print_row(row)
    return rows


def cell(rate: object, batch: int) -> str:
    if not isinstance(rate, float):
        return SKIPPED
    return f"{rate:,.0f}/s ({1e6 / rate:,.0f} µs, {rate * batch:,.0f} rows/s)"


def print_row(row: dict[str, object]) -> None:
    batch = int(row["batch"])  # type: ignore[arg-type]
    cpu, cuda = row["cpu"], row.get("cuda")
    speedup = f"{cuda / cpu:.2f}x" if isinstance(cuda, float) and isinstance(cpu, float) else "-"
    onnx = f" | onnx cpu {cell(row['onnx'], batch)}" if "onnx" in row else ""
    print(f"{row['kind']:<9} batch {batch:>5} | cpu {cell(cpu, batch)} | cuda {cell(cuda, batch)} "
          f"| cuda/cpu {speedup}{onnx}", flush=True)


def csv_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="SAC inference and update speed, CPU vs CUDA.")
    parser.add_argument("--env", default="cartpole",
                        help="cartpole, kuka or a gymnasium id (sizes the networks)")
    parser.add_argument("--hidden", type=csv_ints, default=(256, 256), help="hidden layer widths")
    parser.add_argument("--batches", type=csv_ints, default=(1, 64, 1024),
                        help="observations per inference call")
    parser.add_argument("--update-batches", type=csv_ints, default=(256, 1024),
                        help="transitions per gradient step")
    parser.add_argument("--duration", type=float, default=1.0, help="seconds per window")
    parser.add_argument("--repeats", type=int, default=3, help="windows per cell (median)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch intra-op threads on the CPU (1, as the node processes run; "
                        "0 = torch's default)")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    if options.torch_threads:
        torch.set_num_threads(options.torch_threads)
    reason = cuda_unavailable_reason()
    gpu = describe(torch.device("cuda")) if not reason else f"{SKIPPED} ({reason})"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s), "
          f"{platform.processor() or platform.machine()}; GPU: {gpu}", flush=True)
    rows = measure(options)
    if options.json:
        Path(options.json).write_text(json.dumps(
            {"torch": torch.__version__, "cpu_threads": torch.get_num_threads(), "gpu": gpu,
             "env": options.env, "hidden": list(options.hidden), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
