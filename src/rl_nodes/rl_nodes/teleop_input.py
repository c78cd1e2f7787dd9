"""A simulator's teleop endpoints (``teleop: true``): an operator's commands in, as
:class:`rl_core.acting.teleop.Intervention` takes them.

``<namespace>/teleop_command`` (``std_msgs/Float64MultiArray``, actions in [-1, 1]) always, and
``<namespace>/joy`` (``sensor_msgs/Joy``, e.g. from the ``joy`` package's ``joy_node``) when a
``teleop_mapping`` file is given. A malformed input is counted and logged as a rejection, and the
policy keeps driving.
"""

from __future__ import annotations

import time

from sensor_msgs.msg import Joy
from std_msgs.msg import Float64MultiArray

from rl_core.acting.teleop import Intervention, JoyMapping
from rl_nodes import graph
from rl_nodes.messages import plain
from rl_nodes.ports import TeleopHost


class TeleopInput:
    """The operator's inputs of ``node``, feeding :attr:`intervention`.

    :raises rl_core.config.ConfigError: when the mapping file is missing or malformed.
    """

    def __init__(self, node: TeleopHost, action_size: int, choices: int = 0) -> None:
        config = node.config
        mapping = JoyMapping.from_file(config.teleop_mapping, action_size, choices) \
            if config.teleop_mapping else None
        self.node = node
        self.intervention = Intervention(action_size, config.teleop_timeout, mapping, choices)
        node.subscription(graph.TELEOP_COMMAND, self._on_command, plain(Float64MultiArray))
        if mapping is not None:
            node.subscription(graph.JOY, self._on_joy, plain(Joy))
        node.get_logger().warn(
            f"teleop: an operator's commands on {graph.TELEOP_COMMAND.name}"
            f"{f' and {graph.JOY.name} ({config.teleop_mapping})' if mapping else ''} drive "
            "this robot while they count; anyone on the domain can send them")

    def _on_command(self, msg: Float64MultiArray) -> None:
        try:
            self.intervention.on_command(msg.data, time.monotonic())
        except ValueError as error:
            self.node.reject("teleop command", str(error))

    def _on_joy(self, msg: Joy) -> None:
        try:
            self.intervention.on_joy(msg.axes, msg.buttons, time.monotonic())
        except ValueError as error:
            self.node.reject("joy", str(error))
