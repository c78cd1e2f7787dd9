"""The e-stop's own listener: a node ``<simulator>_estop`` on ``<namespace>/estop``
(``std_msgs/Bool``), spun on a thread of its own.

In one process with the learner the dispatch thread may be inside a gradient step, and the
hold must go out within one control period all the same (rl_nodes.robot_boundary).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Bool

from rl_nodes import graph

#: Scheduling niceness of the e-stop thread (lower runs first; needs root, else unchanged).
ESTOP_NICENESS = -10


class EStopListener:
    """Calls ``on_estop(engaged)`` on its own thread for each e-stop message to ``node``'s
    namespace.

    :param node: the node whose name and namespace the listener takes.
    :param on_estop: called with the message's value.
    """

    def __init__(self, node: Node, on_estop: Callable[[bool], None]) -> None:
        self.node = rclpy.create_node(f"{node.get_name()}_estop",
                                      namespace=node.get_namespace(), context=node.context)
        self.node.create_subscription(Bool, graph.ESTOP.name,
                                      lambda msg: on_estop(bool(msg.data)),
                                      graph.ESTOP.qos.profile())
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(self.node)
        threading.Thread(target=self._spin, name="estop", daemon=True).start()

    def _spin(self) -> None:
        try:
            # Ahead of the process' other threads when the cores are busy (root only; a robot
            # computer runs its control stack so). Idle unless an e-stop comes.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), ESTOP_NICENESS)
        except OSError:
            pass
        try:
            self.executor.spin()
        except (ExternalShutdownException, RuntimeError):
            pass  # the process is shutting down

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
