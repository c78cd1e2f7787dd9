"""Joint states read into the task's joints, with clear refusals; the control loop's figures."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.robot.joint_io import (
    ControlStats,
    JointStateError,
    JointStateReader,
    StateSource,
    command_limits,
)
from rl_core.robot.tasks import CartPoleBalanceTask, KukaReachTask

pytestmark = pytest.mark.unit


def test_reads_the_task_joints_in_task_order_from_any_order() -> None:
    reader = JointStateReader(["b", "a"])
    sample = reader.read(1.5, ["a", "extra", "b"], [1.0, 9.0, 2.0], [0.1, 0.9, 0.2], [])
    assert sample.stamp == 1.5
    np.testing.assert_array_equal(sample.position, [2.0, 1.0])
    np.testing.assert_array_equal(sample.velocity, [0.2, 0.1])
    np.testing.assert_array_equal(sample.effort, [0.0, 0.0])  # not reported: zeros


@pytest.mark.parametrize(("names", "position", "velocity", "reason"), [
    (["a"], [1.0], [], "lacks ['b']"),
    (["a", "b"], [1.0], [], "1 positions for 2 names"),
    (["a", "b"], [1.0, np.nan], [], "non-finite"),
    (["a", "b"], [1.0, 2.0], [0.0, np.inf], "non-finite"),
])
def test_refuses_what_it_cannot_read_and_says_why(names, position, velocity, reason) -> None:
    with pytest.raises(JointStateError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        JointStateReader(["a", "b"]).read(0.0, names, position, velocity, [])


def test_the_rate_leaves_pauses_out_and_latencies_give_percentiles() -> None:
    stats = ControlStats(period=0.02)
    assert stats.rate_hz == 0.0 and stats.latency_percentiles() == (0.0, 0.0)
    for k in range(11):
        stats.command_sent(k * 0.02)
    stats.command_sent(10.0)  # after a pause of ~10 s: not a slow period
    for k in range(1, 11):
        stats.command_sent(10.0 + k * 0.02)
    assert stats.commands_sent == 22
    assert stats.rate_hz == pytest.approx(50.0)
    for latency in np.linspace(0.001, 0.1, 100):
        stats.answered(float(latency))
    p50, p99 = stats.latency_percentiles()
    assert p50 == pytest.approx(0.0505, abs=1e-3) and p99 == pytest.approx(0.099, abs=1e-3)


def test_command_limits_come_from_the_task_urdf_or_are_unbounded() -> None:
    kuka = KukaReachTask()
    limits = command_limits(kuka)
    assert limits.names == tuple(kuka.commanded)
    assert np.all(np.isfinite(limits.velocity)) and np.all(limits.velocity > 0)
    cartpole = CartPoleBalanceTask()
    assert command_limits(cartpole).names == tuple(cartpole.commanded)


def test_a_publisher_is_pinned_only_while_it_is_the_only_one_on_the_topic() -> None:
    """Issue 41: a second publisher there when one must be chosen (a forger that came first, or
    one waiting for the robot's driver to crash) gets nothing pinned: every state is refused
    until one leaves. Before, the first state heard was pinned whoever sent it."""
    robot, forger, restarted = b"robot", b"forger", b"robot-2"
    present = [robot, forger]
    source = StateSource(lambda: present)
    assert "2 publishers" in (source.refusal(forger) or "")
    assert "2 publishers" in (source.refusal(robot) or "")
    assert source.pinned is None and source.refused == 2
    present.remove(forger)
    assert source.refusal(robot) is None and source.pinned == robot
    present.append(forger)  # pinned: the other is refused, the robot goes on
    assert "second publisher" in (source.refusal(forger) or "")
    assert source.refusal(robot) is None
    present[:] = [forger, restarted]  # the driver restarted under a new identity, forger there
    assert source.refusal(forger) is not None and source.refusal(restarted) is not None
    present.remove(forger)
    assert source.refusal(restarted) is None and source.pinned == restarted
    assert source.refusal(None) is None  # a state from this process
    assert source.refused == 5


def test_a_state_sent_before_its_publisher_is_listed_is_taken_when_no_other_is() -> None:
    """The graph may list a publisher after its first message came: alone, it is pinned."""
    source = StateSource(lambda: [])
    assert source.refusal(b"robot") is None and source.pinned == b"robot"
    assert source.may_be(b"robot") and not source.may_be(b"other") and source.may_be(None)
