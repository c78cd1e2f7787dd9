"""Central batched inference: one policy node (``robots: N``) serving several robots' simulators.

In one process (zero-copy) the answers are checked batch by batch; across processes (DDS) the
``policy`` executable with ``-p robots:=2`` must keep two robots stepping.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy

from rl_interfaces.msg import EpisodeStatistics
from rl_interfaces.srv import GetAction
from rl_nodes.base import WARN
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.messages import ACTIONS, OBSERVATIONS, Actions, Observations
from rl_nodes.policy import PolicyNode
from rl_nodes.simulator import SimulatorNode
from tests.integration.in_process import spinning
from tests.processes import REPO, Child

pytestmark = pytest.mark.integration
CONFIG = REPO / "config" / "cartpole.yaml"
NUM_ENVS = {0: 2, 1: 3}  # different widths: each robot's share of the forward pass must fit


def write_overrides(directory: Path, blocks: dict[str, dict[str, object]]) -> Path:
    path = directory / "overrides.yaml"
    path.write_text(yaml.safe_dump({key: {"ros__parameters": values}
                                    for key, values in blocks.items()}))
    return path


@pytest.fixture
def central_process(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, object]]:
    """A central policy (robots: 2) and the simulators of ``request.param`` robots, one process."""
    simulated = request.param
    window_ms = 200.0 if simulated == 2 else 20.0
    overrides = write_overrides(tmp_path, {
        "/**/simulator": {"random_steps": 0, "visualization_rate_hz": 0.0},
        **{f"/robot_{k}/simulator": {"num_envs": NUM_ENVS[k]} for k in range(simulated)},
        "/**/policy": {"robots": 2, "batch_window_ms": window_ms, "deterministic": True},
    })
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    simulators = [SimulatorNode(f"/robot_{k}") for k in range(simulated)]
    policy = PolicyNode("/")
    probe = rclpy.create_node("central_probe")
    ipc = IntraProcessManager.for_context(probe.context)
    seen: dict[str, dict[int, object]] = {"obs0": {}, "obs1": {}, "act0": {}, "act1": {}}
    for k in range(2):  # record what each robot sent and got, by step
        ipc.create_subscription(probe, OBSERVATIONS, f"/robot_{k}/observations",
                                lambda msg, k=k: seen[f"obs{k}"].setdefault(msg.step, msg), 10)
        ipc.create_subscription(probe, ACTIONS, f"/robot_{k}/actions",
                                lambda msg, k=k: seen[f"act{k}"].setdefault(msg.step, msg), 10)
    with spinning([*simulators, policy], probe):
        yield {"simulators": simulators, "policy": policy, "probe": probe, "ipc": ipc,
               "seen": seen, "window_ms": window_ms}


@pytest.mark.parametrize("central_process", [2], indirect=True)
def test_one_forward_pass_answers_both_robots_each_with_its_own_actions(central_process) -> None:
    simulators, policy = central_process["simulators"], central_process["policy"]
    ipc: IntraProcessManager = central_process["ipc"]
    seen = central_process["seen"]
    assert ipc.spin_until(lambda: all(sim.step_count >= 30 for sim in simulators), 60.0)
    for simulator in simulators:
        assert simulator.rejected_messages == 0  # every answer had the robot's own shape
    stats = policy.batcher.stats
    assert stats.forward_passes >= 30
    # In one process both robots' batches arrive back to back: every pass serves both.
    assert stats.robots_per_pass == pytest.approx(2.0)
    assert stats.rows_per_pass == pytest.approx(sum(NUM_ENVS.values()))
    assert stats.batches == 2 * stats.forward_passes
    assert 0.0 <= stats.mean_wait_ms < central_process["window_ms"]
    assert stats.mean_latency_ms >= stats.mean_wait_ms
    # Each robot got actions for its own steps, from its own observations.
    for k in range(2):
        steps = sorted(set(seen[f"obs{k}"]) & set(seen[f"act{k}"]))
        assert len(steps) >= 20
        for step in steps[:20]:
            obs: Observations = seen[f"obs{k}"][step]
            actions: Actions = seen[f"act{k}"][step]
            assert actions.robot_id == obs.robot_id == k
            assert actions.actions.shape == (NUM_ENVS[k], 1)
            np.testing.assert_allclose(actions.actions,
                                       policy.actor.act(obs.obs, deterministic=True), atol=1e-5)
    _, _, values = policy.diagnose()
    assert values["robots"] == 2 and float(values["robots per forward pass"]) == pytest.approx(2.0)
    assert "batch wait ms" in values and "answer latency ms" in values


@pytest.mark.parametrize("central_process", [1], indirect=True)
def test_a_missing_robot_delays_the_others_by_the_window_only(central_process) -> None:
    (simulator,) = central_process["simulators"]
    policy: PolicyNode = central_process["policy"]
    ipc: IntraProcessManager = central_process["ipc"]
    window_ms = central_process["window_ms"]
    # Stops right after a batch of /robot_0 arrived, so the diagnostics period has one.
    assert ipc.spin_until(lambda: policy.batcher.robot_batches[0] >= 12, 30.0)
    assert simulator.step_count >= 10 and policy.batcher.robot_batches[1] == 0
    stats = policy.batcher.stats
    assert stats.robots_per_pass == pytest.approx(1.0)
    # Each batch waited for /robot_1 until the window closed, not much longer.
    assert window_ms * 0.9 <= stats.mean_wait_ms < window_ms + 200.0
    level, message, _ = policy.diagnose()
    assert level == WARN and "/robot_1" in message


@pytest.mark.parametrize("central_process", [2], indirect=True)
def test_central_get_action_is_served_under_the_node_name(central_process) -> None:
    probe, ipc = central_process["probe"], central_process["ipc"]
    client = probe.create_client(GetAction, "/policy/get_action")
    result: dict[str, object] = {}

    def ask() -> None:
        if client.wait_for_service(timeout_sec=10.0):
            done = threading.Event()
            future = client.call_async(GetAction.Request(obs_shape=[4], obs=[0.0] * 8))
            future.add_done_callback(lambda _: done.set())
            if done.wait(10.0):
                result["response"] = future.result()

    thread = threading.Thread(target=ask)
    thread.start()
    ipc.spin_until(lambda: not thread.is_alive(), 30.0)
    thread.join()
    response = result.get("response")
    assert response is not None and response.success and len(response.actions) == 2


def test_policy_executable_serves_two_robots_over_dds(tmp_path: Path, ros_env) -> None:
    bin_dir = Path(sys.executable).parent
    overrides = write_overrides(tmp_path, {"/**/simulator": {"random_steps": 0,
                                                             "visualization_rate_hz": 0.0}})
    params = ["--params-file", str(CONFIG), "--params-file", str(overrides)]
    policy = Child([str(bin_dir / "policy"), "--ros-args", *params, "-p", "robots:=2",
                    "-p", "batch_window_ms:=50.0"], env=ros_env)
    robots = Child([str(bin_dir / "container"), "--node", "simulator@/robot_0",
                    "--node", "simulator@/robot_1", "--ros-args", *params], env=ros_env)
    rclpy.init(args=[])
    probe = rclpy.create_node("central_dds_probe")
    steps: dict[int, int] = {}
    batching: dict[str, str] = {}

    def on_episodes(msg: EpisodeStatistics) -> None:
        steps[msg.robot_id] = max(steps.get(msg.robot_id, 0), int(msg.total_env_steps))

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {pair.key: pair.value for pair in status.values}
            if status.name == "/policy" and int(values.get("forward passes", 0)) > 0:
                batching.update(values)

    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    probe.create_subscription(EpisodeStatistics, "/episodes", on_episodes, qos)
    probe.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, qos)
    executor = SingleThreadedExecutor()
    executor.add_node(probe)
    try:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and not (
                min(steps.get(0, 0), steps.get(1, 0)) >= 300 and batching):
            executor.spin_once(timeout_sec=0.1)
            assert policy.process.poll() is None, policy.output()
            assert robots.process.poll() is None, robots.output()
        assert min(steps.get(0, 0), steps.get(1, 0)) >= 300, (steps, policy.output(),
                                                              robots.output())
        assert batching, policy.output()
        assert batching["robots"] == "2"
        assert 1.0 <= float(batching["robots per forward pass"]) <= 2.0
    finally:
        executor.shutdown(timeout_sec=1.0)
        probe.destroy_node()
        rclpy.try_shutdown()
        robots.stop()
        policy.stop()
