"""A simulator's robot in rviz: environment 0's ``robot_description`` once, then its joint
states, markers and TF at ``visualization_rate_hz``, each built only when someone listens.

rl_nodes.visualization builds the messages; this is the simulator node's publishers and timer
for them. Only our pybullet robots (rl_core.envs.PybulletRobotEnv) have a URDF to show.
"""

from __future__ import annotations

from typing import Any

from std_msgs.msg import String

from rl_core.envs import PybulletRobotEnv
from rl_nodes import graph, visualization


class RvizDisplay:
    """rviz's topics of ``env`` (robot ``robot_id``), published by ``node``.

    :param node: the simulator node (an RLNode).
    :param env: the environment shown.
    :param robot_id: ``k`` of ``/robot_k``: where the robot is drawn, its TF prefix.
    :param rate_hz: publishing rate; 0 publishes only the robot description.
    """

    def __init__(self, node: Any, env: PybulletRobotEnv, robot_id: int, rate_hz: float) -> None:
        self.node, self.env, self.robot_id = node, env, robot_id
        description = node.publisher(graph.ROBOT_DESCRIPTION)
        description.publish(String(data=visualization.urdf_for_rviz(env.urdf_path)))
        self.joint_states_pub = node.publisher(graph.JOINT_STATES)
        self.markers_pub = node.publisher(graph.MARKERS)
        self.tf_pub = (node.publisher(graph.TF)
                       if visualization.TFMessage is not None else None)
        self._timer: Any = None
        self.set_rate(rate_hz)

    @classmethod
    def of(cls, node: Any, env: Any, robot_id: int, rate_hz: float) -> RvizDisplay | None:
        """The display of ``env``; None (said once) for an environment without a robot model."""
        if isinstance(env, PybulletRobotEnv):
            return cls(node, env, robot_id, rate_hz)
        # Any gymnasium env trains; only our pybullet robots have a URDF to show.
        node.get_logger().info(f"{node.config.env_id} has no robot model (URDF): no "
                               "robot_description, joint_states or markers for rviz")
        return None

    def set_rate(self, rate_hz: float) -> None:
        """Publish at ``rate_hz`` from now on (0: stop)."""
        if self._timer is not None:
            self.node.destroy_timer(self._timer)
            self._timer = None
        if rate_hz > 0:
            self._timer = self.node.timer(1.0 / rate_hz, self.publish)

    def publish(self) -> None:
        """Publish the environment's state, building only what someone listens to."""
        stamp = self.node.get_clock().now().to_msg()
        if self.joint_states_pub.get_subscription_count():
            self.joint_states_pub.publish(visualization.joint_state(self.env, stamp))
        if self.markers_pub.get_subscription_count():
            self.markers_pub.publish(visualization.markers(self.env, self.robot_id, stamp))
        if self.tf_pub is not None and self.tf_pub.get_subscription_count():
            self.tf_pub.publish(visualization.transforms(self.env, self.robot_id, stamp))
