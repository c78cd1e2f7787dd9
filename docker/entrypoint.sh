#!/bin/bash
# Entry point of the rl_ros2 image: the ROS 2 environment and the colcon install, then the command.
set -e
source /opt/ros/kilted/setup.bash
source /ws/install/setup.bash
exec "$@"
