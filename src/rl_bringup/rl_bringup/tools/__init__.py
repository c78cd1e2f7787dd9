"""Subcommands of ``rl-bringup`` that are tools rather than deployments, one module each.

Among them :mod:`~rl_bringup.tools.advise`, :mod:`~rl_bringup.tools.evaluate` (``eval``),
:mod:`~rl_bringup.tools.export`, :mod:`~rl_bringup.tools.record`,
:mod:`~rl_bringup.tools.status`, :mod:`~rl_bringup.tools.doctor` (a package: one module per kind
of check) and :mod:`~rl_bringup.tools.compare`; beside them the shared pieces:
:mod:`~rl_bringup.tools.ros_session` (the rclpy session of the tools that attach to a
deployment), :mod:`~rl_bringup.tools.message_types`, :mod:`~rl_bringup.tools.common` (config,
checkpoint and task helpers) and :mod:`~rl_bringup.tools.subcommand` (errors, exit codes,
``key:=value`` parsing, :func:`~rl_bringup.tools.subcommand.add_tool`). What each tool does:
docs/tools.md.

Each subcommand module has a ``register(subparsers)`` function that calls ``add_tool`` and that
:data:`rl_bringup.cli.SUBCOMMANDS` lists. No tool imports :mod:`rl_bringup.cli`, and they import
torch, gymnasium and pybullet lazily, so listing them keeps ``rl-bringup plan`` quick.
"""
