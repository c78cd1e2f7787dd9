"""Tools for a running deployment: watch it, check it, stop its robots, record it.

:mod:`.status` (a live table), :mod:`.doctor` (the ROS setup and the graph against the plan, one
module per kind of check), :mod:`.estop` (engage or release the e-stop) and :mod:`.record` (topics
to MCAP); :mod:`.message_types` finds the message classes and definitions they read. Each attaches
to the run's graph through :mod:`rl_bringup.run.ros_session`; ``status``, ``doctor`` and ``record``
also run on their own as ``python -m rl_bringup.tools.operate.<tool>``. docs/tools.md.
"""
