"""A node process ends soon after its stop signal (rl_nodes.runtime.end_process): once its nodes
are closed it skips the interpreter's teardown of torch, pybullet and DDS, which took about 1 s on
an idle machine and, on CI's loaded 2 cores, past ``ros2 launch``'s 5 s before SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import qos_profile_sensor_data

from rl_nodes import graph
from tests.processes import REPO, Child, wait_until

pytestmark = pytest.mark.integration
POLICY = str(Path(sys.executable).parent / "policy")
#: From SIGINT to exit, with two CPU hogs on 2 cores: 0.11-0.22 s over 20 runs; 1.18-1.39 s
#: before end_process (0.09-0.14 s and 1.1-1.3 s idle).
EXIT_BOUND_S = 0.8


def test_end_process_runs_atexit_flushes_and_exits_with_the_code() -> None:
    """What ``sys.exit`` would keep: atexit functions and buffered output. Under 1 s."""
    script = textwrap.dedent("""\
        import atexit
        from rl_nodes.runtime import end_process
        atexit.register(print, "atexit ran")
        print("buffered", end="")
        end_process(3)
        """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert run.returncode == 3, run.stderr
    assert run.stdout == "bufferedatexit ran\n", run.stdout


def test_a_stopped_node_process_exits_at_once(ros_env: dict[str, str]) -> None:
    """A policy process (torch loaded) exits 0 within EXIT_BOUND_S of SIGINT. About 4 s."""
    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=int(ros_env["ROS_DOMAIN_ID"]))
    watcher = rclpy.create_node("_node_exit_test", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(watcher)
    # Best effort: a reliable reader here would hold the closing policy's flush of /diagnostics
    # (up to FLUSH_TIMEOUT_S), which is not what this test measures.
    statuses: list[str] = []
    watcher.create_subscription(DiagnosticArray, graph.DIAGNOSTICS.name, lambda msg: statuses.extend(
        status.name for status in msg.status), qos_profile_sensor_data)
    namespace = f"/node_exit_{os.getpid()}_{time.monotonic_ns()}"  # no earlier run's graph entry
    policy = Child([POLICY, "--ros-args", "-r", f"__ns:={namespace}", "--params-file",
                    str(REPO / "config" / "cartpole.yaml")], env=ros_env)
    try:
        # Its first diagnostics: the process is spinning, all set up.
        def spinning() -> bool:
            executor.spin_once(timeout_sec=0.1)
            return any(namespace.strip("/") in name for name in statuses)

        assert wait_until(spinning, 60.0), f"{statuses[-5:]}\n{policy.output()[-3000:]}"
        started = time.monotonic()
        policy.process.send_signal(signal.SIGINT)  # the process this test started, by PID
        code = policy.wait(10.0)
        ended_s = time.monotonic() - started
    finally:
        policy.stop()
        executor.shutdown(timeout_sec=1.0)
        watcher.destroy_node()
        rclpy.try_shutdown(context=context)
    assert code == 0, policy.output()[-3000:]
    assert ended_s < EXIT_BOUND_S, f"exited {ended_s:.2f} s after SIGINT\n{policy.output()[-3000:]}"
