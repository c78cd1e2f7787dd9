"""SAC learns cart-pole from pixels: clearly better than a random policy within a CI budget.

The budget is that of ``config/cartpole_pixels.yaml`` (minutes on 2 CPU cores); the full
learning curve and its wall time are in
docs/history/benchmarks-2026-12.md#learning-from-pixels-configcartpole_pixelsyaml.
The random policy is measured here, on the same evaluation episodes (same seeds), so the
comparison needs no remembered figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rl_core.config import load_run_config
from rl_core.envs import make_env
from rl_core.learning.evaluation import EVAL_SEED_OFFSET
from rl_core.learning.training import train
from tests.learning import report_outcome, seed_overrides

pytestmark = pytest.mark.system
CONFIG = Path(__file__).resolve().parents[2] / "config" / "cartpole_pixels.yaml"
#: How much better than random the learned policy must do: clearly, not by noise.
FACTOR_OVER_RANDOM = 2.0


def random_policy_returns(env_id: str, episodes: int, seed: int) -> np.ndarray:
    """Returns of uniformly random actions on the evaluation episodes' seeds."""
    env = make_env(env_id)
    env.action_space.seed(seed)
    returns = []
    try:
        for episode in range(episodes):
            env.reset(seed=seed + EVAL_SEED_OFFSET + episode)
            total, done = 0.0, False
            while not done:
                _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return np.asarray(returns)


def test_pixel_cartpole_learns_clearly_better_than_random(tmp_path: Path) -> None:
    config = load_run_config(CONFIG, seed_overrides())
    episodes, seed = config.trainer.eval_episodes, config.simulator.seed
    random_returns = random_policy_returns(config.simulator.env_id, episodes, seed)
    result = train(config, tmp_path, log=lambda line: None)
    assert result.env_steps == config.replay.total_env_steps
    report_outcome("evaluation / random policy's", result.eval_mean_return / random_returns.mean(),
                   FACTOR_OVER_RANDOM)
    assert result.eval_mean_return >= FACTOR_OVER_RANDOM * random_returns.mean(), (
        f"learned {result.eval_mean_return:.1f} vs random {random_returns.mean():.1f}")
