#!/usr/bin/env python3
r"""How often each learning test fails: run pytest tests again and again, each run with a seed
of its own, and tabulate every learning outcome they assert against its threshold.

A learning test asserts an outcome of one training run (a best evaluation >= 180, a success rate
>= 0.8, ...), and a training run is one draw from a distribution. A test that fails 1 run in 20
costs a whole CI run every 20 (issue 21). This benchmark measures the distribution of what each
test asserts, with the test's own code, budget and assertions:

* every run is ``python -m pytest -s NODEID`` in a fresh process, one run at a time (each takes
  every core it can get, as in the suite), with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, a
  ``ROS_DOMAIN_ID`` of its own and ``RL_ROS2_LEARNING_SEED`` (tests/learning.py): run ``k`` trains
  with seed ``first-seed + k``. Tests of the distributed modes are fresh draws even with one
  seed (message timing decides what each batch holds);
* each test prints ``learning outcome: NAME VALUE (needs >= THRESHOLD)`` before it asserts it;
  the table gives per test and outcome the runs, the failures, the minimum and median value, the
  smallest margin over the threshold, and the 95 % upper bound of the failure rate (exact,
  Clopper-Pearson: 0 failures in 24 runs bound it below 11.7 %). A run that fails without an
  outcome line (a crash, a timeout, another assertion) counts as failed too.

Usage::

    .venv/bin/python benchmarks/learning_tests.py --runs 24 --json bare.json \
        tests/system/test_learning_bare.py::test_bare_loop_solves_cartpole
    # a measurement made in parts (the JSON is rewritten as each run ends, so a part cut
    # short keeps its runs): tabulate them together
    .venv/bin/python benchmarks/learning_tests.py --tabulate part1.json part2.json

It is a benchmark, not a test: it prints figures; the exit code is 0 when every run passed, 1
otherwise, 2 on bad flags. The runs' logs stay in ``--output``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rl_bringup.plan.discovery import RANDOM_DOMAIN_ID_RANGE
from rl_bringup.run.processes import describe_exit, stop_process

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the tests package lives at the repository root
    sys.path.insert(0, str(REPO))
from benchmarks.tables import LEFT, RIGHT, bold, markdown_table  # noqa: E402
from tests.learning import OUTCOME_PREFIX, SEED_VARIABLE  # noqa: E402

#: Seconds one test run may take before it is stopped and counted as failed.
RUN_TIMEOUT_S = 3600.0
#: Seconds a stopped run gets after SIGINT before its process group is killed.
STOP_GRACE_S = 30.0
#: ``learning outcome: NAME VALUE (needs >= THRESHOLD)``.
OUTCOME_LINE = re.compile(re.escape(OUTCOME_PREFIX)
                          + r" (?P<name>.+) (?P<value>\S+) \(needs >= (?P<threshold>\S+)\)$")


@dataclass
class Run:
    """One run of one test: its exit, its outcomes ``{name: (value, threshold)}``."""

    test: str
    seed: int
    exit_code: int | None = None
    outcomes: dict[str, tuple[float, float]] = field(default_factory=dict)
    wall_time_s: float = 0.0
    log: str = ""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def parse_outcomes(text: str) -> dict[str, tuple[float, float]]:
    """Every outcome line of a run's output (the last one of each name)."""
    found = {}
    for line in text.splitlines():
        match = OUTCOME_LINE.search(line.strip())
        if match:
            found[match["name"]] = (float(match["value"]), float(match["threshold"]))
    return found


def failure_rate_bound(failures: int, runs: int, confidence: float = 0.95) -> float:
    """The exact (Clopper-Pearson) upper bound of a failure rate after ``failures`` in
    ``runs``: the rate p at which seeing that few failures has probability ``1 - confidence``."""
    if failures >= runs:
        return 1.0

    def at_most(p: float) -> float:
        return sum(math.comb(runs, k) * p**k * (1 - p) ** (runs - k) for k in range(failures + 1))

    low, high = failures / runs, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if at_most(middle) > 1 - confidence:
            low = middle
        else:
            high = middle
    return high


def run_test(test: str, seed: int, domain_id: int, log: Path) -> Run:
    """One pytest run of ``test`` in its own process group, its output in ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", SEED_VARIABLE: str(seed),
                   "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_DOMAIN_ID": str(domain_id)}
    command = [sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", test]
    run = Run(test, seed, log=str(log))
    began = time.monotonic()
    with open(log, "wb") as log_file:
        process = subprocess.Popen(command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=log_file,
                                   stderr=subprocess.STDOUT, env=environment,
                                   start_new_session=True)
        try:
            run.exit_code = process.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            run.exit_code = None
        finally:
            stop_process(process, STOP_GRACE_S)
    run.wall_time_s = time.monotonic() - began
    run.outcomes = parse_outcomes(log.read_text(errors="replace"))
    return run


def load_runs(path: Path) -> list[Run]:
    """The runs a ``--json`` file holds.

    :raises ValueError: when the file is not such a list (KeyError/TypeError for a bad row)."""
    rows = json.loads(path.read_text())
    if not isinstance(rows, list):
        raise ValueError("not a list of runs written by --json")
    runs = []
    for row in rows:
        run = Run(**row)
        run.outcomes = {name: (float(value), float(threshold))
                        for name, (value, threshold) in run.outcomes.items()}
        runs.append(run)
    return runs


def describe(run: Run) -> str:
    """One line per run as it ends."""
    figures = ", ".join(f"{name} {value:g}" for name, (value, _) in run.outcomes.items())
    verdict = ("passed" if run.passed else "no exit within the timeout" if run.exit_code is None
               else f"FAILED ({describe_exit(run.exit_code)})")
    return (f"{short(run.test)} seed {run.seed}: {verdict}; {figures or 'no outcome line'}; "
            f"{run.wall_time_s:.0f} s")


def short(test: str) -> str:
    """``tests/system/test_x.py::test_y[p]`` -> ``test_x::test_y[p]``."""
    path, _, name = test.partition("::")
    return f"{Path(path).stem}::{name}" if name else Path(path).stem


#: The table's columns (:func:`table`).
COLUMNS = (("test", LEFT), ("outcome", LEFT),
           *((header, RIGHT) for header in ("runs", "failed", "min", "median", "needs",
                                            "smallest margin", "failure rate, 95 % bound",
                                            "median time")))


def table(runs: list[Run]) -> str:
    """One markdown row per test and outcome: runs, failures, the outcome's minimum, median and
    smallest margin over its threshold, the failure rate's 95 % upper bound, the median time."""
    cells = []
    for test in dict.fromkeys(run.test for run in runs):
        mine = [run for run in runs if run.test == test]
        failed = sum(not run.passed for run in mine)
        bound = f"{100 * failure_rate_bound(failed, len(mine)):.1f} %"
        seconds = f"{statistics.median(run.wall_time_s for run in mine):.0f} s"
        names = list(dict.fromkeys(name for run in mine for name in run.outcomes)) or ["-"]
        for name in names:
            pairs = [run.outcomes[name] for run in mine if name in run.outcomes]
            values = [value for value, _ in pairs]
            figures = ([f"{min(values):.4g}", f"{statistics.median(values):.4g}",
                        f"{pairs[0][1]:g}", f"{min(v - t for v, t in pairs):+.4g}"]
                       if pairs else ["-"] * 4)
            cells.append([short(test), name, str(len(mine)), str(failed), *figures, bound,
                          seconds])
    return markdown_table(COLUMNS, cells)


#: docs/results.md's "Learning-test failure rates" table.
RESULTS_COLUMNS = (("test", LEFT), ("what it asserts", LEFT), ("runs", RIGHT), ("failed", RIGHT),
                   ("median", RIGHT), ("min", RIGHT), ("smallest margin", RIGHT),
                   ("95 % bound", RIGHT))


def measured(value: float, sign: str = "") -> str:
    """An outcome as the page writes it: ``200.0``, ``0.725``, ``10,500`` (``sign="+"``: with
    its sign, for margins)."""
    if abs(value) >= 1000:
        return f"{value:{sign},.0f}"
    text = repr(round(value, 3))
    return f"+{text}" if sign == "+" and value >= 0 else text


def results_table(runs: list[Run]) -> str:
    """docs/results.md's "Learning-test failure rates" table: per test and outcome the runs,
    the failures (bold when any), the outcome's median, minimum and smallest margin over its
    threshold, and the failure rate's 95 % upper bound."""
    cells = []
    for test in dict.fromkeys(run.test for run in runs):
        mine = [run for run in runs if run.test == test]
        failed = sum(not run.passed for run in mine)
        path, _, name = test.partition("::")
        label = f"`{Path(path).stem}`" + (f" {name[name.index('[') + 1:-1]}" if "[" in name
                                          else "")
        for outcome in list(dict.fromkeys(o for run in mine for o in run.outcomes)) or ["-"]:
            pairs = [run.outcomes[outcome] for run in mine if outcome in run.outcomes]
            values = [value for value, _ in pairs]
            asserts = f"{outcome} >= {pairs[0][1]:g}" if pairs else outcome
            figures = ([measured(statistics.median(values)), measured(min(values)),
                        measured(min(v - t for v, t in pairs), "+")] if pairs else ["-"] * 3)
            cells.append([label, asserts, str(len(mine)), bold(str(failed), failed > 0),
                          *figures, f"{100 * failure_rate_bound(failed, len(mine)):.1f} %"])
    return markdown_table(RESULTS_COLUMNS, cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tests", nargs="*", metavar="NODEID",
                        help="pytest node ids, e.g. tests/system/test_x.py::test_y")
    parser.add_argument("--runs", type=int, default=24, help="runs of every test (default 24)")
    parser.add_argument("--first-seed", type=int, default=1,
                        help="seed of the first run, counting up (default 1)")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID of the first run, counting up (default random)")
    parser.add_argument("--output", type=Path, default=None,
                        help="folder for the runs' logs (default runs/learning-tests-<time>)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write every run here (rewritten as each run ends)")
    parser.add_argument("--tabulate", type=Path, nargs="+", default=None, metavar="JSON",
                        help="run nothing: tabulate the runs of earlier --json files together "
                        "(the parts of one measurement)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the table as docs/results.md shows it")
    args = parser.parse_args(argv)
    if args.tabulate is not None:
        try:
            tabulated = [run for path in args.tabulate for run in load_runs(path)]
            print(table(tabulated))
            if args.markdown:
                print("\n" + results_table(tabulated))
        except (OSError, ValueError, TypeError, KeyError) as error:
            parser.error(f"cannot tabulate {' '.join(map(str, args.tabulate))}: {error}")
        return 0
    if not args.tests:
        parser.error("give the tests to run (NODEID ...), or --tabulate JSON files")
    if args.runs < 1 or args.first_seed < 0:
        parser.error("--runs must be positive and --first-seed non-negative")
    low, high = RANDOM_DOMAIN_ID_RANGE
    first_domain = args.domain_id if args.domain_id is not None else random.randint(low, high)
    if not low <= first_domain <= high:
        parser.error(f"--domain-id must be in {low}..{high}")
    missing = [test for test in args.tests if not (REPO / test.partition("::")[0]).is_file()]
    if missing:
        parser.error(f"no such test file: {', '.join(missing)} (give paths from the repository "
                     "root, e.g. tests/system/test_learning_bare.py::test_bare_loop_solves_cartpole)")
    output = args.output or REPO / f"runs/learning-tests-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"{len(args.tests)} test(s) x {args.runs} runs, one at a time, logs in {output}",
          flush=True)
    runs: list[Run] = []
    for number in range(args.runs):
        seed = args.first_seed + number
        for index, test in enumerate(args.tests):
            domain = low + (first_domain - low + number * len(args.tests) + index) % (high - low + 1)
            log = output / re.sub(r"[^\w.-]+", "_", short(test)) / f"seed{seed}.log"
            runs.append(run_test(test, seed, domain, log))
            print(describe(runs[-1]), flush=True)
            if args.json is not None:  # rewritten after every run: a cut-short measurement counts
                args.json.write_text(json.dumps([asdict(run) for run in runs], indent=2))
    print(table(runs))
    if args.markdown:
        print("\n" + results_table(runs))
    return 0 if all(run.passed for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
