"""Seeds of the bare loop: ``rl-train-bare --seed`` and the seed-spread benchmark built on it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.seed_spread import Outcome, Runner, parse_seeds, table
from benchmarks.seed_spread import main as seed_spread
from rl_core.learning.training import main as train_bare

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).resolve().parents[2] / "config" / "cartpole.yaml"
#: A few hundred steps with updates: seconds per run.
SHORT = {"random_steps: 500": "random_steps: 100", "learning_starts: 500": "learning_starts: 100",
         "total_env_steps: 8000": "total_env_steps: 300", "eval_episodes: 10": "eval_episodes: 3",
         "batch_size: 128": "batch_size: 32"}


def short_config(tmp_path: Path, seed: int = 0) -> Path:
    text = CONFIG.read_text()
    for old, new in {**SHORT, "seed: 0": f"seed: {seed}"}.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"short-seed{seed}.yaml"
    path.write_text(text)
    return path


def eval_returns(run: Path) -> list[float]:
    return json.loads((run / "result.json").read_text())["eval_returns"]


def test_seed_flag_trains_as_the_seed_in_the_file(tmp_path: Path) -> None:
    assert train_bare(["--config", str(short_config(tmp_path)), "--seed", "5",
                       "--output", str(tmp_path / "flag")]) == 0
    assert train_bare(["--config", str(short_config(tmp_path, 5)),
                       "--output", str(tmp_path / "file")]) == 0
    assert train_bare(["--config", str(short_config(tmp_path)),
                       "--output", str(tmp_path / "zero")]) == 0
    assert eval_returns(tmp_path / "flag") == eval_returns(tmp_path / "file")
    # Seed 0's evaluation episodes start elsewhere (reset seeds follow the seed).
    assert eval_returns(tmp_path / "flag") != eval_returns(tmp_path / "zero")


def test_seed_flag_out_of_range_is_a_configuration_error(tmp_path: Path, capsys) -> None:
    assert train_bare(["--config", str(short_config(tmp_path)), "--seed", "-1",
                       "--output", str(tmp_path / "run")]) == 2
    assert "seed" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_seed_spread_runs_every_seed_and_tabulates(tmp_path: Path, capsys) -> None:
    config = short_config(tmp_path)
    assert seed_spread(["--config", str(config), "--seeds", "1-2", "--jobs", "2",
                        "--output", str(tmp_path / "runs"), "--json", str(tmp_path / "o.json")]) == 0
    outcomes = json.loads((tmp_path / "o.json").read_text())
    assert [o["seed"] for o in outcomes] == [1, 2]
    assert all(o["error"] == "" and o["eval_mean_return"] > 0 for o in outcomes)
    for outcome in outcomes:  # the benchmark reports what each run wrote
        run = tmp_path / "runs" / "0-short-seed0" / f"seed{outcome['seed']}"
        returns = eval_returns(run)
        assert outcome["eval_mean_return"] == pytest.approx(sum(returns) / len(returns))
    printed = capsys.readouterr().out
    assert "| short-seed0.yaml | 180 | 2 |" in printed


def test_seed_spread_launches_a_distributed_mode_per_seed(tmp_path: Path, ros_env,
                                                          capsys) -> None:
    """``--mode hybrid``: one ``rl-bringup launch hybrid robots:=2 seed:=S`` per seed, on the
    given ROS domain, its final and best evaluations read from its result.json."""
    domain = int(ros_env["ROS_DOMAIN_ID"])
    assert seed_spread(["--config", str(short_config(tmp_path)), "--seeds", "3", "--mode",
                        "hybrid", "--robots", "2", "--domain-id", str(domain),
                        "--output", str(tmp_path / "runs"), "--json", str(tmp_path / "o.json")]) == 0
    [outcome] = json.loads((tmp_path / "o.json").read_text())
    run = tmp_path / "runs" / "0-short-seed0" / "seed3"
    result = json.loads((run / "result.json").read_text())
    assert outcome["error"] == "" and outcome["seed"] == 3
    assert outcome["eval_mean_return"] == result["eval_mean_return"]
    assert outcome["best_eval_mean_return"] == result["best_eval_mean_return"]
    log = (run / "run.log").read_text()
    assert "[robot_1] " in log and "seed 3" in log, log[-3000:]
    assert "mode hybrid robots:=2, 1 at once" in capsys.readouterr().out


def test_runner_commands_carry_the_seed_budget_and_domain(tmp_path: Path) -> None:
    config, output = tmp_path / "c.yaml", tmp_path / "out"
    bare = Runner(steps=500).command(config, 7, output, 42)
    assert bare[1:] == ["-m", "rl_core.learning.training", "--config", str(config), "--output", str(output),
                        "--seed", "7", "--total-env-steps", "500"]
    launched = Runner("decoupled", 3).command(config, 7, output, 42)
    assert launched[1:6] == ["-m", "rl_bringup.cli", "launch", "decoupled", "robots:=3"]
    assert {"seed:=7", "domain_id:=42", f"config:={config}", f"output_dir:={output}"} <= set(launched)
    assert not any(part.startswith("total_env_steps") for part in launched)
    boundary = Runner("colocated", 1, None, ("robot_interface:=ros2_control",))
    assert boundary.command(config, 7, output, 42)[-1] == "robot_interface:=ros2_control"


def test_launch_arguments_are_for_distributed_modes_and_need_an_assignment(capsys) -> None:
    with pytest.raises(SystemExit) as bare:
        seed_spread(["--launch-arg", "robot_interface:=ros2_control"])
    assert bare.value.code == 2 and "for the distributed modes" in capsys.readouterr().err
    with pytest.raises(SystemExit) as malformed:
        seed_spread(["--mode", "colocated", "--launch-arg", "robot_interface"])
    assert malformed.value.code == 2 and "NAME:=VALUE" in capsys.readouterr().err


def test_seeds_parse_ranges_and_lists() -> None:
    assert parse_seeds("1-3,7,2") == [1, 2, 3, 7]
    for bad in ("", "x", "3-1", "-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_seeds(bad)


def test_table_counts_runs_at_the_threshold_and_leaves_out_failed_ones() -> None:
    outcomes = [Outcome("a.yaml", 1, 200.0, 200.0), Outcome("a.yaml", 2, 179.9, 185.0),
                Outcome("a.yaml", 3, 180.0, 179.0), Outcome("a.yaml", 4, error="exit 1: boom")]
    rows = table({"a.yaml": 180.0, "b.yaml": 180.0}, outcomes).splitlines()
    assert rows[2] == ("| a.yaml | 180 | 3 | 180.0 | 179.9 | 200.0 | 2/3 "
                       "| 185.0 | 179.0 | 200.0 | 2/3 |")
    assert rows[3] == "| b.yaml | 180 | 0 | - | - | - | - | - | - | - | - |"
