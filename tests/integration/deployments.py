"""Small deployments and operator-tool command lines for the tool tests (record, status, doctor).

A deployment is started with ``rl-bringup launch`` in the test run's own domain, kept light for
a 2-core machine shared with other work (no gradient updates, a capped control rate), and is
"ready" when every robot's policy answers observations and the replay buffer reports — checked
from this process with a raw rclpy subscription, not with the tools under test.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy

from tests.processes import Child

BIN = Path(sys.executable).parent
RL_BRINGUP = str(BIN / "rl-bringup")
#: No SAC updates (they are not what the tools look at) and a capped step rate: the deployment
#: stays cheap while other tests share the machine.
LIGHT_PARAMETERS = ("total_env_steps:=1000000000", "learning_starts:=1000000000",
                    "max_rate_hz:=100.0")
READY_TIMEOUT_S = 180.0


def tool_argv(name: str) -> list[str]:
    """Command line of ``rl-bringup NAME``."""
    return [RL_BRINGUP, name]


def wait_until_stepping(domain_id: int, robots: int, timeout_s: float, run: Child) -> None:
    """Return once each robot's actions flow and /replay_status arrives; fail with the launch
    output when ``timeout_s`` passes or the deployment exits."""
    from rl_interfaces.msg import ActionBatch, ReplayStatus

    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    node = rclpy.create_node("_deployment_readiness", context=context)
    counts = {f"/robot_{k}/actions": 0 for k in range(robots)}
    counts["/replay_status"] = 0

    def counter(topic: str):
        def count(_: bytes) -> None:
            counts[topic] += 1
        return count

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    for topic in counts:
        msg_type = ReplayStatus if topic == "/replay_status" else ActionBatch
        node.create_subscription(msg_type, topic, counter(topic), qos, raw=True)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + timeout_s
        while min(counts.values()) < 3:
            assert run.process.poll() is None, f"deployment exited:\n{run.output()[-4000:]}"
            assert time.monotonic() < deadline, (
                f"deployment not stepping after {timeout_s:g} s ({counts}):\n"
                f"{run.output()[-4000:]}")
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)


@contextlib.contextmanager
def deployment(mode: str, robots: int, ros_env: dict[str, str], output_dir: Path
               ) -> Iterator[Child]:
    """A running, stepping deployment; stopped by PID (SIGINT, grace, SIGKILL) afterwards."""
    domain_id = int(ros_env["ROS_DOMAIN_ID"])
    run = Child([RL_BRINGUP, "launch", mode, f"robots:={robots}", *LIGHT_PARAMETERS,
                 f"output_dir:={output_dir}", f"domain_id:={domain_id}"], env=ros_env)
    try:
        wait_until_stepping(domain_id, robots, READY_TIMEOUT_S, run)
        yield run
    finally:
        run.stop(grace_s=20.0)
