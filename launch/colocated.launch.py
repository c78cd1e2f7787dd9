"""rl_ros2, colocated mode: every node in one process (a Python component
container), the diagnostics aggregator included: the lowest latency, on one machine.

    ros2 launch rl_bringup colocated.launch.py robots:=2 config:=cartpole

starts these nodes (robot k in namespace /robot_k; `rl-bringup plan colocated robots:=2 --format nodes`
prints the same table, and the table for any other arguments):

    PROCESS    KIND                    NAMESPACE  EXECUTABLE
    container  simulator               /robot_0   container
    container  policy                  /robot_0   container
    container  simulator               /robot_1   container
    container  policy                  /robot_1   container
    container  replay_buffer           /          container
    container  trainer                 /          container
    container  diagnostics_aggregator  /          container

The diagnostics aggregator groups /diagnostics for rqt_robot_monitor (/diagnostics_agg,
/diagnostics_toplevel_state). The container respawns when it crashes and is required: its clean
exit (training complete) ends the launch. policy_layout:=central hosts one policy node /policy in
the container instead of one per robot; robot_interface:=ros2_control adds a `sim_robot` process
per robot.

The processes come from rl_bringup.plan (the layout in rl_bringup.plan.layouts), the same plan
`rl-bringup launch colocated` runs; `ros2 launch rl_bringup colocated.launch.py --show-args` lists the
arguments.
"""

from launch import LaunchDescription
from launch.actions import OpaqueFunction

from rl_bringup.launch_helpers import declare_arguments, launch_setup

MODE = "colocated"


def generate_launch_description() -> LaunchDescription:
    """The deployment arguments and node parameters, then the colocated plan's processes (the table
    above), made once launch knows the arguments' values."""
    return LaunchDescription([
        *declare_arguments(with_mode=False),
        OpaqueFunction(function=launch_setup, kwargs={"mode": MODE}),
    ])
