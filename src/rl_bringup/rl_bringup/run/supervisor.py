"""A small process supervisor: runs a deployment plan where ``ros2 launch`` is not installed.

It does what the launch front end does for this project, with the standard library only: starts
each process in its own session, prefixes its output lines with ``[name]`` (:mod:`.output`),
forwards SIGINT and SIGTERM, restarts, gives up or ends the run after an exit and kills hung
processes by the rules of :mod:`.supervision`, and stops in phases (the forwarded signal, a grace
period, SIGTERM, SIGKILL). ``standby`` processes wait until :meth:`Supervisor.start_standby` and
go back on :meth:`Supervisor.retire`: the elastic robots of :mod:`rl_bringup.run.elastic` scale
this way. Requests from other threads reach the supervising loop through a queue.

Signals go only to the process groups this supervisor started
(:func:`rl_bringup.run.processes.signal_group`), never by name. Processes are anything
:class:`rl_bringup.run.processes.SupervisedProcess` describes: a plan's ``ProcessSpec``, or a
plain ``Command``. Every rule in full: docs/architecture.md, "Launch: two front ends, one plan".
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from types import FrameType
from typing import IO, Any

from rl_bringup.plan.deployment import MAX_RESPAWNS, RESPAWN_DELAY_S
from rl_bringup.run.output import LineOutput
from rl_bringup.run.processes import EXIT_CANNOT_START, SupervisedProcess, describe_exit, signal_group
from rl_bringup.run.supervision import Child, ExitRules, HeartbeatWatch, ProcessState
from rl_core.monitoring import heartbeat
from rl_core.names import variables

#: How many times the process was restarted before this start (0 the first time).
RESTART_VARIABLE = variables.RESTART_COUNT


class Supervisor:
    """Run processes until a required one exits or the user interrupts; see the module docstring.

    :param processes: what to run, started in this order.
    :param environment: variables for every process, on top of ``os.environ`` (each process's
        own ``env`` comes last).
    :param python_bin_dir: passed to each process's ``argv`` (the folder of the executables).
    :param output: where prefixed lines go (``sys.stdout`` when ``None``).
    :param grace_period: seconds the processes get after the first stop signal.
    :param terminate_timeout: seconds after SIGTERM before SIGKILL.
    :param kill_timeout: seconds to wait for the kernel to reap after SIGKILL.
    :param respawn_delay: delay before the first restart; it doubles per consecutive restart.
    :param max_respawn_delay: upper bound of the restart delay.
    :param max_respawns: consecutive restarts before a process is given up.
    :param stable_run_s: a process that ran this long counts as healthy: its restart count resets.
    :param poll_interval: seconds between checks of the children (also the signal latency).
    :param cwd: working directory of the children (the supervisor's when ``None``).
    :param label: prefix of the supervisor's own lines.
    :param standby: names of processes not to start with the others; they start when
        :meth:`start_standby` asks for them.
    :param unfinished: for a required process that exited 0, why the run is not finished
        (e.g. no ``result.json``: it was stopped from outside), or ``None`` when it is.
    :param heartbeat_timeout: a process whose heartbeat file (``RL_ROS2_HEARTBEAT_FILE``,
        touched by rl_nodes' dispatch threads) is older than this is hung: it is killed, then
        respawned like a crashed one (0: not watched; a process is watched once it has beaten,
        and a later run of it that has not beaten ``heartbeat.STARTUP_TIMEOUTS`` timeouts after
        its start is hung too).
    """

    def __init__(
        self,
        processes: Sequence[SupervisedProcess],
        *,
        environment: Mapping[str, str] | None = None,
        python_bin_dir: str | os.PathLike[str] | None = None,
        output: IO[str] | None = None,
        grace_period: float = 10.0,
        terminate_timeout: float = 5.0,
        kill_timeout: float = 2.0,
        respawn_delay: float = RESPAWN_DELAY_S,
        max_respawn_delay: float = 30.0,
        max_respawns: int = MAX_RESPAWNS,
        stable_run_s: float = 30.0,
        poll_interval: float = 0.05,
        cwd: str | os.PathLike[str] | None = None,
        label: str = "rl-bringup",
        standby: Collection[str] = (),
        heartbeat_timeout: float = heartbeat.HEARTBEAT_TIMEOUT_S,
        unfinished: Callable[[str], str | None] | None = None,
    ) -> None:
        names = [process.name for process in processes]
        if not names:
            raise ValueError("nothing to supervise: the process list is empty")
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"process names must be unique; repeated: {', '.join(duplicates)}")
        if unknown := sorted(set(standby) - set(names)):
            raise ValueError(f"standby names no process: {', '.join(unknown)}")
        if grace_period < 0 or terminate_timeout < 0 or kill_timeout < 0:
            raise ValueError("grace_period, terminate_timeout and kill_timeout must be >= 0")
        if respawn_delay < 0 or max_respawns < 0 or poll_interval <= 0:
            raise ValueError("respawn_delay and max_respawns must be >= 0, poll_interval > 0")
        self._children = [Child(spec=process, standby=process.name in standby)
                          for process in processes]
        self._by_name = {child.spec.name: child for child in self._children}
        # start_standby / retire requests from other threads, served by the supervising loop.
        self._requests: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._environment = dict(environment or {})
        self._python_bin_dir = python_bin_dir
        self._output = LineOutput(output if output is not None else sys.stdout, label)
        self._grace_period = grace_period
        self._terminate_timeout = terminate_timeout
        self._kill_timeout = kill_timeout
        self._exit_rules = ExitRules(respawn_delay, max_respawn_delay, max_respawns, stable_run_s,
                                     log=self._log, unfinished=unfinished)
        self._heartbeats = HeartbeatWatch(heartbeat_timeout, log=self._log)
        self._poll_interval = poll_interval
        self._cwd = cwd
        # Written by signal handlers and other threads; plain attribute stores are atomic, and a
        # signal handler must not take locks the interrupted main thread may hold.
        self._stop_signal: int | None = None
        self._stopping = False
        self._escalate = False
        self._wake = threading.Event()
        self._started_pids: list[int] = []
        self._readers: list[threading.Thread] = []

    # ----------------------------------------------------------------------------------- public

    @property
    def started_pids(self) -> list[int]:
        """Pids of every process started so far (respawns included), oldest first."""
        return list(self._started_pids)

    def start_standby(self, name: str) -> None:
        """Start process ``name`` if it is on standby (else nothing happens). Thread-safe."""
        self._request("start", name)

    def retire(self, name: str) -> None:
        """Stop process ``name`` like the run's stop (SIGINT, grace period, SIGTERM, SIGKILL)
        and put it on standby instead of respawning it. Thread-safe.

        :raises ValueError: for an unknown or a required process (its exit ends the run).
        """
        if name in self._by_name and self._by_name[name].spec.required:
            raise ValueError(f"{name} is required: stopping it ends the run, it cannot retire")
        self._request("retire", name)

    @property
    def stopping(self) -> bool:
        """Whether the run is ending (interrupted, or a required process exited)."""
        return self._stopping

    def states(self) -> dict[str, ProcessState]:
        """The state of every process by name, in start order. Thread-safe: a snapshot of
        attributes only the supervising thread writes."""
        return {child.spec.name: child.state() for child in self._children}

    def log(self, message: str) -> None:
        """A line of the supervisor's own (``[label] message``). Thread-safe."""
        self._log(message)

    def _request(self, action: str, name: str) -> None:
        if name not in self._by_name:
            raise ValueError(f"no process named {name!r}")
        self._requests.put((action, name))
        self._wake.set()

    def request_stop(self, signum: int = signal.SIGINT) -> None:
        """Stop the run as if ``signum`` had been received; a second call skips the grace period.

        Safe to call from any thread.
        """
        self._note_signal(signum)
        self._wake.set()

    def run(self, install_signal_handlers: bool = True) -> int:
        """Start everything, supervise, stop everything.

        :param install_signal_handlers: handle SIGINT/SIGTERM (only possible on the main thread;
            ignored elsewhere). The previous handlers are restored on return.
        :return: the run's exit code: a required process's exit status, 128 + signal number when
            interrupted, else 0 when every process exited with 0 and 1 otherwise.
        """
        previous_handlers = self._install_signal_handlers() if install_signal_handlers else {}
        result = 1
        try:
            result = self._supervise()
        finally:
            self._stopping = True
            first_signal = self._stop_signal if self._stop_signal is not None else signal.SIGINT
            self._stop_all(first_signal)
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)
            for reader in self._readers:
                reader.join(timeout=2.0)
        self._log(f"exit code {result}")
        return result

    # ------------------------------------------------------------------------------ supervision

    def _supervise(self) -> int:
        """The main loop; returns the run's exit code once the run should end."""
        for child in self._children:
            result = None if child.standby else self._start(child)
            if result is not None:
                return result
        while True:
            if self._stop_signal is not None:
                self._log(f"received {signal.Signals(self._stop_signal).name}; stopping")
                return 128 + self._stop_signal
            result = self._serve_requests()
            if result is not None:
                return result
            now = time.monotonic()
            for child in self._children:
                result = None
                if child.retire_next_at is not None and now >= child.retire_next_at:
                    self._next_retire_signal(child, now)
                if child.process is not None:
                    returncode = child.process.poll()
                    if returncode is not None:
                        result = self._handle_exit(child, returncode)
                    else:
                        self._heartbeats.check(child, now)
                elif child.restart_at is not None and now >= child.restart_at:
                    child.restart_at = None
                    result = self._start(child)
                if result is not None:
                    return result
            if all(child.finished or child.standby for child in self._children):
                failed = [child.spec.name for child in self._children
                          if child.finished and child.returncode != 0]
                failures = f"; failed: {', '.join(failed)}" if failed else ""
                self._log(f"all processes exited{failures}")
                return 1 if failed else 0
            self._wake.wait(self._poll_interval)
            self._wake.clear()

    def _serve_requests(self) -> int | None:
        """Start and retire what other threads asked for; the run's exit code when it must end."""
        while True:
            try:
                action, name = self._requests.get_nowait()
            except queue.Empty:
                return None
            child = self._by_name[name]
            if action == "start":
                if not child.standby:
                    continue  # already started: a repeated request
                child.standby = False
                child.restarts = 0
                result = self._start(child)
                if result is not None:
                    return result
            elif child.process is None:
                if not child.standby and not child.finished:
                    child.restart_at = None  # retired while waiting to be respawned
                    child.standby = True
                    self._log(f"{name} retired (it was waiting to restart)")
            elif not child.retiring:
                child.retiring = True
                child.retire_phases = [(signal.SIGINT, self._grace_period),
                                       (signal.SIGTERM, self._terminate_timeout),
                                       (signal.SIGKILL, self._kill_timeout)]
                self._next_retire_signal(child, time.monotonic())

    def _next_retire_signal(self, child: Child, now: float) -> None:
        """Send a retiring child the next signal of its stop sequence."""
        if child.process is None or not child.retire_phases:
            child.retire_next_at = None  # SIGKILL sent: only the reaping is left
            return
        signum, timeout = child.retire_phases.pop(0)
        self._log(f"retiring {child.spec.name}: sending {signal.Signals(signum).name}")
        signal_group(child.process, signum, leader_exited=False)
        child.retire_next_at = now + timeout

    def _start(self, child: Child) -> int | None:
        """Start ``child``; a failure to start counts as an exit with :data:`EXIT_CANNOT_START`.

        :return: the run's exit code when the run must end, else ``None``.
        """
        spec = child.spec
        argv = spec.argv(self._python_bin_dir)
        # A respawned process learns it is one (a simulator then draws a fresh seed stream).
        # ... that it ends with this supervisor (rl_nodes.process_settings), and where it beats.
        environment = {**os.environ, **self._environment, **dict(spec.env),
                       RESTART_VARIABLE: str(child.total_restarts),
                       variables.SUPERVISOR_PID: str(os.getpid())}
        self._heartbeats.prepare(child, environment)
        try:
            process = subprocess.Popen(
                argv,
                env=environment,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            program = argv[0] if argv else "<empty command>"
            self._log(f"cannot start {spec.name} ({program}): {error}")
            child.started_at = time.monotonic()
            return self._handle_exit(child, EXIT_CANNOT_START)
        self._started_pids.append(process.pid)
        child.process = process
        child.started_at = time.monotonic()
        assert process.stdout is not None  # stdout=PIPE above
        child.reader = self._output.start_reader(spec.name, process.stdout)
        # Keep only live readers: a long run with many respawns must not accumulate threads.
        self._readers = [reader for reader in self._readers if reader.is_alive()]
        self._readers.append(child.reader)
        self._log(f"started {spec.name} (pid {process.pid}): {' '.join(argv)}")
        return None

    def _handle_exit(self, child: Child, returncode: int) -> int | None:
        """Account for an exit: end the run, schedule a restart, or mark the child finished.

        :return: the run's exit code when the run must end, else ``None``.
        """
        spec = child.spec
        process = child.process
        child.process = None
        child.returncode = returncode
        if process is not None:
            # The group's leftovers (children the process forked) would be orphans nobody
            # supervises; the pgid is still ours because it was reaped an instant ago.
            signal_group(process, signal.SIGKILL, leader_exited=True)
            if child.reader is not None:
                child.reader.join(timeout=1.0)  # print its last lines before the exit message
        words = describe_exit(returncode)
        if child.retiring:
            child.retiring, child.retire_next_at, child.retire_phases = False, None, []
            child.standby, child.restarts = True, 0
            self._log(f"{spec.name} retired: it {words}")
            return None
        return self._exit_rules.after_exit(child, returncode, words, children=self._children,
                                           stopping=self._stopping)

    # ------------------------------------------------------------------------------ stopping

    def _stop_all(self, first_signal: int) -> None:
        """Stop every running child: ``first_signal``, grace period, SIGTERM, SIGKILL."""
        for child in self._children:
            child.restart_at = child.retire_next_at = None
        phases: list[tuple[int, float]] = [(first_signal, self._grace_period)]
        if first_signal != signal.SIGTERM:
            phases.append((signal.SIGTERM, self._terminate_timeout))
        phases.append((signal.SIGKILL, self._kill_timeout))
        stopping = [child for child in self._children if child.process is not None]
        for signum, timeout in phases:
            alive = [child for child in stopping if child.running()]
            if not alive:
                break
            names = ", ".join(child.spec.name for child in alive)
            self._log(f"sending {signal.Signals(signum).name} to {names}")
            self._escalate = False
            for child in alive:
                assert child.process is not None
                signal_group(child.process, signum, leader_exited=False)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and not self._escalate:
                if not any(child.running() for child in alive):
                    break
                time.sleep(min(self._poll_interval, 0.02))
        for child in stopping:
            process = child.process
            if process is None:
                continue
            returncode = process.poll()
            # Sweep group members that outlived their leader during the stop sequence.
            signal_group(process, signal.SIGKILL, leader_exited=returncode is not None)
            if returncode is None:
                try:
                    returncode = process.wait(timeout=self._kill_timeout)
                except subprocess.TimeoutExpired:
                    self._log(f"{child.spec.name} (pid {process.pid}) did not die after SIGKILL")
                    continue
            child.returncode = returncode
            child.process = None
            if child.reader is not None:
                child.reader.join(timeout=1.0)
            self._log(f"{child.spec.name} {describe_exit(returncode)}")

    # ------------------------------------------------------------------------------ signals & io

    def _note_signal(self, signum: int) -> None:
        """Record a stop request; a repeated one cuts the current grace period short."""
        if self._stop_signal is None:
            self._stop_signal = signum
        else:
            self._escalate = True

    def _install_signal_handlers(self) -> dict[int, Any]:
        """Route SIGINT and SIGTERM to :meth:`_note_signal`; returns the previous handlers."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum: int, frame: FrameType | None) -> None:
            self._note_signal(signum)

        previous: dict[int, Any] = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handler)
        return previous

    def _log(self, message: str) -> None:
        """A line of the supervisor's own."""
        self._output.log(message)

