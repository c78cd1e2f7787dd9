"""rl_bringup: deployments of rl_ros2.

One deployment plan (:mod:`rl_bringup.plan`: mode, robots, config -> processes) feeds two
front ends: the ``launch/*.launch.py`` files for ROS 2 installs (through
:mod:`rl_bringup.launch_helpers`) and the ``rl-bringup`` command (:mod:`rl_bringup.cli`), which
runs the same plan with a small supervisor (:mod:`rl_bringup.run`) where ``ros2 launch`` is not
available; :mod:`rl_bringup.tools` holds the other subcommands. Importing this package imports
neither rclpy nor launch.
"""

__version__ = "0.1.0"
