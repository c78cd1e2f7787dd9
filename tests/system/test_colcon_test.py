"""``colcon test`` of a fresh workspace, as a ROS user or a ROS CI runs it: the packages' own
``test/`` folders, i.e. the launch_testing tests of every mode (src/rl_bringup/test) and each
Python package's lint test. This is the one place the repository's test run (``make test``) runs
``colcon test``.

Why through colcon, and not by collecting src/*/test here: the launch tests need launch_testing's
pytest plugin, whose hook declares an argument pytest 9 removed; loaded into this pytest 9 run it
would stop the whole suite at start-up (../shared/ros2-cli/README.md). scripts/setup.sh therefore
installs it, with the pytest 8.4 it supports, into ``.venv/launch_testing``, a folder only this
test's ``colcon test`` gets on ``PYTHONPATH``: the launch tests run under the pytest and plugin they
are written for, and this suite keeps pytest 9. (Collected directly by pytest 9, the launch tests
skip with that reason: src/rl_bringup/test/conftest.py.)

The workspace is a copy of the working tree with the repository files the package tests read
(ruff.toml, pytest.ini); ``rl_interfaces`` comes from the venv underneath, as in
tests/system/test_colcon_workspace.py. ``colcon test`` runs in this run's ``ROS_DOMAIN_ID`` on
the loopback (both passed on explicitly), with ROS logs and temporary files in ``tmp_path``, and
without the ``RL_ROS2_*`` keys tests/conftest.py sets: the launch makes a run's keys, as for a user.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from rl_bringup.plan.layouts import MODES
from tests.processes import REPO, Child
from tests.system.test_colcon_workspace import BIN, COLCON, colcon_build, copy_repository

ROS2_CLI_DIR = Path(os.environ.get("ROS2_CLI_DIR", REPO.parent / "shared" / "ros2-cli"))
#: Where scripts/setup.sh installs launch_testing and its pytest (see the module docstring).
LAUNCH_TESTING = Path(sys.prefix) / "launch_testing"
PYTHON_PACKAGES = ("rl_core", "rl_nodes", "rl_bringup")
#: Repository files the packages' tests read: ruff.toml (lint tests) and pytest.ini (markers).
ROOT_FILES = ("ruff.toml", "pytest.ini")
#: Three launches of a tiny budget and the lint tests take 1–3 minutes on 2 cores.
COLCON_TEST_TIMEOUT_S = 900.0

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not (ROS2_CLI_DIR / "launch_testing").is_dir(),
                       reason=f"{ROS2_CLI_DIR / 'launch_testing'} is absent: no launch / "
                              f"launch_testing on this machine (scripts/setup.sh installs them from "
                              f"{ROS2_CLI_DIR})"),
]


def colcon_test_environment(tmp_path: Path) -> dict[str, str]:
    """The environment of ``colcon test``: launch_testing on PYTHONPATH, the venv as the ROS
    install underneath, this run's domain on the loopback, logs and temporary files in
    ``tmp_path``, no RL_ROS2_* settings."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("RL_ROS2_")}
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env["AMENT_PREFIX_PATH"] = sys.prefix
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LAUNCH_TESTING),
                                                      env.get("PYTHONPATH", "")]))
    env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]  # tests/conftest.py: this run's own
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_LOG_DIR"] = str(tmp_path / "ros_log")
    (tmp_path / "tmp").mkdir()
    env["TMPDIR"] = str(tmp_path / "tmp")
    return env


def junit_cases(result_file: Path) -> dict[str, tuple[str, str]]:
    """``{name: (outcome, captured output)}`` of a pytest JUnit file; outcome is ``passed``,
    ``failure``, ``error`` or ``skipped``."""
    cases = {}
    for case in ElementTree.parse(result_file).getroot().iter("testcase"):
        outcomes = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        output = "\n".join(child.text or "" for child in case
                           if child.tag in ("system-out", "system-err"))
        cases[case.get("name", "")] = (outcomes[0] if outcomes else "passed", output)
    return cases


def test_colcon_test_runs_the_launch_tests_of_every_mode_and_the_lint_tests(
    tmp_path: Path
) -> None:
    assert LAUNCH_TESTING.is_dir(), (f"{LAUNCH_TESTING} missing although {ROS2_CLI_DIR} exists: "
                                     f"run scripts/setup.sh")
    workspace = tmp_path / "ws"
    checkout = copy_repository(workspace, PYTHON_PACKAGES)
    for name in ROOT_FILES:
        shutil.copy2(REPO / name, checkout / name)
    build = colcon_build(workspace)
    assert build.returncode == 0, build.stdout + build.stderr

    env = colcon_test_environment(tmp_path)
    # junit_logging: the launch tests' unittest report goes into the result files, to be counted.
    run = Child([str(COLCON), "test", "--return-code-on-test-failure",
                 "--event-handlers", "console_cohesion+", "--pytest-args", " -o",
                 "junit_logging=all"], env=env, cwd=workspace)
    try:
        code = run.wait(COLCON_TEST_TIMEOUT_S)
    finally:
        run.stop(grace_s=30.0)
    summary = subprocess.run([str(COLCON), "test-result", "--all", "--verbose"], cwd=workspace,
                             env=env, capture_output=True, text=True, timeout=60)
    report = f"{run.output()[-6000:]}\n--- colcon test-result:\n{summary.stdout[-3000:]}"
    assert code == 0, report
    assert summary.returncode == 0, report

    cases = {package: junit_cases(workspace / "build" / package / "pytest.xml")
             for package in PYTHON_PACKAGES}
    for package in PYTHON_PACKAGES:
        assert cases[package].get("test_ruff_finds_nothing", ("missing",))[0] == "passed", report
    launch_tests = {f"test_{mode}_launch" for mode in MODES}
    assert set(cases["rl_bringup"]) == launch_tests | {"test_ruff_finds_nothing"}, report
    for name in sorted(launch_tests):
        outcome, output = cases["rl_bringup"][name]
        assert outcome == "passed", f"{name}: {outcome}\n{output[-4000:]}"
        # launch_testing's own report: the tests while the launch ran, then after its shutdown,
        # each of them ok (a module whose test classes were not found would pass with none).
        ran = [int(count) for count in re.findall(r"^Ran (\d+) tests? in ", output, flags=re.M)]
        passed = re.findall(r"^test_\w+ \(.*\) \.\.\. ok$", output, flags=re.M)
        assert len(ran) == 2 and min(ran) >= 1 and len(passed) == sum(ran), f"{name}:\n{output}"
