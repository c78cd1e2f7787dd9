"""The outcome of ``rl-bringup doctor``'s checks and the report that lists them."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


class Level(enum.Enum):
    """Outcome of one check."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass
class Check:
    """One line of the report.

    :param level: PASS, WARN or FAIL.
    :param name: what was checked (``rmw``, ``node``, ``topic /experience``).
    :param message: what was found.
    :param fix: how to fix it (WARN and FAIL).
    """

    level: Level
    name: str
    message: str
    fix: str = ""


def format_report(checks: Sequence[Check]) -> str:
    """The report: one line per check, a ``fix:`` line under each WARN and FAIL, a summary."""
    width = max([len(check.name) for check in checks] + [4])
    lines = []
    for check in checks:
        lines.append(f"{check.level.value}  {check.name:<{width}}  {check.message}")
        if check.fix and check.level is not Level.PASS:
            lines.append(f"{'':4}  {'':<{width}}  fix: {check.fix}")
    counts = Counter(check.level for check in checks)
    lines.append(f"{counts[Level.PASS]} passed, {counts[Level.WARN]} warning(s), "
                 f"{counts[Level.FAIL]} failed")
    return "\n".join(lines)
