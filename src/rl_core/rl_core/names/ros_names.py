"""ROS name rules in plain Python: robot namespaces, fully qualified node names, how a node
resolves a relative or private (``~/``) name, and moving an absolute name under a namespace.

:mod:`rl_nodes.graph` builds the project's graph with them; nothing here imports rclpy.
"""

from __future__ import annotations

__all__ = ["in_namespace", "node_name", "resolve", "robot_namespace"]


def robot_namespace(robot: int) -> str:
    """``/robot_{robot}``: the namespace of robot ``robot``'s simulator and policy."""
    return f"/robot_{robot}"


def node_name(kind: str, namespace: str = "/") -> str:
    """Fully qualified name of a node of ``kind`` in ``namespace``."""
    return f"{namespace.rstrip('/')}/{kind}"


def resolve(name: str, namespace: str = "/", node: str = "") -> str:
    """The fully qualified form of topic or service ``name`` for a node ``node`` in
    ``namespace`` (``~/x`` -> ``<namespace>/<node>/x``, ``x`` -> ``<namespace>/x``)."""
    if name.startswith("/"):
        return name
    if name.startswith("~/"):
        return f"{node_name(node, namespace)}/{name[2:]}"
    return f"{namespace.rstrip('/')}/{name}"


def in_namespace(namespace: str, name: str) -> str:
    """Absolute ``name`` (or namespace) moved under ``namespace``: ``/lab`` + ``/experience`` ->
    ``/lab/experience``; ``/`` leaves it as is."""
    if namespace in ("", "/"):
        return name
    return namespace.rstrip("/") + ("" if name == "/" else name)
