"""Rate check of ``rl-bringup doctor``: messages per second on the topics whose rate is a
contract (:attr:`.graph.TopicSpec.rate_hz`), measured over a window."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from rl_bringup.run.ros_session import RosSession
from rl_bringup.tools.operate.doctor.graph import GraphSnapshot, TopicSpec
from rl_bringup.tools.operate.doctor.report import Check, Level
from rl_bringup.tools.operate.message_types import message_class


def measure_rates(session: RosSession, graph: GraphSnapshot, specs: Sequence[TopicSpec],
                  window_s: float) -> dict[str, float]:
    """Messages per second on each topic over ``window_s``, received raw (not decoded) with
    best-effort subscriptions, which match reliable and best-effort publishers alike."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: PLC0415

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    arrivals: dict[str, list[float]] = {}
    subscriptions = []
    for spec in specs:
        if graph.topics.get(spec.name) != [spec.type]:
            continue
        msg_class = message_class(spec.type)
        times = arrivals.setdefault(spec.name, [])
        subscriptions.append(session.node.create_subscription(
            msg_class, spec.name, lambda data, times=times: times.append(time.monotonic()),
            qos, raw=True))
    started = time.monotonic()
    session.spin_for(window_s)
    elapsed = max(time.monotonic() - started, 1e-6)
    for subscription in subscriptions:
        session.node.destroy_subscription(subscription)
    rates: dict[str, float] = {}
    for topic, times in arrivals.items():
        if len(times) >= 3:  # from the spacing, so a late-matched subscription does not read low
            rates[topic] = (len(times) - 1) / max(times[-1] - times[0], 1e-6)
        else:
            rates[topic] = len(times) / elapsed
    return rates


def check_rates(specs: Sequence[TopicSpec], rates: Mapping[str, float],
                window_s: float) -> list[Check]:
    """Observed rates within each topic's expected band (``> 0`` when the band starts at 0)."""
    checks: list[Check] = []
    for spec in specs:
        if spec.rate_hz is None or spec.name not in rates:
            continue
        low, high = spec.rate_hz
        rate = rates[spec.name]
        band = "> 0 Hz" if low == 0.0 and high == float("inf") else f"{low:g}..{high:g} Hz"
        name = f"rate {spec.name}"
        if rate == 0.0:
            checks.append(Check(Level.FAIL, name, f"no messages in {window_s:g} s (expected "
                                f"{band})", _rate_fix(spec)))
        elif (low == 0.0 or rate >= low) and rate <= high:
            checks.append(Check(Level.PASS, name, f"{rate:.1f} Hz"))
        else:
            checks.append(Check(Level.WARN, name, f"{rate:.2f} Hz, expected {band}",
                                _rate_fix(spec)))
    return checks


def _rate_fix(spec: TopicSpec) -> str:
    if spec.name.endswith(("/observations", "/actions")):
        return ("the robot is not stepping: check the launch log of its simulator and policy "
                "(a policy without weights, a crashed env); the run may also have finished "
                "(total_env_steps reached)")
    if spec.name == "/experience":
        return "the simulators are not stepping: check their logs in the launch output"
    return f"{', '.join(spec.publishers)} is stalled or overloaded: check its log"
