"""``rl-bringup compare``: result parsing, medians, ratios, CPU math, the table, the arguments, and
the run loop with stand-in commands (tiny ``python -c`` scripts instead of training runs)."""

from __future__ import annotations

import dataclasses
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rl_bringup import cli
from rl_bringup.tools.common import ToolError, load_config
from rl_bringup.tools.train import compare
from rl_bringup.tools.train.compare import (
    CompareSettings,
    ModeRow,
    RunMetrics,
    RunOutcome,
    cpu_utilisation,
    format_table,
    median_time_to_solve,
    parse_result,
    settings_from_values,
    summarise,
)

pytestmark = pytest.mark.unit

RunCli = Callable[..., tuple[int, str, str]]
FULL_RESULT: dict[str, Any] = {
    "env_steps": 8000, "updates": 7500, "episodes": 60, "wall_time_s": 80.0,
    "eval_mean_return": 200.0, "eval_std_return": 0.0, "eval_returns": [200.0] * 10,
    "checkpoint_dir": "/x/checkpoint", "updates_per_transition": 0.94, "solved_at_s": 41.5,
    "solved_at_env_steps": 4200, "cpu_time_s": 150.0, "update_time_s": 52.0,
    "learner_utilisation": 0.65,
    "learner_time_shares": {"gradient steps": 0.65, "getting batches": 0.2, "evaluation": 0.05,
                            "weights and checkpoints": 0.02, "other": 0.08},
}
#: What result.json held before the lead's new keys.
OLD_RESULT = {key: FULL_RESULT[key] for key in
              ("env_steps", "updates", "episodes", "wall_time_s", "eval_mean_return",
               "eval_std_return", "eval_returns", "checkpoint_dir")}


def metrics(wall_time_s: float = 10.0, eval_return: float = 100.0, env_steps: int = 1000,
            solved_at_s: float | None = None, solved_at_env_steps: int | None = None) -> RunMetrics:
    return RunMetrics(env_steps, env_steps // 2, wall_time_s, eval_return, 0.5, solved_at_s,
                      solved_at_env_steps)


def outcome(mode: str, round_index: int = 0, run_metrics: RunMetrics | None = None,
            error: str | None = None, cpu_time_s: float = 10.0,
            process_wall_s: float = 10.0) -> RunOutcome:
    return RunOutcome(mode, 1, round_index, f"/runs/{mode}-r{round_index + 1}", process_wall_s,
                      cpu_time_s, 2, 0 if error is None else 1, error, run_metrics)


# --- result.json ---------------------------------------------------------------------------------


def test_a_full_result_is_read_as_written() -> None:
    read = parse_result(FULL_RESULT)
    assert read == RunMetrics(8000, 7500, 80.0, 200.0, 0.94, 41.5, 4200, 150.0, 0.65,
                              FULL_RESULT["learner_time_shares"])
    assert read.env_steps_per_s == 100.0


def test_missing_optional_keys_fall_back() -> None:
    read = parse_result(OLD_RESULT)
    assert read.updates_per_transition == pytest.approx(7500 / 8000)
    assert read.solved_at_s is None and read.solved_at_env_steps is None
    assert read.reported_cpu_time_s is None and read.learner_utilisation is None
    assert read.learner_time_shares is None


def test_never_solved_is_null_and_bad_optional_values_count_as_absent() -> None:
    read = parse_result({**OLD_RESULT, "solved_at_s": None, "solved_at_env_steps": None,
                         "updates_per_transition": "fast", "cpu_time_s": float("nan")})
    assert read.solved_at_s is None and read.reported_cpu_time_s is None
    assert read.updates_per_transition == pytest.approx(7500 / 8000)  # the fallback


def test_no_updates_per_transition_without_transitions() -> None:
    assert parse_result({**OLD_RESULT, "env_steps": 0}).updates_per_transition is None
    assert parse_result({**OLD_RESULT, "wall_time_s": 0.0}).env_steps_per_s is None


@pytest.mark.parametrize("drop", ["env_steps", "updates", "wall_time_s", "eval_mean_return"])
def test_a_missing_required_key_is_named(drop: str) -> None:
    with pytest.raises(ValueError, match=drop):
        parse_result({key: value for key, value in OLD_RESULT.items() if key != drop})


def test_a_required_key_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="eval_mean_return"):
        parse_result({**OLD_RESULT, "eval_mean_return": "high"})
    with pytest.raises(ValueError, match="env_steps"):
        parse_result({**OLD_RESULT, "env_steps": True})


# --- CPU utilisation -----------------------------------------------------------------------------


@pytest.mark.parametrize(("cpu_s", "wall_s", "cores", "expected"), [
    (20.0, 10.0, 2, 1.0),     # both cores busy all the time
    (5.0, 10.0, 2, 0.25),     # half of one core
    (30.0, 10.0, 4, 0.75),
    (0.0, 10.0, 1, 0.0),
])
def test_cpu_utilisation_is_cpu_time_over_wall_time_over_cores(cpu_s: float, wall_s: float,
                                                               cores: int, expected: float) -> None:
    assert cpu_utilisation(cpu_s, wall_s, cores) == pytest.approx(expected)


@pytest.mark.parametrize(("cpu_s", "wall_s", "cores"), [(1.0, 0.0, 2), (1.0, 1.0, 0),
                                                         (-1.0, 1.0, 1)])
def test_cpu_utilisation_refuses_meaningless_input(cpu_s: float, wall_s: float, cores: int) -> None:
    with pytest.raises(ValueError):
        cpu_utilisation(cpu_s, wall_s, cores)


def test_an_outcome_measures_its_process_tree() -> None:
    assert outcome("bare", cpu_time_s=15.0, process_wall_s=10.0).cpu_utilisation == 0.75
    assert outcome("bare", process_wall_s=0.0).cpu_utilisation is None


# --- medians and ratios --------------------------------------------------------------------------


@pytest.mark.parametrize(("times", "expected"), [
    ([10.0, 30.0, 20.0], 20.0),
    ([10.0, None, 20.0], 20.0),   # one run never solved: counted as the latest
    ([10.0, None, None], None),   # most runs never solved
    ([10.0, None], None),         # the median lies halfway to "never"
    ([], None),
])
def test_time_to_solve_counts_never_as_infinitely_late(times: list[float | None],
                                                       expected: float | None) -> None:
    assert median_time_to_solve(times) == expected


def test_rows_hold_the_median_over_repeats_and_ratios_to_bare() -> None:
    outcomes = [
        outcome("bare", 0, metrics(10.0, 200.0, solved_at_s=5.0, solved_at_env_steps=500)),
        outcome("colocated", 0, metrics(30.0, 150.0)),
        outcome("bare", 1, metrics(14.0, 180.0, solved_at_s=7.0, solved_at_env_steps=700)),
        outcome("colocated", 1, metrics(20.0, 100.0, solved_at_s=9.0, solved_at_env_steps=900)),
        outcome("bare", 2, metrics(12.0, 190.0, solved_at_s=6.0, solved_at_env_steps=600)),
        outcome("colocated", 2, metrics(25.0, 95.0)),
    ]
    bare, colocated = summarise(outcomes, ("bare", "colocated"))
    assert (bare.mode, bare.completed, bare.runs) == ("bare", 3, 3)
    assert bare.wall_time_s == 12.0 and bare.eval_return == 190.0
    assert (bare.solved_at_s, bare.solved_at_env_steps) == (6.0, 600)
    assert bare.sample_efficiency == 1.0 and bare.wall_time_x_bare == 1.0
    assert colocated.wall_time_s == 25.0 and colocated.eval_return == 100.0
    assert colocated.solved_at_s is None  # solved in one run of three
    assert colocated.sample_efficiency == pytest.approx(100.0 / 190.0)
    assert colocated.wall_time_x_bare == pytest.approx(25.0 / 12.0)
    assert colocated.env_steps_per_s == pytest.approx(1000 / 25.0)
    assert colocated.updates_per_transition == 0.5 and colocated.cpu_utilisation == 0.5


def test_a_failed_run_is_left_out_of_the_median_and_named_in_the_note() -> None:
    outcomes = [outcome("bare", 0, metrics(10.0)),
                outcome("hybrid", 0, error="exited with code 1 (log: /runs/hybrid-r1/output.log)"),
                outcome("hybrid", 1, metrics(40.0))]
    _, hybrid = summarise(outcomes, ("bare", "hybrid"))
    assert (hybrid.completed, hybrid.runs, hybrid.wall_time_s) == (1, 2, 40.0)
    assert hybrid.note == "round 1: exited with code 1 (log: /runs/hybrid-r1/output.log)"


def test_a_mode_whose_runs_all_failed_has_no_figures() -> None:
    rows = summarise([outcome("decoupled", error="timed out after 5 s")], ("decoupled",))
    assert rows[0].wall_time_s is None and rows[0].completed == 0
    assert "timed out" in rows[0].note


def test_no_ratios_without_a_usable_bare_row() -> None:
    without_bare = summarise([outcome("colocated", 0, metrics())], ("colocated",))
    assert without_bare[0].sample_efficiency is None and without_bare[0].wall_time_x_bare is None
    failed_bare = summarise([outcome("bare", error="exited with code 2"),
                             outcome("colocated", 0, metrics())], ("bare", "colocated"))
    assert failed_bare[1].sample_efficiency is None
    zero_bare = summarise([outcome("bare", 0, metrics(eval_return=0.0)),
                           outcome("colocated", 0, metrics())], ("bare", "colocated"))
    assert zero_bare[1].sample_efficiency is None and zero_bare[1].wall_time_x_bare == 1.0


# --- the table -----------------------------------------------------------------------------------


def test_the_table_is_markdown_with_one_row_per_mode() -> None:
    rows = [
        ModeRow("bare", 1, 1, 1, wall_time_s=83.04, solved_at_s=41.52, solved_at_env_steps=4200,
                eval_return=199.96, sample_efficiency=1.0, updates_per_transition=0.9375,
                env_steps_per_s=1234.5, cpu_utilisation=0.514, learner_utilisation=0.623,
                wall_time_x_bare=1.0),
        ModeRow("hybrid", 2, 0, 1, note="exited with code 1 | see log"),
    ]
    lines = format_table(rows).splitlines()
    assert len(lines) == 4
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == [name for name, _ in compare.COLUMNS]
    assert lines[1].startswith("|---|---:|")
    bare = [cell.strip() for cell in lines[2].strip("|").split("|")]
    # No learner_time_shares (an older writer): gradient steps from the learner utilisation.
    assert bare == ["bare", "1", "1/1", "83.0 s", "1.00x", "41.5 s (4,200 steps)", "200.0",
                    "1.00", "0.94", "1,234", "51 %", "62 %", "-", "-", ""]
    hybrid = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert hybrid[:14] == ["hybrid", "2", "0/1"] + ["-"] * 11
    assert hybrid[14] == "exited with code 1 / see log"  # a '|' would split the cell


def test_where_the_learners_time_went_is_the_median_share_per_part() -> None:
    shares = [{"gradient steps": 0.4, "getting batches": 0.5, "other": 0.1},
              {"gradient steps": 0.6, "getting batches": 0.3, "other": 0.1},
              {"gradient steps": 0.5, "other": 0.2}]
    runs = [outcome("hybrid", index, RunMetrics(1000, 500, 10.0, 100.0, 0.5,
                                                learner_time_shares=run_shares))
            for index, run_shares in enumerate(shares)]
    (row,) = summarise([*runs, outcome("hybrid", 3, metrics())], ("hybrid",))
    assert row.learner_time_shares == {"gradient steps": 0.5, "getting batches": 0.4,
                                       "other": 0.1}
    assert compare.format_row(row)[11:14] == ["50 %", "40 %", "10 %"]
    # The rest of the wall time: every part but the two shown (evaluation, weights, ...).
    row.learner_time_shares = {"gradient steps": 0.5, "getting batches": 0.2, "evaluation": 0.1,
                               "other": 0.2}
    assert compare.format_row(row)[11:14] == ["50 %", "20 %", "30 %"]
    assert compare.format_row(ModeRow("bare", 1, 1, 1))[11:14] == ["-", "-", "-"]
    read = parse_result({**OLD_RESULT, "learner_time_shares": {"gradient steps": "x",
                                                               "other": 0.3}})
    assert read.learner_time_shares == {"other": 0.3}  # a non-number is left out


def test_solved_time_without_steps_and_never_solved() -> None:
    assert compare.format_row(ModeRow("bare", 1, 1, 1, solved_at_s=3.0))[5] == "3.0 s"
    assert compare.format_row(ModeRow("bare", 1, 1, 1))[5] == "-"


# --- arguments -----------------------------------------------------------------------------------


def test_defaults_are_all_modes_two_robots_and_the_configs_budget() -> None:
    settings = settings_from_values({})
    assert settings.modes == ("bare", "colocated", "decoupled", "hybrid")
    assert settings.robots == 2 and settings.repeats == 1 and settings.domain_id is None
    assert settings.total_env_steps == load_config("cartpole")[1].replay.total_env_steps
    assert settings.config_file.endswith("cartpole.yaml")
    assert Path(settings.output_dir).name.startswith("compare-") and settings.json_file is None
    assert settings.timeout_s == compare.DEFAULT_TIMEOUT_S


def test_values_are_read() -> None:
    settings = settings_from_values({"modes": "hybrid, Bare", "robots": "3", "repeats": "2",
                                     "total_env_steps": "600", "timeout": "90.5",
                                     "output": "out", "json": "rows.json", "domain_id": "7"})
    assert settings.modes == ("hybrid", "bare") and settings.robots == 3
    assert (settings.repeats, settings.total_env_steps, settings.timeout_s) == (2, 600, 90.5)
    assert Path(settings.output_dir).is_absolute() and settings.json_file == "rows.json"
    assert settings.domain_id == 7


@pytest.mark.parametrize(("values", "message"), [
    ({"modes": "bare,fast"}, r"unknown mode\(s\) fast"),
    ({"modes": ","}, "names no mode"),
    ({"modes": "bare,bare"}, "twice"),
    ({"robots": "0"}, r"robots:= must be 1\.\.64"),
    ({"repeats": "two"}, "repeats:= must be an integer"),
    ({"total_env_steps": "0"}, "total_env_steps:= must be"),
    ({"timeout": "-1"}, "timeout:= must be a positive"),
    ({"timeout": "soon"}, "timeout:= must be a positive"),
    ({"domain_id": "200"}, r"domain_id:= must be 0\.\.101"),
    ({"config": "no_such_task"}, "no_such_task"),
])
def test_bad_values_are_refused_with_the_reason(values: dict[str, str], message: str) -> None:
    with pytest.raises(ToolError, match=message) as error:
        settings_from_values(values)
    assert error.value.exit_code == 2


def test_the_cli_refuses_unknown_keys_and_bare_tokens(run_cli: RunCli) -> None:
    code, out, err = run_cli("compare", "mode:=bare")
    assert code == 2 and out == "" and "unknown argument 'mode'" in err and "modes" in err
    code, _, err = run_cli("compare", "bare")
    assert code == 2 and "unexpected argument 'bare'" in err
    code, _, err = run_cli("compare", "modes:=warp")
    assert code == 2 and err.startswith("rl-bringup compare: error: unknown mode(s) warp")


def test_compare_is_a_registered_subcommand() -> None:
    assert "compare" in cli.build_parser()._subparsers._group_actions[0].choices


def test_domain_ids_differ_per_run() -> None:
    assert compare.domain_ids(3, 100) == [100, 101, 0]
    picked = compare.domain_ids(5, None, random.Random(1))
    assert len(set(picked)) == 5 and all(1 <= value <= 100 for value in picked)


def test_run_commands_are_the_users_commands(tmp_path: Path) -> None:
    settings = settings_from_values({"total_env_steps": "600", "output": str(tmp_path)})
    bare = compare.run_command("bare", 1, settings, "/o/bare-r1", None)
    assert bare[1:] == ["-m", "rl_core.learning.training", "--config", settings.config_file, "--output",
                        "/o/bare-r1", "--total-env-steps", "600"]
    hybrid = compare.run_command("hybrid", 2, settings, "/o/hybrid-r1", 42)
    assert hybrid[1:5] == ["-m", "rl_bringup.cli", "launch", "hybrid"]
    assert {"robots:=2", "output_dir:=/o/hybrid-r1", "total_env_steps:=600",
            "domain_id:=42"} <= set(hybrid)
    assert not any(argument.startswith("cpus:=") for argument in hybrid)
    pinned = settings_from_values({"output": str(tmp_path), "cpus": "auto"})
    assert "cpus:=auto" in compare.run_command("hybrid", 2, pinned, "/o/h", 1)
    assert not any(argument.startswith("cpus") for argument in
                   compare.run_command("bare", 1, pinned, "/o/b", None))


# --- the run loop, with stand-in commands --------------------------------------------------------

WRITE_RESULT = """
import json, os, sys, time
deadline = time.process_time() + 0.3  # some CPU time for the accounting to see
while time.process_time() < deadline:
    pass
assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
json.dump({RESULT}, open(os.path.join(sys.argv[1], "result.json"), "w"))
"""


def stand_in(script: str) -> Callable[..., list[str]]:
    def command(mode: str, robots: int, settings: CompareSettings, output_dir: str,
                domain_id: int | None) -> list[str]:
        return [sys.executable, "-c", script, output_dir, mode]

    return command


def small_settings(tmp_path: Path, **changes: Any) -> CompareSettings:
    settings = settings_from_values({"modes": "bare,colocated", "output": str(tmp_path / "out"),
                                     "timeout": "30"})
    return dataclasses.replace(settings, **changes)


def test_runs_go_in_rounds_and_measure_the_tree_cpu(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    script = WRITE_RESULT.replace("{RESULT}", repr(OLD_RESULT))
    monkeypatch.setattr(compare, "run_command", stand_in(script))
    settings = small_settings(tmp_path, repeats=2, json_file=str(tmp_path / "rows.json"))
    lines: list[str] = []
    assert compare.execute(settings, lines.append) == 0
    document = json.loads((tmp_path / "rows.json").read_text())
    order = [(run["mode"], run["round_index"]) for run in document["runs"]]
    assert order == [("bare", 0), ("colocated", 0), ("bare", 1), ("colocated", 1)]
    for run in document["runs"]:
        assert run["error"] is None and run["cpu_time_s"] >= 0.25
        assert 0 < run["cpu_utilisation"] <= 1.0
    assert [row["mode"] for row in document["rows"]] == ["bare", "colocated"]
    assert (tmp_path / "out" / "table.md").read_text().startswith("| mode |")
    assert (tmp_path / "out" / "colocated-r2" / "output.log").is_file()
    assert "\n| colocated | 1 | 2/2 |" in "\n".join(lines)


def test_failures_are_reported_per_run_and_exit_1(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    script = "import sys\nif sys.argv[2] == 'bare':\n    sys.exit(3)\n"  # colocated: no result
    monkeypatch.setattr(compare, "run_command", stand_in(script))
    lines: list[str] = []
    assert compare.execute(small_settings(tmp_path), lines.append) == 1
    table = "\n".join(lines)
    assert "round 1: exited with code 3 (log: " in table
    assert "round 1: no result.json written (log: " in table


def test_a_run_past_its_timeout_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "run_command", stand_in("import time\ntime.sleep(60)\n"))
    settings = small_settings(tmp_path, modes=("bare",), timeout_s=0.5)
    run = compare.run_once("bare", 0, settings, None)
    assert run.error is not None and run.error.startswith("timed out after 0.5 s")
    assert run.returncode is not None and run.returncode != 0  # stopped by SIGINT
    assert run.process_wall_s < 20.0


def test_an_output_folder_with_earlier_runs_is_refused(tmp_path: Path) -> None:
    settings = small_settings(tmp_path)
    (Path(settings.output_dir) / "bare-r1").mkdir(parents=True)
    with pytest.raises(ToolError, match="already holds bare-r1"):
        compare.run_comparison(settings, lambda line: None)


def test_the_benchmark_script_maps_flags_to_the_same_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "learning.py"
    spec = importlib.util.spec_from_file_location("learning_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seen: list[CompareSettings] = []
    monkeypatch.setattr(module, "execute", lambda settings, log: seen.append(settings) or 0)
    assert module.main(["--modes", "bare,hybrid", "--robots", "3", "--total-env-steps", "900",
                        "--output", str(tmp_path), "--domain-id", "9"]) == 0
    assert seen[0].modes == ("bare", "hybrid") and seen[0].robots == 3
    assert (seen[0].total_env_steps, seen[0].domain_id) == (900, 9)
    assert module.main(["--repeats", "0"]) == 2


def test_a_report_without_runs_lists_the_modes_with_no_figures() -> None:
    text, document = compare.report(small_settings(Path("/tmp/never-created")), [])
    assert "| bare | 0 | 0/0 | - |" in text
    assert [row["completed"] for row in document["rows"]] == [0, 0]
