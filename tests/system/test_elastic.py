"""Elastic robots end to end: ``rl-bringup launch hybrid robots:=auto`` grows from one robot and
stops where another no longer helps (or at max_robots), with every decision in its output and
on /diagnostics.

The robots are capped at a real robot's control rate (``max_rate_hz``), so one more robot adds
throughput until the learner (or the machine) cannot keep up. The CPU-headroom check is off: the
test machine is shared with other work, and its idle share says nothing about this deployment
(the check itself is unit-tested in tests/unit/test_autoscale.py).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from rl_nodes import graph
from tests.processes import Child

pytestmark = pytest.mark.system
RL_BRINGUP = str(Path(sys.executable).parent / "rl-bringup")
MAX_ROBOTS = 3
TIMEOUT_S = 240.0
ELASTIC_ARGUMENTS = (
    "robots:=auto", "min_robots:=1", f"max_robots:={MAX_ROBOTS}",
    "max_rate_hz:=25", "learning_starts:=100", "total_env_steps:=100000000",
    "autoscale_window_s:=5", "autoscale_warmup_s:=2", "autoscale_settle_s:=2",
    "autoscale_cpu_headroom:=0",
)
ADD = re.compile(r"\[rl-bringup\] autoscale: add robot_(\d) \((\d) -> (\d)\): .*measured \d "
                 r"robot\(s\): [\d.]+ env steps/s")
#: Where growth stops: a hold (at max_robots, or the learner/CPU blocks) or a retirement.
STOP = re.compile(r"\[rl-bringup\] autoscale: (hold at (\d) robot\(s\)|retire robot_(\d) "
                  r"\((\d) -> (\d)\)): .*measured")


def test_elastic_robots_grow_from_one_and_stop(tmp_path: Path, ros_env: dict[str, str]) -> None:
    domain_id = int(ros_env["ROS_DOMAIN_ID"])
    run = Child([RL_BRINGUP, "launch", "hybrid", *ELASTIC_ARGUMENTS,
                 f"output_dir:={tmp_path / 'run'}", f"domain_id:={domain_id}"], env=ros_env)
    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    node = rclpy.create_node("_elastic_test", context=context)
    statuses: list[dict[str, str]] = []

    def on_diagnostics(msg) -> None:
        for status in msg.status:
            if status.name == graph.AUTOSCALER_STATUS:
                statuses.append({"message": status.message,
                                 **{value.key: value.value for value in status.values}})

    from diagnostic_msgs.msg import DiagnosticArray
    node.create_subscription(DiagnosticArray, graph.DIAGNOSTICS.name, on_diagnostics,
                             graph.DIAGNOSTICS.qos.profile())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)

    def spin_until(found, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not found():
            assert run.process.poll() is None, f"the run ended:\n{run.output()[-5000:]}"
            assert time.monotonic() < deadline, f"no {what} in {TIMEOUT_S:g} s:\n" \
                                                f"{run.output()[-5000:]}"
            executor.spin_once(timeout_sec=0.1)

    def lines_matching(pattern: re.Pattern[str]) -> list[re.Match[str]]:
        return [match for line in list(run.lines) if (match := pattern.search(line))]

    try:
        spin_until(lambda: lines_matching(ADD), "robot added")
        first = lines_matching(ADD)[0]
        assert first.groups() == ("1", "1", "2"), first.string  # grows from one robot
        # Growth stops: a hold or a retirement once 2+ robots ran, or max_robots is reached.
        spin_until(lambda: any(int(match.group(2) or match.group(4) or 0) >= 2
                               for match in lines_matching(STOP)), "stop of the growth")
        stop = next(match for match in lines_matching(STOP)
                    if int(match.group(2) or match.group(4) or 0) >= 2)
        if stop.group(3) is not None:  # retired: SIGINT, the process ends cleanly
            spin_until(lambda: any(f"robot_{stop.group(3)} retired: it exited with code 0"
                                   in line for line in run.lines), "clean retirement")
        added = [int(match.group(1)) for match in lines_matching(ADD)]
        assert added == sorted(added) and max(added) < MAX_ROBOTS
        # The same decisions on /diagnostics.
        spin_until(lambda: any(int(status.get("decisions", 0)) >= len(added) + 1
                               for status in statuses), "decisions on /diagnostics")
        latest = statuses[-1]
        assert int(latest["max robots"]) == MAX_ROBOTS and int(latest["robots"]) >= 1
        assert "1:" in latest["env steps/s by robots"] and "2:" in latest["env steps/s by robots"]
        assert float(latest["window env steps/s"]) > 0
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        code = run.stop(grace_s=30.0)
    print("\n".join(line for line in run.lines if "autoscale:" in line))
    output = run.output()
    assert code == 130, output[-4000:]  # interrupted by the test: 128 + SIGINT
    assert "autoscale: stopped by an error" not in output, output[-6000:]
