"""A robot process retired with SIGINT (as ``robots:=auto`` retires one) or SIGTERM (as a launch
escalates, or Kubernetes stops a pod) delivers all the experience it published: a subscriber in
this process receives every message of the stream, from the first one after it matched up to the
count the simulator reports when it closes (rl_nodes.runtime: the signal ends the spin loop, the
nodes close, their reliable publishers are flushed, and only then does the context end)."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
import rclpy
import yaml
from rclpy.executors import SingleThreadedExecutor

from rl_interfaces.msg import ExperienceBatch
from rl_nodes import graph
from tests.processes import REPO, Child

pytestmark = pytest.mark.integration
CONTAINER = str(Path(sys.executable).parent / "container")
DEADLINE_S = 90.0
MESSAGES_BEFORE_RETIRING = 300


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_delivers_every_published_experience_message(
        signum: int, tmp_path: Path, ros_env: dict[str, str]) -> None:
    overrides = tmp_path / "overrides.yaml"
    # Random actions and no rate cap: the robot publishes as fast as it can when it is retired.
    overrides.write_text(yaml.safe_dump({"/**/simulator": {"ros__parameters": {
        "random_steps": 10**9, "max_rate_hz": 0.0, "visualization_rate_hz": 0.0}}}))
    domain_id = int(ros_env["ROS_DOMAIN_ID"])
    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    node = rclpy.create_node("_retire_flush_test", context=context)
    received: dict[int, list[int]] = {}

    def on_experience(msg: ExperienceBatch) -> None:
        received.setdefault(msg.stream, []).append(msg.sequence)

    node.create_subscription(ExperienceBatch, graph.EXPERIENCE.name, on_experience,
                             graph.EXPERIENCE.qos.profile())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    robot = Child([CONTAINER, "--node", "simulator@/robot_0", "--node", "policy@/robot_0",
                   "--ros-args", "--params-file", str(REPO / "config" / "cartpole.yaml"),
                   "--params-file", str(overrides)], env=ros_env)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while sum(map(len, received.values())) < MESSAGES_BEFORE_RETIRING:
            assert robot.process.poll() is None, robot.output()[-3000:]
            assert time.monotonic() < deadline, f"{received.keys()}\n{robot.output()[-3000:]}"
            executor.spin_once(timeout_sec=0.1)
        if signum == signal.SIGINT:
            code = robot.stop(grace_s=20.0)  # SIGINT, as Supervisor.retire sends first
        else:
            os.kill(robot.pid, signum)  # the process this test started, by PID
            code = robot.wait(20.0)
        drain_until = time.monotonic() + 3.0
        while time.monotonic() < drain_until:
            executor.spin_once(timeout_sec=0.1)
    finally:
        robot.stop()
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    assert code == 0, robot.output()[-3000:]
    closing = robot.wait_for_line(lambda line: "closing:" in line, 5.0)
    assert closing is not None, robot.output()[-3000:]
    match = re.search(r"closing: (\d+) experience messages .* in stream (\d+)", closing)
    assert match, closing
    published, stream = int(match.group(1)), int(match.group(2))
    # Messages before this subscriber matched were never sent over DDS; from the first one it got
    # to the last one published, none is missing. SIGINT can land between a publish and the count
    # that follows it, so the message after the counted ones may have gone out too.
    sequences = sorted(received[stream])
    assert len(sequences) >= MESSAGES_BEFORE_RETIRING
    assert sequences == list(range(sequences[0], sequences[-1] + 1)), "a message was lost"
    assert sequences[-1] in (published - 1, published), (sequences[-1], published)
