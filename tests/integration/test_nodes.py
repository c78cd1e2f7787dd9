"""The four nodes in one process (colocated wiring) and across processes (late joiners)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rclpy
import yaml
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from rl_core.config import ConfigError
from rl_core.monitoring import heartbeat
from rl_core.names import variables
from rl_interfaces.srv import GetAction
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.intra_process_endpoints import IntraProcessClient
from rl_nodes.messages import BUFFER_FILE_SERVICE, Experience
from rl_nodes.policy import PolicyNode
from rl_nodes.replay_buffer import ReplayBufferNode
from rl_nodes.simulator import SimulatorNode
from rl_nodes.trainer import TrainerNode
from tests.processes import REPO, Child

pytestmark = pytest.mark.integration
CONFIG = REPO / "config" / "cartpole.yaml"


def overrides_file(directory: Path, parameters: dict[str, dict[str, object]]) -> Path:
    path = directory / "overrides.yaml"
    path.write_text(yaml.safe_dump({f"/**/{node}": {"ros__parameters": values}
                                    for node, values in parameters.items()}))
    return path


def call(node: rclpy.node.Node, srv_type: type, name: str, request: object) -> object:
    client = node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=10.0), f"{name} never appeared"
    future = client.call_async(request)
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    assert done.wait(10.0), f"{name} did not answer"
    return future.result()


@pytest.fixture
def colocated(tmp_path: Path) -> Iterator[dict[str, object]]:
    with colocated_nodes(tmp_path) as nodes:
        yield nodes


@contextlib.contextmanager
def colocated_nodes(tmp_path: Path, extra: dict[str, dict[str, object]] | None = None
                    ) -> Iterator[dict[str, object]]:
    """The four nodes in this process, spinning; ``extra``: more parameters per node."""
    parameters: dict[str, dict[str, object]] = {
        "simulator": {"num_envs": 4, "random_steps": 40},
        "replay_buffer": {"learning_starts": 100, "output_dir": str(tmp_path / "run"),
                          "snapshot_period": 0.0, "total_env_steps": 10**6},
        "trainer": {"weights_period": 0.2,
                    "batch_size": 32, "output_dir": str(tmp_path / "run"),
                    "checkpoint_period": 0.0},
    }
    for node, values in (extra or {}).items():
        parameters[node].update(values)
    overrides = overrides_file(tmp_path, parameters)
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    nodes = {"simulator": SimulatorNode("/robot_0"), "policy": PolicyNode("/robot_0"),
             "replay": ReplayBufferNode("/"), "trainer": TrainerNode("/")}
    probe = rclpy.create_node("probe")
    executor = SingleThreadedExecutor()
    for node in [*nodes.values(), probe]:
        executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    for node in nodes.values():
        node.start()
    try:
        yield {**nodes, "probe": probe, "ipc": IntraProcessManager.for_context(probe.context),
               "tmp": tmp_path}
    finally:
        for node in reversed(list(nodes.values())):
            node.close()
        executor.shutdown(timeout_sec=1.0)
        for node in [*nodes.values(), probe]:
            node.destroy_node()
        rclpy.try_shutdown()


def test_colocated_nodes_train_through_the_zero_copy_channel(colocated) -> None:
    simulator, policy, replay, trainer = (colocated[k] for k in ("simulator", "policy", "replay",
                                                                  "trainer"))
    ipc: IntraProcessManager = colocated["ipc"]
    assert ipc.spin_until(lambda: trainer.sac.update_step >= 30 and policy.version >= 3, 120.0)
    assert trainer.update_mode == "interleaved"
    assert len(replay.buffer) >= 100 and replay.buffer.obs_shape == (4,)
    # Stepping traffic stayed in the process: nothing serialised for observations/experience.
    assert simulator.observations_pub.dds_publications == 0
    assert simulator.experience_pub.dds_publications == 0
    # Weights are transient local: always on DDS too, for robots in other processes.
    assert trainer.weights_pub.dds_publications >= 3
    assert simulator.policy_version >= 1


def test_n_step_rows_reach_the_replay_buffer_and_the_critics_bootstrap_after_them(
        tmp_path: Path) -> None:
    """n_step 3 as rl-bringup passes it on (the simulator's and the trainer's): the stored
    rewards are three discounted rewards of a cart-pole (1 per step); about 10 s."""
    n_step = {"n_step": 3, "gamma": 0.9}
    with colocated_nodes(tmp_path, {"simulator": n_step, "trainer": n_step}) as nodes:
        replay, trainer = nodes["replay"], nodes["trainer"]
        assert nodes["ipc"].spin_until(lambda: trainer.sac.update_step >= 10, 120.0)
        assert trainer.sac.config.bootstrap_discount == pytest.approx(0.729)
        with replay.service.lock:
            rewards = replay.buffer.sample(256).rewards
    summed = np.isclose(rewards, 1 + 0.9 + 0.81)
    # Every row but the short ones at the end of a fallen pole's episode sums three rewards.
    assert summed.mean() > 0.5 and np.all(summed | np.isclose(rewards, 1.9)
                                          | np.isclose(rewards, 1.0)), np.unique(rewards)


def test_a_publisher_of_another_message_definition_is_refused_by_name(colocated) -> None:
    """A peer whose /experience is another type (as one of another rl_interfaces would be)
    never reaches the replay buffer over DDS; it is named and counted, once (about 6 s)."""
    from std_msgs.msg import String

    context = rclpy.Context()  # a participant of its own, as another process would be
    rclpy.init(context=context)
    try:
        peer = rclpy.create_node("old_robot", context=context)
        peer.create_publisher(String, "/experience", 10)
        replay, what = colocated["replay"], "peer of another wire version"
        assert colocated["ipc"].spin_until(lambda: what in replay.rejections, 15.0)
        time.sleep(6.0)  # the next check names it no more
        assert replay.rejections[what] == 1
    finally:
        rclpy.try_shutdown(context=context)


def test_get_action_service_answers_and_refuses_bad_requests(colocated) -> None:
    ipc: IntraProcessManager = colocated["ipc"]
    probe = colocated["probe"]
    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.update(
        good=call(probe, GetAction, "/robot_0/policy/get_action",
                  GetAction.Request(obs_shape=[4], obs=[0.0] * 8, deterministic=True)),
        bad=call(probe, GetAction, "/robot_0/policy/get_action",
                 GetAction.Request(obs_shape=[3], obs=[0.0] * 3))))
    thread.start()
    ipc.spin_until(lambda: not thread.is_alive(), 30.0)
    thread.join()
    good, bad = result["good"], result["bad"]
    assert good.success and list(good.action_shape) == [1] and len(good.actions) == 2
    assert all(-1.0 <= a <= 1.0 for a in good.actions)
    assert not bad.success and "obs_shape [4]" in bad.message
    assert colocated["policy"].rejected_messages == 1


def test_replay_buffer_rejects_bad_experience_and_saves_and_loads(colocated) -> None:
    replay, ipc = colocated["replay"], colocated["ipc"]
    assert ipc.spin_until(lambda: replay.buffer is not None and len(replay.buffer) >= 50, 60.0)
    size = len(replay.buffer)
    bad = Experience(0, np.full((2, 4), np.nan, np.float32), np.zeros((2, 1), np.float32),
                     np.zeros(2, np.float32), np.zeros((2, 4), np.float32),
                     np.zeros(2, bool), np.zeros(2, bool))
    replay._on_experience(bad)
    assert replay.rejected_messages == 1 and len(replay.buffer) == size
    client = IntraProcessClient(ipc, colocated["probe"], BUFFER_FILE_SERVICE, "/replay_buffer/save")
    ok, message, saved, path = client.call("buffer.npz")
    target = colocated["tmp"] / "run" / "replay" / "buffer.npz"
    assert ok and path == str(target) and saved >= size and target.is_file(), message
    # The file services stay inside output_dir/replay, whatever the network asks for.
    (colocated["tmp"] / "run" / "replay" / "escape").symlink_to(colocated["tmp"])
    for outside in (str(colocated["tmp"] / "x.npz"), "../x.npz", "escape/x.npz"):
        ok, message, _, _ = client.call(outside)
        assert not ok and ("relative" in message or "leaves" in message), message
    assert not (colocated["tmp"] / "x.npz").exists()
    loader = IntraProcessClient(ipc, colocated["probe"], BUFFER_FILE_SERVICE, "/replay_buffer/load")
    ok, message, _, _ = loader.call("missing.npz")
    assert not ok and "no file" in message
    assert len(replay.buffer) >= size, "a failed load must keep the contents"
    # Issue 41: a live run's experience is never replaced, nor its counters moved back.
    total = replay.replay.total_inserted
    ok, message, _, _ = loader.call("buffer.npz")
    assert not ok and "active" in message and replay.replay.total_inserted >= total


def test_live_parameters_take_effect_and_invalid_values_are_refused(colocated) -> None:
    trainer = colocated["trainer"]
    result = trainer.set_parameters([Parameter("actor_lr", value=1e-3)])[0]
    assert result.successful
    assert trainer.sac.actor_optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    gamma = trainer.sac.config.gamma
    refused = trainer.set_parameters([Parameter("gamma", value=1.5)])[0]
    assert not refused.successful and refused.reason
    assert trainer.sac.config.gamma == gamma != 1.5
    descriptor = trainer.describe_parameter("actor_lr")
    assert descriptor.description and descriptor.floating_point_range[0].to_value == 1.0
    read_only = trainer.set_parameters([Parameter("env_id", value="other")])[0]
    assert not read_only.successful
    # stop_at_target is live (an operator's "end the run at its target"), given a target: this
    # run has none, so it is refused with the reason and the learner goes on.
    refused = trainer.set_parameters([Parameter("stop_at_target", value=True)])[0]
    assert not refused.successful and "target_return" in refused.reason, refused.reason
    assert not trainer.learner.stop_at_target
    # Issue 19: what would stop or wreck a run at run time is refused (set it at launch).
    for name, value in (("use_sim_time", True), ("batch_size", 65536), ("checkpoint_period", 0.0),
                        ("eval_episodes", 10000), ("weights_period", 3600.0)):
        refused = trainer.set_parameters([Parameter(name, value=value)])[0]
        assert not refused.successful, name
    assert not trainer.get_parameter("use_sim_time").value
    simulator = colocated["simulator"]
    refused = simulator.set_parameters([Parameter("max_rate_hz", value=1e-5)])[0]
    assert not refused.successful and "at least 1 Hz" in refused.reason
    for name, value in (("priority_alpha", 0.1), ("snapshot_period", 1.0)):  # never applied live
        assert not colocated["replay"].set_parameters([Parameter(name, value=value)])[0].successful


def test_a_node_process_beats_its_heartbeat_file_and_stops_when_stopped(
        tmp_path: Path, ros_env) -> None:
    """Issue 19: the file a supervisor or a liveness probe judges a hung node by."""
    path = tmp_path / "heartbeat"
    policy = Child([str(Path(sys.executable).parent / "policy"), "--ros-args", "-r",
                    "__ns:=/robot_0", "--params-file", str(CONFIG)],
                   env={**ros_env, variables.HEARTBEAT_FILE: str(path)})
    try:
        deadline = time.monotonic() + 60.0
        while heartbeat.age_s(path) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert heartbeat.main([str(path), "5"]) == 0, policy.output()
        os.kill(policy.pid, signal.SIGSTOP)  # hung: the beats stop
        time.sleep(2.5)
        assert heartbeat.main([str(path), "2"]) == 1
        os.kill(policy.pid, signal.SIGCONT)
        deadline = time.monotonic() + 10.0
        while heartbeat.main([str(path), "2"]) != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert heartbeat.main([str(path), "2"]) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(policy.pid, signal.SIGCONT)
        policy.stop()


def test_late_policy_process_gets_the_current_weights_at_once(tmp_path: Path, ros_env) -> None:
    overrides = overrides_file(tmp_path, {"replay_buffer": {"total_env_steps": 10**6},
                                          "trainer": {"output_dir": str(tmp_path / "run")}})
    bin_dir = Path(sys.executable).parent
    learner = Child([str(bin_dir / "container"), "--node", "replay_buffer@/", "--node", "trainer@/",
                     "--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)],
                    env=ros_env)
    policy = None
    rclpy.init(args=[])
    probe = rclpy.create_node("late_probe")
    try:
        assert learner.wait_for_line(lambda line: "update mode" in line, 60.0), learner.output()
        policy = Child([str(bin_dir / "policy"), "--ros-args", "-r", "__ns:=/robot_5",
                        "--params-file", str(CONFIG)], env=ros_env)
        deadline = time.monotonic() + 60.0
        version = 0
        while version == 0 and time.monotonic() < deadline:
            executor = SingleThreadedExecutor()
            executor.add_node(probe)
            client = probe.create_client(GetAction, "/robot_5/policy/get_action")
            if client.wait_for_service(timeout_sec=1.0):
                future = client.call_async(GetAction.Request(obs_shape=[4], obs=[0.0] * 4))
                executor.spin_until_future_complete(future, timeout_sec=5.0)
                if future.done():
                    version = future.result().policy_version
            probe.destroy_client(client)
            executor.remove_node(probe)
        assert version >= 1, policy.output()
    finally:
        probe.destroy_node()
        rclpy.try_shutdown()
        if policy is not None:
            policy.stop()
        learner.stop()
    # Interrupted before the end, the trainer still keeps what it learned, where a respawned
    # trainer resumes from (the rolling checkpoint store).
    from rl_core.runs.checkpoint import CheckpointStore
    assert CheckpointStore(tmp_path / "run" / "checkpoints").newest_valid(), learner.output()


def test_policy_node_runs_an_exported_onnx_model(tmp_path: Path) -> None:
    from rl_core.algorithms.networks import SquashedGaussianActor
    from rl_core.runs.export import export_onnx

    actor = SquashedGaussianActor(4, 1, (64, 64))
    model = export_onnx(actor, tmp_path / "policy.onnx", env_id="rl_ros2/CartPoleBalance-v0")
    overrides = overrides_file(tmp_path, {"policy": {"onnx_model": str(model)}})
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    try:
        policy = PolicyNode("/robot_0")
        obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
        np.testing.assert_allclose(policy._act(obs, deterministic=True),
                                   actor.act(obs, deterministic=True), atol=1e-5)
        # It acts on the model's sizes, with no torch actor and no /policy_weights subscription.
        assert policy.actor is None and policy.obs_shape == (4,) and policy.action_shape == (1,)
        assert not policy.get_subscriptions_info_by_topic("/policy_weights")
        policy.destroy_node()
    finally:
        rclpy.try_shutdown()


@pytest.mark.parametrize("model_name, message", [
    ("kuka.onnx", "was exported for rl_ros2/KukaReach-v0, this policy's env_id is "
                  "rl_ros2/CartPoleBalance-v0; set env_id:=rl_ros2/KukaReach-v0"),
    ("missing.onnx", "onnx_model: no ONNX model at"),
])
def test_policy_node_refuses_an_onnx_model_of_another_task_or_none(
        tmp_path: Path, model_name: str, message: str) -> None:
    from rl_core.algorithms.networks import SquashedGaussianActor
    from rl_core.runs.export import export_onnx

    export_onnx(SquashedGaussianActor(4, 1, (64, 64)), tmp_path / "kuka.onnx",
                env_id="rl_ros2/KukaReach-v0")
    overrides = overrides_file(tmp_path, {"policy": {"onnx_model": str(tmp_path / model_name)}})
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    try:
        with pytest.raises(ConfigError, match=re.escape(message)):
            PolicyNode("/robot_0")
    finally:
        rclpy.try_shutdown()


def test_a_trainer_given_the_budget_does_not_use_it_and_says_whose_it_is(tmp_path: Path) -> None:
    """``total_env_steps`` is the replay buffer's (passed on by the trainer for a release
    before); a value that reaches the trainer (a shared ``/**`` block, or ``ros2 run`` with its
    own block, which rl-bringup and the launch files refuse before starting) is not used, and
    ``ros2 param describe`` says whose it is."""
    overrides = overrides_file(tmp_path, {"trainer": {"total_env_steps": 321,
                                                      "output_dir": str(tmp_path / "run")}})
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    trainer = None
    try:
        trainer = TrainerNode("/")
        descriptor = trainer.describe_parameter("total_env_steps")
        assert descriptor.read_only and "Moved: the replay_buffer's parameter; a value here is " \
            "not used" in descriptor.description
    finally:
        if trainer is not None:
            trainer.close()
            trainer.destroy_node()
        rclpy.try_shutdown()


def change_state(probe: rclpy.node.Node, node: str, transition: int) -> bool:
    """``ros2 lifecycle set``'s request, through the node's ~/change_state service."""
    request = ChangeState.Request(transition=Transition(id=transition))
    return bool(call(probe, ChangeState, f"{node}/change_state", request).success)


def state_of(probe: rclpy.node.Node, node: str) -> str:
    return str(call(probe, GetState, f"{node}/get_state", GetState.Request()).current_state.label)


def test_deactivate_pauses_a_node_and_activate_resumes_it_with_nothing_lost(colocated) -> None:
    """Lifecycle (rl_nodes.lifecycle) through the nodes' own services, as ``ros2 lifecycle set``
    calls them: a deactivated trainer makes no gradient step, a deactivated replay buffer grants
    none, a deactivated simulator makes no env step; the buffer keeps what it holds, and activate
    goes on from there."""
    simulator, replay, trainer = (colocated[k] for k in ("simulator", "replay", "trainer"))
    ipc: IntraProcessManager = colocated["ipc"]
    probe = colocated["probe"]
    assert ipc.spin_until(lambda: trainer.sac.update_step >= 10, 120.0)
    results: dict[str, object] = {}

    def in_thread(name: str, function: object, *args: object) -> None:
        # Service calls from a thread: the test thread drains the dispatch queue meanwhile.
        thread = threading.Thread(target=lambda: results.update({name: function(*args)}))
        thread.start()
        assert ipc.spin_until(lambda: name in results, 30.0), name

    in_thread("state", state_of, probe, "/trainer")
    assert results.pop("state") == "active"
    in_thread("off", change_state, probe, "/trainer", Transition.TRANSITION_DEACTIVATE)
    assert results.pop("off") is True
    updates, stored = trainer.sac.update_step, len(replay.buffer)
    ipc.spin_until(lambda: False, 3.0)  # three seconds of the process running on
    assert trainer.sac.update_step == updates, "a deactivated trainer kept learning"
    in_thread("state", state_of, probe, "/trainer")
    assert results.pop("state") == "inactive"
    in_thread("on", change_state, probe, "/trainer", Transition.TRANSITION_ACTIVATE)
    assert results.pop("on") is True
    assert ipc.spin_until(lambda: trainer.sac.update_step >= updates + 10, 60.0)
    assert len(replay.buffer) >= stored  # nothing lost while paused

    # A paused buffer grants nothing (acting soon held by the rate limiter); activated again,
    # the interleaved trainer takes the grants with the next /replay_status.
    in_thread("off", change_state, probe, "/replay_buffer", Transition.TRANSITION_DEACTIVATE)
    assert results.pop("off") is True
    ipc.spin_until(lambda: False, 3.0)
    updates = trainer.sac.update_step
    in_thread("on", change_state, probe, "/replay_buffer", Transition.TRANSITION_ACTIVATE)
    assert results.pop("on") is True
    assert ipc.spin_until(lambda: trainer.sac.update_step >= updates + 10, 60.0)

    in_thread("off", change_state, probe, "/robot_0/simulator", Transition.TRANSITION_DEACTIVATE)
    assert results.pop("off") is True
    ipc.spin_until(lambda: False, 1.0)  # a step under way ends
    steps = simulator.total_env_steps
    ipc.spin_until(lambda: False, 2.0)
    assert simulator.total_env_steps == steps, "a deactivated simulator kept stepping"
    in_thread("on", change_state, probe, "/robot_0/simulator", Transition.TRANSITION_ACTIVATE)
    assert results.pop("on") is True
    assert ipc.spin_until(lambda: simulator.total_env_steps > steps + 20, 60.0)


def test_a_node_that_fails_to_configure_says_why_and_the_process_exits_2(tmp_path: Path) -> None:
    bad = overrides_file(tmp_path, {"trainer": {"batch_size": -3}})
    run = Child([str(Path(sys.executable).parent / "container"), "--node", "trainer@/",
                 "--ros-args", "--params-file", str(CONFIG), "--params-file", str(bad)])
    try:
        code = run.wait(60.0)
    finally:
        run.stop(grace_s=5.0)
    assert code == 2, run.output()
    assert "configure failed: Invalid parameter value (-3)" in run.output()
    assert "configuration error: Invalid parameter value (-3)" in run.output()
