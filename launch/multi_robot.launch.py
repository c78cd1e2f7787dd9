"""rl_ros2 with the mode chosen on the command line.

    ros2 launch rl_bringup multi_robot.launch.py mode:=hybrid robots:=4

starts the nodes of that mode: colocated.launch.py, decoupled.launch.py and hybrid.launch.py list
them, and `rl-bringup plan MODE robots:=N --format nodes` prints them for any arguments.

The processes come from rl_bringup.plan (the same plan `rl-bringup launch MODE` runs);
`ros2 launch rl_bringup multi_robot.launch.py --show-args` lists the arguments.
"""

from launch import LaunchDescription
from launch.actions import OpaqueFunction

from rl_bringup.launch_helpers import declare_arguments, launch_setup


def generate_launch_description() -> LaunchDescription:
    """The mode argument, the deployment arguments and node parameters, then the chosen mode's
    processes, made once launch knows the arguments' values."""
    return LaunchDescription([
        *declare_arguments(with_mode=True),
        OpaqueFunction(function=launch_setup, kwargs={"mode": None}),
    ])
