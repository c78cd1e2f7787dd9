"""Colocated container: several rl_ros2 nodes in one process, zero-copy between them.

rclpy has no component container; this one instantiates the same node classes the single-node
executables run. ``container --node simulator@/robot_0 --node policy@/robot_0 --node
replay_buffer@/ --node trainer@/ --ros-args --params-file config/cartpole.yaml``

``--remote-composition`` serves ROS composition's ``load_node`` and ``unload_node`` (off by
default: anyone on the domain could call them; rl_nodes.component_manager). An empty container
needs it: its nodes come only through ``load_node``.
"""

from __future__ import annotations

import argparse
import sys

from rclpy.utilities import remove_ros_args

from rl_nodes.component_manager import serve_composition
from rl_nodes.runtime import NODE_CLASSES, end_process, run_nodes


def parse_node_spec(spec: str) -> tuple[str, str]:
    """``KIND@NAMESPACE`` -> (kind, namespace); the namespace defaults to ``/``."""
    kind, _, namespace = spec.partition("@")
    if kind not in NODE_CLASSES:
        raise argparse.ArgumentTypeError(
            f"unknown node kind {kind!r} in {spec!r}; valid kinds: {', '.join(NODE_CLASSES)}")
    namespace = namespace or "/"
    if not namespace.startswith("/"):
        raise argparse.ArgumentTypeError(f"namespace in {spec!r} must start with '/'")
    return kind, namespace


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="container", description="Run several rl_ros2 nodes in one process (zero-copy).")
    parser.add_argument("--node", action="append", type=parse_node_spec, default=[],
                        metavar="KIND@NAMESPACE",
                        help=f"a node to run; KIND in {', '.join(NODE_CLASSES)}; none: an empty "
                             f"container, whose nodes ros2 component load or launch_ros's "
                             f"LoadComposableNodes load (with --remote-composition)")
    parser.add_argument("--remote-composition", action="store_true",
                        help="serve ROS composition's load_node and unload_node (ros2 component "
                             "load|unload, LoadComposableNodes); off by default: anyone on the "
                             "domain could load nodes into this process or unload its robots")
    args = parser.parse_args(remove_ros_args(argv)[1:])
    if not args.node and not args.remote_composition:
        parser.error("an empty container gets its nodes through load_node: give --node "
                     "KIND@NAMESPACE or --remote-composition")
    return end_process(run_nodes(args.node, argv, serve=lambda executor, nodes: serve_composition(
        executor, nodes, remote=args.remote_composition)))


if __name__ == "__main__":
    raise SystemExit(main())
