"""benchmarks/human_in_loop.py without training: how its runs start and how its table reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.human_in_loop import INTERVENTIONS, NONE, Outcome, runner_for, table
from benchmarks.human_in_loop import main as human_in_loop

pytestmark = pytest.mark.integration


def test_every_run_gets_the_extra_launch_arguments_before_its_variants_own(tmp_path: Path) -> None:
    config, demos = tmp_path / "c.yaml", tmp_path / "demos20.mcap"
    extra = ("eval_period:=500", "updates_per_transition:=4")
    with_demos = runner_for("hybrid", 2, 9000, "20 demos", demos, 0.1, extra)
    command = with_demos.command(config, 3, tmp_path / "run", 42)
    assert command[-3:] == [*extra, f"demos:={demos}"]
    assert {"robots:=2", "seed:=3", "total_env_steps:=9000"} <= set(command)
    operator = runner_for("colocated", 1, 9000, INTERVENTIONS, None, 0.25, extra)
    assert operator.launch_arguments == (*extra, "expert_interventions:=0.25",
                                         "expert_interventions_steps:=5000")
    assert runner_for("colocated", 1, 9000, NONE, None, 0.1).launch_arguments == ()


def test_a_launch_argument_without_an_assignment_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as refused:
        human_in_loop(["--launch-arg", "eval_period"])
    assert refused.value.code == 2 and "NAME:=VALUE" in capsys.readouterr().err


def test_table_gives_ratios_to_none_and_marks_censored_medians() -> None:
    outcomes = [Outcome("colocated", NONE, seed, 20000, target_env_steps=steps,
                        target_wall_time_s=seconds)
                for seed, steps, seconds in ((1, 6000, 160.0), (2, 8000, 200.0))]
    outcomes += [Outcome("colocated", "20 demos", 1, 20000, target_env_steps=3000,
                         target_wall_time_s=80.0),
                 Outcome("colocated", "20 demos", 2, 20000, env_steps=20000, wall_time_s=500.0),
                 Outcome("colocated", "20 demos", 3, 20000, error="exit 1: boom")]
    rows = table(outcomes, [NONE, "20 demos"], ["colocated"]).splitlines()
    assert rows[2] == "| colocated | none | 2/2 | 7,000 | - | 180 | - |"
    # One of two runs never met the criterion (counted as its budget): a lower bound.
    assert rows[3] == "| colocated | 20 demos | 1/2 | >=11,500 | 1.64 | >=290 | 1.61 |"
