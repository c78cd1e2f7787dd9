"""Liveness of a node process: its dispatch thread touches a heartbeat file once a second.

A node that stopped turning (a deadlock, SIGSTOP, a callback that never returns) still runs, so
a supervisor that restarts only on exit never notices it. The file says it: the ``rl-bringup``
supervisor restarts a process whose file has not changed for :data:`HEARTBEAT_TIMEOUT_S`
(measured on its monotonic clock, so a step of the wall clock is no hang), and Kubernetes'
liveness probe compares the file's time with the wall clock (``python3 -m rl_core.monitoring.heartbeat
FILE``). A process is judged only once it has beaten: one that never does (not an rl_nodes
process) is left alone. A restarted process whose earlier run beat gets
:data:`STARTUP_TIMEOUTS` timeouts from its start to its first beat; one silent for longer hung
while starting.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from rl_core.names.variables import HEARTBEAT_FILE

#: Exit code of a process one of whose nodes was cleaned up or shut down through its lifecycle
#: services: sysexits' EX_TEMPFAIL ("try again"); not 0, so rl-bringup's supervisor, launch's
#: respawn and Kubernetes start the process again (a clean exit 0 would end the run). The
#: supervisor restarts it however often it comes: it is asked for, not a crash.
EXIT_RESTART = 75

#: A heartbeat older than this marks a hung process. Generous: the trainer's final evaluation
#: runs on the dispatch thread and takes tens of seconds on a loaded 2-core machine (it beats
#: once an episode, see :func:`beat_from_here`, but an episode of a slow task is long).
HEARTBEAT_TIMEOUT_S = 120.0
#: Heartbeat timeouts a restarted process that beats gets from its start to its first beat
#: (imports, configuration and restoring snapshots come first).
STARTUP_TIMEOUTS = 2


def beat(path: str | os.PathLike[str]) -> None:
    """Touch ``path`` (created when missing); a failure is ignored (liveness is best effort)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        try:
            Path(path).touch()
        except OSError:
            pass
    except OSError:
        pass


def beat_from_here() -> None:
    """Beat the calling process' heartbeat, where it has one: for work that holds the beating
    thread for long but goes on (the trainer's final evaluation, one call per episode)."""
    path = os.environ.get(HEARTBEAT_FILE)
    if path:
        beat(path)


def age_s(path: str | os.PathLike[str], now: float | None = None) -> float | None:
    """Seconds since the last beat (wall clock), or None before the first one."""
    try:
        modified = os.stat(path).st_mtime
    except OSError:
        return None
    return (time.time() if now is None else now) - modified


def main(argv: list[str] | None = None) -> int:
    """``python3 -m rl_core.monitoring.heartbeat FILE [TIMEOUT_S]``: exit 0 while FILE is fresh, else 1
    (a Kubernetes exec probe)."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python3 -m rl_core.monitoring.heartbeat FILE [TIMEOUT_S]", file=sys.stderr)
        return 2
    timeout = float(args[1]) if len(args) > 1 else HEARTBEAT_TIMEOUT_S
    age = age_s(args[0])
    if age is None or age > timeout:
        print(f"{args[0]}: {'no heartbeat yet' if age is None else f'{age:.0f} s old'}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
