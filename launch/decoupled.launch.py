"""rl_ros2, decoupled mode: one process per node (per robot a simulator and
a policy, one replay_buffer, one trainer), talking over DDS.

    ros2 launch rl_bringup decoupled.launch.py robots:=2 config:=cartpole

The process layout comes from rl_bringup.plan (the same plan `rl-bringup launch decoupled` runs);
`ros2 launch rl_bringup decoupled.launch.py --show-args` lists the arguments.
"""

from launch import LaunchDescription
from rl_bringup.launch_helpers import generate_mode_launch_description


def generate_launch_description() -> LaunchDescription:
    """Launch description of the decoupled deployment."""
    return generate_mode_launch_description("decoupled")
