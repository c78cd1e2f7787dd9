"""rl_nodes: thin ROS 2 nodes over rl_core, the zero-copy channel and the colocated container."""
