"""Prioritized replay under ROS: the trainer's TD errors reach the replay buffer — in its own
process (colocated's interleaved updates, hybrid's learner thread) and over DDS (decoupled) — and
skew sampling towards the transitions the critic cannot predict. Bad priority updates from the
wire are rejected per reason while sampling goes on."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from rl_core.replay import ReplayBuffer
from rl_core.wire.messages import MAX_REQUEST_ROWS, PriorityUpdate, SampleRequest
from rl_interfaces.msg import ExperienceBatch, ReplayStatus
from rl_nodes import graph
from rl_nodes.base import EXPERIENCE_QOS
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.messages import (
    EXPERIENCE,
    PRIORITIES_SERVICE,
    SAMPLE_SERVICE,
    Experience,
    ServiceType,
    experience_to_msg,
)
from rl_nodes.replay_buffer import ReplayBufferNode
from rl_nodes.trainer import TrainerNode
from tests.integration.in_process import overrides_file, spinning
from tests.processes import REPO, Child

pytestmark = pytest.mark.integration
CONFIG = REPO / "config" / "cartpole.yaml"
BIN = Path(sys.executable).parent
#: One transition in SURPRISE_EVERY has reward SURPRISE_REWARD, the rest 0. The observations do
#: not tell which, so the critic keeps a large TD error on exactly those 5 %.
SURPRISE_EVERY = 20
SURPRISE_REWARD = 20.0
ROWS_PER_MESSAGE = 100
MESSAGES = 10
LEARNING_STARTS = 200
#: alpha 1: sampling proportional to |TD error|, so the skew is far from uniform's 5 %.
REPLAY = {"prioritized": True, "priority_alpha": 1.0, "learning_starts": LEARNING_STARTS,
          "capacity": 5000, "rate_limit": False, "snapshot_period": 0.0}
TRAINER = {"batch_size": 64, "weights_period": 60.0, "checkpoint_period": 0.0,
           "eval_episodes": 1}
#: Uniform sampling gives 1 / SURPRISE_EVERY = 5 %; prioritized gave 26-30 % in trials.
SKEWED_SHARE = 0.15


def experience(sequence: int, rng: np.random.Generator) -> Experience:
    """``ROWS_PER_MESSAGE`` one-step episodes (terminated: no bootstrapping) of random states."""
    rows = ROWS_PER_MESSAGE
    obs = rng.normal(size=(rows, 4)).astype(np.float32)
    rewards = np.where(np.arange(rows) % SURPRISE_EVERY == 0, SURPRISE_REWARD, 0.0)
    return Experience(0, obs, rng.uniform(-1.0, 1.0, (rows, 1)).astype(np.float32),
                      rewards.astype(np.float32), obs.copy(), np.ones(rows, bool),
                      np.zeros(rows, bool), stream=1, sequence=sequence)


def surprising_share(rewards: np.ndarray) -> float:
    return float(np.mean(rewards > SURPRISE_REWARD / 2))


@pytest.fixture
def learner_process(tmp_path: Path, request: pytest.FixtureRequest
                    ) -> Iterator[tuple[ReplayBufferNode, TrainerNode | None, rclpy.node.Node]]:
    """Replay buffer (and, with a trainer update_mode as param, a trainer) in this process."""
    update_mode = getattr(request, "param", None)
    overrides = overrides_file(tmp_path, {"replay_buffer": {**REPLAY, "total_env_steps": 10**6},
                                          "trainer": {**TRAINER, "update_mode": update_mode or "auto",
                                                      "output_dir": str(tmp_path / "run")}})
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    replay = ReplayBufferNode("/")
    trainer = TrainerNode("/") if update_mode else None
    probe = rclpy.create_node("priorities_probe")
    with spinning([node for node in (replay, trainer) if node is not None], probe):
        yield replay, trainer, probe


@pytest.mark.parametrize("learner_process", ["interleaved", "thread"], indirect=True)
def test_priorities_reach_a_buffer_in_the_trainers_process(learner_process) -> None:
    replay, trainer, probe = learner_process
    assert trainer is not None and trainer.update_mode == trainer.config.update_mode
    ipc = IntraProcessManager.for_context(probe.context)
    publisher = ipc.create_publisher(probe, EXPERIENCE, graph.EXPERIENCE.name, EXPERIENCE_QOS)
    rng = np.random.default_rng(0)
    for sequence in range(MESSAGES):
        publisher.publish(experience(sequence, rng))
    updates = MESSAGES * ROWS_PER_MESSAGE - LEARNING_STARTS
    assert ipc.spin_until(lambda: trainer.sac.update_step >= updates
                          and replay.service.priorities_applied > 0, 120.0), trainer.update_mode
    assert replay.rejected_messages == 0, replay.rejections
    with replay.service.lock:
        state = replay.buffer.state_dict()
    # The chance of each slot to be drawn, over all but the last message: the priorities of the
    # updates after it are still on their way (interleaved: with the next insert's request).
    rows = (MESSAGES - 1) * ROWS_PER_MESSAGE
    chances, rewards = state["priorities"][:rows], state["rewards"][:rows]
    assert chances[rewards > SURPRISE_REWARD / 2].sum() / chances.sum() > SKEWED_SHARE


def test_bad_priorities_are_rejected_per_reason_and_sampling_goes_on(learner_process) -> None:
    replay, _, probe = learner_process
    replay._on_experience(experience(0, np.random.default_rng(1)))
    replay._on_experience(experience(1, np.random.default_rng(2)))
    replay._on_experience(experience(2, np.random.default_rng(3)))
    before = replay.buffer.state_dict()["priorities"]
    total = replay.replay.total_inserted
    bad = {"not finite": PriorityUpdate(np.array([0, 1]), np.array([1.0, np.nan], np.float32),
                                        total),
           "negative": PriorityUpdate(np.array([0]), np.array([-2.0], np.float32), total),
           "index out of range": PriorityUpdate(np.array([0, 10**9]), np.ones(2, np.float32),
                                                total),
           "malformed": PriorityUpdate(np.array([0, 1, 2]), np.ones(2, np.float32), total),
           "too many": PriorityUpdate(np.zeros(MAX_REQUEST_ROWS + 1, np.int64),
                                      np.ones(MAX_REQUEST_ROWS + 1, np.float32), total)}
    for kind, update in bad.items():
        answer = call_service(probe, PRIORITIES_SERVICE, UPDATE_PRIORITIES_NAME, update)
        assert not answer.success and answer.message, kind
        result = replay.sample(SampleRequest(16, 1))
        assert result.success and result.prioritized and len(result.batches) == 1
    assert {f"priorities ({kind})": 1 for kind in bad}.items() <= replay.rejections.items()
    np.testing.assert_array_equal(replay.buffer.state_dict()["priorities"], before)
    # Over the wire: the update's fields arrive as the same update, answers carry the flag.
    good = PriorityUpdate(np.array([3, 4]), np.array([7.0, 0.5], np.float32), total)
    answer = call_service(probe, PRIORITIES_SERVICE, UPDATE_PRIORITIES_NAME, good)
    assert answer == (True, "", 2, 0)
    assert replay.service.priorities_applied == 2
    result = call_service(probe, SAMPLE_SERVICE, SAMPLE_NAME, SampleRequest(16, 1))
    assert result.success and result.prioritized
    # A peer's 3e38 (issue 41): before, it was stored as is and took nearly every later draw,
    # and every later insert inherited it as the largest priority seen. Now it is set to
    # value_bound, counted and logged.
    bound = replay.buffer.value_bound
    assert bound is not None and bound < 3e38
    huge = PriorityUpdate(np.array([5]), np.array([3e38], np.float32), total)
    assert call_service(probe, PRIORITIES_SERVICE, UPDATE_PRIORITIES_NAME, huge).success
    assert replay.rejections.get("priorities (clipped)") == 1
    chances = replay.buffer.state_dict()["priorities"]
    assert chances.max() <= (bound + 1.0) ** REPLAY["priority_alpha"], chances.max()


SAMPLE_NAME = "/replay_buffer/sample"
UPDATE_PRIORITIES_NAME = "/replay_buffer/update_priorities"


def call_service(probe: rclpy.node.Node, service: ServiceType, name: str, request: Any) -> Any:
    """``request`` sent over DDS from ``probe`` (spun by another thread); the answer object."""
    client = probe.create_client(service.srv_type, name)
    try:
        assert client.wait_for_service(timeout_sec=10.0), f"{name} never appeared"
        done = threading.Event()
        future = client.call_async(service.request_to_msg(request))
        future.add_done_callback(lambda _: done.set())
        assert done.wait(10.0), f"{name} did not answer"
        return service.response_from_msg(future.result())
    finally:
        probe.destroy_client(client)


def test_decoupled_trainer_skews_sampling_towards_high_td_errors(tmp_path: Path, ros_env) -> None:
    """Replay buffer and trainer as processes (decoupled): the trainer learns on the updates
    the buffer's ``total_env_steps`` pays for, sending its TD errors back over DDS, and exits
    once the buffer says the run is done; the buffer's last snapshot (written as it stops) shows
    the skew: the rows the critic cannot predict hold far more than their share of the chances
    to be drawn. About 30 s."""
    budget = LEARNING_STARTS + 400
    overrides = overrides_file(tmp_path, {
        "replay_buffer": {**REPLAY, "total_env_steps": budget, "output_dir": str(tmp_path / "run")},
        "trainer": {**TRAINER, "output_dir": str(tmp_path / "run")}})
    ros_args = ["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)]
    replay = Child([str(BIN / "replay_buffer"), *ros_args], env=ros_env)
    trainer = Child([str(BIN / "trainer"), *ros_args], env=ros_env)
    rclpy.init(args=[])
    probe = rclpy.create_node("priorities_probe")
    statuses: list[ReplayStatus] = []
    probe.create_subscription(ReplayStatus, graph.REPLAY_STATUS.name, statuses.append, 10)
    executor = SingleThreadedExecutor()
    executor.add_node(probe)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        publisher = probe.create_publisher(ExperienceBatch, graph.EXPERIENCE.name, EXPERIENCE_QOS)
        deadline = time.monotonic() + 60.0
        while publisher.get_subscription_count() == 0:
            assert time.monotonic() < deadline and replay.process.poll() is None, replay.output()
            time.sleep(0.05)
        rng = np.random.default_rng(0)
        for sequence in range(MESSAGES):
            publisher.publish(experience_to_msg(experience(sequence, rng)))
        assert trainer.wait(120.0) == 0, trainer.output()[-4000:]
        assert any("update mode: thread" in line and "over DDS" in line
                   for line in trainer.lines), trainer.output()[-4000:]
        assert not any("rejected" in line for line in trainer.lines), trainer.output()[-4000:]
        seen = len(statuses)
        deadline = time.monotonic() + 10.0
        while len(statuses) == seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert statuses and statuses[-1].rejected_messages == 0, replay.output()[-4000:]
    finally:
        executor.shutdown(timeout_sec=1.0)
        probe.destroy_node()
        rclpy.try_shutdown()
        trainer.stop()
        replay.stop()
    state = ReplayBuffer.from_file(tmp_path / "run" / "replay" / "snapshot.npz").state_dict()
    rows = MESSAGES * ROWS_PER_MESSAGE
    chances, rewards = state["priorities"][:rows], state["rewards"][:rows]
    assert chances[rewards > SURPRISE_REWARD / 2].sum() / chances.sum() > SKEWED_SHARE
