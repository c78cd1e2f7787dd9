"""``rl-bringup compare`` end to end: a bare and a colocated training run with a tiny budget."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.processes import Child

pytestmark = pytest.mark.integration
RL_BRINGUP = str(Path(sys.executable).parent / "rl-bringup")
#: Just past learning_starts (500 in config/cartpole.yaml), so both runs make some updates.
BUDGET = 600
TIMEOUT_S = 150.0


def cells(table: str, mode: str) -> list[str]:
    """The cells of ``mode``'s row of a markdown table."""
    for line in table.splitlines():
        if line.startswith(f"| {mode} |"):
            return [cell.strip() for cell in line.strip().strip("|").split("|")]
    raise AssertionError(f"no row for {mode}:\n{table}")


def test_compare_trains_bare_and_colocated_and_tabulates_both(tmp_path: Path,
                                                              ros_env: dict[str, str]) -> None:
    output = tmp_path / "compare"
    run = Child([RL_BRINGUP, "compare", "modes:=bare,colocated", f"total_env_steps:={BUDGET}",
                 f"output:={output}", f"json:={tmp_path / 'rows.json'}", "timeout:=120"],
                env=ros_env)
    try:
        code = run.wait(TIMEOUT_S)
    finally:
        run.stop(grace_s=40.0)
    assert code == 0, run.output()[-4000:]
    table = (output / "table.md").read_text()
    assert all(line in run.lines for line in table.splitlines()[:4])  # printed as well
    for mode in ("bare", "colocated"):
        row = cells(table, mode)
        assert row[:3] == [mode, "1", "1/1"], row
        wall, wall_ratio, _, eval_return, efficiency, updates, rate, cpu = row[3:11]
        assert re.fullmatch(r"[\d,]+\.\d s", wall) and re.fullmatch(r"[\d,]+\.\d", eval_return)
        assert re.fullmatch(r"\d+\.\d\d", efficiency) and re.fullmatch(r"\d+\.\d\d", updates)
        assert re.fullmatch(r"[\d,]+", rate) and re.fullmatch(r"\d+ %", cpu)
        assert re.fullmatch(r"\d+\.\d\dx", wall_ratio) and row[14] == ""
        # Where the learner's time went: both modes write learner_time_shares.
        assert all(re.fullmatch(r"\d+ %", share) for share in row[11:14]), row
    assert cells(table, "bare")[7] == "1.00" and cells(table, "bare")[4] == "1.00x"
    document = json.loads((tmp_path / "rows.json").read_text())
    for run_record in document["runs"]:
        assert run_record["metrics"]["env_steps"] >= BUDGET
        assert run_record["metrics"]["updates"] > 0
        assert 0 < run_record["cpu_utilisation"] <= 1.0
        assert (Path(run_record["output_dir"]) / "result.json").is_file()
