"""The e-stop's own listener: a node ``<simulator>_estop`` on ``<namespace>/estop``
(``std_msgs/Bool``) and ``<namespace>/estop/release`` (``std_msgs/String``, a signed release:
rl_core.robot.estop), spun on a thread of its own.

In one process with the learner the dispatch thread may be inside a gradient step, and the
hold must go out within one control period all the same (rl_nodes.robot_boundary).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Bool, String

from rl_nodes import graph

#: Scheduling niceness of the e-stop thread (lower runs first; needs root, else unchanged).
ESTOP_NICENESS = -10
#: Real-time priority of the e-stop thread where the system allows it (1-99; ros2_control's
#: controller_manager asks for 50).
ESTOP_RT_PRIORITY = 50
#: The longest another thread of the process keeps the interpreter once the e-stop thread asks
#: for it (Python's default is 5 ms): an e-stop takes the interpreter lock several times between
#: the topic and the hold, and in one process with the learner each may wait that long.
ESTOP_SWITCH_INTERVAL_S = 0.001


def raise_priority() -> str:
    """Put the calling thread ahead of other work when the cores are busy, as a robot computer
    runs its control stack: real-time (SCHED_FIFO, priority ESTOP_RT_PRIORITY) where allowed
    (root or CAP_SYS_NICE), else niceness ESTOP_NICENESS, else as it was. The thread sleeps in
    the executor's wait unless an e-stop comes. Returns which it got."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(ESTOP_RT_PRIORITY))
        return "SCHED_FIFO"
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), ESTOP_NICENESS)
        return f"nice {ESTOP_NICENESS}"
    except OSError:
        return "unchanged"


class EStopListener:
    """Calls ``on_estop(engaged)`` on its own thread for each e-stop message to ``node``'s
    namespace, and ``on_release(text)`` for each release.

    :param node: the node whose name and namespace the listener takes.
    :param on_estop: called with the message's value.
    :param on_release: called with a release message's text.
    :param watchdog: ``(period_s, callback)``: called on this thread every period of a steady
        clock (the boundary's command deadline: it must not run on the thread it guards).
    """

    def __init__(self, node: Node, on_estop: Callable[[bool], None],
                 on_release: Callable[[str], None],
                 watchdog: tuple[float, Callable[[], None]] | None = None) -> None:
        sys.setswitchinterval(min(sys.getswitchinterval(), ESTOP_SWITCH_INTERVAL_S))
        self.node = rclpy.create_node(f"{node.get_name()}_estop",
                                      namespace=node.get_namespace(), context=node.context)
        self.node.create_subscription(Bool, graph.ESTOP.name,
                                      lambda msg: on_estop(bool(msg.data)),
                                      graph.ESTOP.qos.profile())
        self.node.create_subscription(String, graph.ESTOP_RELEASE.name,
                                      lambda msg: on_release(str(msg.data)),
                                      graph.ESTOP_RELEASE.qos.profile())
        if watchdog is not None:
            self.node.create_timer(watchdog[0], watchdog[1],
                                   clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(self.node)
        threading.Thread(target=self._spin, name="estop", daemon=True).start()

    def _spin(self) -> None:
        self.node.get_logger().info(f"e-stop thread: {raise_priority()}")
        try:
            self.executor.spin()
        except (ExternalShutdownException, RuntimeError):
            pass  # the process is shutting down

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
