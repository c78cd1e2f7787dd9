"""Apply the deployment plan's CPU set and thread counts to this process.

The plan (``rl_bringup.plan``) passes them as environment variables (names in
:mod:`rl_core.learning.cpus`); :func:`apply_process_settings` applies them at process start, before
rclpy starts threads and before torch sizes its thread pools. Without the variables nothing is
pinned and torch runs one intra-op thread.

``os.sched_setaffinity(0, ...)`` changes only the calling *thread*, and a new thread inherits its
creator's affinity, so :func:`apply_process_settings` pins every thread that exists and the
trainer's learner thread pins itself first (:func:`pin_current_thread` with :func:`learner_cpus`);
the OpenMP workers it then starts inherit its set (docs/architecture.md, "Processes, CPUs and
threads"). This module imports no rclpy, and torch only when it applies the thread count; without
torch (the robot-side install) the thread count is left unapplied.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rl_core.learning.cpus import (
    CPUS_VARIABLE,
    LEARNER_CPUS_VARIABLE,
    TORCH_THREADS_VARIABLE,
    format_cpu_list,
    parse_cpu_list,
)
from rl_core.names.variables import SUPERVISOR_PID as SUPERVISOR_PID_VARIABLE

#: torch intra-op threads when the plan sets none: acting needs no intra-op parallelism, and idle
#: OpenMP workers spin against the other processes of a deployment on small machines.
DEFAULT_TORCH_THREADS = 1


@dataclass(frozen=True)
class ProcessSettings:
    """What :func:`apply_process_settings` applied.

    :param cpus: the CPUs the process was pinned to; ``None`` when it was left unpinned.
    :param torch_threads: the torch intra-op thread count that was set; ``None`` where torch is
        not installed.
    :param learner_cpus: the CPUs the trainer's learner thread is to pin itself to; ``None``
        when it runs on the process's CPUs.
    """

    cpus: frozenset[int] | None
    torch_threads: int | None
    learner_cpus: frozenset[int] | None


def _cpus_from(environ: Mapping[str, str], name: str) -> frozenset[int] | None:
    """The CPU set in variable ``name``; ``None`` when it is unset or empty.

    :raises ValueError: naming the variable when its value is not a CPU list.
    """
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        return parse_cpu_list(text)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def _torch_threads_from(environ: Mapping[str, str]) -> int:
    """The thread count in ``RL_ROS2_TORCH_THREADS``; :data:`DEFAULT_TORCH_THREADS` when unset.

    :raises ValueError: naming the variable when it is not a positive integer.
    """
    text = environ.get(TORCH_THREADS_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TORCH_THREADS
    try:
        threads = int(text)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{TORCH_THREADS_VARIABLE}={text!r} must be a positive integer")
    return threads


def _require_affinity_support(name: str) -> None:
    """Raise when this platform cannot pin threads (pinning was asked for by ``name``)."""
    if not hasattr(os, "sched_setaffinity"):
        raise OSError(f"{name} is set, but this platform cannot pin threads to CPUs (no "
                      f"os.sched_setaffinity); unset it or plan the run with cpus:=none")


def _check_available(cpus: frozenset[int], name: str) -> None:
    """Raise when ``cpus`` asks for a CPU the calling thread may not use.

    :raises ValueError: naming the variable ``name`` and the CPUs that are available.
    """
    available = frozenset(os.sched_getaffinity(0))
    if missing := cpus - available:
        raise ValueError(
            f"{name}={format_cpu_list(cpus)} asks for CPU {format_cpu_list(missing)}, which this "
            f"process cannot use; available CPUs: {format_cpu_list(available)}"
        )


def _pin_all_threads(cpus: frozenset[int]) -> None:
    """Pin every thread of the process, not only the caller (affinity is per thread)."""
    try:
        thread_ids = [int(name) for name in os.listdir("/proc/self/task")]
    except FileNotFoundError:  # no procfs: pin the caller; threads it starts inherit the set
        thread_ids = [0]
    for thread_id in thread_ids:
        try:
            os.sched_setaffinity(thread_id, cpus)
        except ProcessLookupError:
            continue  # the thread ended after the listing; nothing left to pin


def learner_cpus(environ: Mapping[str, str] | None = None) -> frozenset[int] | None:
    """The CPUs of the trainer's learner thread (``RL_ROS2_LEARNER_CPUS``), ``None`` when unset.

    :param environ: the environment (``os.environ`` when ``None``).
    :raises ValueError: naming the variable when its value is not a CPU list.
    """
    return _cpus_from(os.environ if environ is None else environ, LEARNER_CPUS_VARIABLE)


def pin_current_thread(cpus: Iterable[int] | None) -> frozenset[int] | None:
    """Pin the calling thread (only it, and the threads it starts later) to ``cpus``.

    Meant as the first action of the trainer's learner thread:
    ``pin_current_thread(learner_cpus())``.

    :param cpus: the CPUs; ``None`` leaves the thread as it is.
    :return: the set applied, ``None`` when nothing was done.
    :raises ValueError: when a CPU is outside the thread's current affinity or the set is empty.
    :raises OSError: on platforms without ``os.sched_setaffinity``.
    """
    if cpus is None:
        return None
    chosen = frozenset(cpus)
    if not chosen:
        raise ValueError("cannot pin a thread to an empty CPU set")
    _require_affinity_support(LEARNER_CPUS_VARIABLE)
    _check_available(chosen, "learner thread CPUs")
    os.sched_setaffinity(0, chosen)
    return chosen


def apply_process_settings(environ: Mapping[str, str] | None = None) -> ProcessSettings:
    """Apply the plan's CPU set and torch thread count to this process; call it at start.

    * ``RL_ROS2_CPUS``: every thread of the process is pinned to the set (unset: no pinning).
    * ``RL_ROS2_TORCH_THREADS``: ``torch.set_num_threads`` (unset: 1). A trainer's non-zero
      ``torch_threads`` parameter, applied later, still wins. Validated, and not applied, where
      torch is not installed.
    * ``RL_ROS2_LEARNER_CPUS``: validated (a subset of the process's CPUs) and returned; the
      learner thread applies it with :func:`pin_current_thread`.

    :param environ: the environment (``os.environ`` when ``None``).
    :return: what was applied.
    :raises ValueError: naming the variable, for malformed values or CPUs this process cannot
        use (the message lists the available ones).
    :raises OSError: when pinning is asked for on a platform that cannot pin.
    """
    environ = os.environ if environ is None else environ
    cpus = _cpus_from(environ, CPUS_VARIABLE)
    torch_threads = _torch_threads_from(environ)
    learner = _cpus_from(environ, LEARNER_CPUS_VARIABLE)
    if cpus is not None:
        _require_affinity_support(CPUS_VARIABLE)
        _check_available(cpus, CPUS_VARIABLE)
    if learner is not None:
        _require_affinity_support(LEARNER_CPUS_VARIABLE)
        # Checked before anything changes, so a bad setting leaves the process as it was.
        _check_available(learner, LEARNER_CPUS_VARIABLE)
        if cpus is not None and not learner <= cpus:
            raise ValueError(
                f"{LEARNER_CPUS_VARIABLE}={format_cpu_list(learner)} is not within "
                f"{CPUS_VARIABLE}={format_cpu_list(cpus)}"
            )
    if cpus is not None:
        _pin_all_threads(cpus)
    if importlib.util.find_spec("torch") is None:
        return ProcessSettings(cpus=cpus, torch_threads=None, learner_cpus=learner)

    import torch  # here, not at module level: the variables are validated without loading torch

    torch.set_num_threads(torch_threads)
    return ProcessSettings(cpus=cpus, torch_threads=torch_threads, learner_cpus=learner)


#: prctl(2) option: the signal this process gets when the thread that started it ends.
PR_SET_PDEATHSIG = 1


def end_with_supervisor(environ: Mapping[str, str] | None = None) -> bool:
    """Ask the kernel for SIGTERM when the supervisor that started this process dies
    (``RL_ROS2_SUPERVISOR_PID``): the node then shuts down as on Ctrl-C, checkpoints included,
    instead of living on unsupervised after a SIGKILL of the supervisor, beside the nodes of a
    relaunch. Linux only; elsewhere, or when no supervisor started the process, nothing happens.

    :return: whether the request is in place.
    """
    environ = os.environ if environ is None else environ
    supervisor = environ.get(SUPERVISOR_PID_VARIABLE, "")
    if not supervisor.isdigit() or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        return False
    if os.getppid() != int(supervisor):  # it died before the request took hold
        os.kill(os.getpid(), signal.SIGTERM)
    return True
