"""diagnostics_aggregator: ``/diagnostics`` grouped into the tree rqt_robot_monitor shows.

The pip install's stand-in for diagnostic_aggregator's ``aggregator_node`` (C++, not on PyPI),
with the same topics: it subscribes ``/diagnostics`` and publishes ``/diagnostics_agg`` and
``/diagnostics_toplevel_state`` (docs/graph.md). The grouping is
:mod:`rl_core.monitoring.diagnostic_aggregation`'s, from the same analyzer file the docker
image's aggregator_node reads (``config/robots/diagnostic_analyzers.yaml`` unless
``analyzers_file`` names another). Every deployment runs one, beside the learning nodes; by
hand: ``ros2 run rl_nodes diagnostics_aggregator``, then
``ros2 run rqt_robot_monitor rqt_robot_monitor``.

Like every node it reports itself on ``/diagnostics`` (statuses held, stale, dropped or clipped:
the tree is bounded, since any peer can publish ``/diagnostics``). Statuses are timed on arrival
with a monotonic clock, so staleness follows the wall time a status has been silent, whatever
``use_sim_time`` says.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

from rl_core.monitoring.diagnostic_aggregation import (
    STALE,
    Aggregator,
    AnalyzerConfigError,
    Status,
    shipped_analyzer_file,
    toplevel_level,
)
from rl_nodes import graph
from rl_nodes.runtime import main_for

NODE_NAME = graph.DIAGNOSTICS_AGGREGATOR
#: Depth of the /diagnostics queue: every node publishes once a second, and a burst from many
#: robots must not push statuses out before the callback takes them (upstream keeps 1000).
DIAGNOSTICS_DEPTH = 1000


def _level(value: Any) -> int:
    """A message's level as an int (rclpy gives a ``byte`` field as ``bytes``)."""
    return value[0] if isinstance(value, (bytes, bytearray)) else int(value)


def to_status(message: DiagnosticStatus) -> Status:
    return Status(message.name, _level(message.level), message.message, message.hardware_id,
                  tuple((pair.key, pair.value) for pair in message.values))


def to_message(status: Status) -> DiagnosticStatus:
    return DiagnosticStatus(level=bytes([status.level]), name=status.name, message=status.message,
                            hardware_id=status.hardware_id,
                            values=[KeyValue(key=key, value=value) for key, value in status.values])


class DiagnosticsAggregatorNode(Node):
    """Takes ``/diagnostics``, publishes the aggregated tree and the toplevel state."""

    def __init__(self, namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **({"namespace": namespace} if namespace else {}), **kwargs)
        self.declare_parameter("analyzers_file", "", ParameterDescriptor(
            description="diagnostic_aggregator analyzer YAML ('analyzers: ros__parameters:'); "
                        "empty: the shipped config/robots/diagnostic_analyzers.yaml",
            read_only=True))
        self.aggregator = load_aggregator(str(self.get_parameter("analyzers_file").value))
        self.create_subscription(DiagnosticArray, graph.DIAGNOSTICS.name, self._on_diagnostics,
                                 DIAGNOSTICS_DEPTH)
        # Depth 1, reliable, volatile: upstream's profile, which rqt_robot_monitor matches.
        self._agg_pub = self.create_publisher(DiagnosticArray, graph.DIAGNOSTICS_AGG.name,
                                              graph.DIAGNOSTICS_AGG.qos.profile())
        self._toplevel_pub = self.create_publisher(DiagnosticStatus,
                                                   graph.DIAGNOSTICS_TOPLEVEL.name,
                                                   graph.DIAGNOSTICS_TOPLEVEL.qos.profile())
        self._tree: list[Status] = []
        self._own_pub = self.create_publisher(DiagnosticArray, graph.DIAGNOSTICS.name,
                                              graph.DIAGNOSTICS.qos.profile())
        self.create_timer(1.0 / self.aggregator.pub_rate_hz, self._publish)
        self.create_timer(graph.DIAGNOSTICS_PERIOD_S, self._publish_own_status)

    def start(self) -> None:
        """Nothing to start: the timers run from construction (rl_nodes.runtime's contract)."""

    def close(self) -> None:
        """Nothing to release (rl_nodes.runtime's contract)."""

    def _on_diagnostics(self, message: DiagnosticArray) -> None:
        self.aggregator.update([to_status(status) for status in message.status], time.monotonic())

    def _publish(self) -> None:
        tree = self._tree = self.aggregator.report(time.monotonic())
        array = DiagnosticArray(status=[to_message(status) for status in tree])
        array.header.stamp = self.get_clock().now().to_msg()
        self._agg_pub.publish(array)
        self._toplevel_pub.publish(DiagnosticStatus(level=bytes([toplevel_level(tree)]),
                                                    name="toplevel_state"))


    def _publish_own_status(self) -> None:
        tree = self._tree
        stale = sum(status.level == STALE for status in tree)
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK, name=self.get_fully_qualified_name(),
            message=f"aggregating into {graph.DIAGNOSTICS_AGG.name}",
            hardware_id=self.get_namespace(),
            values=[KeyValue(key="entries", value=str(len(tree))),
                    KeyValue(key="stale entries", value=str(stale)),
                    KeyValue(key="dropped statuses", value=str(self.aggregator.dropped)),
                    KeyValue(key="clipped statuses", value=str(self.aggregator.clipped))])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._own_pub.publish(array)


def load_aggregator(path: str) -> Aggregator:
    """The aggregator of the analyzer file at ``path`` (the shipped one when empty).

    :raises AnalyzerConfigError: naming the file and what is wrong with it.
    """
    if not path:
        try:
            path = str(shipped_analyzer_file())
        except FileNotFoundError as error:
            raise AnalyzerConfigError(f"{error}; or name a file with "
                                      f"-p analyzers_file:=PATH") from error
    return Aggregator.from_file(path)


def main() -> int:
    """Run the aggregator until shutdown; exit code 0, or 2 for a bad analyzer file."""
    return main_for(NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
