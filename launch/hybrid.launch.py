"""rl_ros2, hybrid mode: per robot one process (simulator + policy) and
one learner process (replay_buffer + trainer + diagnostics_aggregator).

    ros2 launch rl_bringup hybrid.launch.py robots:=2 config:=cartpole

starts these nodes (robot k in namespace /robot_k; `rl-bringup plan hybrid robots:=2 --format nodes`
prints the same table, and the table for any other arguments):

    PROCESS  KIND                    NAMESPACE  EXECUTABLE
    robot_0  simulator               /robot_0   container
    robot_0  policy                  /robot_0   container
    robot_1  simulator               /robot_1   container
    robot_1  policy                  /robot_1   container
    learner  replay_buffer           /          container
    learner  trainer                 /          container
    learner  diagnostics_aggregator  /          container

The diagnostics aggregator groups /diagnostics for rqt_robot_monitor (/diagnostics_agg,
/diagnostics_toplevel_state). Every process respawns when it crashes; the learner is required:
its clean exit (training complete) ends the launch. policy_layout:=central leaves the simulators
alone in the robot containers and starts one `policy` process (node /policy);
robot_interface:=ros2_control adds a `sim_robot` process per robot.

The processes come from rl_bringup.plan (the layout in rl_bringup.plan.layouts), the same plan
`rl-bringup launch hybrid` runs; `ros2 launch rl_bringup hybrid.launch.py --show-args` lists the
arguments.
"""

from launch import LaunchDescription
from launch.actions import OpaqueFunction

from rl_bringup.launch_helpers import declare_arguments, launch_setup

MODE = "hybrid"


def generate_launch_description() -> LaunchDescription:
    """The deployment arguments and node parameters, then the hybrid plan's processes (the table
    above), made once launch knows the arguments' values."""
    return LaunchDescription([
        *declare_arguments(with_mode=False),
        OpaqueFunction(function=launch_setup, kwargs={"mode": MODE}),
    ])
