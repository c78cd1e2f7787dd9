"""A policy node with a run key loads only weights signed with that key, newest (epoch, version)
first, finite only: in-process through ``_on_weights`` and over DDS from a forging publisher. A
robot of one run obeys neither the weights nor the statuses that the learner of another run
signed with the same key (the run identity, issue 41 item 7)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import rclpy
import rclpy.parameter
import torch
from rclpy.executors import SingleThreadedExecutor
from rclpy.serialization import serialize_message

from rl_core.security.signed_status import StatusSigner, sign_status
from rl_core.security.weights_auth import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    PUBLIC_KEY_FILE_VARIABLE,
    PUBLIC_KEY_VARIABLE,
    RUN_ID_VARIABLE,
    SigningKey,
    sign_weights,
)
from rl_interfaces.msg import PolicyWeights, ReplayStatus
from rl_nodes import graph
from rl_nodes.base import LATCHED_QOS
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.messages import Weights, weights_from_msg, weights_to_msg
from rl_nodes.policy import PolicyNode
from rl_nodes.simulator import SimulatorNode
from tests.integration.in_process import overrides_file, spinning
from tests.processes import REPO, Child, wait_until

pytestmark = pytest.mark.integration
CONFIG = REPO / "config" / "cartpole.yaml"
KEY = SigningKey(bytes(range(32)))
OTHER_KEY = SigningKey(bytes(range(100, 132)))
EPOCH = 1_700_000_000_000_000_000


@pytest.fixture
def keyed_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[PolicyNode]:
    """A policy node of a run whose key is :data:`KEY`, holding its public half alone as a
    robot does, its executor spinning on a thread."""
    monkeypatch.setenv(KEY_VARIABLE, "")
    monkeypatch.setenv(KEY_FILE_VARIABLE, "")
    monkeypatch.setenv(PUBLIC_KEY_VARIABLE, KEY.public.hex())
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG)])
    policy = PolicyNode("/robot_0")
    executor = SingleThreadedExecutor()
    executor.add_node(policy)
    threading.Thread(target=executor.spin, daemon=True).start()
    policy.start()
    try:
        yield policy
    finally:
        policy.close()
        executor.shutdown(timeout_sec=1.0)
        policy.destroy_node()
        rclpy.try_shutdown()


def weights(policy: PolicyNode, version: int, epoch: int = EPOCH, key: SigningKey | None = KEY,
            scale: float = 1.0) -> Weights:
    """Weights fitting ``policy``'s actor (its own tensors times ``scale``), signed with ``key``."""
    state = {name: tensor.detach().clone() * scale
             for name, tensor in policy.actor.state_dict().items()}
    result = Weights(version, 10 * version, state, policy.actor.architecture(), epoch=epoch)
    if key is not None:
        sign_weights(result, key)
    return result


def first_tensor(policy: PolicyNode) -> torch.Tensor:
    return next(iter(policy.actor.state_dict().values())).detach().clone()


def test_the_node_loaded_the_run_key(keyed_policy: PolicyNode) -> None:
    assert keyed_policy.weights.key.raw == KEY.public.raw


def test_signed_weights_load_and_forged_stale_or_broken_ones_are_rejected(
        keyed_policy: PolicyNode) -> None:
    policy = keyed_policy
    before = first_tensor(policy)

    policy._on_weights(weights(policy, 3, scale=2.0))
    assert (policy.weights.epoch, policy.version) == (EPOCH, 3) and policy.rejected_messages == 0
    assert torch.allclose(first_tensor(policy), before * 2.0)
    loaded = first_tensor(policy)

    def assert_rejected(candidate: Weights, count: int) -> None:
        policy._on_weights(candidate)
        assert policy.rejected_messages == count
        assert (policy.weights.epoch, policy.version) == (EPOCH, 3)
        assert torch.equal(first_tensor(policy), loaded)

    assert_rejected(weights(policy, 4, key=None, scale=5.0), 1)  # unsigned
    assert_rejected(weights(policy, 4, key=OTHER_KEY, scale=5.0), 2)  # another run's key
    tampered = weights(policy, 4, scale=5.0)
    tampered.version = 5  # signed as version 4
    assert_rejected(tampered, 3)
    assert_rejected(weights(policy, 2, scale=5.0), 4)  # an older version of this epoch: a replay
    assert_rejected(weights(policy, 9, epoch=EPOCH - 1, scale=5.0), 5)  # an older epoch
    nan = weights(policy, 4, key=None, scale=5.0)
    next(iter(nan.state.values()))[0] = float("nan")
    sign_weights(nan, KEY)
    assert_rejected(nan, 6)
    infinite = weights(policy, 4, key=None)
    next(iter(infinite.state.values())).fill_(float("inf"))
    sign_weights(infinite, KEY)
    assert_rejected(infinite, 7)

    # The latched copy of the current weights arriving again is neither loaded nor counted.
    policy._on_weights(weights(policy, 3, scale=2.0))
    assert policy.rejected_messages == 7

    # A restarted trainer: a newer epoch starts its versions again, lower than the current one.
    policy._on_weights(weights(policy, 1, epoch=EPOCH + 1, scale=0.5))
    assert (policy.weights.epoch, policy.version) == (EPOCH + 1, 1) and policy.rejected_messages == 7
    assert torch.allclose(first_tensor(policy), loaded * 0.5)


def test_forged_weights_over_dds_are_rejected(keyed_policy: PolicyNode) -> None:
    """A publisher outside the node's process context (as another host would be) sends weights
    with a correct SHA-256 checksum but no valid signature on /policy_weights; then signed ones."""
    policy = keyed_policy
    ipc = IntraProcessManager.for_context(policy.context)
    forged = weights(policy, 50, key=None, scale=3.0)
    forged.signature = "00" * 32
    forged_msg = weights_to_msg(forged)
    # The checksum is right: only the missing signature gives it away.
    assert weights_from_msg(forged_msg).tensors().keys() == forged.state.keys()

    context = rclpy.Context()
    rclpy.init(context=context)
    forger = rclpy.create_node("forger", context=context)
    try:
        publisher = forger.create_publisher(PolicyWeights, graph.WEIGHTS.name, LATCHED_QOS)
        deadline = time.monotonic() + 10.0
        while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # discovery; condition-bounded, not a fixed wait
        assert publisher.get_subscription_count() >= 1, "the policy never matched the publisher"
        decode_rejections = ipc.stats["rejected"]
        publisher.publish(forged_msg)
        assert ipc.spin_until(lambda: policy.rejected_messages >= 1, 10.0)
        assert policy.rejected_messages == 1 and policy.version == 0
        assert ipc.stats["rejected"] == decode_rejections  # decoded fine, refused by signature

        publisher.publish(weights_to_msg(weights(policy, 51, scale=3.0)))
        assert ipc.spin_until(lambda: policy.version == 51, 10.0)
        assert policy.weights.epoch == EPOCH and policy.rejected_messages == 1
    finally:
        forger.destroy_node()
        rclpy.try_shutdown(context=context)


@pytest.mark.parametrize("allow_unsigned", [False, True])
def test_a_policy_without_a_public_key_refuses_weights_unless_unsigned_ones_are_allowed(
        monkeypatch: pytest.MonkeyPatch, allow_unsigned: bool) -> None:
    for variable in (KEY_VARIABLE, KEY_FILE_VARIABLE, PUBLIC_KEY_VARIABLE):
        monkeypatch.setenv(variable, "")
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG),
                     "-p", f"allow_unsigned:={str(allow_unsigned).lower()}"])
    policy = PolicyNode("/robot_0")
    try:
        assert policy.weights.key is None
        policy._on_weights(weights(policy, 1, key=None, scale=2.0))
        assert policy.version == (1 if allow_unsigned else 0)
        assert policy.rejected_messages == (0 if allow_unsigned else 1)
        # Launch-only: a peer cannot switch it on at run time.
        result = policy.set_parameters([rclpy.parameter.Parameter("allow_unsigned",
                                                                  value=not allow_unsigned)])
        assert not result[0].successful
    finally:
        policy.destroy_node()
        rclpy.try_shutdown()


# --- another run's learner, holding the same key (issue 41 item 7) --------------------------------

RUN_A, RUN_B = "aaaa0000aaaa0000aaaa0000aaaa0000@/", "bbbb1111bbbb1111bbbb1111bbbb1111@/"
#: Run B's learner process: reads the key and its run identity from its environment as a trainer
#: and a replay buffer do, publishes the weights of the file it is given signed (latched), then
#: signed statuses that pause acting, 10 a second (a replay buffer's rate), until stopped.
RUN_B_LEARNER = """
import sys, time
import rclpy
from rclpy.serialization import deserialize_message
from rl_core.security import weights_auth
from rl_core.security.signed_status import StatusSigner, sign_status
from rl_interfaces.msg import PolicyWeights, ReplayStatus
from rl_nodes import graph
from rl_nodes.messages import weights_from_msg, weights_to_msg

rclpy.init()
node = rclpy.create_node("run_b_learner")
key = weights_auth.load_key()
with open(sys.argv[1], "rb") as file:
    weights = weights_from_msg(deserialize_message(file.read(), PolicyWeights))
weights_auth.sign_weights(weights, key)
latched = node.create_publisher(PolicyWeights, graph.WEIGHTS.name, graph.WEIGHTS.qos.profile())
latched.publish(weights_to_msg(weights))
status = node.create_publisher(ReplayStatus, graph.REPLAY_STATUS.name,
                               graph.REPLAY_STATUS.qos.profile())
signer = StatusSigner(key)
print("run", key.run_id, "publishing", flush=True)
try:
    while True:
        msg = ReplayStatus(rate_limited=True, acting_paused=True)
        sign_status(msg, signer)
        status.publish(msg)
        time.sleep(0.1)
except KeyboardInterrupt:
    pass
"""


class RunARobot(NamedTuple):
    sim: SimulatorNode
    policy: PolicyNode
    status: Any  # a /replay_status publisher of this process
    reasons: list[tuple[str, str]]  # (what, why) of every refusal of the robot's nodes


@pytest.fixture
def run_a_robot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunARobot]:
    """robot_0's simulator and policy of run A (its identity, :data:`KEY`'s public half alone)
    spinning in this process as a container runs them, every refusal's reason recorded, and a
    probe that publishes /replay_status."""
    for variable, value in {KEY_VARIABLE: "", KEY_FILE_VARIABLE: "", PUBLIC_KEY_FILE_VARIABLE: "",
                            PUBLIC_KEY_VARIABLE: KEY.public.hex(), RUN_ID_VARIABLE: RUN_A}.items():
        monkeypatch.setenv(variable, value)
    overrides = overrides_file(tmp_path, {"simulator": {"random_steps": 0}})
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    sim, policy = SimulatorNode("/robot_0"), PolicyNode("/robot_0")
    reasons: list[tuple[str, str]] = []
    for node in (sim, policy):
        def recording(what: str, reason: str, original: Callable[..., None] = node.reject) -> None:
            reasons.append((what, reason))
            original(what, reason)
        monkeypatch.setattr(node, "reject", recording)
    probe = rclpy.create_node("run_a_probe")
    status = probe.create_publisher(ReplayStatus, graph.REPLAY_STATUS.name,
                                    graph.REPLAY_STATUS.qos.profile())
    with spinning([sim, policy], probe):
        done = threading.Event()  # the container's main thread: intra-process and DDS hand-offs
        ipc = IntraProcessManager.for_context(probe.context)
        drain = threading.Thread(target=ipc.spin_until, args=(done.is_set, 120.0), daemon=True)
        drain.start()
        try:
            yield RunARobot(sim, policy, status, reasons)
        finally:
            done.set()
            drain.join(5.0)


def test_a_robot_ignores_the_weights_and_statuses_another_run_signed_with_the_same_key(
        run_a_robot: RunARobot, tmp_path: Path) -> None:
    """Run B's learner (another process, the same key, another RL_ROS2_RUN_ID) latches signed
    weights that fit the policy and pauses acting 10 times a second; run A's robot loads none,
    obeys none, counts each and acts on; a status signed for run A does pause it. About 6 s
    (the robot and run B's process starting, a second of its statuses)."""
    sim, policy, status, reasons = run_a_robot
    weights_file = tmp_path / "weights.cdr"
    weights_file.write_bytes(serialize_message(weights_to_msg(
        weights(policy, 5, key=None, scale=3.0))))
    environment = {**os.environ, KEY_VARIABLE: KEY.raw.hex(), KEY_FILE_VARIABLE: "",
                   PUBLIC_KEY_VARIABLE: "", RUN_ID_VARIABLE: RUN_B}
    learner_b = Child([sys.executable, "-c", RUN_B_LEARNER, str(weights_file)], env=environment)
    try:
        def refused(what: str) -> int:
            return sim.rejections.get(what, 0) + policy.rejections.get(what, 0)

        assert wait_until(lambda: refused("replay status") >= 10 and
                          refused("policy weights") >= 1, 30.0), learner_b.output()[-3000:]
        assert f"run {RUN_B} publishing" in learner_b.output()
        steps = sim.total_env_steps
        assert wait_until(lambda: sim.total_env_steps > steps + 20, 5.0), "the robot stopped"
        assert not sim.acting_paused and policy.version == 0
        assert sim.status_check.last == (0, 0), "a status of run B was obeyed"
        refusals = [(what, reason) for what, reason in reasons
                    if what in ("replay status", "policy weights")]
        assert {what for what, _ in refusals} == {"replay status", "policy weights"}
        assert all("another run" in reason for _, reason in refusals), refusals

        # The same status signed for run A pauses the robot: the refusals were the run's alone.
        signer_a = StatusSigner(SigningKey(KEY.raw, RUN_A))

        def paused_by_run_a() -> bool:
            msg = ReplayStatus(rate_limited=True, acting_paused=True)
            sign_status(msg, signer_a)
            status.publish(msg)
            return sim.acting_paused

        assert wait_until(paused_by_run_a, 5.0), "run A's own pause was not obeyed"
        assert learner_b.process.poll() is None, learner_b.output()[-3000:]
    finally:
        learner_b.stop(grace_s=3.0)
