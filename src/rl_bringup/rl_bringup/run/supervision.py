"""The supervisor's judgement of one process: what an exit means, and when a running one is hung.

:class:`ExitRules` decides after each exit: a ``required`` process ends the run with its exit
status (a clean exit that ``unfinished`` explains ends it with 1); a ``respawn`` process is
started again after a delay that doubles per consecutive restart, and given up after
``max_respawns`` of them (the count resets after a stable run); an exit asking for a restart
(``EXIT_RESTART``, a lifecycle shutdown) backs off the same way but is never given up; once every
process stepping a robot is given up, the run ends. :class:`HeartbeatWatch` kills a process whose
heartbeat file stopped changing, so that it is respawned like a crashed one. :class:`Child` is
the book-keeping both read and write, one per process across its restarts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl_bringup.plan.process_spec import private_directory
from rl_bringup.run.processes import SupervisedProcess, exit_status, signal_group
from rl_core.monitoring import heartbeat
from rl_core.names import variables

STANDBY, RUNNING, RETIRING, RESTARTING, FINISHED = (
    "standby", "running", "retiring", "restarting", "finished")


@dataclass(frozen=True)
class ProcessState:
    """A supervised process as another thread sees it (:meth:`Supervisor.states`).

    :param state: :data:`STANDBY` (not started, or retired), :data:`RUNNING`, :data:`RETIRING`
        (asked to stop, not yet exited), :data:`RESTARTING` (waiting to be respawned) or
        :data:`FINISHED` (exited for good, or not yet started while the run begins).
    :param pid: the running process's pid; ``None`` when none runs.
    :param returncode: the last exit's return code; ``None`` before any exit.
    """

    state: str
    pid: int | None
    returncode: int | None


@dataclass
class Child:
    """Book-keeping for one supervised process across its restarts."""

    spec: SupervisedProcess
    process: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = None
    started_at: float = 0.0
    restarts: int = 0
    #: Restarts asked for in a row (exit code EXIT_RESTART): they back off but never give up.
    requested_restarts: int = 0
    total_restarts: int = 0
    restart_at: float | None = None
    returncode: int | None = None
    finished: bool = False
    standby: bool = False
    #: Retirement: asked to stop for good, the signals still to send, when the next one is due.
    retiring: bool = False
    retire_phases: list[tuple[int, float]] = field(default_factory=list)
    retire_next_at: float | None = None
    #: The heartbeat file's last modification time and when (monotonic) it was first seen;
    #: None before the first beat of this run of the process.
    last_beat: tuple[float, float] | None = None
    #: Killed for a stale heartbeat (once per run of the process).
    hung: bool = False
    #: An earlier run of the process beat: a run that does not is hung while starting.
    beats: bool = False

    def running(self) -> bool:
        """Whether the current process is still running (not yet exited)."""
        return self.process is not None and self.process.poll() is None

    def state(self) -> ProcessState:
        process = self.process
        if self.retiring and process is not None:
            name = RETIRING
        elif process is not None:
            name = RUNNING
        elif self.standby:
            name = STANDBY
        elif self.restart_at is not None:
            name = RESTARTING
        else:
            name = FINISHED
        return ProcessState(name, process.pid if process is not None else None, self.returncode)


def _steps_a_robot(spec: Any) -> bool:
    """Whether a supervised process hosts a simulator node (a plan's ProcessSpec does)."""
    hosted = getattr(spec, "hosted_nodes", None)
    return hosted is not None and any(kind == "simulator" for kind, _ in hosted())


@dataclass(frozen=True)
class ExitRules:
    """What an exit of a process that was not retiring means for the run; see the module docstring.

    :param respawn_delay: delay before the first restart; it doubles per consecutive restart.
    :param max_respawn_delay: upper bound of the restart delay.
    :param max_respawns: consecutive restarts before a process is given up.
    :param stable_run_s: a process that ran this long counts as healthy: its restart count resets.
    :param log: where the decisions are written (the supervisor's own lines).
    :param unfinished: for a required process that exited 0, why the run is not finished, or
        ``None`` when it is.
    """

    respawn_delay: float
    max_respawn_delay: float
    max_respawns: int
    stable_run_s: float
    log: Callable[[str], None]
    unfinished: Callable[[str], str | None] | None = None

    def after_exit(self, child: Child, returncode: int, words: str, *,
                   children: Sequence[Child], stopping: bool) -> int | None:
        """End the run, schedule a restart of ``child``, or mark it finished.

        :param words: the exit in words (:func:`rl_bringup.run.processes.describe_exit`).
        :param children: every process of the run (to tell whether any robot is left).
        :param stopping: the run is ending already (a clean exit then needs no reason).
        :return: the run's exit code when the run must end, else ``None``.
        """
        spec = child.spec
        if spec.required and (returncode == 0 or not spec.respawn):
            why = self.unfinished(spec.name) if returncode == 0 and self.unfinished else None
            if why is not None and not stopping:
                self.log(f"{spec.name} {words} before the run finished ({why}); it is "
                         "required, stopping everything")
                return 1
            self.log(f"{spec.name} {words}; it is required, stopping everything")
            return exit_status(returncode)
        if not spec.respawn:
            child.finished = True
            self.log(f"{spec.name} {words}")
            return None
        if time.monotonic() - child.started_at >= self.stable_run_s:
            child.restarts = child.requested_restarts = 0
        if returncode == heartbeat.EXIT_RESTART:
            # A lifecycle shutdown or cleanup, from outside or not: the process saved its state
            # and asked to be started again. Not a crash, so no count of them gives it up (a
            # peer repeating the call would otherwise end the run); they back off like crashes.
            child.requested_restarts += 1
            self._schedule_restart(child, words, child.requested_restarts, "asked to be restarted")
            return None
        if child.restarts >= self.max_respawns:
            child.finished = True
            self.log(f"{spec.name} {words}; giving up after {self.max_respawns} restarts")
            if spec.required:
                return exit_status(returncode)
            return self._check_robots_left(children, returncode)
        child.restarts += 1
        self._schedule_restart(child, words, child.restarts,
                               f"restart {child.restarts}/{self.max_respawns}")
        return None

    def _schedule_restart(self, child: Child, words: str, in_a_row: int, why: str) -> None:
        """Start ``child`` again after a delay that doubles with each restart ``in_a_row``."""
        delay = min(self.respawn_delay * 2 ** (in_a_row - 1), self.max_respawn_delay)
        child.total_restarts += 1
        child.restart_at = time.monotonic() + delay
        self.log(f"{child.spec.name} {words}; restarting in {delay:.1f} s ({why})")

    def _check_robots_left(self, children: Sequence[Child], returncode: int) -> int | None:
        """End the run (with the last robot's exit status) once every process that steps a
        robot has been given up: the learner would otherwise wait for experience forever."""
        robots = [child for child in children if _steps_a_robot(child.spec)]
        if not robots or not all(child.finished for child in robots):
            return None
        self.log(f"every robot process ({', '.join(child.spec.name for child in robots)}) "
                 "has been given up after repeated crashes, so no experience can come; "
                 "stopping the run (their last lines above say why)")
        return exit_status(returncode) or 1


class HeartbeatWatch:
    """Kills a running process whose heartbeat stopped; it is then respawned as after a crash.

    :param timeout_s: a process whose heartbeat file (``RL_ROS2_HEARTBEAT_FILE``, touched by
        rl_nodes' dispatch threads) has not changed for this long is hung (0: nothing is watched).
    :param log: where a kill is reported (the supervisor's own lines).
    """

    def __init__(self, timeout_s: float, log: Callable[[str], None]) -> None:
        self.timeout_s = timeout_s
        self.directory = private_directory() if timeout_s > 0 else None
        self._log = log

    def file(self, child: Child) -> Path | None:
        """The heartbeat file of ``child``; ``None`` when nothing is watched."""
        if self.directory is None:
            return None
        return self.directory / f"heartbeat-{os.getpid()}-{child.spec.name}"

    def prepare(self, child: Child, environment: dict[str, str]) -> None:
        """Before ``child`` starts: forget its last run's beats and tell it where to beat."""
        heartbeat_file = self.file(child)
        child.hung, child.last_beat = False, None
        if heartbeat_file is not None:
            heartbeat_file.unlink(missing_ok=True)  # the last run's beats are not this run's
            environment[variables.HEARTBEAT_FILE] = str(heartbeat_file)

    def check(self, child: Child, now: float) -> None:
        """Kill ``child`` when its heartbeat stopped.

        The file's time only tells whether it changed; how long it has not is measured here on
        the monotonic clock, so a step of the wall clock is no hang."""
        path = self.file(child)
        if path is None or child.retiring or child.process is None or child.hung:
            return
        try:
            modified = os.stat(path).st_mtime
        except OSError:  # not beating yet
            # A process whose earlier run beat is one that beats: silent for longer than
            # heartbeat.STARTUP_TIMEOUTS timeouts after it started (imports, configuration,
            # restoring snapshots), it hung before its first beat (a SIGSTOP, a deadlock).
            # A process that never beat (not an rl_nodes process) is left alone.
            allowance_s = heartbeat.STARTUP_TIMEOUTS * self.timeout_s
            if child.beats and now - child.started_at > allowance_s:
                self._kill_hung(child, f"no heartbeat since it started {now - child.started_at:.0f}"
                                f" s ago (more than {allowance_s:g} s; its earlier runs beat)")
            return
        child.beats = True
        if child.last_beat is None or child.last_beat[0] != modified:
            child.last_beat = (modified, now)
            return
        silent_s = now - child.last_beat[1]
        if silent_s > self.timeout_s:
            self._kill_hung(child, f"no heartbeat for {silent_s:.0f} s (more than "
                            f"{self.timeout_s:g} s)")

    def _kill_hung(self, child: Child, why: str) -> None:
        """Kill a hung child; it is respawned as after a crash."""
        assert child.process is not None  # a running child is judged
        child.hung = True
        self._log(f"{child.spec.name} is hung: {why}; killing it")
        signal_group(child.process, signal.SIGKILL, leader_exited=False)
