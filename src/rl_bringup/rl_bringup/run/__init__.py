"""Running a deployment plan where ``ros2 launch`` is not installed, and what runs beside it.

:mod:`.supervisor` starts the plan's processes, respawns, watches and stops them;
:mod:`.elastic` starts and retires the robots of ``robots:=auto`` by the rule of
:mod:`rl_bringup.plan.autoscale`; :mod:`.replica` gives each replica of a robot container its
robot index; :mod:`.ros_session` is the small rclpy participant of the autoscaler and of the tools
that attach to a run. Built on :mod:`rl_bringup.plan`, never on :mod:`rl_bringup.tools`
(tests/unit/test_bringup_layers.py).
"""
