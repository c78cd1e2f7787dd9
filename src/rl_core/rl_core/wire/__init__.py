"""What the nodes hand each other and what crosses DDS, without ROS: the transport objects,
the caps, checks and encodings of message fields, image codecs and joins, the safetensors bytes
of weights, and a process' dispatch queue and registry of local endpoints.

rl_nodes turns these objects into rl_interfaces messages and back; nothing here knows ROS.
"""
