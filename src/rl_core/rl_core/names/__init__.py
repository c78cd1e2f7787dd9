"""Names defined once: the node kinds, ROS name rules, rl_ros2's environment variables and
the observation codecs' names.

Plain strings and string functions that every other layer of rl_core (and rl_nodes, rl_bringup)
may import; nothing here imports anything of rl_core.
"""
