"""The bare training loop: SAC on a vectorised pybullet task, no ROS.

This is the reference the ROS deployments are measured against (same envs, buffer and learner;
only the transport differs). Run it with ``rl-train-bare --config config/cartpole.yaml``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from rl_core.algorithms.sac import SAC
from rl_core.checkpoint import save_checkpoint
from rl_core.config import ConfigError, RunConfig, load_run_config
from rl_core.envs import VectorEnv
from rl_core.evaluation import evaluate
from rl_core.plotting import plot_training_curve
from rl_core.replay import ReplayBuffer


@dataclass
class TrainResult:
    """Outcome of a training run."""

    env_steps: int
    updates: int
    episodes: int
    wall_time_s: float
    eval_mean_return: float
    eval_std_return: float
    eval_returns: list[float]
    checkpoint_dir: str | None


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (CleanRL style); envs are seeded through ``reset(seed=...)``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class UpdateSchedule:
    """Keeps gradient steps at ``updates_per_step`` per collected transition after warm-up.

    Shared by the bare loop and the trainer node so both follow the same update-to-data ratio.
    """

    def __init__(self, updates_per_step: float, learning_starts: int) -> None:
        self.updates_per_step = updates_per_step
        self.learning_starts = learning_starts
        self._owed = 0.0

    def due(self, new_transitions: int, stored: int) -> int:
        """Gradient steps to run now after ``new_transitions`` arrived (``stored`` in buffer)."""
        if stored < self.learning_starts:
            return 0
        self._owed += new_transitions * self.updates_per_step
        steps = int(self._owed)
        self._owed -= steps
        return steps


def train(config: RunConfig, output_dir: str | Path | None = None,
          log: Callable[[str], None] = print, log_period_s: float = 2.0) -> TrainResult:
    """Train SAC on ``config.simulator.env_id`` for ``config.trainer.total_env_steps`` steps.

    :param output_dir: where the checkpoint and ``result.json`` go (nothing saved when None).
    :param log: receives one progress line every ``log_period_s`` seconds.
    """
    sim, trainer = config.simulator, config.trainer
    seed_everything(trainer.seed)
    if trainer.torch_threads:
        torch.set_num_threads(trainer.torch_threads)
    envs = VectorEnv(sim.env_id, sim.num_envs)
    obs_shape = envs.single_observation_space.shape
    action_shape = envs.single_action_space.shape
    buffer = ReplayBuffer(obs_shape, action_shape, config.replay.capacity,
                          prioritized=config.replay.prioritized, alpha=config.replay.priority_alpha,
                          beta=config.replay.priority_beta, seed=config.replay.seed)
    sac = SAC(int(np.prod(obs_shape)), int(np.prod(action_shape)), config.sac, seed=trainer.seed)
    schedule = UpdateSchedule(trainer.updates_per_step, trainer.learning_starts)
    action_rng = np.random.default_rng(sim.seed)

    recent_returns: deque[float] = deque(maxlen=20)
    curve: list[tuple[int, float]] = []
    env_steps = episodes = 0
    metrics: dict[str, float] = {}
    start = last_log = time.perf_counter()
    last_log_steps = 0
    obs = envs.reset(seed=sim.seed)
    try:
        while env_steps < trainer.total_env_steps:
            if env_steps < sim.random_steps:
                actions = action_rng.uniform(-1.0, 1.0, (sim.num_envs, *action_shape)).astype(np.float32)
            else:
                actions = sac.act(obs.reshape(sim.num_envs, -1)).reshape(sim.num_envs, *action_shape)
            step = envs.step(actions)
            buffer.add(obs, actions, step.rewards, step.next_obs, step.terminated, step.truncated)
            obs = step.obs
            env_steps += sim.num_envs
            for record in step.episodes:
                episodes += 1
                recent_returns.append(float(record.episode_return))
                curve.append((env_steps, float(record.episode_return)))
            for _ in range(schedule.due(sim.num_envs, len(buffer))):
                batch = buffer.sample(trainer.batch_size)
                metrics = sac.update(batch)
                if config.replay.prioritized:
                    buffer.update_priorities(batch.indices, sac.last_td_errors)
            now = time.perf_counter()
            if now - last_log >= log_period_s:
                rate = (env_steps - last_log_steps) / (now - last_log)
                mean_return = np.mean(recent_returns) if recent_returns else float("nan")
                log(f"[bare] steps {env_steps}/{trainer.total_env_steps} | {rate:,.0f} steps/s | "
                    f"episodes {episodes} | return(last {len(recent_returns)}) {mean_return:.1f} | "
                    f"updates {sac.update_step} | critic loss {metrics.get('critic_loss', float('nan')):.3f} | "
                    f"alpha {sac.alpha:.3f}")
                last_log, last_log_steps = now, env_steps
    finally:
        envs.close()

    result_eval = evaluate(sac.actor, sim.env_id, trainer.eval_episodes, seed=sim.seed)
    checkpoint_dir = None
    if output_dir is not None:
        output_dir = Path(output_dir)
        checkpoint_dir = str(save_checkpoint(output_dir / "checkpoint", sac,
                                             {"env_steps": env_steps, "episodes": episodes},
                                             env_id=sim.env_id))
    result = TrainResult(env_steps, sac.update_step, episodes, time.perf_counter() - start,
                         result_eval.mean, result_eval.std, result_eval.returns.tolist(),
                         checkpoint_dir)
    if output_dir is not None:
        (output_dir / "result.json").write_text(json.dumps(asdict(result), indent=2))
        steps, returns = zip(*curve) if curve else ((), ())
        plot_training_curve(steps, returns, output_dir / "training_curve.png",
                            title=f"{sim.env_id} (SAC, bare loop)", evaluation=result.eval_mean_return)
    log(f"[bare] done: {env_steps} steps, {sac.update_step} updates, {episodes} episodes in "
        f"{result.wall_time_s:.0f} s | evaluation return {result.eval_mean_return:.1f} "
        f"± {result.eval_std_return:.1f} over {len(result.eval_returns)} episodes"
        + (f" | checkpoint {checkpoint_dir}" if checkpoint_dir else ""))
    return result


def main(argv: list[str] | None = None) -> int:
    """Command line: ``rl-train-bare --config FILE [--output DIR] [--total-env-steps N]``."""
    parser = argparse.ArgumentParser(description="Train SAC with the bare (no ROS) loop.")
    parser.add_argument("--config", required=True, help="scenario YAML (config/*.yaml)")
    parser.add_argument("--output", default=None, help="directory for checkpoint and result.json "
                        "(default runs/bare-<time>)")
    parser.add_argument("--total-env-steps", type=int, default=None, help="override the budget")
    args = parser.parse_args(argv)
    overrides = {"trainer": {"total_env_steps": args.total_env_steps}} if args.total_env_steps else None
    try:
        config = load_run_config(args.config, overrides)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    output = args.output or f"runs/bare-{time.strftime('%Y%m%d-%H%M%S')}"
    train(config, output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
