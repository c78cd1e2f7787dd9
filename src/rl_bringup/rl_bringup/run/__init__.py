"""Running a deployment plan where ``ros2 launch`` is not installed, and what runs beside it.

:mod:`.supervisor` starts the plan's processes and stops them, with one module per part of its
job: :mod:`.processes` (what a supervised process is; signalling and stopping one, by process
group), :mod:`.supervision` (what an exit means: restart, give up or end the run; hung processes
by their heartbeat) and :mod:`.output` (prefixed lines). :mod:`.elastic` starts and retires the
robots of ``robots:=auto`` by the rule of :mod:`rl_bringup.plan.autoscale`; :mod:`.replica` gives
each replica of a robot container its robot index; :mod:`.ros_session` is the small rclpy
participant of the autoscaler and of the tools that attach to a run. Built on
:mod:`rl_bringup.plan`, never on :mod:`rl_bringup.tools` (tests/unit/test_bringup_layers.py).
"""
