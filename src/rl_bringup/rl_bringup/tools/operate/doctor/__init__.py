"""``rl-bringup doctor``: check the ROS setup and a running deployment, and say how to fix it.

Usage::

    rl-bringup doctor [mode:=colocated|decoupled|hybrid] [robots:=N] [domain_id:=N]
                      [discovery:=localhost|subnet|server:HOST:PORT] [wait:=S] [window:=S]

Prints one ``PASS`` / ``WARN`` / ``FAIL`` line per check, each ``WARN`` and ``FAIL`` followed by
a ``fix:`` line; exits 1 when any check failed, else 0. It checks the environment (rclpy, RMW,
domain, discovery, ``/dev/shm``) and the deployment against :func:`expected_graph` (the table of
docs/graph.md, node layout from :func:`rl_bringup.plan.deployment.make_plan`); the checks:
docs/tools.md, "doctor". This module is the command; each kind of check has a module of its own:
:mod:`.environment`, :mod:`.graph`, :mod:`.qos`, :mod:`.rates`; :mod:`.deployment` runs the
graph checks in order and :mod:`.report` formats the outcome.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from rl_bringup.plan.deployment import parse_robots
from rl_bringup.plan.discovery import parse_domain_id
from rl_bringup.plan.layouts import MODES
from rl_bringup.run.ros_session import ATTACH_KEYS, RosSession, attach_settings
from rl_bringup.tools.operate.doctor.deployment import deployment_checks
from rl_bringup.tools.operate.doctor.environment import (
    check_discovery,
    check_domain_id,
    check_rclpy,
    check_rmw,
    check_shared_memory,
)
from rl_bringup.tools.operate.doctor.graph import expected_graph
from rl_bringup.tools.operate.doctor.report import Check, Level, format_report
from rl_bringup.tools.subcommand import SubparsersAction, ToolError, add_tool, parse_seconds

# expected_graph is not used here; docs/tools.md names it
# rl_bringup.tools.operate.doctor.expected_graph.
__all__ = ["Check", "Level", "doctor", "expected_graph", "format_report", "register"]

KEYS: tuple[str, ...] = ("mode", "robots", "wait", "window", *ATTACH_KEYS)
DEFAULT_WAIT_S = 5.0
DEFAULT_WINDOW_S = 3.0


def doctor(values: dict[str, str], out: TextIO = sys.stdout) -> int:
    """Run ``rl-bringup doctor`` with parsed ``key:=value`` arguments; returns the exit code
    (0: no FAIL, 1: at least one).

    :raises ToolError: for bad arguments (exit code 2).
    """
    mode = values.get("mode", "").strip().lower() or None
    if mode is not None and mode not in MODES:
        raise ToolError(f"unknown mode {values['mode']!r}; valid modes: {', '.join(MODES)}")
    robots = parse_robots(values["robots"]) if "robots" in values else None
    wait_s = parse_seconds("wait", values.get("wait", str(DEFAULT_WAIT_S)))
    window_s = parse_seconds("window", values.get("window", str(DEFAULT_WINDOW_S)))
    if values.get("domain_id", "").strip():
        parse_domain_id(values["domain_id"])  # a bad argument is a usage error (exit 2)

    # The environment as the user has it, before the tool applies its own defaults.
    checks, identifier = check_rclpy()
    checks.append(check_rmw(os.environ, identifier))
    domain_check = check_domain_id(values, os.environ)
    checks.append(domain_check)
    checks += check_discovery(values, os.environ)
    checks.append(check_shared_memory())
    header = f"rl-bringup doctor  {mode or 'any mode'}, " \
             f"{robots if robots is not None else 'any number of'} robot(s)"
    if identifier is None or domain_check.level is Level.FAIL:
        checks.append(Check(Level.FAIL, "deployment", "graph checks skipped: fix the "
                            "environment first", "see the failures above"))
    else:
        settings = attach_settings(values)
        header += f"  domain {settings.domain_id}"
        try:
            with RosSession("doctor", settings.domain_id) as session:
                checks += deployment_checks(session, settings.domain_id, mode, robots, wait_s,
                                            window_s)
        except Exception as error:  # noqa: BLE001 - rclpy.init or the middleware failing: report, don't crash
            checks.append(Check(Level.FAIL, "ros", f"could not start ROS in domain "
                                f"{settings.domain_id}: {error}",
                                "check RMW_IMPLEMENTATION and the Fast DDS environment "
                                "(FASTRTPS_DEFAULT_PROFILES_FILE, ROS_DISCOVERY_SERVER)"))
    print(header, file=out)
    print(format_report(checks), file=out, flush=True)
    return 1 if any(check.level is Level.FAIL for check in checks) else 0


def register(subparsers: SubparsersAction) -> None:
    """Add ``doctor`` to the ``rl-bringup`` subcommands."""
    add_tool(
        subparsers, "doctor", doctor, keys=KEYS,
        help="check the ROS environment and a running deployment; say how to fix problems",
        description="Check rclpy/RMW, ROS_DOMAIN_ID, discovery range, /dev/shm and, in the "
        "domain, the deployment's nodes, topics, services, QoS compatibility, process layout "
        "and topic rates. Exit code 1 when a check fails. key:=value arguments: mode:=MODE "
        f"({', '.join(MODES)}; makes a missing deployment a failure), robots:=N (default: "
        f"counted from the graph), domain_id:=N (default $ROS_DOMAIN_ID), "
        "discovery:=localhost|subnet|server:HOST:PORT, wait:=S (discovery wait, default "
        f"{DEFAULT_WAIT_S:g}), window:=S (rate window, default {DEFAULT_WINDOW_S:g}).",
    )
