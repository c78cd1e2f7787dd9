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
SOLVED = 0.9 * MAX_RETURN
#: config/cartpole.yaml's budget.
BUDGET = 8000


def launch(mode: str, tmp_path: Path, env: dict[str, str], *arguments: str,
           options: tuple[str, ...] = ()) -> Child:
    """``rl-bringup launch [OPTIONS] MODE`` into ``tmp_path/run`` on the test's domain, with the
    seed of a failure-rate measurement where one runs (tests/learning.py)."""
    return Child([RL_BRINGUP, "launch", *options, mode, f"output_dir:={tmp_path / 'run'}",
                  f"domain_id:={env['ROS_DOMAIN_ID']}", *seed_arguments(), *arguments], env=env)


#: The runs end at their first periodic evaluation (config/cartpole.yaml: 10 episodes every
#: 1,000 transitions) whose mean return meets 180, within their budget (issue 42: a run that
#: asserts an outcome stops at it). What the learner's best checkpoint then evaluates to is
#: printed, not asserted.
STOP_AT_TARGET = (f"target_return:={SOLVED:g}", "stop_at_target:=true")
#: config/cartpole.yaml's learning_starts: the first transitions pay for no update.
LEARNING_STARTS = 500


def check_target_met(result: dict, budget: int) -> None:
    """The run met its target (cart-pole's: a mean return of 180): a periodic evaluation met it
    within ``budget`` transitions, and the run ended there."""
    met = result["target_env_steps"]
    report_outcome("transitions of the budget left at the criterion",
                   budget - (budget if met is None else met), 1)
    assert met is not None, result["evaluations"]
    assert met <= result["env_steps"] <= budget, result
    rate = result["best_eval_success_rate"]  # None for a task without successes (cart-pole)
    print(f"target met at {met} of {budget} transitions; best checkpoint evaluates "
          f"{result['best_eval_mean_return']}" + ("" if rate is None else
                                                  f" (success rate {rate})"))


def train_to_target(mode: str, tmp_path: Path, env: dict[str, str], budget: int,
                    *arguments: str) -> dict:
    """Launch ``mode`` (2 robots beyond colocated) until it stops at its target; assert a clean
    exit and the target met within ``budget`` (:func:`check_target_met`). The checkpoint's
    metadata."""
    robots = () if mode == "colocated" else ("robots:=2",)
    run = launch(mode, tmp_path, env, *robots, *arguments)
    code = finish(run, 300.0)
    output = run.output()
    assert code == 0, output[-4000:]
    assert "Traceback (most recent call last)" not in output, output[-4000:]
    check_target_met(json.loads((tmp_path / "run" / "result.json").read_text()), budget)
    return json.loads((tmp_path / "run" / "checkpoint" / "checkpoint.json").read_text())


def finish(run: Child, timeout_s: float) -> int | None:
    try:
        return run.wait(timeout_s)
    finally:
        run.stop(grace_s=20.0)


def test_colocated_training_solves_cartpole(tmp_path: Path, ros_env) -> None:
    run = launch("colocated", tmp_path, ros_env, *STOP_AT_TARGET)
    code = finish(run, 600.0)
    assert code == 0, run.output()[-4000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["update_mode"] == "interleaved"
    check_target_met(result, BUDGET)
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


def check_solved_within_the_rate_limit(tmp_path: Path, update_mode: str, budget: int) -> dict:
    """The run solved cart-pole (:func:`check_target_met`) and the replay buffer's rate limiter
    held its bound: at every evaluation and at the end, at most one update per transition after
    the first 500 (cartpole.yaml). The run ends at an evaluation, not at a budget whose every
    update was granted, so the ratio of the whole run is not 1.0: in between, acting runs ahead
    of learning by up to the time the robots take to hear that they must pause (a hybrid run,
    2026-12-06: 1,040 updates at 2,260 transitions). That a run to its budget gets exactly the
    updates it pays for is checked by the launch tests (src/rl_bringup/test/launch_checks.py)."""
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["update_mode"] == update_mode, result
    check_target_met(result, budget)
    for moment in [*result["evaluations"], result]:
        assert moment["updates"] <= moment["env_steps"] - LEARNING_STARTS, moment
    assert result["updates"] > 0, result
    return result


#: The most transitions the distributed tests may take to meet the criterion: the config's 8,000
#: and room, as with two robots the timing of weight updates varies from run to run (their
#: failure rates: docs/results.md#learning-test-failure-rates).
DISTRIBUTED_BUDGET = 12000


def test_decoupled_two_robots_solve_cartpole(tmp_path: Path, ros_env) -> None:
    # The replay buffer's rate limiter pauses both robots while the learner catches up.
    run = launch("decoupled", tmp_path, ros_env, "robots:=2",
                 f"total_env_steps:={DISTRIBUTED_BUDGET}", *STOP_AT_TARGET)
    code = finish(run, 600.0)
    assert code == 0, run.output()[-4000:]
    check_solved_within_the_rate_limit(tmp_path, "thread", DISTRIBUTED_BUDGET)
    robots_seen = {line.split("]")[0] for line in run.lines if line.startswith("[simulator_robot_")}
    assert robots_seen == {"[simulator_robot_0", "[simulator_robot_1"}


def test_hybrid_two_robots_solve_cartpole(tmp_path: Path, ros_env) -> None:
    run = launch("hybrid", tmp_path, ros_env, "robots:=2",
                 f"total_env_steps:={DISTRIBUTED_BUDGET}", *STOP_AT_TARGET)
    code = finish(run, 600.0)
    assert code == 0, run.output()[-4000:]
    check_solved_within_the_rate_limit(tmp_path, "thread", DISTRIBUTED_BUDGET)
    assert not any("cannot publish data" in line for line in run.lines), run.output()[-3000:]
