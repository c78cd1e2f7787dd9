"""rl_ros2 with the mode chosen on the command line.

    ros2 launch rl_bringup multi_robot.launch.py mode:=hybrid robots:=4

The process layout comes from rl_bringup.plan (the same plan `rl-bringup launch MODE` runs);
`ros2 launch rl_bringup multi_robot.launch.py --show-args` lists the arguments.
"""

from launch import LaunchDescription
from rl_bringup.launch_helpers import generate_mode_launch_description


def generate_launch_description() -> LaunchDescription:
    """Launch description of the deployment named by the mode argument."""
    return generate_mode_launch_description(None)
