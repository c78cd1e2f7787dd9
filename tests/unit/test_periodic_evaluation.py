"""Periodic evaluation and the best checkpoint: when it runs, what it keeps, what a run reports."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from rl_core.algorithms.sac import SAC
from rl_core.config import SACConfig
from rl_core.learning.evaluation import EvalResult
from rl_core.learning.learner import Learner
from rl_core.learning.periodic_evaluation import (
    BEST_DIRECTORY,
    SELECTION_SEED_OFFSET,
    Evaluation,
    PeriodicEvaluator,
)
from rl_core.runs.checkpoint import load_actor, load_checkpoint, read_checkpoint_meta

pytestmark = pytest.mark.unit

ENV_ID = "rl_ros2/CartPoleBalance-v0"


def cartpole_sac(seed: int = 0) -> SAC:
    return SAC(4, 1, SACConfig(hidden_sizes=(16, 16)), seed=seed)


class Scripted(PeriodicEvaluator):
    """Selection episodes replaced by scripted figures, one per evaluation, in order."""

    def __init__(self, figures: list[tuple[float, float | None]], *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.figures = list(figures)
        self.seen_weights: list[torch.Tensor] = []

    def _selection_episodes(self, sac: SAC) -> EvalResult:
        self.seen_weights.append(sac.actor.mean.weight.detach().clone())
        mean, success = self.figures.pop(0)
        successes = np.zeros(0, dtype=bool) if success is None else \
            np.array([True] * int(10 * success) + [False] * (10 - int(10 * success)))
        return EvalResult(np.full(10, mean), np.full(10, 100), successes)


def bump(sac: SAC) -> None:
    """Stand-in for training: change the weights and count an update."""
    with torch.no_grad():
        for parameter in sac.actor.parameters():
            parameter.add_(0.01)
    sac.update_step += 1


def test_evaluates_every_period_on_its_own_snapshot(tmp_path: Path) -> None:
    sac = cartpole_sac()
    evaluator = Scripted([(50.0, None), (120.0, None)], ENV_ID, 1000, 10, 0, tmp_path)
    assert not evaluator.submit(sac, 999)
    assert evaluator.submit(sac, 1000)
    at_submit = sac.actor.mean.weight.detach().clone()
    bump(sac)  # training goes on while the snapshot is evaluated
    evaluator.wait()
    assert torch.equal(evaluator.seen_weights[0], at_submit)
    assert not evaluator.submit(sac, 1500)  # next due at 2000
    assert evaluator.submit(sac, 2300)
    evaluator.wait()
    assert not evaluator.due(2999) and evaluator.due(3000)
    assert [(e.env_steps, e.mean_return) for e in evaluator.history] == [(1000, 50.0),
                                                                          (2300, 120.0)]
    assert evaluator.best == evaluator.history[1]
    meta = read_checkpoint_meta(tmp_path / BEST_DIRECTORY)
    assert meta["counters"]["env_steps"] == 2300 and meta["counters"]["selection_return"] == 120.0
    assert meta["env_id"] == ENV_ID and meta["update_step"] == 1
    restored, _ = load_checkpoint(tmp_path / BEST_DIRECTORY)
    assert torch.equal(restored.actor.mean.weight, sac.actor.mean.weight)
    evaluator.close()


def test_a_worse_snapshot_keeps_the_best_and_ties_go_to_the_later(tmp_path: Path) -> None:
    sac = cartpole_sac()
    evaluator = Scripted([(150.0, None), (90.0, None), (150.0, None)], ENV_ID, 100, 10, 0,
                         tmp_path)
    for steps in (100, 200, 300):
        assert evaluator.submit(sac, steps)
        evaluator.wait()
        bump(sac)
        if steps == 100:
            best_weights = load_actor(tmp_path / BEST_DIRECTORY)[0].mean.weight.detach().clone()
        if steps == 200:  # the worse one did not replace the best
            kept = load_actor(tmp_path / BEST_DIRECTORY)[0].mean.weight
            assert torch.equal(kept, best_weights)
    assert evaluator.best.env_steps == 300
    assert read_checkpoint_meta(tmp_path / BEST_DIRECTORY)["counters"]["env_steps"] == 300


def test_the_success_rate_ranks_before_the_return(tmp_path: Path) -> None:
    evaluator = Scripted([(-1.0, 0.9), (-0.5, 0.6)], ENV_ID, 100, 10, 0, tmp_path)
    sac = cartpole_sac()
    for steps in (100, 200):
        evaluator.submit(sac, steps)
        evaluator.wait()
    assert evaluator.best.env_steps == 100 and evaluator.best.success_rate == pytest.approx(0.9)


def test_a_resumed_learner_competes_with_the_best_it_had(tmp_path: Path) -> None:
    first = Scripted([(170.0, None)], ENV_ID, 100, 10, 0, tmp_path)
    first.submit(cartpole_sac(), 100)
    first.close()
    resumed = Scripted([(160.0, None)], ENV_ID, 100, 10, 0, tmp_path, resumed=True)
    assert resumed.best == Evaluation(100, 0, 170.0, None)
    assert not resumed.due(199) and resumed.due(200)
    resumed.submit(cartpole_sac(seed=1), 200)
    resumed.wait()
    assert resumed.best.env_steps == 100  # 160 < 170: the old best stays
    assert resumed.best_actor() is not None
    fresh = Scripted([(10.0, None)], ENV_ID, 100, 10, 0, tmp_path)
    assert fresh.best is None  # a new run in the same directory replaces it
    fresh.submit(cartpole_sac(), 100)
    fresh.wait()
    assert read_checkpoint_meta(tmp_path / BEST_DIRECTORY)["counters"]["selection_return"] == 10.0


def test_a_failed_evaluation_is_recorded_and_training_goes_on(tmp_path: Path) -> None:
    class Failing(PeriodicEvaluator):
        def _selection_episodes(self, sac: SAC) -> EvalResult:
            raise RuntimeError("physics server gone")

    evaluator = Failing(ENV_ID, 100, 10, 0, tmp_path)
    assert evaluator.submit(cartpole_sac(), 100)
    evaluator.wait()
    assert evaluator.best is None and evaluator.history == []
    assert "physics server gone" in evaluator.errors[0]


def test_off_without_a_period_or_an_in_process_twin() -> None:
    assert not PeriodicEvaluator(ENV_ID, 0, 10, 0).enabled
    assert not PeriodicEvaluator(ENV_ID, 100, 0, 0).enabled
    assert not PeriodicEvaluator("tests.system.user_packages.point_reach:PointReach", 100, 10,
                                 0).enabled


def test_real_selection_episodes_use_their_own_seeds(tmp_path: Path) -> None:
    evaluator = PeriodicEvaluator(ENV_ID, 100, 2, 7, tmp_path)
    assert evaluator.submit(cartpole_sac(), 100)
    evaluator.wait()
    evaluator.close()
    from rl_core.learning.evaluation import evaluate
    expected = evaluate(cartpole_sac().actor, ENV_ID, 2, seed=7 + SELECTION_SEED_OFFSET)
    assert evaluator.history[0].mean_return == pytest.approx(expected.mean)


def test_a_run_reports_the_final_and_the_best_evaluation(tmp_path: Path) -> None:
    sac = cartpole_sac()
    # The periodic snapshot scores best on the selection episodes; the final weights less.
    evaluator = Scripted([(190.0, None), (100.0, None)], ENV_ID, 100, 3, 0, tmp_path)
    learner = Learner(sac, ENV_ID, evaluator=evaluator)
    learner.evaluate_if_due(100)
    evaluator.wait()
    snapshot = sac.actor.mean.weight.detach().clone()
    bump(sac)
    result = learner.finish(150, 150, 3, 0, tmp_path)
    document = json.loads((tmp_path / "result.json").read_text())
    assert document["best_env_steps"] == 100
    assert document["best_checkpoint_dir"] == str(tmp_path / BEST_DIRECTORY)
    assert [e["env_steps"] for e in document["evaluations"]] == [100, 150]
    # The best's final figures come from the final evaluation's episodes, run on its weights.
    from rl_core.learning.evaluation import evaluate
    actor = load_actor(tmp_path / BEST_DIRECTORY)[0]
    assert torch.equal(actor.mean.weight, snapshot)
    assert document["best_eval_mean_return"] == pytest.approx(evaluate(actor, ENV_ID, 3).mean)
    assert result.eval_mean_return == pytest.approx(evaluate(sac.actor, ENV_ID, 3).mean)


def test_final_weights_that_win_are_the_best(tmp_path: Path) -> None:
    sac = cartpole_sac()
    evaluator = Scripted([(50.0, None), (100.0, None)], ENV_ID, 100, 3, 0, tmp_path)
    learner = Learner(sac, ENV_ID, evaluator=evaluator)
    learner.evaluate_if_due(100)
    evaluator.wait()
    bump(sac)
    result = learner.finish(150, 150, 3, 0, tmp_path)
    assert result.best_env_steps == 150
    assert result.best_eval_mean_return == result.eval_mean_return
    assert torch.equal(load_actor(tmp_path / BEST_DIRECTORY)[0].mean.weight,
                       load_actor(tmp_path / "checkpoint")[0].mean.weight)


@dataclass
class EmptyGrant:
    """A grant with no batches, at ``total_inserted`` transitions, not the run's last."""

    total_inserted: int
    batches: tuple = ()
    prioritized: bool = False
    total_env_steps: int = 10_000
    done: bool = False


@pytest.mark.parametrize("stop", [True, False])
def test_a_run_reports_when_it_met_its_target_and_can_stop_there(tmp_path: Path,
                                                                 stop: bool) -> None:
    evaluator = Scripted([(-3.0, 0.5), (-1.0, 0.8), (-0.5, 1.0)], ENV_ID, 100, 10, 0, tmp_path,
                         target_success_rate=0.8)
    learner = Learner(cartpole_sac(), ENV_ID, evaluator=evaluator, stop_at_target=stop)
    learner.learn(EmptyGrant(100))
    evaluator.wait()
    learner.learn(EmptyGrant(150))
    assert evaluator.target_met is None and not learner.done  # 50 % < 80 %
    learner.learn(EmptyGrant(200))
    evaluator.wait()
    learner.learn(EmptyGrant(250))
    assert evaluator.target_met is evaluator.history[1]
    assert learner.done is stop
    result = learner.finish(250, 250, 3, 0, tmp_path)
    document = json.loads((tmp_path / "result.json").read_text())
    assert document["target_env_steps"] == result.target_env_steps == 200
    first, second = document["evaluations"][:2]
    assert 0.0 <= first["wall_time_s"] <= second["wall_time_s"] == result.target_wall_time_s


def test_stop_at_target_set_during_a_run_ends_it_at_the_next_round(tmp_path: Path) -> None:
    """Live: an operator sets stop_at_target after the target was met; the next round ends it."""
    evaluator = Scripted([(185.0, None)], ENV_ID, 100, 10, 0, tmp_path, target_return=180.0)
    learner = Learner(cartpole_sac(), ENV_ID, evaluator=evaluator)
    learner.learn(EmptyGrant(100))
    evaluator.wait()
    learner.learn(EmptyGrant(150))
    assert evaluator.target_met is not None and not learner.done
    learner.stop_at_target = True
    learner.learn(EmptyGrant(160))
    assert learner.done


def test_a_return_target_is_met_by_the_mean_return_where_no_success_rate_is_set(
        tmp_path: Path) -> None:
    evaluator = Scripted([(150.0, None), (185.0, None)], ENV_ID, 100, 10, 0, tmp_path,
                         target_return=180.0)
    learner = Learner(cartpole_sac(), ENV_ID, evaluator=evaluator, stop_at_target=True)
    learner.learn(EmptyGrant(100))
    evaluator.wait()
    learner.learn(EmptyGrant(150))
    assert evaluator.target_met is None and not learner.done  # 150 < 180
    learner.learn(EmptyGrant(200))
    evaluator.wait()
    learner.learn(EmptyGrant(250))
    assert evaluator.target_met is evaluator.history[1] and learner.done
    # A success rate target, where set, is the criterion whatever the return.
    both = Scripted([(500.0, 0.5)], ENV_ID, 100, 10, 0, tmp_path, target_success_rate=0.8,
                    target_return=180.0)
    both.submit(cartpole_sac(), 100)
    both.wait()
    assert both.target_met is None


def test_no_target_is_tracked_by_default(tmp_path: Path) -> None:
    evaluator = Scripted([(-0.5, 1.0)], ENV_ID, 100, 10, 0, tmp_path)
    evaluator.submit(cartpole_sac(), 100)
    evaluator.wait()
    assert evaluator.target_met is None


def test_stopping_at_a_target_needs_a_target_and_evaluations() -> None:
    from rl_core.config import ConfigError, TrainerConfig
    with pytest.raises(ConfigError, match="stop_at_target needs a target_success_rate"):
        TrainerConfig(stop_at_target=True)
    with pytest.raises(ConfigError, match="eval_period > 0"):
        TrainerConfig(stop_at_target=True, target_success_rate=0.8, eval_period=0)
    assert TrainerConfig(stop_at_target=True, target_success_rate=0.8).stop_at_target
    assert TrainerConfig(stop_at_target=True, target_return=180.0).stop_at_target
