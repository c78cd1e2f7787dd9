"""Subcommands of ``rl-bringup`` that are tools rather than deployments, one module each.

Among them:

* :mod:`~rl_bringup.tools.advise` — measure env step and inference costs, recommend a mode;
* :mod:`~rl_bringup.tools.evaluate` — ``eval``: deterministic episodes of a checkpoint or an
  exported ONNX model, optionally an animated GIF of the first one;
* :mod:`~rl_bringup.tools.export` — ``export``: a checkpoint's policy as an ONNX model;
* :mod:`~rl_bringup.tools.record` — ``record``: topics of a running deployment into MCAP;
* :mod:`~rl_bringup.tools.status` — ``status``: a live table of robots, replay and trainer;
* :mod:`~rl_bringup.tools.doctor` — ``doctor``: environment and graph checks with fixes (a
  package: one module per kind of check);
* :mod:`~rl_bringup.tools.compare` — ``compare``: train one task in every mode in turn and
  tabulate wall time, time to solve, return, updates per transition, steps/s and CPU use;
* :mod:`~rl_bringup.tools.ros_session` — the rclpy session (domain, discovery, Ctrl-C) of the
  tools that attach to a deployment;
* :mod:`~rl_bringup.tools.message_types` — message classes and complete definitions by type name;
* :mod:`~rl_bringup.tools.common` — config, checkpoint and task helpers of the policy tools;
* :mod:`~rl_bringup.tools.subcommand` — errors, exit codes, ``key:=value`` parsing and
  :func:`~rl_bringup.tools.subcommand.add_tool`, shared with :mod:`rl_bringup.cli`.

Each subcommand module has a ``register(subparsers)`` function that calls ``add_tool`` and that
:data:`rl_bringup.cli.SUBCOMMANDS` lists. No tool imports :mod:`rl_bringup.cli` (the shared pieces
are in the leaf module ``subcommand``), and they import torch, gymnasium and pybullet lazily, so
listing them keeps ``rl-bringup plan`` quick.
"""
