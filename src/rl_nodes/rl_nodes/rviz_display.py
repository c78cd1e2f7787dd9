"""A simulator's robot in rviz: environment 0's ``robot_description`` and static TF once, then
its joint states, markers and moving TF at ``visualization_rate_hz``, each built only when
someone listens.

rl_nodes.visualization builds the messages; this is the simulator node's publishers and timer
for them. Only our pybullet robots (rl_core.envs.PybulletRobotEnv) have a URDF to show. TF
(``publish_tf``, where tf2_msgs imports) is REP-105's, as robot_state_publisher publishes it:
``world -> robot_k/<root link>`` and the fixed joints on ``/tf_static``, the moving joints on
``/tf`` from the same positions as ``joint_states``.
"""

from __future__ import annotations

from typing import Any

from std_msgs.msg import String

from rl_core.envs import PybulletRobotEnv
from rl_core.robot.tf_tree import TfTree
from rl_nodes import graph, visualization


class RvizDisplay:
    """rviz's topics of ``env`` (robot ``robot_id``), published by ``node``.

    :param node: the simulator node (an RLNode).
    :param env: the environment shown.
    :param robot_id: ``k`` of ``/robot_k``: where the robot is drawn, its TF prefix.
    :param rate_hz: publishing rate; 0 publishes only the robot description (and static TF).
    :param publish_tf: publish TF (false: leave it to a robot_state_publisher).
    """

    def __init__(self, node: Any, env: PybulletRobotEnv, robot_id: int, rate_hz: float,
                 publish_tf: bool = True) -> None:
        self.node, self.env, self.robot_id = node, env, robot_id
        description = node.publisher(graph.ROBOT_DESCRIPTION)
        description.publish(String(data=visualization.urdf_for_rviz(env.urdf_path)))
        self.joint_states_pub = node.publisher(graph.JOINT_STATES)
        self.markers_pub = node.publisher(graph.MARKERS)
        self.tree: TfTree | None = None
        self.tf_pub: Any = None
        self.tf_static_pub: Any = None  # kept: a late subscriber gets its message from it
        if publish_tf and visualization.TFMessage is not None:
            self._start_tf()
        self._timer: Any = None
        self.set_rate(rate_hz)

    @classmethod
    def of(cls, node: Any, env: Any, robot_id: int, rate_hz: float) -> RvizDisplay | None:
        """The display of ``env``; None (said once) for an environment without a robot model."""
        if isinstance(env, PybulletRobotEnv):
            return cls(node, env, robot_id, rate_hz, node.config.publish_tf)
        # Any gymnasium env trains; only our pybullet robots have a URDF to show.
        node.get_logger().info(f"{node.config.env_id} has no robot model (URDF): no "
                               "robot_description, joint_states or markers for rviz")
        return None

    def _start_tf(self) -> None:
        """Publish the static transforms once and open /tf; a URDF the tree cannot read leaves
        the robot without TF (said once), as rviz would show it anyway."""
        try:
            self.tree = visualization.robot_tf_tree(self.env, self.robot_id)
        except ValueError as error:
            self.node.get_logger().error(f"no TF for robot {self.robot_id}: {error}")
            return
        stamp = self.node.get_clock().now().to_msg()
        static = visualization.static_transforms(self.env, self.tree, self.robot_id)
        self.tf_static_pub = self.node.publisher(graph.TF_STATIC)
        self.tf_static_pub.publish(visualization.tf_message(static, stamp))
        self.tf_pub = self.node.publisher(graph.TF)

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
        joints = self.joint_states_pub.get_subscription_count() > 0
        tf = self.tf_pub is not None and self.tf_pub.get_subscription_count() > 0
        if joints or tf:
            state = visualization.joint_state(self.env, stamp)
            if joints:
                self.joint_states_pub.publish(state)
            if tf and self.tree is not None:
                moving = self.tree.moving_transforms(state.name, state.position)
                self.tf_pub.publish(visualization.tf_message(moving, stamp))
        if self.markers_pub.get_subscription_count():
            self.markers_pub.publish(visualization.markers(self.env, self.robot_id, stamp))
