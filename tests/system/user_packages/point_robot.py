"""A user's robot for :class:`point_reach.PointReach`, in a few lines of rclpy: two joints ``x``
and ``y`` that integrate the latest velocity command, behind the topics of ros2_control's
joint_state_broadcaster and a velocity forward command controller.

``python point_robot.py NAMESPACE`` serves ``NAMESPACE/joint_states`` and
``NAMESPACE/velocity_controller/commands``. Lockstep: each command advances the robot one control
period, then the joint state is published (stamped with the robot's own time). One state goes
out at start, and again every 0.5 s while no command comes, so a late subscriber gets one. No
reset service: the run homes the robot with velocity commands (reset:=homing). Its limits are in
``point_robot.urdf`` beside it.

At its end it reports what a robot's owner would check: the largest change between two
commands, and how long after the last moving command the robot was told to hold: between the
times the two were sent (their DDS source timestamps: what the run controls), and between the
times this process took them (its own scheduling included).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

CONTROL_PERIOD = 0.05  # s, PointReach.control_period
IDLE_REPUBLISH_S = 0.5


class PointRobot(Node):
    def __init__(self, namespace: str) -> None:
        super().__init__("point_robot", namespace=namespace)
        self.position = np.zeros(2)
        self.velocity = np.zeros(2)
        self.steps = 0  # control periods done: the robot's clock
        self.last_command_at = time.monotonic()
        self.largest_change = 0.0
        #: When the last command that moved the robot was sent and taken (s).
        self.moving_at: tuple[float, float] | None = None
        self.held_after: float | None = None  # from its sending to the first hold's
        self.held_at = 0.0  # when that hold was taken
        self.state_pub = self.create_publisher(JointState, "joint_states", 10)
        self.create_subscription(Float64MultiArray, "velocity_controller/commands",
                                 self.on_command, 10)
        self.create_timer(IDLE_REPUBLISH_S, self.on_idle_timer)
        self.publish_state()
        self.get_logger().info(f"point robot ready in {self.get_namespace()}")

    def on_command(self, msg: Float64MultiArray, info: dict) -> None:
        if len(msg.data) != 2 or not np.all(np.isfinite(msg.data)):
            self.get_logger().error(f"rejected command {list(msg.data)}")
            return
        command = np.asarray(msg.data, dtype=np.float64)
        if self.steps:
            self.largest_change = max(self.largest_change,
                                      float(np.max(np.abs(command - self.velocity))))
        now = (1e-9 * info["source_timestamp"], time.monotonic())
        if np.any(command != 0.0):
            if self.held_after is not None:
                self.get_logger().info(f"point robot: moving again after {now[1] - self.held_at:.4f}"
                                       f" s held (step {self.steps})")
            self.moving_at, self.held_after = now, None
        elif self.held_after is None and self.moving_at is not None:
            self.held_after, self.held_at = now[0] - self.moving_at[0], now[1]
            self.get_logger().info(f"point robot: held {self.held_after:.4f} s after the last "
                                   f"moving command (step {self.steps}; taken "
                                   f"{now[1] - self.moving_at[1]:.4f} s after it)")
        self.velocity = command
        self.position = self.position + self.velocity * CONTROL_PERIOD
        self.steps += 1
        self.last_command_at = time.monotonic()
        self.publish_state()

    def on_idle_timer(self) -> None:
        if time.monotonic() - self.last_command_at >= IDLE_REPUBLISH_S:
            self.publish_state()

    def publish_state(self) -> None:
        nanoseconds = round(self.steps * CONTROL_PERIOD * 1e9)
        msg = JointState(name=["x", "y"], position=self.position.tolist(),
                         velocity=self.velocity.tolist())
        msg.header.stamp = Time(sec=nanoseconds // 10**9, nanosec=nanoseconds % 10**9)
        self.state_pub.publish(msg)


def main() -> None:
    rclpy.init()
    node = PointRobot(sys.argv[1] if len(sys.argv) > 1 else "/robot_0")
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.get_logger().info(f"point robot stopping after {node.steps} commands")
        held = "never" if node.held_after is None else f"{node.held_after:.4f}"
        node.get_logger().info(f"point robot: largest change {node.largest_change:.4f}, last "
                               f"command {node.velocity.tolist()}, held after {held} s")
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
