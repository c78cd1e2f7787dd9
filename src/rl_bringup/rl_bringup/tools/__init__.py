"""Subcommands of ``rl-bringup`` that are tools rather than deployments, grouped by who uses them.

:mod:`~rl_bringup.tools.deploy` for whoever sets a deployment up (``advise``, ``compose``,
``k8s``), :mod:`~rl_bringup.tools.operate` for whoever watches or steers a running one
(``status``, ``doctor``, ``estop``, ``record``) and :mod:`~rl_bringup.tools.train` for the
results of training (``compare``, ``eval``, ``export``). Beside them the pieces every tool
shares: :mod:`~rl_bringup.tools.subcommand` (errors, exit codes, ``key:=value`` parsing,
:func:`~rl_bringup.tools.subcommand.add_tool`) and :mod:`~rl_bringup.tools.common` (config,
checkpoint and task helpers); the rclpy session of the tools that attach to a deployment is
:mod:`rl_bringup.run.ros_session`. What each tool does: docs/tools.md.

Each subcommand module has a ``register(subparsers)`` function that calls ``add_tool`` and that
:data:`rl_bringup.cli.SUBCOMMANDS` lists. No tool imports :mod:`rl_bringup.cli`, and they import
torch, gymnasium and pybullet lazily, so listing them keeps ``rl-bringup plan`` quick.
"""
