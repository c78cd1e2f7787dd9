#!/usr/bin/env python3
"""Learning per deployment mode: the same task trained bare, colocated, decoupled and hybrid.

The same comparison as ``rl-bringup compare`` (:mod:`rl_bringup.tools.train.compare`), with argparse
flags for use without the CLI: every mode is trained once per round, one run after the other, each
in a fresh process tree, and one markdown table prints one row per mode (median over rounds):

* wall time for the budget, and when the task was first solved (``-``: never, or not reported);
* evaluation return, and sample efficiency (that return over the bare loop's);
* achieved updates per transition, env steps/s (transitions / wall time);
* CPU utilisation (the run's process-tree CPU time / process wall time / cores);
* wall time x bare.

Usage::

    .venv/bin/python benchmarks/learning.py                           # all four modes, cart-pole
    .venv/bin/python benchmarks/learning.py --modes bare,colocated --total-env-steps 3000
    .venv/bin/python benchmarks/learning.py --repeats 3 --json learning.json --output runs/learn
    .venv/bin/python benchmarks/learning.py --robots 3 --config kuka_reach --timeout 1800

Flags: ``--modes`` (``bare,colocated,decoupled,hybrid``), ``--robots`` (decoupled and hybrid,
2), ``--config`` (``cartpole``), ``--total-env-steps`` (the config's), ``--repeats`` (1),
``--output`` (``runs/compare-<time>``), ``--json FILE``, ``--timeout`` (s per run, 3600),
``--domain-id`` (the first ROS run's; random per run by default). ROS runs use
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a ``ROS_DOMAIN_ID`` each.

The full comparison trains four times the default budget: minutes on 2 cores. It is a benchmark,
not a test: it prints figures; the exit code is 1 only when a run fails (its row says why), 2 on bad
flags.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rl_bringup.tools.common import ToolError
from rl_bringup.tools.train.compare import (
    ALL_MODES,
    DEFAULT_ROBOTS,
    DEFAULT_TIMEOUT_S,
    execute,
    settings_from_values,
)

#: Flag destinations -> the ``key:=`` of ``rl-bringup compare`` they stand for.
FLAG_KEYS = {"modes": "modes", "robots": "robots", "config": "config",
             "total_env_steps": "total_env_steps", "repeats": "repeats", "output": "output",
             "json": "json", "timeout": "timeout", "domain_id": "domain_id"}


def build_parser() -> argparse.ArgumentParser:
    """The flags; values stay text so :func:`settings_from_values` checks them as the CLI does."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes",
                        help=f"comma-separated, from {','.join(ALL_MODES)} (default all)")
    parser.add_argument("--robots", help=f"robots in decoupled and hybrid mode ({DEFAULT_ROBOTS})")
    parser.add_argument("--config", help="scenario name in config/ or a YAML path (cartpole)")
    parser.add_argument("--total-env-steps", dest="total_env_steps",
                        help="budget per run (default: the config's total_env_steps)")
    parser.add_argument("--repeats", help="rounds; the table shows the median per mode (1)")
    parser.add_argument("--output", help="folder for the runs (runs/compare-<time>)")
    parser.add_argument("--json", help="also write the rows and runs as JSON to this file")
    parser.add_argument("--timeout", help=f"seconds per run ({DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--domain-id", dest="domain_id",
                        help="ROS_DOMAIN_ID of the first ROS run (default: random per run)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags, run the comparison, print the table; returns the exit code."""
    arguments = build_parser().parse_args(argv)
    values = {key: getattr(arguments, flag) for flag, key in FLAG_KEYS.items()
              if getattr(arguments, flag) is not None}
    try:
        settings = settings_from_values(values)
        return execute(settings, lambda line: print(line, flush=True))
    except ToolError as error:
        print(f"learning.py: error: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
