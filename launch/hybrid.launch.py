"""rl_ros2, hybrid mode: per robot one process (simulator + policy) and
one learner process (replay_buffer + trainer).

    ros2 launch rl_bringup hybrid.launch.py robots:=2 config:=cartpole

The process layout comes from rl_bringup.plan (the same plan `rl-bringup launch hybrid` runs);
`ros2 launch rl_bringup hybrid.launch.py --show-args` lists the arguments.
"""

from launch import LaunchDescription
from rl_bringup.launch_helpers import generate_mode_launch_description


def generate_launch_description() -> LaunchDescription:
    """Launch description of the hybrid deployment."""
    return generate_mode_launch_description("hybrid")
