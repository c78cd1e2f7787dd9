"""What a deployment is: mode, robots, config -> the processes to start, their parameters and
environment. Pure: nothing here imports rclpy or launch or starts a process, so all of it is
unit-tested with plain pytest (tests/unit/test_bringup_layers.py holds that).

:mod:`.deployment` (:class:`~.deployment.Plan`, :func:`~.deployment.make_plan`) puts together one
module per concern: :mod:`.layouts` (which process hosts which node), :mod:`.discovery` (domain
id and DDS discovery), :mod:`.cpu_sets`, :mod:`.parameter_overrides`, :mod:`.robot_plan`
(``robot_interface:=ros2_control``) and :mod:`.autoscale` (the settings and the rule of
``robots:=auto``); :mod:`.process_spec` is one process of a plan. :mod:`.arguments` parses the
``key:=value`` arguments both front ends take, :mod:`.run_key` hands out a run's keys and
identity, and :mod:`.paths` finds the config and launch files and the node executables.
"""
