"""Helpers of in-process integration tests: parameter override files, and nodes spun by an
executor thread the way a container runs them."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import rclpy
import yaml
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from rl_nodes.base import RLNode


def overrides_file(directory: Path, parameters: dict[str, dict[str, object]]) -> Path:
    """A parameter file with one ``/**/<node>`` block per entry of ``parameters``."""
    path = directory / "overrides.yaml"
    path.write_text(yaml.safe_dump({f"/**/{node}": {"ros__parameters": values}
                                    for node, values in parameters.items()}))
    return path


@contextlib.contextmanager
def spinning(nodes: Sequence[RLNode], probe: Node) -> Iterator[None]:
    """Spin ``nodes`` and ``probe`` on an executor thread and start the nodes; afterwards close
    them in reverse order, destroy everything and shut the default context down."""
    executor = SingleThreadedExecutor()
    for node in [*nodes, probe]:
        executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    try:
        for node in nodes:
            node.start()
        yield
    finally:
        for node in reversed(nodes):
            node.close()
        executor.shutdown(timeout_sec=1.0)
        for node in [*nodes, probe]:
            node.destroy_node()
        rclpy.try_shutdown()
