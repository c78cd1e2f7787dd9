"""A robot stops acting while its replay buffer is silent (the learner's host unreachable) and
resumes when it reports again; without a rate limiter, or without any replay buffer (the gym
bridge's deployments), silence changes nothing. A deployment's robot (await_replay_status) acts
only once the replay buffer's first signed status came."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import rclpy

from rl_core.security import weights_auth
from rl_core.security.signed_status import StatusSigner, sign_status
from rl_interfaces.msg import ReplayStatus
from rl_nodes import simulator as simulator_module
from rl_nodes.base import WARN
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.policy import PolicyNode
from rl_nodes.simulator import SimulatorNode
from tests.integration.in_process import overrides_file, spinning
from tests.processes import REPO, wait_until

pytestmark = pytest.mark.integration
#: Signs statuses as the replay buffer does, with the suite's learner key (tests/conftest.py).
SIGNER = StatusSigner(weights_auth.load_key())
CONFIG = REPO / "config" / "cartpole.yaml"
SILENCE_S = 1.0  # the simulator's STATUS_SILENCE_S, shortened for the test


@pytest.fixture
def robot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          request: pytest.FixtureRequest) -> Iterator[dict[str, object]]:
    """robot_0's simulator and policy spinning in this process, and a probe that publishes
    /replay_status as a replay buffer would; ``indirect`` True: the simulator awaits the first
    status, as a deployment's robots do."""
    monkeypatch.setattr(simulator_module, "STATUS_SILENCE_S", SILENCE_S)
    overrides = overrides_file(tmp_path, {"simulator": {
        "random_steps": 0, "await_replay_status": getattr(request, "param", False)}})
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    sim, policy = SimulatorNode("/robot_0"), PolicyNode("/robot_0")
    probe = rclpy.create_node("replay_probe")
    status = probe.create_publisher(ReplayStatus, "/replay_status", 10)
    with spinning([sim, policy], probe):
        # The container's main thread: deliver the intra-process hand-offs (observations, actions).
        done = threading.Event()
        ipc = IntraProcessManager.for_context(probe.context)
        drain = threading.Thread(target=ipc.spin_until, args=(done.is_set, 120.0), daemon=True)
        drain.start()
        try:
            yield {"sim": sim, "status": status}
        finally:
            done.set()
            drain.join(5.0)


def report(status: object, rate_limited: bool, duration_s: float) -> None:
    """Publish a status without the pause every 0.1 s for ``duration_s``."""
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        msg = ReplayStatus(rate_limited=rate_limited, acting_paused=False)
        sign_status(msg, SIGNER)
        status.publish(msg)
        time.sleep(0.1)


def stepping(sim: SimulatorNode, over_s: float = 1.0) -> bool:
    before = sim.total_env_steps
    time.sleep(over_s)
    return sim.total_env_steps > before


def test_silent_replay_buffer_pauses_acting_until_it_reports_again(robot) -> None:
    sim, status = robot["sim"], robot["status"]
    report(status, rate_limited=True, duration_s=1.0)
    assert stepping(sim, 0.5) and not sim.replay_silent, "the robot should step while heard"

    assert wait_until(lambda: sim.replay_silent, SILENCE_S + 3.0), \
        "acting went on with the replay buffer silent"
    assert sim.acting_paused
    assert not stepping(sim), "the robot stepped while its replay buffer was silent"
    level, message, _ = sim.diagnose()
    assert level == WARN and "no /replay_status" in message, message

    report(status, rate_limited=True, duration_s=0.5)
    assert not sim.replay_silent and not sim.acting_paused
    assert stepping(sim), "acting did not resume when the replay buffer reported again"


def test_silence_does_not_pause_without_a_rate_limiter_or_a_replay_buffer(robot) -> None:
    sim, status = robot["sim"], robot["status"]
    # No replay buffer ever reported (a gym bridge deployment): the robot steps on.
    time.sleep(SILENCE_S + 1.0)
    assert stepping(sim) and not sim.replay_silent
    # A replay buffer without the rate limiter: acting is not coupled to it, silence or not.
    report(status, rate_limited=False, duration_s=0.5)
    time.sleep(SILENCE_S + 1.0)
    assert stepping(sim) and not sim.replay_silent and not sim.acting_paused


@pytest.mark.parametrize("robot", [True], indirect=True)
def test_a_deployments_robot_acts_once_the_replay_buffer_is_heard(robot) -> None:
    sim, status = robot["sim"], robot["status"]
    assert not stepping(sim, SILENCE_S + 0.5), "the robot acted before any status"
    assert sim.total_env_steps == 0 and sim.acting_paused and not sim.replay_silent
    level, message, _ = sim.diagnose()
    assert level == WARN and "first /replay_status" in message, message
    unsigned = ReplayStatus(rate_limited=True, acting_paused=False)
    for _ in range(5):
        status.publish(unsigned)
        time.sleep(0.05)
    assert wait_until(lambda: sim.rejections.get("replay status", 0) >= 5, 3.0)
    assert sim.total_env_steps == 0, "an unsigned status let the robot act"
    report(status, rate_limited=True, duration_s=0.5)
    assert not sim.acting_paused and stepping(sim), "the first status did not start acting"


def test_only_the_learners_signed_newer_status_pauses_a_robot(robot) -> None:
    """A peer on the domain cannot pause or unleash a robot through /replay_status: unsigned,
    foreign-signed and replayed statuses are refused and counted; the learner's statuses rule."""
    sim, status = robot["sim"], robot["status"]
    paused, stop = threading.Event(), threading.Event()
    recorded: list[ReplayStatus] = []

    def learner() -> None:  # the replay buffer: fresh signed statuses, 10 a second
        while not stop.wait(0.1):
            msg = ReplayStatus(rate_limited=True, acting_paused=paused.is_set())
            sign_status(msg, SIGNER)
            recorded.append(msg)
            status.publish(msg)

    def refused() -> int:
        return sim.rejections.get("replay status", 0)

    def publish(msg: ReplayStatus, count: int = 5) -> None:
        for _ in range(count):
            status.publish(msg)
            time.sleep(0.05)

    thread = threading.Thread(target=learner, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: stepping(sim, 0.3), 5.0)
        forged = ReplayStatus(rate_limited=True, acting_paused=True, epoch=2**63, sequence=1)
        foreign = ReplayStatus(rate_limited=True, acting_paused=True)
        sign_status(foreign, StatusSigner(weights_auth.SigningKey(bytes(range(32)))))
        before = refused()
        publish(forged)
        publish(foreign)
        assert wait_until(lambda: refused() >= before + 10, 3.0)
        assert not sim.acting_paused and stepping(sim, 0.5), "a forged status paused the robot"

        paused.set()
        assert wait_until(lambda: sim.acting_paused, 3.0), "the learner's pause was not obeyed"
        # A recording of an earlier "go on" sent again is a replay (older sequence).
        go_on = next(msg for msg in recorded if not msg.acting_paused)
        before = refused()
        publish(go_on, 10)
        assert refused() >= before + 10 and sim.acting_paused, "a replayed status resumed acting"
        assert not stepping(sim, 0.5)
        paused.clear()
        assert wait_until(lambda: not sim.acting_paused, 3.0) and stepping(sim)
    finally:
        stop.set()
        thread.join(2.0)
