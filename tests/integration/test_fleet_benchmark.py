"""benchmarks/fleet.py: light robots' experience reaches a real replay buffer over DDS and is
stored, none refused (their messages are what a simulator sends); the fleet part's log parsing
and process classification."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from benchmarks import fleet
from tests.processes import Child

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_light_robots_fill_the_replay_buffer_and_nothing_is_refused(
        tmp_path: Path, ros_env: dict[str, str]) -> None:
    out = tmp_path / "ingest.json"
    run = Child([sys.executable, str(REPO / "benchmarks" / "fleet.py"), "--part", "ingest",
                 "--light-robots", "20", "--light-processes", "2", "--warmup-s", "1",
                 "--ingest-s", "3", "--domain-id", ros_env["ROS_DOMAIN_ID"], "--json", str(out)],
                env=ros_env)
    try:
        code = run.wait(180.0)
    finally:
        run.stop(grace_s=20.0)
    assert code == 0, run.output()[-3000:]
    (row,) = json.loads(out.read_text())["ingest"]
    assert row["light_robots"] == 20 and row["light_processes"] == 2 and row["rows"] == 1
    assert row["offered_messages_per_s"] == 400.0
    assert row["rejected"] == 0 and row["writer_refused"] == 0, row
    # Stored: some, and never more than was offered (each message once).
    assert 0 < row["messages_per_s"] and 0 < row["stored_share"] <= 1.2, row
    assert row["transitions_per_s"] == pytest.approx(row["messages_per_s"])
    assert row["buffer_cpus"] > 0, row
    assert any("stored/offered" in line for line in run.lines)  # the table was printed


def test_node_up_times_read_the_simulators_first_line() -> None:
    lines = ["[INFO] [1764820000.250000000] [robot_3.simulator]: robot 3: 1 x "
             "rl_ros2/CartPoleBalance-v0, seed 3, ...",
             "[INFO] [1764820001.500000000] [robot_3.simulator]: robot 3: again",
             "[INFO] [1764820000.750000000] [robot_12.simulator]: robot 12: 1 x ...",
             "[INFO] [1764820000.900000000] [robot_4.policy]: robot 4: not a simulator"]
    assert fleet.node_up_times(lines) == {3: 1764820000.25, 12: 1764820000.75}


def test_processes_are_told_apart_by_their_command_lines() -> None:
    """Robot and learner processes by the node arguments on their command lines (idle Python
    processes carrying them here); anything else is neither."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    children = [Child([*sleeper, "--node", "simulator@/robot_3", "--node", "policy@/robot_3"]),
                Child([*sleeper, "--node", "replay_buffer@/", "--node", "trainer@/"])]
    try:
        robot, learner = (child.pid for child in children)
        assert fleet.classify([robot, learner, os.getpid()]) == ([robot], [learner])
    finally:
        for child in children:
            child.stop(grace_s=2.0)


def test_help_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as shown:
        fleet.parse_args(["--help"])
    assert shown.value.code == 0 and "--light-robots" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        fleet.parse_args(["--discovery", "multicast"])
    assert refused.value.code == 2 and "--discovery takes server, localhost or both" in \
        capsys.readouterr().err
