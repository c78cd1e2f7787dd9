"""QoS check of ``rl-bringup doctor``: every publisher/subscription pair of the graph can talk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rl_bringup.run.ros_session import qos_policy_name
from rl_bringup.tools.operate.doctor.graph import GraphSnapshot
from rl_bringup.tools.operate.doctor.report import Check, Level


def check_qos(graph: GraphSnapshot,
              compatible: Callable[[Any, Any], tuple[Any, str]] | None = None) -> list[Check]:
    """Every publisher/subscription pair of every topic can talk (reliability, durability,
    deadline, liveliness), as rmw judges it; one line per topic with a problem, one in all when
    there is none."""
    from rclpy.qos import QoSCompatibility, qos_check_compatible  # noqa: PLC0415

    compatible = qos_check_compatible if compatible is None else compatible
    checks: list[Check] = []
    pairs = 0
    for topic in sorted(graph.topics):
        errors: list[str] = []
        warnings: list[str] = []
        for publisher in graph.publishers.get(topic, []):
            for subscription in graph.subscriptions.get(topic, []):
                pairs += 1
                result, reason = compatible(publisher.qos, subscription.qos)
                if result == QoSCompatibility.OK:
                    continue
                pair = (f"{publisher.node} offers {qos_policy_name(publisher.qos.reliability)}/"
                        f"{qos_policy_name(publisher.qos.durability)}, {subscription.node} requests "
                        f"{qos_policy_name(subscription.qos.reliability)}/"
                        f"{qos_policy_name(subscription.qos.durability)}: {reason.strip()}")
                (errors if result == QoSCompatibility.ERROR else warnings).append(pair)
        fix = ("make the subscription's request no stricter than the offer: best_effort "
               "publishers need best_effort subscriptions, volatile publishers volatile ones")
        if errors:
            checks.append(Check(Level.FAIL, f"qos {topic}", "incompatible, no messages flow: "
                                + "; ".join(sorted(set(errors))), fix))
        if warnings:
            checks.append(Check(Level.WARN, f"qos {topic}", "compatibility unknown: "
                                + "; ".join(sorted(set(warnings))),
                                "give both sides explicit QoS policies instead of system "
                                "defaults"))
    if not checks:
        checks.append(Check(Level.PASS, "qos", f"all {pairs} publisher/subscription pairs on "
                            f"{len(graph.topics)} topics are compatible"))
    return checks
