"""CPU lists and the per-process settings (affinity, torch threads) a deployment plan hands out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rl_core.learning.cpus import (
    CPUS_VARIABLE,
    LEARNER_CPUS_VARIABLE,
    MAX_CPU,
    TORCH_THREADS_VARIABLE,
    available_cpus,
    format_cpu_list,
    parse_cpu_list,
)
from rl_nodes.process_settings import (
    apply_process_settings,
    end_with_supervisor,
    learner_cpus,
    pin_current_thread,
)

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or not Path("/proc/self/task").is_dir(),
    reason="needs Linux thread affinity and procfs",
)


def allowed_list(thread_id: int) -> str:
    """``Cpus_allowed_list`` of one thread of this process, as the kernel reports it."""
    for line in Path(f"/proc/self/task/{thread_id}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no Cpus_allowed_list for thread {thread_id}")


# ---------------------------------------------------------------------------------- CPU lists


@pytest.mark.parametrize(
    ("text", "cpus", "canonical"),
    [
        ("0", {0}, "0"),
        ("0-1", {0, 1}, "0-1"),
        ("0,2", {0, 2}, "0,2"),
        (" 3 , 0 - 1 ,5", {0, 1, 3, 5}, "0-1,3,5"),
        ("1-3,2", {1, 2, 3}, "1-3"),
    ],
)
def test_cpu_lists_parse_and_format_like_the_kernel(text: str, cpus: set[int], canonical: str) -> None:
    assert parse_cpu_list(text) == frozenset(cpus)
    assert format_cpu_list(cpus) == canonical
    assert parse_cpu_list(canonical) == frozenset(cpus)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "is not a CPU number"),
        ("a", "'a' is not a CPU number"),
        ("-1", "is not a CPU number"),
        ("0,,1", "is not a CPU number"),
        ("1-2-3", "is not a CPU number"),
        ("2-1", "runs backwards"),
        (f"0-{MAX_CPU + 1}", "is above"),
    ],
)
def test_bad_cpu_lists_are_rejected_with_the_syntax(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match) as error:
        parse_cpu_list(text)
    assert "'0-1'" in str(error.value)  # the message shows the valid forms


def test_empty_cpu_set_cannot_be_formatted() -> None:
    with pytest.raises(ValueError, match="empty"):
        format_cpu_list([])


def test_available_cpus_is_the_affinity() -> None:
    cpus = available_cpus()
    assert cpus and cpus <= frozenset(range(os.cpu_count() or 1))


# ---------------------------------------------------------------------------------- settings


def test_learner_cpus_reads_its_variable() -> None:
    assert learner_cpus({}) is None
    assert learner_cpus({LEARNER_CPUS_VARIABLE: ""}) is None
    assert learner_cpus({LEARNER_CPUS_VARIABLE: "1-2"}) == {1, 2}
    with pytest.raises(ValueError, match=LEARNER_CPUS_VARIABLE):
        learner_cpus({LEARNER_CPUS_VARIABLE: "one"})


@needs_affinity
@pytest.mark.parametrize(
    ("environ", "match"),
    [
        ({CPUS_VARIABLE: "x"}, f"{CPUS_VARIABLE}: bad CPU list"),
        ({CPUS_VARIABLE: str(MAX_CPU)}, f"{CPUS_VARIABLE}={MAX_CPU} asks for CPU.*available CPUs"),
        ({TORCH_THREADS_VARIABLE: "0"}, f"{TORCH_THREADS_VARIABLE}='0' must be a positive"),
        ({TORCH_THREADS_VARIABLE: "two"}, "must be a positive integer"),
        ({LEARNER_CPUS_VARIABLE: str(MAX_CPU)}, f"{LEARNER_CPUS_VARIABLE}={MAX_CPU} asks for"),
    ],
)
def test_bad_settings_name_the_variable_and_change_nothing(
    environ: dict[str, str], match: str
) -> None:
    before = os.sched_getaffinity(0)
    with pytest.raises(ValueError, match=match):
        apply_process_settings(environ)
    assert os.sched_getaffinity(0) == before


@needs_affinity
def test_learner_cpus_must_lie_within_the_process_cpus() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    environ = {CPUS_VARIABLE: str(cpus[0]), LEARNER_CPUS_VARIABLE: str(cpus[1])}
    with pytest.raises(ValueError, match="is not within"):
        apply_process_settings(environ)


@needs_affinity
def test_pin_current_thread_pins_only_that_thread_and_its_children() -> None:
    process_cpus = os.sched_getaffinity(0)
    target = min(process_cpus)
    seen: dict[str, object] = {}

    def learner() -> None:
        seen["applied"] = pin_current_thread({target})
        seen["own"] = allowed_list(threading.get_native_id())
        seen["main"] = allowed_list(threading.main_thread().native_id or 0)
        child = threading.Thread(target=lambda: seen.update(child=os.sched_getaffinity(0)))
        child.start()
        child.join()

    thread = threading.Thread(target=learner)
    thread.start()
    thread.join(timeout=10)
    assert seen["applied"] == {target}
    assert seen["own"] == str(target)
    assert seen["main"] == format_cpu_list(process_cpus)
    assert seen["child"] == {target}
    assert os.sched_getaffinity(0) == process_cpus
    assert pin_current_thread(None) is None


@needs_affinity
def test_pin_current_thread_rejects_cpus_it_cannot_use() -> None:
    with pytest.raises(ValueError, match="available CPUs"):
        pin_current_thread({MAX_CPU})
    with pytest.raises(ValueError, match="empty"):
        pin_current_thread(set())


_PROBE = textwrap.dedent(
    """
    import json, os, threading
    from rl_nodes.process_settings import apply_process_settings

    def status(thread_id):
        with open(f"/proc/self/task/{thread_id}/status") as lines:
            for line in lines:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()

    release = threading.Event()
    early = threading.Thread(target=release.wait)  # a thread that exists before the settings
    early.start()
    settings = apply_process_settings()
    import torch
    result = {
        "affinity": sorted(os.sched_getaffinity(0)),
        "early_thread": status(early.native_id),
        "torch_threads": torch.get_num_threads(),
        "settings": [sorted(settings.cpus or []), settings.torch_threads,
                     sorted(settings.learner_cpus or [])],
    }
    release.set()
    early.join()
    print(json.dumps(result))
    """
)


@needs_affinity
def test_apply_process_settings_pins_a_real_process() -> None:
    target = min(os.sched_getaffinity(0))
    environ = {
        **os.environ,
        CPUS_VARIABLE: str(target),
        TORCH_THREADS_VARIABLE: "2",
        LEARNER_CPUS_VARIABLE: str(target),
    }
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=environ,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,  # run() kills the child when this passes
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["affinity"] == [target]
    assert result["early_thread"] == str(target)
    assert result["torch_threads"] == 2
    assert result["settings"] == [[target], 2, [target]]


_SUPERVISOR = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]],
                         env={**os.environ, "RL_ROS2_SUPERVISOR_PID": str(os.getpid())})
print(child.pid, flush=True)
time.sleep(120)
"""
_NODE = """
import time
from rl_nodes.process_settings import end_with_supervisor
assert end_with_supervisor()
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its new parent to reap it does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_node_process_ends_with_its_supervisor() -> None:
    """Issue 19: a SIGKILLed supervisor leaves no node running beside a relaunch's."""
    supervisor = subprocess.Popen([sys.executable, "-c", _SUPERVISOR, _NODE], cwd=REPO_ROOT,
                                  stdout=subprocess.PIPE, text=True)
    assert supervisor.stdout is not None
    node = int(supervisor.stdout.readline())
    try:
        time.sleep(1.0)  # the node has made its request
        assert _alive(node), "the node runs while its supervisor does"
        supervisor.kill()
        supervisor.wait(timeout=10)
        deadline = time.monotonic() + 10.0
        while _alive(node) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(node):
            pytest.fail(f"node {node} outlived its SIGKILLed supervisor")
    finally:
        try:
            os.kill(node, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_without_a_supervisor_nothing_is_asked() -> None:
    assert not end_with_supervisor({})
    assert not end_with_supervisor({"RL_ROS2_SUPERVISOR_PID": "not a pid"})
