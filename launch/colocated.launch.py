"""rl_ros2, colocated mode: every node in one process (a Python component
container): the lowest latency, on one machine.

    ros2 launch rl_bringup colocated.launch.py robots:=2 config:=cartpole

The process layout comes from rl_bringup.plan (the same plan `rl-bringup launch colocated` runs);
`ros2 launch rl_bringup colocated.launch.py --show-args` lists the arguments.
"""

from launch import LaunchDescription
from rl_bringup.launch_helpers import generate_mode_launch_description


def generate_launch_description() -> LaunchDescription:
    """Launch description of the colocated deployment."""
    return generate_mode_launch_description("colocated")
