"""The bare training loop: SAC on a vectorised pybullet task, no ROS.

This is the reference the ROS deployments are measured against (same envs, buffer and learner;
only the transport differs). Run it with ``rl-train-bare --config config/cartpole.yaml``. A task
with a ``Discrete`` action trains with SAC for discrete actions (rl_core.algorithms.discrete_sac),
here as in the nodes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from rl_core.algorithms import DQN, new_algorithm
from rl_core.config import NODE_CONFIGS, ConfigError, RunConfig, load_run_config
from rl_core.envs import VectorEnv
from rl_core.envs.spaces import random_actions
from rl_core.learning.device import describe, resolve_device
from rl_core.learning.learner import Learner, TrainResult, seed_everything
from rl_core.learning.periodic_evaluation import PeriodicEvaluator
from rl_core.monitoring.progress import RateMeter, progress_line, summary_line
from rl_core.replay import UNLIMITED_BATCHES, RateLimitedReplay
from rl_core.replay.build import new_buffer, new_replay
from rl_core.replay.n_step import NStepReturns


def make_replay(config: RunConfig, obs_shape: tuple[int, ...], action_shape: tuple[int, ...]
                ) -> RateLimitedReplay:
    """The rate-limited replay buffer of ``config`` (the replay node builds the same one)."""
    return new_replay(config.replay, new_buffer(config.replay, obs_shape, action_shape))


def train(config: RunConfig, output_dir: str | Path | None = None,
          log: Callable[[str], None] = print, log_period_s: float = 2.0) -> TrainResult:
    """Train SAC on ``config.simulator.env_id`` for ``config.replay.total_env_steps`` steps.

    Acting and learning alternate in one thread: after every vector step the learner learns on
    what the replay's rate limiter grants (``updates_per_transition`` per transition after
    ``learning_starts``), through the same :meth:`Learner.learn` as the trainer node.

    :param output_dir: where the checkpoint and ``result.json`` go (nothing saved when None).
    :param log: receives one progress line every ``log_period_s`` seconds.
    :raises ConfigError: when ``trainer.device`` asks for CUDA and torch has none.
    """
    sim, trainer = config.simulator, config.trainer
    device = resolve_device(trainer.device)
    seed_everything(trainer.seed)
    if trainer.torch_threads:
        torch.set_num_threads(trainer.torch_threads)
    envs = VectorEnv(sim.env_id, sim.num_envs)
    obs_shape = envs.single_observation_space.shape
    action_shape = envs.action_shape
    replay = make_replay(config, obs_shape, action_shape)
    try:
        sac = new_algorithm(obs_shape, action_shape, envs.choices, config.sac, trainer.seed,
                            device)
    except ConfigError:
        envs.close()
        raise
    if isinstance(sac, DQN):
        sac.actor.epsilon = config.policy.exploration_epsilon
    log(f"[bare] learning and acting on {describe(device)}")
    if replay.demo_note:
        log(f"[bare] {replay.demo_note}")
    evaluator = PeriodicEvaluator(sim.env_id, trainer.eval_period, trainer.eval_episodes,
                                  sim.seed, Path(output_dir) if output_dir is not None else None,
                                  target_success_rate=trainer.target_success_rate,
                                  target_return=trainer.target_return)
    learner = Learner(sac, sim.env_id, trainer.solve_return, evaluator,
                      stop_at_target=trainer.stop_at_target)
    action_rng = np.random.default_rng(sim.seed)
    rates = RateMeter()
    last_log = time.monotonic()
    env_steps = 0
    obs = envs.reset(seed=sim.seed)
    env_ids = np.arange(sim.num_envs)  # each env's episodes, for HER
    returns = NStepReturns(config.sac.n_step, config.sac.gamma)  # n_step 1: the rows as they are
    try:
        while not learner.done:
            if env_steps < sim.random_steps:
                actions = random_actions(action_rng, (sim.num_envs, *action_shape),
                                         envs.choices)
            else:
                actions = sac.act(obs if sac.pixels else obs.reshape(sim.num_envs, -1)
                                  ).reshape(sim.num_envs, *action_shape)
            step = envs.step(actions)
            rows = returns.add(obs, actions, step.rewards, step.next_obs, step.terminated,
                               step.truncated)
            if len(rows.rewards):
                replay.add(*rows[:6], episode_keys=env_ids[rows.env_index])
            obs = step.obs
            env_steps += sim.num_envs
            for record in step.episodes:
                learner.record_episode(float(record.episode_return), env_steps)
            priorities = learner.priorities.take()
            if priorities is not None:
                replay.update_priorities(priorities)
            learner.learn(replay.take(trainer.batch_size, UNLIMITED_BATCHES)[0])
            if time.monotonic() - last_log >= log_period_s:
                last_log = time.monotonic()
                rate = rates.read(env_steps, sac.update_step)["env_steps_per_s"]
                log("[bare] " + progress_line(learner, env_steps, replay.total_env_steps, rate,
                                              details=() if isinstance(sac, DQN) else
                                              (f"alpha {sac.alpha:.3f}",)))
    finally:
        envs.close()

    paying = min(env_steps, replay.total_env_steps) - config.replay.learning_starts
    algorithm = ("double DQN" if isinstance(sac, DQN) else "SAC" if not envs.choices
                 else "discrete SAC" if envs.action_shape == (1,) else "arm-and-choice SAC")
    result = learner.finish(env_steps, paying, trainer.eval_episodes,
                            sim.seed, Path(output_dir) if output_dir is not None else None,
                            title=f"{sim.env_id} ({algorithm}, bare loop)",
                            extra={"device": device.type})
    log(f"[bare] {summary_line(result)}")
    return result


def main(argv: list[str] | None = None) -> int:
    """Command line: ``rl-train-bare --config FILE [--output DIR] [--total-env-steps N]
    [--seed S]``."""
    parser = argparse.ArgumentParser(description="Train SAC with the bare (no ROS) loop.")
    parser.add_argument("--config", required=True, help="scenario YAML (config/*.yaml)")
    parser.add_argument("--output", default=None, help="directory for checkpoint and result.json "
                        "(default runs/bare-<time>)")
    parser.add_argument("--total-env-steps", type=int, default=None, help="override the budget")
    parser.add_argument("--seed", type=int, default=None,
                        help="override the seed of every node (environments, exploration, "
                        "sampler, networks)")
    args = parser.parse_args(argv)
    overrides: dict[str, dict[str, int]] = {node: {} for node in NODE_CONFIGS}
    if args.total_env_steps:
        overrides["replay_buffer"]["total_env_steps"] = args.total_env_steps
    if args.seed is not None:
        for node in overrides:
            overrides[node]["seed"] = args.seed
    output = args.output or f"runs/bare-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        train(load_run_config(args.config, overrides), output)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
