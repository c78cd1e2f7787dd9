"""benchmarks/learning_tests.py: runs pytest tests with a seed each and tabulates their learning
outcomes against their thresholds, failures counted, the failure rate bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.learning_tests import failure_rate_bound, main, parse_outcomes
from tests.learning import SEED_VARIABLE

pytestmark = pytest.mark.integration

#: A stand-in learning test: its outcome is ten times its seed, and it needs 15.
SEEDED_TEST = f'''
import os

from tests.learning import report_outcome


def test_outcome_of_the_seed():
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    print("domain", os.environ["ROS_DOMAIN_ID"])
    value = 10.0 * int(os.environ["{SEED_VARIABLE}"])
    report_outcome("ten times the seed", value, 15.0)
    assert value >= 15.0
'''


def test_runs_each_seed_counts_failures_and_tabulates_margins(tmp_path: Path, capsys) -> None:
    test_file = tmp_path / "test_seeded.py"
    test_file.write_text(SEEDED_TEST)
    node = f"{test_file}::test_outcome_of_the_seed"
    code = main([node, "--runs", "3", "--first-seed", "1", "--domain-id", "99",
                 "--output", str(tmp_path / "logs"), "--json", str(tmp_path / "runs.json")])
    assert code == 1  # seed 1 failed
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert [(run["seed"], run["exit_code"]) for run in runs] == [(1, 1), (2, 0), (3, 0)]
    assert [run["outcomes"]["ten times the seed"] for run in runs] == [[10, 15], [20, 15], [30, 15]]
    # Domains count up from the first and wrap within ROS's range.
    assert [("domain 99" in Path(run["log"]).read_text(),
             "domain 100" in Path(run["log"]).read_text(),
             "domain 1\n" in Path(run["log"]).read_text()) for run in runs] == [
        (True, False, False), (False, True, False), (False, False, True)]
    out = capsys.readouterr().out
    assert "test_seeded::test_outcome_of_the_seed seed 1: FAILED" in out
    row = next(line for line in out.splitlines() if line.startswith("| test_seeded"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1:9] == ["ten times the seed", "3", "1", "10", "20", "15", "-5",
                          f"{100 * failure_rate_bound(1, 3):.1f} %"]

    # A measurement made in parts tabulates as one: the same row from two files.
    (tmp_path / "part1.json").write_text(json.dumps(runs[:1]))
    (tmp_path / "part2.json").write_text(json.dumps(runs[1:]))
    assert main(["--tabulate", str(tmp_path / "part1.json"), str(tmp_path / "part2.json")]) == 0
    assert row in capsys.readouterr().out.splitlines()


def test_tabulate_refuses_what_is_not_a_measurement_and_a_run_needs_tests(tmp_path: Path,
                                                                         capsys) -> None:
    (tmp_path / "other.json").write_text('{"runs": 3}')
    for bad in ([str(tmp_path / "other.json")], [str(tmp_path / "missing.json")], []):
        with pytest.raises(SystemExit) as refused:
            main(["--tabulate", *bad] if bad else [])
        assert refused.value.code == 2
        assert ("cannot tabulate" if bad else "give the tests to run") in capsys.readouterr().err


def test_a_run_without_an_outcome_line_fails_and_bad_flags_are_refused(tmp_path: Path,
                                                                      capsys) -> None:
    test_file = tmp_path / "test_crash.py"
    test_file.write_text("def test_crash():\n    raise RuntimeError('boom')\n")
    assert main([str(test_file), "--runs", "1", "--output", str(tmp_path / "logs")]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "no outcome line" in out
    with pytest.raises(SystemExit) as missing:
        main(["tests/system/test_no_such_file.py::test_x"])
    assert missing.value.code == 2 and "no such test file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as runs:
        main([str(test_file), "--runs", "0"])
    assert runs.value.code == 2


def test_outcome_lines_parse_and_the_bound_is_clopper_pearson() -> None:
    text = ("noise\nlearning outcome: best evaluation 196.8 (needs >= 180)\n"
            "  learning outcome: a - b 12.5 (needs >= 10)  \nlearning outcome: broken\n")
    assert parse_outcomes(text) == {"best evaluation": (196.8, 180.0), "a - b": (12.5, 10.0)}
    # 0 failures in n runs: 1 - 0.05^(1/n) (11.7 % for 24, 3.0 % for 100).
    assert failure_rate_bound(0, 24) == pytest.approx(1 - 0.05 ** (1 / 24), abs=1e-9)
    assert failure_rate_bound(0, 100) == pytest.approx(0.0295, abs=1e-4)
    # 1 failure in 24: the rate at which 1 or fewer failures in 24 have probability 5 %.
    bound = failure_rate_bound(1, 24)
    assert (1 - bound) ** 24 + 24 * bound * (1 - bound) ** 23 == pytest.approx(0.05, abs=1e-6)
    assert failure_rate_bound(5, 5) == 1.0
