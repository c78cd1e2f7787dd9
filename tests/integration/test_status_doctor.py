"""``rl-bringup status`` and ``rl-bringup doctor`` against a small decoupled deployment, and
``doctor`` against an empty domain. The checks on their own are unit-tested in
tests/unit/test_doctor.py. The same deployment shows the decoupled graph of rl_nodes.graph
(tests/system/test_graph.py)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator

import pytest

from rl_bringup.tools.operate.doctor.graph import expected_graph
from tests.integration.deployments import assert_graph_is_documented, deployment, tool_argv
from tests.processes import Child

pytestmark = pytest.mark.integration

ROBOTS = 2
TOOL_TIMEOUT_S = 90.0
#: Outside conftest's 1..100 and plan.py's random 1..100: no test run or deployment uses it.
EMPTY_DOMAIN_ID = 101


# --- a running deployment -------------------------------------------------------------------


@pytest.fixture(scope="module")
def decoupled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    with deployment("decoupled", ROBOTS, dict(os.environ),
                    tmp_path_factory.mktemp("decoupled") / "run") as run:
        yield run


def run_tool(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                          check=False)


def test_live_decoupled_graph_matches_the_graph_module(decoupled: Child, ros_env) -> None:
    assert_graph_is_documented("decoupled", ROBOTS, int(ros_env["ROS_DOMAIN_ID"]), decoupled)


def test_status_once_shows_both_robots_and_the_replay_fill(decoupled: Child, ros_env) -> None:
    # once:=true returns as soon as everything is known; wait:= only bounds a busy machine.
    result = run_tool([*tool_argv("status"), "once:=true", "wait:=15"], ros_env)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()
            if re.match(r"^\d+\s", line)}
    assert set(rows) == {"0", "1"}, result.stdout
    for robot in ("0", "1"):
        assert rows[robot][1:3] == ["up", "up"], result.stdout
    fill = re.search(r"fill (\d+)/(\d+)", result.stdout)
    assert fill is not None and int(fill.group(1)) > 0 and int(fill.group(2)) > 0, result.stdout
    assert re.search(r"weights version \d+", result.stdout), result.stdout


def test_doctor_passes_on_a_running_deployment(decoupled: Child, ros_env) -> None:
    result = run_tool([*tool_argv("doctor"), "mode:=decoupled", f"robots:={ROBOTS}", "wait:=20"],
                      ros_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 failed" in result.stdout
    for expected in ("PASS  nodes", "PASS  process layout", "rate /robot_1/actions",
                     "service /replay_buffer/sample"):
        assert expected in result.stdout, result.stdout


def test_doctor_fails_on_an_empty_domain_naming_the_missing_nodes(ros_env) -> None:
    result = run_tool([*tool_argv("doctor"), "mode:=decoupled", f"robots:={ROBOTS}",
                       f"domain_id:={EMPTY_DOMAIN_ID}", "wait:=2"], ros_env)
    assert result.returncode == 1, result.stdout + result.stderr
    failures = [line for line in result.stdout.splitlines() if line.startswith("FAIL  nodes")]
    assert failures, result.stdout
    for node in expected_graph(ROBOTS, "decoupled").nodes:
        assert node in failures[0]
    assert "fix: start the deployment (rl-bringup launch decoupled robots:=2" in result.stdout


def test_bad_arguments_are_usage_errors(ros_env) -> None:
    for tool, argument in (("doctor", "mode:=sideways"), ("status", "period:=-1"),
                           ("status", "colour:=red")):
        result = run_tool([*tool_argv(tool), argument], ros_env)
        assert result.returncode == 2, (tool, argument, result.stderr)
        assert "error" in result.stderr
