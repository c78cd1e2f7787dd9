"""CPU sets: the list syntax, the environment variables that carry them, the machine's cores.

The deployment plan (``rl_bringup.plan``) decides which CPUs each process may use and passes
the decision as environment variables; the processes apply it at start
(``rl_nodes.process_settings``). Both sides read the names and the list syntax from here, so
this module imports nothing but ``os``.

The list syntax is the kernel's (``Cpus_allowed_list`` in ``/proc/*/status``, ``taskset -c``,
cgroup ``cpuset.cpus``): comma-separated CPU numbers and inclusive ranges, ``"0-2,5"``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from rl_core.names import variables

#: CPUs a process may run on (``os.sched_setaffinity`` at process start).
CPUS_VARIABLE = variables.CPUS
#: torch intra-op threads of a process.
TORCH_THREADS_VARIABLE = variables.TORCH_THREADS
#: CPUs of the trainer's learner thread, when they differ from the process's (colocated mode).
LEARNER_CPUS_VARIABLE = variables.LEARNER_CPUS
#: OpenMP's own thread count (torch's and the BLAS libraries' pools read it at start).
OMP_THREADS_VARIABLE = "OMP_NUM_THREADS"

_ITEM = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", re.ASCII)
# Linux builds support at most 8192 CPUs (CONFIG_NR_CPUS); the bound keeps a typo such as
# "0-100000000" from building a huge set.
MAX_CPU = 8191
_SYNTAX = "expected CPU numbers and ranges such as '0', '0-1' or '0,2-3'"


def parse_cpu_list(text: str) -> frozenset[int]:
    """Parse a CPU list such as ``"0-2,5"`` into ``{0, 1, 2, 5}``.

    :param text: comma-separated CPU numbers and inclusive ``LOW-HIGH`` ranges; spaces around
        items are ignored.
    :return: the CPUs, never empty.
    :raises ValueError: for an empty list, a non-number, a negative number, a reversed range
        or a CPU above :data:`MAX_CPU`.
    """
    cpus: set[int] = set()
    for item in str(text).split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"bad CPU list {text!r}: {item.strip()!r} is not a CPU number or "
                             f"range; {_SYNTAX}")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError(f"bad CPU list {text!r}: range {item.strip()!r} runs backwards; "
                             f"{_SYNTAX}")
        if high > MAX_CPU:
            raise ValueError(f"bad CPU list {text!r}: CPU {high} is above {MAX_CPU}; {_SYNTAX}")
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The canonical text of a CPU set, ranges collapsed: ``{0, 1, 2, 5}`` -> ``"0-2,5"``.

    :raises ValueError: for an empty set (it would mean "no CPU", which no process can run on).
    """
    ordered = sorted(set(cpus))
    if not ordered:
        raise ValueError("an empty CPU set cannot be written as a CPU list")
    ranges: list[tuple[int, int]] = []
    for cpu in ordered:
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], cpu)
        else:
            ranges.append((cpu, cpu))
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)


def available_cpus() -> frozenset[int]:
    """The CPUs this process may run on (its affinity; all CPUs where affinity is unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(0))
    return frozenset(range(os.cpu_count() or 1))
