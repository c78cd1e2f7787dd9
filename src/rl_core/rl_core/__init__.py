"""rl_core: the ROS-free reinforcement-learning core of rl_ros2.

Nothing in this package imports rclpy: environments, replay buffers, networks, algorithms,
checkpoints and configuration are plain Python and are tested with plain pytest. The ROS 2 nodes
in ``rl_nodes`` only convert messages and call into this package.
"""

__version__ = "0.1.0"
