"""End-to-end training through the ROS graph, run as users run it (rl-bringup launch)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.learning import report_outcome, seed_arguments
from tests.processes import Child

pytestmark = pytest.mark.system
RL_BRINGUP = str(Path(sys.executable).parent / "rl-bringup")
MAX_RETURN = 200.0


def launch(mode: str, tmp_path: Path, env: dict[str, str], *arguments: str) -> Child:
    """``rl-bringup launch MODE`` into ``tmp_path/run`` on the test's domain, with the seed of a
    failure-rate measurement where one runs (tests/learning.py)."""
    return Child([RL_BRINGUP, "launch", mode, f"output_dir:={tmp_path / 'run'}",
                  f"domain_id:={env['ROS_DOMAIN_ID']}", *seed_arguments(), *arguments], env=env)


def check_best_return(result: dict) -> None:
    """The run solved cart-pole: its best checkpoint (docs/architecture.md, "The best
    checkpoint") evaluates >= 180."""
    report_outcome("best evaluation", result["best_eval_mean_return"], 0.9 * MAX_RETURN)
    assert result["best_eval_mean_return"] >= 0.9 * MAX_RETURN, result


def finish(run: Child, timeout_s: float) -> int | None:
    try:
        return run.wait(timeout_s)
    finally:
        run.stop(grace_s=20.0)


def test_colocated_training_solves_cartpole(tmp_path: Path, ros_env) -> None:
    run = launch("colocated", tmp_path, ros_env)
    code = finish(run, 600.0)
    assert code == 0, run.output()[-4000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["update_mode"] == "interleaved"
    check_best_return(result)
    assert (tmp_path / "run" / "checkpoint" / "model.safetensors").is_file()
    assert (tmp_path / "run" / "best" / "model.safetensors").is_file()
    assert any("steps/s" in line for line in run.lines), "no progress lines"
    # Training records: TensorBoard scalars and the curve.
    events = list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    accumulator = EventAccumulator(str(events[0].parent))
    accumulator.Reload()
    assert {"train/critic_loss", "train/mean_return", "eval/mean_return",
            "eval/best_mean_return"} <= set(accumulator.Tags()["scalars"])
    assert (tmp_path / "run" / "training_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def check_learned_like_the_bare_loop(tmp_path: Path, update_mode: str) -> dict:
    """The run solved cart-pole (:func:`check_best_return`) with the configured update-to-data
    ratio (cartpole.yaml: 1.0)."""
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["update_mode"] == update_mode, result
    check_best_return(result)
    assert result["updates_per_transition"] == pytest.approx(1.0, rel=0.05), result
    return result


#: The distributed tests train 12,000 transitions instead of the config's 8,000: with two robots
#: the timing of weight updates varies from run to run; at 8,000 one run in a few evaluated just
#: under 180 (measured: 179-200, see
#: docs/history/benchmarks-2026-12.md#learning-per-mode-rl-bringup-compare), and at 10,000 a
#: hybrid run on a heavily loaded 2-core machine evaluated 178.1. The threshold stays 180 (as in
#: the fault and link-cut tests, which train 30,000 and 12,000). Each run is still one draw from
#: the final policy's spread over seeds. With gamma 0.99 about 1 bare-loop seed in 24 ended below
#: 180 at 12,000, and more budget made it worse (3 in 16 at 16,000: the policy collapses late);
#: cartpole.yaml's gamma 0.98 had none below 180 in 16 seeds at 16,000, as measured in
#: docs/history/benchmarks-2026-12.md#spread-of-the-final-policy-over-seeds-benchmarksseed_spreadpy.
DISTRIBUTED_BUDGET = "total_env_steps:=12000"


def test_decoupled_two_robots_solve_cartpole(tmp_path: Path, ros_env) -> None:
    # The replay buffer's rate limiter pauses both robots while the learner catches up.
    run = launch("decoupled", tmp_path, ros_env, "robots:=2", DISTRIBUTED_BUDGET)
    code = finish(run, 600.0)
    assert code == 0, run.output()[-4000:]
    check_learned_like_the_bare_loop(tmp_path, "thread")
    robots_seen = {line.split("]")[0] for line in run.lines if line.startswith("[simulator_robot_")}
    assert robots_seen == {"[simulator_robot_0", "[simulator_robot_1"}


def test_hybrid_two_robots_solve_cartpole(tmp_path: Path, ros_env) -> None:
    run = launch("hybrid", tmp_path, ros_env, "robots:=2", DISTRIBUTED_BUDGET)
    code = finish(run, 600.0)
    assert code == 0, run.output()[-4000:]
    result = check_learned_like_the_bare_loop(tmp_path, "thread")
    assert result["env_steps"] >= 10000
    assert not any("cannot publish data" in line for line in run.lines), run.output()[-3000:]
