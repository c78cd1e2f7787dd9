"""Tools for what training produces: compare the modes' learning, evaluate a checkpoint, export it.

:mod:`.compare` trains the same task in every mode, one after the other, and tabulates the runs;
:mod:`.evaluate` (``rl-bringup eval``) runs a checkpoint's policy on its task without ROS;
:mod:`.export` writes the policy as ONNX for a robot without torch. docs/tools.md.
"""
