"""rl_ros2, decoupled mode: one process per node (per robot a simulator and
a policy, one replay_buffer, one trainer, one diagnostics_aggregator), talking over DDS.

    ros2 launch rl_bringup decoupled.launch.py robots:=2 config:=cartpole

starts these nodes (robot k in namespace /robot_k; `rl-bringup plan decoupled robots:=2 --format nodes`
prints the same table, and the table for any other arguments):

    PROCESS                 KIND                    NAMESPACE  EXECUTABLE
    simulator_robot_0       simulator               /robot_0   simulator
    policy_robot_0          policy                  /robot_0   policy
    simulator_robot_1       simulator               /robot_1   simulator
    policy_robot_1          policy                  /robot_1   policy
    replay_buffer           replay_buffer           /          replay_buffer
    trainer                 trainer                 /          trainer
    diagnostics_aggregator  diagnostics_aggregator  /          diagnostics_aggregator

The diagnostics_aggregator groups /diagnostics for rqt_robot_monitor (/diagnostics_agg,
/diagnostics_toplevel_state). Every process respawns when it crashes; replay_buffer and trainer
are required: a clean exit (training complete) ends the launch; the diagnostics_aggregator is
not (the run goes on without it). policy_layout:=central starts one `policy` process (node
/policy) instead of one per robot; robot_interface:=ros2_control adds a `sim_robot` process per
robot.

The processes come from rl_bringup.plan (the layout in rl_bringup.plan.layouts), the same plan
`rl-bringup launch decoupled` runs; `ros2 launch rl_bringup decoupled.launch.py --show-args` lists the
arguments.
"""

from launch import LaunchDescription
from launch.actions import OpaqueFunction

from rl_bringup.launch_helpers import declare_arguments, launch_setup

MODE = "decoupled"


def generate_launch_description() -> LaunchDescription:
    """The deployment arguments and node parameters, then the decoupled plan's processes (the table
    above), made once launch knows the arguments' values."""
    return LaunchDescription([
        *declare_arguments(with_mode=False),
        OpaqueFunction(function=launch_setup, kwargs={"mode": MODE}),
    ])
