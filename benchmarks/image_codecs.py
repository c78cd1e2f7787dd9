#!/usr/bin/env python3
"""Bytes per step, env steps/s and CPU cost of each observation codec, side by side in one run.

Two measurements of the pixel cart-pole, both per codec, codecs interleaved:

1. **Codec work, no ROS.** A random-action rollout for ``--robots`` robots (the batch one DDS hop
   carries per step) is encoded and decoded batch by batch; bytes per env step and CPU µs per env
   step on each side. ``latent`` runs the policy's convolutional encoder on the robot side (its
   cost is the encoder forward pass; sized as in config/cartpole_pixels.yaml) and sends
   ``feature_dim`` float32 per observation.
2. **Through DDS** (``--dds``, the default): ``rl-bringup launch decoupled robots:=2
   config:=cartpole_pixels observation_codec:=CODEC`` with the learner idle (``rate_limit:=false``
   and no update before the window ends), so acting runs free and the figures are the transport
   and inference. A probe reads the simulators' ``/diagnostics`` after a warm-up and again after
   ``--window`` seconds: env steps/s of both robots, and the payload bytes they sent per env step
   on the acting path (observations and their images, or features) and with the experience
   (batches and images for the replay buffer). Rounds (``--rounds``) run every codec in turn; the
   table shows medians.

Usage::

    .venv/bin/python benchmarks/image_codecs.py [--robots 2] [--steps 300] [--rounds 3]
    .venv/bin/python benchmarks/image_codecs.py --no-dds          # codec work only (seconds)

ROS runs with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a ``ROS_DOMAIN_ID`` of its own;
processes are stopped by PID (the launch's process group). tests/system/test_codecs_through_dds.py
asserts on the same measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
PIXELS_CONFIG = REPO / "config" / "cartpole_pixels.yaml"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.tables import LEFT, RIGHT, markdown_table, number  # noqa: E402
from rl_core.algorithms.encoders import PixelEncoder, image_to_tensor
from rl_core.config import load_run_config
from rl_core.envs import CARTPOLE_PIXELS_ID, VectorEnv
from rl_core.wire.image_codecs import decode_batch, encode_batch


def rollout(robots: int, steps: int, seed: int) -> list[np.ndarray]:
    """Observation batches ``(robots, stack, h, w, 3)`` of a random-action rollout."""
    envs = VectorEnv(CARTPOLE_PIXELS_ID, robots)
    rng = np.random.default_rng(seed)
    try:
        batches = [envs.reset(seed=seed)]
        for _ in range(steps - 1):
            batches.append(envs.step(rng.uniform(-1, 1, (robots, 1)).astype(np.float32)).obs)
    finally:
        envs.close()
    return batches


def measure(batches: list[np.ndarray], quality: int) -> dict[str, dict[str, float]]:
    """Per codec: bytes, encode and decode CPU µs, all per env step (one robot's observation)."""
    config = load_run_config(PIXELS_CONFIG).sac  # the encoder the DDS runs use
    encoder = PixelEncoder(batches[0].shape[1:], config.feature_dim, config.encoder_channels)
    codecs = {
        "raw": lambda b: encode_batch(b, "raw"),
        "png": lambda b: encode_batch(b, "png"),
        f"jpeg q{quality}": lambda b: encode_batch(b, "jpeg", quality),
        "latent": lambda b: encoder(image_to_tensor(b)).numpy().tobytes(),
    }
    decoders = {"raw": "raw", "png": "png", f"jpeg q{quality}": "jpeg"}
    totals = {name: {"bytes": 0.0, "encode_s": 0.0, "decode_s": 0.0} for name in codecs}
    with torch.no_grad():
        for batch in batches:
            for name, encode in codecs.items():
                start = time.process_time()
                data = encode(batch)
                middle = time.process_time()
                if name in decoders:
                    decode_batch(data, decoders[name], batch.shape)
                else:  # latent: features are used as they arrive
                    np.frombuffer(data, dtype=np.float32)
                end = time.process_time()
                totals[name]["bytes"] += len(data)
                totals[name]["encode_s"] += middle - start
                totals[name]["decode_s"] += end - middle
    env_steps = len(batches) * batches[0].shape[0]
    return {name: {"bytes_per_step": t["bytes"] / env_steps,
                   "encode_us_per_step": 1e6 * t["encode_s"] / env_steps,
                   "decode_us_per_step": 1e6 * t["decode_s"] / env_steps}
            for name, t in totals.items()}


# --- through DDS: decoupled robots:=2 ------------------------------------------------------------

RL_BRINGUP = str(Path(sys.executable).parent / "rl-bringup")
CODECS = ("raw", "png", "jpeg", "latent")
ROBOTS = 2
#: Counters of a simulator's /diagnostics that the table is made of.
COUNTERS = ("env steps", "dds bytes acting", "dds bytes experience")


class DiagnosticsProbe:
    """A node of this script that keeps the latest /diagnostics values of every status."""

    def __init__(self, domain_id: int) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("_codec_probe", context=self.context)
        self.lock = threading.Lock()
        self.latest: dict[str, tuple[float, dict[str, str]]] = {}
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def _on_diagnostics(self, msg: Any) -> None:
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with self.lock:
            for status in msg.status:
                self.latest[status.name] = (stamp, {kv.key: kv.value for kv in status.values})

    def snapshot(self) -> dict[str, tuple[float, dict[str, str]]]:
        with self.lock:
            return dict(self.latest)

    def close(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def simulators_counting(snapshot: dict[str, tuple[float, dict[str, str]]]) -> bool:
    return all(int(snapshot.get(f"/robot_{k}/simulator", (0, {}))[1].get("env steps", "0")) > 0
               for k in range(ROBOTS))


def measure_deployment(codec: str, environ: dict[str, str], output_dir: Path, warmup_s: float,
                       window_s: float, quality: int = 90,
                       log: Any = lambda line: None) -> dict[str, Any]:
    """One decoupled robots:=2 run of the pixel cart-pole with ``codec``; its figures:
    ``steps_per_s`` (both robots), ``acting_bytes_per_step``, ``experience_bytes_per_step``, and
    ``rejected`` (rejected-input counters of every node, which should stay empty) with
    ``rejections_logged``, the last lines the run logged about them."""
    from tests.processes import Child

    domain_id = int(environ["ROS_DOMAIN_ID"])
    run = Child([RL_BRINGUP, "launch", "decoupled", f"robots:={ROBOTS}", "config:=cartpole_pixels",
                 f"observation_codec:={codec}", f"jpeg_quality:={quality}", "rate_limit:=false",
                 "learning_starts:=1000000000", "total_env_steps:=1000000000",
                 f"output_dir:={output_dir}", f"domain_id:={domain_id}"], env=environ)
    probe = DiagnosticsProbe(domain_id)
    try:
        deadline = time.monotonic() + 120.0
        while not simulators_counting(probe.snapshot()):
            if run.wait(0.5) is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{codec}: the simulators never stepped; output:\n"
                                   f"{run.output()[-3000:]}")
        time.sleep(warmup_s)
        before = probe.snapshot()
        time.sleep(window_s)
        after = probe.snapshot()
    finally:
        probe.close()
        run.stop(grace_s=20.0)
    steps = acting = experience = seconds = 0.0
    for k in range(ROBOTS):
        (t0, v0), (t1, v1) = before[f"/robot_{k}/simulator"], after[f"/robot_{k}/simulator"]
        delta = {key: float(v1[key]) - float(v0[key]) for key in COUNTERS}
        steps += delta["env steps"]
        acting += delta["dds bytes acting"]
        experience += delta["dds bytes experience"]
        seconds = max(seconds, t1 - t0)
    rejected = {name: {key: value for key, value in values.items()
                       if key.startswith("rejected") and value != "0"}
                for name, (_, values) in after.items()}
    figures = {"codec": codec, "steps_per_s": steps / seconds if seconds else 0.0,
               "acting_bytes_per_step": acting / max(steps, 1.0),
               "experience_bytes_per_step": experience / max(steps, 1.0),
               "env_steps": steps, "window_s": seconds,
               "rejected": {name: counts for name, counts in rejected.items() if counts},
               "rejections_logged": [line for line in run.output().splitlines()
                                     if "rejected" in line][-10:]}
    log(f"{codec}: {figures['steps_per_s']:.1f} env steps/s, "
        f"{figures['acting_bytes_per_step']:,.0f} + {figures['experience_bytes_per_step']:,.0f} "
        "bytes/step (acting + experience)")
    return figures


def measure_dds(codecs: tuple[str, ...], rounds: int, warmup_s: float, window_s: float,
                quality: int, domain_id: int) -> dict[str, dict[str, float]]:
    """Medians over ``rounds`` rounds (every codec in turn) of :func:`measure_deployment`."""
    environ = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   ROS_DOMAIN_ID=str(domain_id), PYTHONUNBUFFERED="1")
    runs: dict[str, list[dict[str, Any]]] = {codec: [] for codec in codecs}
    with tempfile.TemporaryDirectory(prefix="rl_codecs_") as folder:
        for round_ in range(rounds):
            for codec in codecs:
                runs[codec].append(measure_deployment(
                    codec, environ, Path(folder) / f"{codec}_{round_}", warmup_s, window_s,
                    quality, log=lambda line, round_=round_: print(
                        f"  round {round_ + 1}: {line}", flush=True)))
    keys = ("steps_per_s", "acting_bytes_per_step", "experience_bytes_per_step")
    return {codec: {key: statistics.median(run[key] for run in results) for key in keys}
            for codec, results in runs.items()}


#: docs/results.md's "Image codecs" table.
RESULTS_COLUMNS = (("codec", LEFT), ("acting bytes/step (DDS)", RIGHT),
                   ("experience bytes/step (DDS)", RIGHT),
                   (f"env steps/s, {ROBOTS} robots (DDS)", RIGHT), ("vs raw", RIGHT),
                   ("encode µs/step", RIGHT), ("decode µs/step", RIGHT))


def results_table(codec_work: dict[str, dict[str, float]], dds: dict[str, dict[str, float]],
                  quality: int, feature_dim: int) -> str:
    """docs/results.md's "Image codecs" table: per codec of :data:`CODECS` its DDS figures
    (:func:`measure_dds`; ``-`` without them) and its codec work (:func:`measure`, keyed ``jpeg
    q<quality>`` for jpeg); ``vs raw``: env steps/s over raw's."""
    labels = {"raw": "raw (`Image`)", "png": "png (`CompressedImage`)",
              "jpeg": f"jpeg q{quality} (`CompressedImage`)",
              "latent": f"latent ({feature_dim} features)"}
    raw_rate = dds.get("raw", {}).get("steps_per_s")
    cells = []
    for codec in CODECS:
        through = dds.get(codec, {})
        work = codec_work.get(f"jpeg q{quality}" if codec == "jpeg" else codec, {})
        rate = through.get("steps_per_s")
        cells.append([labels[codec], number(through.get("acting_bytes_per_step")),
                      number(through.get("experience_bytes_per_step")), number(rate, 1),
                      f"{rate / raw_rate:.2f}" if rate is not None and raw_rate else "-",
                      number(work.get("encode_us_per_step")),
                      number(work.get("decode_us_per_step"))])
    return markdown_table(RESULTS_COLUMNS, cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", type=int, default=2, help="observations per batch")
    parser.add_argument("--steps", type=int, default=300, help="batches to encode")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--dds", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure decoupled robots:=2 through DDS (minutes)")
    parser.add_argument("--rounds", type=int, default=3, help="DDS rounds (medians)")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds before the window")
    parser.add_argument("--window", type=float, default=20.0, help="DDS window in seconds")
    parser.add_argument("--domain-id", type=int, default=1 + os.getpid() % 100)
    parser.add_argument("--markdown", action="store_true",
                        help="also print docs/results.md's table of the figures measured")
    args = parser.parse_args()
    torch.set_num_threads(1)
    batches = rollout(args.robots, args.steps, args.seed)
    results = measure(batches, args.quality)
    dds = (measure_dds(CODECS, args.rounds, args.warmup, args.window, args.quality,
                       args.domain_id) if args.dds else {})
    raw = results["raw"]["bytes_per_step"]
    print(f"\n{CARTPOLE_PIXELS_ID}, obs {batches[0].shape[1:]} uint8, batches of {args.robots}, "
          f"{args.steps} steps, 1 torch thread")
    print(f"{'codec':<10} {'bytes/step':>11} {'vs raw':>7} {'encode µs/step':>15} "
          f"{'decode µs/step':>15}")
    for name, figures in results.items():
        print(f"{name:<10} {figures['bytes_per_step']:>11,.0f} "
              f"{figures['bytes_per_step'] / raw:>7.1%} {figures['encode_us_per_step']:>15,.0f} "
              f"{figures['decode_us_per_step']:>15,.0f}")
    if dds:
        raw_rate = dds["raw"]["steps_per_s"] if "raw" in dds else None
        print(f"\ndecoupled robots:={ROBOTS} through DDS, medians of {args.rounds} rounds of "
              f"{args.window:g} s (learner idle)")
        print(f"{'codec':<10} {'env steps/s':>12} {'vs raw':>7} {'acting B/step':>14} "
              f"{'experience B/step':>18}")
        for codec, figures in dds.items():
            ratio = f"{figures['steps_per_s'] / raw_rate:.2f}" if raw_rate else ""
            print(f"{codec:<10} {figures['steps_per_s']:>12.1f} {ratio:>7} "
                  f"{figures['acting_bytes_per_step']:>14,.0f} "
                  f"{figures['experience_bytes_per_step']:>18,.0f}")
    if args.markdown:
        feature_dim = load_run_config(PIXELS_CONFIG).sac.feature_dim
        print("\n" + results_table(results, dds, args.quality, feature_dim))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"robots": args.robots, "steps": args.steps, "results": results,
                       "dds": dds}, handle, indent=2)


if __name__ == "__main__":
    main()
