"""A small process supervisor: runs a deployment plan where ``ros2 launch`` is not installed.

It does what the launch front end does for this project, with the standard library only: starts
each process in its own session, prefixes its output lines with ``[name]``, forwards SIGINT and
SIGTERM, respawns crashed ``respawn`` processes with a doubling delay up to a bounded number of
restarts, ends the run when a ``required`` process exits (with that process's code), and stops
in phases (the forwarded signal, a grace period, SIGTERM, SIGKILL). ``standby`` processes wait
until :meth:`Supervisor.start_standby` and go back on :meth:`Supervisor.retire`: the elastic
robots of :mod:`rl_bringup.run.elastic` scale this way.

Signals go only to the process groups this supervisor started (:func:`signal_group`), never by
name. :func:`stop_process` is the same stop for one process started elsewhere. Processes are
anything with ``name``, ``env``, ``respawn``, ``required`` and ``argv(python_bin_dir)``:
:class:`rl_bringup.plan.deployment.ProcessSpec`, or :class:`Command` for plain command lines. Every rule in
full: docs/architecture.md, "Launch: two front ends, one plan".
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
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any, Protocol

from rl_bringup.plan.deployment import MAX_RESPAWNS, RESPAWN_DELAY_S
from rl_bringup.plan.process_spec import private_directory
from rl_core.monitoring import heartbeat
from rl_core.names import variables

# Exit code when a process cannot be started at all (the shell's "command not found").
EXIT_CANNOT_START = 127
#: How many times the process was restarted before this start (0 the first time).
RESTART_VARIABLE = variables.RESTART_COUNT


class SupervisedProcess(Protocol):
    """What the supervisor needs to know about a process (read-only, so plain attributes fit)."""

    @property
    def name(self) -> str:
        """Log prefix and identity; unique within a run."""
        ...

    @property
    def env(self) -> Mapping[str, str]:
        """Variables added to the environment of the process."""
        ...

    @property
    def respawn(self) -> bool:
        """Restart the process when it exits."""
        ...

    @property
    def required(self) -> bool:
        """End the run when the process exits."""
        ...

    def argv(self, python_bin_dir: str | os.PathLike[str] | None = None) -> list[str]:
        """The command line to start."""
        ...


@dataclass
class Command:
    """A plain command line to supervise.

    :param name: log prefix and identity of the process.
    :param command: program and arguments.
    :param env: variables added to the supervisor's environment.
    :param respawn: restart it when it exits.
    :param required: end the run when it exits.
    """

    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    respawn: bool = False
    required: bool = False

    def argv(self, python_bin_dir: str | os.PathLike[str] | None = None) -> list[str]:
        """The command line; ``python_bin_dir`` is ignored (the command is already complete)."""
        return list(self.command)


def _steps_a_robot(spec: Any) -> bool:
    """Whether a supervised process hosts a simulator node (a plan's ProcessSpec does)."""
    hosted = getattr(spec, "hosted_nodes", None)
    return hosted is not None and any(kind == "simulator" for kind, _ in hosted())


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
class _Child:
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


def exit_status(returncode: int) -> int:
    """A shell-style exit status for a child's return code (128 + N for death by signal N)."""
    return returncode if returncode >= 0 else 128 - returncode


def describe_exit(returncode: int) -> str:
    """Human words for a return code: "exited with code 3", "was killed by SIGKILL"."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"was killed by {name}"


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
        self._children = [_Child(spec=process, standby=process.name in standby)
                          for process in processes]
        self._by_name = {child.spec.name: child for child in self._children}
        self._unfinished = unfinished
        # start_standby / retire requests from other threads, served by the supervising loop.
        self._requests: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._environment = dict(environment or {})
        self._python_bin_dir = python_bin_dir
        self._output = output if output is not None else sys.stdout
        self._output_lock = threading.Lock()
        self._grace_period = grace_period
        self._terminate_timeout = terminate_timeout
        self._kill_timeout = kill_timeout
        self._respawn_delay = respawn_delay
        self._max_respawn_delay = max_respawn_delay
        self._max_respawns = max_respawns
        self._stable_run_s = stable_run_s
        self._poll_interval = poll_interval
        self._heartbeat_timeout = heartbeat_timeout
        self._heartbeat_dir = private_directory() if heartbeat_timeout > 0 else None
        self._cwd = cwd
        self._label = label
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
                        self._check_heartbeat(child, now)
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

    def _heartbeat_file(self, child: _Child) -> Path | None:
        if self._heartbeat_dir is None:
            return None
        return self._heartbeat_dir / f"heartbeat-{os.getpid()}-{child.spec.name}"

    def _check_heartbeat(self, child: _Child, now: float) -> None:
        """Kill a running child whose heartbeat stopped (it is respawned as after a crash).

        The file's time only tells whether it changed; how long it has not is measured here on
        the monotonic clock, so a step of the wall clock is no hang."""
        path = self._heartbeat_file(child)
        if path is None or child.retiring or child.process is None or child.hung:
            return
        try:
            modified = os.stat(path).st_mtime
        except OSError:  # not beating yet
            # A process whose earlier run beat is one that beats: silent for longer than
            # heartbeat.STARTUP_TIMEOUTS timeouts after it started (imports, configuration,
            # restoring snapshots), it hung before its first beat (a SIGSTOP, a deadlock).
            # A process that never beat (not an rl_nodes process) is left alone.
            allowance_s = heartbeat.STARTUP_TIMEOUTS * self._heartbeat_timeout
            if child.beats and now - child.started_at > allowance_s:
                self._kill_hung(child, f"no heartbeat since it started {now - child.started_at:.0f}"
                                f" s ago (more than {allowance_s:g} s; its earlier runs beat)")
            return
        child.beats = True
        if child.last_beat is None or child.last_beat[0] != modified:
            child.last_beat = (modified, now)
            return
        silent_s = now - child.last_beat[1]
        if silent_s > self._heartbeat_timeout:
            self._kill_hung(child, f"no heartbeat for {silent_s:.0f} s (more than "
                            f"{self._heartbeat_timeout:g} s)")

    def _kill_hung(self, child: _Child, why: str) -> None:
        """Kill a hung child; it is respawned as after a crash."""
        assert child.process is not None  # a running child is judged
        child.hung = True
        self._log(f"{child.spec.name} is hung: {why}; killing it")
        signal_group(child.process, signal.SIGKILL, leader_exited=False)

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

    def _next_retire_signal(self, child: _Child, now: float) -> None:
        """Send a retiring child the next signal of its stop sequence."""
        if child.process is None or not child.retire_phases:
            child.retire_next_at = None  # SIGKILL sent: only the reaping is left
            return
        signum, timeout = child.retire_phases.pop(0)
        self._log(f"retiring {child.spec.name}: sending {signal.Signals(signum).name}")
        signal_group(child.process, signum, leader_exited=False)
        child.retire_next_at = now + timeout

    def _start(self, child: _Child) -> int | None:
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
        heartbeat_file = self._heartbeat_file(child)
        child.hung, child.last_beat = False, None
        if heartbeat_file is not None:
            heartbeat_file.unlink(missing_ok=True)  # the last run's beats are not this run's
            environment[variables.HEARTBEAT_FILE] = str(heartbeat_file)
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
        child.reader = threading.Thread(
            target=self._pump,
            args=(spec.name, process.stdout),
            name=f"output-{spec.name}",
            daemon=True,
        )
        child.reader.start()
        # Keep only live readers: a long run with many respawns must not accumulate threads.
        self._readers = [reader for reader in self._readers if reader.is_alive()]
        self._readers.append(child.reader)
        self._log(f"started {spec.name} (pid {process.pid}): {' '.join(argv)}")
        return None

    def _handle_exit(self, child: _Child, returncode: int) -> int | None:
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
        if spec.required and (returncode == 0 or not spec.respawn):
            why = self._unfinished(spec.name) if returncode == 0 and self._unfinished else None
            if why is not None and not self._stopping:
                self._log(f"{spec.name} {words} before the run finished ({why}); it is "
                          "required, stopping everything")
                return 1
            self._log(f"{spec.name} {words}; it is required, stopping everything")
            return exit_status(returncode)
        if not spec.respawn:
            child.finished = True
            self._log(f"{spec.name} {words}")
            return None
        if time.monotonic() - child.started_at >= self._stable_run_s:
            child.restarts = child.requested_restarts = 0
        if returncode == heartbeat.EXIT_RESTART:
            # A lifecycle shutdown or cleanup, from outside or not: the process saved its state
            # and asked to be started again. Not a crash, so no count of them gives it up (a
            # peer repeating the call would otherwise end the run); they back off like crashes.
            child.requested_restarts += 1
            return self._schedule_restart(child, words, child.requested_restarts,
                                          "asked to be restarted")
        if child.restarts >= self._max_respawns:
            child.finished = True
            self._log(f"{spec.name} {words}; giving up after {self._max_respawns} restarts")
            if spec.required:
                return exit_status(returncode)
            return self._check_robots_left(returncode)
        child.restarts += 1
        return self._schedule_restart(child, words, child.restarts,
                                      f"restart {child.restarts}/{self._max_respawns}")

    def _schedule_restart(self, child: _Child, words: str, in_a_row: int, why: str) -> None:
        """Start ``child`` again after a delay that doubles with each restart ``in_a_row``."""
        delay = min(self._respawn_delay * 2 ** (in_a_row - 1), self._max_respawn_delay)
        child.total_restarts += 1
        child.restart_at = time.monotonic() + delay
        self._log(f"{child.spec.name} {words}; restarting in {delay:.1f} s ({why})")
        return None

    def _check_robots_left(self, returncode: int) -> int | None:
        """End the run (with the last robot's exit status) once every process that steps a
        robot has been given up: the learner would otherwise wait for experience forever."""
        robots = [child for child in self._children if _steps_a_robot(child.spec)]
        if not robots or not all(child.finished for child in robots):
            return None
        self._log(f"every robot process ({', '.join(child.spec.name for child in robots)}) "
                  "has been given up after repeated crashes, so no experience can come; "
                  "stopping the run (their last lines above say why)")
        return exit_status(returncode) or 1

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
            alive = [child for child in stopping if _running(child)]
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
                if not any(_running(child) for child in alive):
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

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        """Copy a child's output to ours, one prefixed line at a time, until end of file."""
        prefix = f"[{name}] "
        try:
            for raw_line in iter(stream.readline, b""):
                self._write(prefix + raw_line.decode("utf-8", errors="replace").rstrip("\r\n"))
        except (OSError, ValueError):
            pass  # the pipe closed under us while stopping; nothing left to copy
        finally:
            stream.close()

    def _log(self, message: str) -> None:
        """A line of the supervisor's own."""
        self._write(f"[{self._label}] {message}")

    def _write(self, line: str) -> None:
        """Write one whole line; the lock keeps lines of different children from interleaving."""
        with self._output_lock:
            try:
                self._output.write(line + "\n")
                self._output.flush()
            except (OSError, ValueError):
                pass  # our own output is gone (closed pipe); keep supervising regardless


def _running(child: _Child) -> bool:
    """Whether the child's current process is still running (not yet exited)."""
    return child.process is not None and child.process.poll() is None


def signal_group(process: subprocess.Popen[bytes], signum: int, *, leader_exited: bool) -> None:
    """Send ``signum`` to the process group of a process this supervisor started.

    The group id is the pid returned by Popen (``start_new_session``). When the leader still
    runs but moved itself to another group, fall back to the pid alone.

    :param process: the started process.
    :param signum: the signal.
    :param leader_exited: the leader was reaped; only leftover members can receive the signal.
    """
    try:
        os.killpg(process.pid, signum)
        return
    except ProcessLookupError:
        pass  # the whole group is gone
    except PermissionError:
        pass  # a member changed credentials; fall back to the leader
    if not leader_exited and process.poll() is None:
        try:
            process.send_signal(signum)
        except ProcessLookupError:
            pass


def stop_process(process: subprocess.Popen[bytes], grace_s: float, *,
                 first_signal: int = signal.SIGINT, kill_timeout_s: float = 10.0) -> None:
    """Stop one process the caller started in a session of its own, and everything it started.

    ``first_signal`` goes to its process group; after ``grace_s`` without an exit, SIGKILL goes
    to the group and to every descendant. Descendants are listed by PID (psutil) before that
    SIGKILL: a :class:`Supervisor` starts each child in a session of its own, which the group
    signal does not reach, and once the supervisor is dead they are orphans. A
    ``KeyboardInterrupt`` during the grace period (a second Ctrl-C) cuts it short and is raised
    again once the process is killed.

    :param process: the started process (``start_new_session=True``).
    :param grace_s: seconds to wait for an exit after ``first_signal``.
    :param first_signal: the signal that asks for a clean shutdown.
    :param kill_timeout_s: seconds to wait for the kernel to reap after SIGKILL.
    """
    if process.poll() is not None:
        return
    interrupted = False
    try:
        signal_group(process, first_signal, leader_exited=False)
        process.wait(timeout=grace_s)
        return
    except subprocess.TimeoutExpired:
        pass
    except KeyboardInterrupt:
        interrupted = True
    import psutil  # noqa: PLC0415 - only this fallback needs it; the Supervisor does not

    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    signal_group(process, signal.SIGKILL, leader_exited=process.poll() is not None)
    for descendant in descendants:
        try:
            descendant.kill()  # psutil checks the PID still belongs to the process it listed
        except psutil.NoSuchProcess:
            pass
    process.wait(timeout=kill_timeout_s)
    if interrupted:
        raise KeyboardInterrupt
