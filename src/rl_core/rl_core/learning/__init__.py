"""The learner's side of a run in plain Python: the update loop, the trainer's run outside ROS,
the bare training loop, evaluation (final and periodic), the torch device and CPU sets.
"""
