"""The bare (no ROS) loop solves cart-pole balance within the default budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_core.config import load_run_config
from rl_core.learning.evaluation import evaluate
from rl_core.learning.training import train
from rl_core.runs.checkpoint import load_actor
from tests.learning import report_outcome, seed_overrides

pytestmark = pytest.mark.system
CONFIG = Path(__file__).resolve().parents[2] / "config" / "cartpole.yaml"
MAX_RETURN = 200.0  # 200 steps, +1 per step upright


def test_bare_loop_solves_cartpole(tmp_path: Path) -> None:
    config = load_run_config(CONFIG, seed_overrides())
    lines: list[str] = []
    result = train(config, tmp_path, log=lines.append)
    assert result.env_steps == config.replay.total_env_steps
    assert len(result.eval_returns) == 10
    # The best checkpoint, as the tests of every mode judge it (docs/architecture.md, "The best
    # checkpoint"): its figures come from the final evaluation's episodes, which did not select it.
    report_outcome("best evaluation", result.best_eval_mean_return, 0.9 * MAX_RETURN)
    assert result.best_eval_mean_return >= 0.9 * MAX_RETURN, result
    assert lines and "done" in lines[-1]
    assert (tmp_path / "training_curve.png").read_bytes()[:4] == b"\x89PNG"
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["eval_mean_return"] == pytest.approx(result.eval_mean_return)
    assert saved["best_eval_mean_return"] == pytest.approx(result.best_eval_mean_return)
    # The learner's utilisation: gradient steps took a real share of the run, not all of it.
    assert 0.0 < saved["update_time_s"] < result.wall_time_s
    assert saved["learner_utilisation"] == pytest.approx(result.update_time_s / result.wall_time_s)
    # The saved checkpoints are the policies that were evaluated.
    actor, meta = load_actor(tmp_path / "checkpoint")
    assert meta["counters"]["env_steps"] == result.env_steps
    again = evaluate(actor, config.simulator.env_id, episodes=3, seed=config.simulator.seed)
    assert again.returns.tolist() == result.eval_returns[:3]
    best, meta = load_actor(result.best_checkpoint_dir)
    assert meta["counters"]["env_steps"] == result.best_env_steps
    again = evaluate(best, config.simulator.env_id, episodes=3, seed=config.simulator.seed)
    report_outcome("best checkpoint loaded, 3 episodes", again.mean, 0.9 * MAX_RETURN)
    assert again.mean >= 0.9 * MAX_RETURN
