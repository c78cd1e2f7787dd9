"""One process a supervisor runs: what it must offer, and how it is signalled and stopped.

:class:`SupervisedProcess` is what :class:`rl_bringup.run.supervisor.Supervisor` needs to know of
a process: :class:`rl_bringup.plan.deployment.ProcessSpec` offers it, and :class:`Command` for a
plain command line. Signals go only to the process groups a supervisor started
(:func:`signal_group`: each child runs in a session of its own, so its group id is its pid),
never by name. :func:`stop_process` is the supervisor's stop for one process started elsewhere
(``rl-bringup compare`` and the benchmarks stop their runs with it); it lists the descendants it
must kill with psutil, imported only there. :func:`describe_exit` puts a return code into words.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

# Exit code when a process cannot be started at all (the shell's "command not found").
EXIT_CANNOT_START = 127


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
