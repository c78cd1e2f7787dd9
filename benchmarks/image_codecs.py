#!/usr/bin/env python3
"""Bytes per step and CPU cost of each observation codec, measured side by side in one run.

Renders a real pixel cart-pole rollout for ``--robots`` robots (the batch one DDS hop would
carry per step), then for each codec encodes and decodes every step's batch once and reports
bytes per env step and CPU microseconds per env step on each side. ``latent`` runs the
policy's convolutional encoder on the robot side (its cost is the encoder forward pass) and sends
``feature_dim`` float32 per robot; the policy side then decodes nothing. Codecs are interleaved
step by step, so a busy machine slows them alike.

Usage::

    .venv/bin/python benchmarks/image_codecs.py [--robots 2] [--steps 300] [--json out.json]

No ROS: this measures the codec work a simulator and a policy node would do per message, not
the transport (see docs/benchmarks.md for what remains to measure through DDS).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from rl_core.config import SACConfig
from rl_core.encoders import PixelEncoder, image_to_tensor
from rl_core.envs import CARTPOLE_PIXELS_ID, VectorEnv
from rl_core.image_codecs import decode_batch, encode_batch


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
    config = SACConfig()
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", type=int, default=2, help="observations per batch")
    parser.add_argument("--steps", type=int, default=300, help="batches to encode")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    batches = rollout(args.robots, args.steps, args.seed)
    results = measure(batches, args.quality)
    raw = results["raw"]["bytes_per_step"]
    print(f"{CARTPOLE_PIXELS_ID}, obs {batches[0].shape[1:]} uint8, batches of {args.robots}, "
          f"{args.steps} steps, 1 torch thread")
    print(f"{'codec':<10} {'bytes/step':>11} {'vs raw':>7} {'encode µs/step':>15} "
          f"{'decode µs/step':>15}")
    for name, figures in results.items():
        print(f"{name:<10} {figures['bytes_per_step']:>11,.0f} "
              f"{figures['bytes_per_step'] / raw:>7.1%} {figures['encode_us_per_step']:>15,.0f} "
              f"{figures['decode_us_per_step']:>15,.0f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"robots": args.robots, "steps": args.steps, "results": results}, handle,
                      indent=2)


if __name__ == "__main__":
    main()
