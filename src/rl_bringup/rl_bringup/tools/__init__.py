"""Subcommands of ``rl-bringup`` that are tools rather than deployments, one module each.

Among them:

* :mod:`~rl_bringup.tools.advise` — measure env step and inference costs, recommend a mode;
* :mod:`~rl_bringup.tools.evaluate` — ``eval``: deterministic episodes of a checkpoint or an
  exported ONNX model, optionally an animated GIF of the first one;
* :mod:`~rl_bringup.tools.export` — ``export``: a checkpoint's policy as an ONNX model;
* :mod:`~rl_bringup.tools.record` — ``record``: topics of a running deployment into MCAP;
* :mod:`~rl_bringup.tools.status` — ``status``: a live table of robots, replay and trainer;
* :mod:`~rl_bringup.tools.doctor` — ``doctor``: environment and graph checks with fixes;
* :mod:`~rl_bringup.tools.compare` — ``compare``: train one task in every mode in turn and
  tabulate wall time, time to solve, return, updates per transition, steps/s and CPU use;
* :mod:`~rl_bringup.tools.ros_session` — the rclpy session (domain, discovery, Ctrl-C) of the
  tools that attach to a deployment;
* :mod:`~rl_bringup.tools.common` — argument parsing, errors and exit codes they share.

Each subcommand module has a ``register(subparsers)`` function that
:data:`rl_bringup.cli.SUBCOMMANDS` lists. The modules import :mod:`rl_bringup.cli` only inside
their handlers, so ``cli`` can import them at its top without an import cycle, and they import
torch, gymnasium and pybullet lazily, so listing them keeps ``rl-bringup plan`` quick.
"""
