"""What a simulator node's parts use of it (nav2's ``configure(parent, name)`` style): the robot
boundary (rl_nodes.robot_boundary) and the teleop input (rl_nodes.teleop_input) take one of
these ports instead of the whole node, so each says what it reads and calls, and neither
imports the simulator module that builds it (no import circle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from rl_core.acting.stepping import Stepper
from rl_core.config import BoundaryConfig, SimulatorConfig
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.messages import Experience, Observations


class NodePart(Protocol):
    """What every part uses: the node's logger, its zero-copy endpoints and its rejections
    (rl_nodes.base.RLNode)."""

    config: SimulatorConfig

    def get_logger(self) -> Any: ...

    def subscription(self, topic: Any, callback: Callable[..., None], topic_type: Any = None,
                     qos: Any = None, stepping: bool | None = None,
                     with_sender: bool = False) -> Any: ...

    def reject(self, what: str, reason: str) -> None: ...


class TeleopHost(NodePart, Protocol):
    """The teleop input's port: its parameters (``config``), subscriptions and rejections."""


class BoundaryHost(NodePart, Protocol):
    """The robot boundary's port: the simulator's robot, keys, stepping and publishing, and the
    rclpy calls its own endpoints need (the boundary's e-stop thread runs a node of its own in
    the same context)."""

    boundary_config: BoundaryConfig
    robot_id: int
    public_key: Any  # rl_core.weights_auth.VerifyKey, or None
    stepper: Stepper
    ipc: IntraProcessManager

    @property
    def acting_paused(self) -> bool: ...

    def publisher(self, topic: Any, topic_type: Any = None, qos: Any = None,
                  stepping: bool | None = None) -> Any: ...

    def send_observations(self, data: Observations) -> None: ...

    def publish_experience(self, experience: Experience | None, episodes: Any = None) -> None: ...

    # rclpy.node.Node
    @property
    def context(self) -> Any: ...

    def get_clock(self) -> Any: ...

    def get_name(self) -> str: ...

    def get_namespace(self) -> str: ...

    def create_publisher(self, msg_type: Any, topic: str, qos: Any) -> Any: ...

    def create_subscription(self, msg_type: Any, topic: str, callback: Callable[..., None],
                            qos: Any) -> Any: ...

    def create_client(self, srv_type: Any, name: str) -> Any: ...

    def get_publishers_info_by_topic(self, topic: str) -> list[Any]: ...
