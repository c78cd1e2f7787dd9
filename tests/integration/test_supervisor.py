"""Integration tests of rl_bringup.run.supervisor with tiny ``python -c`` processes.

Every wait has a deadline (conditions are polled; child scripts carry their own deadlines and
fail loudly), and every process a test starts is killed by PID in a ``finally``/fixture
teardown, after checking it is still the process we started.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from rl_bringup.run.processes import EXIT_CANNOT_START, Command
from rl_bringup.run.supervision import RETIRING, RUNNING, STANDBY, ProcessState
from rl_bringup.run.supervisor import Supervisor
from rl_core.monitoring.heartbeat import EXIT_RESTART

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 30.0
# -S: the children need only the standard library; skipping site-packages keeps them fast.
PYTHON = [sys.executable, "-S", "-u", "-c"]

# Child scripts. Each takes its inputs from sys.argv and gives up after its own deadline, so a
# broken supervisor fails the test instead of hanging it.
SLEEPER = textwrap.dedent(
    """
    import os, signal, sys, time
    if len(sys.argv) > 2 and sys.argv[2] == "stubborn":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        def stop(signum, frame):
            print("stopping on", signal.Signals(signum).name, flush=True)
            sys.exit(0)
        signal.signal(signal.SIGINT, stop)
    print("ready pid=%d" % os.getpid(), flush=True)
    if len(sys.argv) > 1 and sys.argv[1] != "-":
        open(sys.argv[1], "w").close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(99)
    """
)
WAIT_FOR_FILE_THEN_EXIT = textwrap.dedent(
    """
    import os, sys, time
    path, lines, code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if os.path.exists(path) and len(open(path).read().splitlines()) >= lines:
            print("condition met, exiting with", code, flush=True)
            sys.exit(code)
        time.sleep(0.02)
    print("gave up waiting for", path, flush=True)
    sys.exit(42)
    """
)
CRASH_UNTIL = textwrap.dedent(
    """
    import sys, time
    path, crashes = sys.argv[1], int(sys.argv[2])
    with open(path, "a") as counter:
        counter.write("start\\n")
    starts = len(open(path).read().splitlines())
    if starts <= crashes:
        print("crash", starts, flush=True)
        sys.exit(3)
    print("stable after", starts, "starts", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)
    """
)
# A learner-like process: logs each start with the restart count it was given, crashes (exit 3)
# on its first start and exits cleanly (training complete) on the next one.
CRASH_ONCE_THEN_FINISH = textwrap.dedent(
    """
    import os, sys
    path = sys.argv[1]
    with open(path, "a") as starts:
        starts.write(os.environ.get("RL_ROS2_RESTART_COUNT", "unset") + "\\n")
    starts = len(open(path).read().splitlines())
    print("start", starts, "restart count", os.environ.get("RL_ROS2_RESTART_COUNT"), flush=True)
    sys.exit(3 if starts == 1 else 0)
    """
)
PARENT_OF_GRANDCHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"])
    print("grandchild pid=%d" % child.pid, flush=True)
    open(sys.argv[1], "w").close()
    time.sleep(60)
    """
)


class LineCollector(io.TextIOBase):
    """A text stream that keeps lines and lets tests wait for one (thread-safe)."""

    def __init__(self) -> None:
        super().__init__()
        self._buffer = ""
        self._lines: list[str] = []
        self._condition = threading.Condition()

    def write(self, text: str) -> int:
        with self._condition:
            self._buffer += text
            *complete, self._buffer = self._buffer.split("\n")
            self._lines.extend(complete)
            self._condition.notify_all()
        return len(text)

    @property
    def lines(self) -> list[str]:
        with self._condition:
            return list(self._lines)

    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = DEADLINE_S) -> re.Match[str]:
        """The first line matching ``pattern``, waiting for it up to ``timeout`` seconds."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                for line in self._lines:
                    match = regex.search(line)
                    if match:
                        return match
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = "\n".join(self._lines)
                    raise AssertionError(f"no line matching {pattern!r} within {timeout} s:\n{seen}")
                self._condition.wait(remaining)


def kill_processes(pids: list[int], is_ours: Callable[[psutil.Process], bool]) -> None:
    """SIGTERM, a grace period, then SIGKILL to each pid that is still one of ours."""
    processes = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE and is_ours(process):
                processes.append(process)
        except psutil.Error:
            continue
    for process in processes:
        try:
            process.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(processes, timeout=2.0)
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=2.0)


def gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether ``pid`` no longer runs (absent or a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


@pytest.fixture
def supervisors() -> Iterator[list[Supervisor]]:
    """Supervisors made by a test; every process they started is killed afterwards."""
    made: list[Supervisor] = []
    yield made
    own_pid = os.getpid()
    for supervisor in made:
        supervisor.request_stop()
        kill_processes(supervisor.started_pids, lambda process: process.ppid() == own_pid)


@pytest.fixture
def extra_pids() -> Iterator[list[int]]:
    """Pids of grandchildren a test learns about; killed afterwards if still ours (by cmdline)."""
    pids: list[int] = []
    yield pids
    kill_processes(pids, lambda process: bool(process.cmdline()) and process.cmdline()[0] == sys.executable)


def make_supervisor(
    made: list[Supervisor], commands: list[Command], **options: Any
) -> tuple[Supervisor, LineCollector]:
    """A supervisor writing to a collector, with short timeouts for tests."""
    output = LineCollector()
    defaults: dict[str, Any] = {
        "grace_period": 3.0,
        "terminate_timeout": 2.0,
        "kill_timeout": 2.0,
        "respawn_delay": 0.05,
        "poll_interval": 0.02,
    }
    defaults.update(options)
    supervisor = Supervisor(commands, output=output, **defaults)  # type: ignore[arg-type]
    made.append(supervisor)
    return supervisor, output


def start_on_thread(supervisor: Supervisor) -> tuple[threading.Thread, list[int]]:
    """Run ``supervisor`` on a daemon thread; its exit code lands in the returned list."""
    result: list[int] = []

    def target() -> None:
        result.append(supervisor.run(install_signal_handlers=False))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


def run_with_deadline(supervisor: Supervisor, timeout: float = DEADLINE_S) -> int:
    """Run ``supervisor`` on a thread; fail (after stopping it) if it outlives ``timeout``."""
    thread, result = start_on_thread(supervisor)
    thread.join(timeout)
    if thread.is_alive():
        supervisor.request_stop()
        supervisor.request_stop()
        thread.join(10.0)
        pytest.fail(f"supervisor still running after {timeout} s")
    return result[0]


def test_output_lines_are_prefixed_with_the_process_name(supervisors: list[Supervisor]) -> None:
    commands = [
        Command("alpha", PYTHON + ["print('first'); print('second')"]),
        Command("beta", PYTHON + ["import sys; print('to stderr', file=sys.stderr)"]),
    ]
    supervisor, output = make_supervisor(supervisors, commands)
    assert run_with_deadline(supervisor) == 0
    lines = output.lines
    assert lines.index("[alpha] first") < lines.index("[alpha] second")
    assert "[beta] to stderr" in lines
    assert any(line.startswith("[rl-bringup] started alpha (pid ") for line in lines)


def test_crashing_process_is_respawned(supervisors: list[Supervisor], tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    commands = [
        Command("crasher", PYTHON + [CRASH_UNTIL, str(counter), "2"], respawn=True),
        # Required: ends the run (with 0) once the crasher has started three times.
        Command("watcher", PYTHON + [WAIT_FOR_FILE_THEN_EXIT, str(counter), "3", "0"], required=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands)
    assert run_with_deadline(supervisor) == 0
    assert counter.read_text().splitlines() == ["start"] * 3
    assert output.lines.count("[crasher] crash 1") == 1
    assert "[crasher] crash 2" in output.lines
    assert "[crasher] stable after 3 starts" in output.text()
    assert len(re.findall(r"crasher exited with code 3; restarting in", output.text())) == 2
    assert len(supervisor.started_pids) == 4  # three crasher starts + the watcher
    assert all(gone(pid) for pid in supervisor.started_pids)


def test_respawn_is_bounded(supervisors: list[Supervisor]) -> None:
    commands = [Command("always_crashes", PYTHON + ["import sys; sys.exit(5)"], respawn=True)]
    supervisor, output = make_supervisor(supervisors, commands, max_respawns=2, respawn_delay=0.01)
    assert run_with_deadline(supervisor) == 1  # nothing required; a process failed
    assert len(supervisor.started_pids) == 3
    assert "giving up after 2 restarts" in output.text()


def test_restarts_a_process_asks_for_never_give_it_up(supervisors: list[Supervisor],
                                                     tmp_path: Path) -> None:
    """Exit code EXIT_RESTART (a lifecycle shutdown, which any peer on the domain may call) is
    restarted however often it comes, while crashes are still given up after ``max_respawns``:
    before, five shutdowns in a row ended the run (issue 41). About 1 s."""
    counter = tmp_path / "starts"
    asks = textwrap.dedent(f"""
        import sys
        with open(sys.argv[1], "a") as counter:
            counter.write("start\\n")
        starts = len(open(sys.argv[1]).read().splitlines())
        sys.exit({EXIT_RESTART} if starts <= 4 else 0)
        """)
    commands = [Command("learner", PYTHON + [asks, str(counter)], respawn=True, required=True)]
    supervisor, output = make_supervisor(supervisors, commands, max_respawns=1,
                                         respawn_delay=0.01)
    assert run_with_deadline(supervisor) == 0
    assert counter.read_text().splitlines() == ["start"] * 5
    assert len(re.findall(rf"learner exited with code {EXIT_RESTART}; restarting in .* "
                          r"\(asked to be restarted\)", output.text())) == 4
    assert "giving up" not in output.text()


def test_required_failure_stops_everything_with_its_exit_code(
    supervisors: list[Supervisor], tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    commands = [
        Command("worker", PYTHON + [SLEEPER, str(ready)], respawn=True),
        Command("trainer", PYTHON + [WAIT_FOR_FILE_THEN_EXIT, str(ready), "0", "7"], required=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands)
    assert run_with_deadline(supervisor) == 7
    assert "trainer exited with code 7; it is required, stopping everything" in output.text()
    worker_pid = int(output.wait_for(r"^\[worker\] ready pid=(\d+)").group(1))
    assert gone(worker_pid)
    assert "[worker] stopping on SIGINT" in output.lines  # stopped, not respawned


def test_required_success_stops_the_rest_and_exits_zero(
    supervisors: list[Supervisor], tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    commands = [
        Command("simulator", PYTHON + [SLEEPER, str(ready)], respawn=True),
        Command("trainer", PYTHON + [WAIT_FOR_FILE_THEN_EXIT, str(ready), "0", "0"], required=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands)
    assert run_with_deadline(supervisor) == 0
    assert "[simulator] stopping on SIGINT" in output.lines
    assert "simulator exited with code 0" in output.text()
    assert all(gone(pid) for pid in supervisor.started_pids)


def test_a_required_clean_exit_before_the_run_finished_ends_it_with_the_reason(
    supervisors: list[Supervisor], tmp_path: Path
) -> None:
    """A required container stopped from outside exits 0 (rclpy's clean shutdown) although the
    run did not finish: the run ends with 1 and says why, not with 0 and no result."""
    ready = tmp_path / "ready"
    commands = [
        Command("simulator", PYTHON + [SLEEPER, str(ready)], respawn=True),
        Command("trainer", PYTHON + [WAIT_FOR_FILE_THEN_EXIT, str(ready), "0", "0"], required=True),
    ]
    supervisor, output = make_supervisor(
        supervisors, commands,
        unfinished=lambda name: "no result.json" if name == "trainer" else None)
    assert run_with_deadline(supervisor) == 1
    assert ("trainer exited with code 0 before the run finished (no result.json); it is "
            "required, stopping everything") in output.text()


def test_required_respawned_process_is_restarted_after_a_crash_and_ends_the_run_on_a_clean_exit(
    supervisors: list[Supervisor], tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    commands = [
        Command("simulator", PYTHON + [SLEEPER, "-"], respawn=True),
        Command("learner", PYTHON + [CRASH_ONCE_THEN_FINISH, str(starts)], respawn=True,
                required=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands)
    assert run_with_deadline(supervisor) == 0
    # The first start sees 0, the respawned one 1.
    assert starts.read_text().splitlines() == ["0", "1"]
    text = output.text()
    assert "learner exited with code 3; restarting in" in text
    assert "learner exited with code 3; it is required" not in text  # a crash does not end the run
    assert "learner exited with code 0; it is required, stopping everything" in text
    # The rest is stopped, not respawned: simulator + two learner starts.
    assert len(supervisor.started_pids) == 3
    assert all(gone(pid) for pid in supervisor.started_pids)


def test_required_respawned_process_that_keeps_crashing_ends_the_run_when_given_up(
    supervisors: list[Supervisor],
) -> None:
    commands = [Command("learner", PYTHON + ["import sys; sys.exit(4)"], respawn=True, required=True)]
    supervisor, output = make_supervisor(supervisors, commands, max_respawns=1, respawn_delay=0.01)
    assert run_with_deadline(supervisor) == 4
    assert len(supervisor.started_pids) == 2
    assert "learner exited with code 4; giving up after 1 restarts" in output.text()


def test_stubborn_process_gets_sigterm_then_sigkill(supervisors: list[Supervisor], tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    commands = [
        Command("stubborn", PYTHON + [SLEEPER, str(ready), "stubborn"]),
        Command("trainer", PYTHON + [WAIT_FOR_FILE_THEN_EXIT, str(ready), "0", "0"], required=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands, grace_period=0.3, terminate_timeout=0.3)
    assert run_with_deadline(supervisor) == 0
    text = output.text()
    assert text.index("sending SIGINT to stubborn") < text.index("sending SIGTERM to stubborn")
    assert text.index("sending SIGTERM to stubborn") < text.index("sending SIGKILL to stubborn")
    assert "stubborn was killed by SIGKILL" in text
    assert all(gone(pid) for pid in supervisor.started_pids)


def test_grandchildren_in_the_process_group_are_stopped(
    supervisors: list[Supervisor], extra_pids: list[int], tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    commands = [
        Command("parent", PYTHON + [PARENT_OF_GRANDCHILD, str(ready)]),
        Command("trainer", PYTHON + [WAIT_FOR_FILE_THEN_EXIT, str(ready), "0", "0"], required=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands)
    try:
        assert run_with_deadline(supervisor) == 0
        grandchild = int(output.wait_for(r"^\[parent\] grandchild pid=(\d+)").group(1))
        extra_pids.append(grandchild)
        assert gone(grandchild), "the grandchild shares the parent's process group and must be stopped"
    finally:
        for match in re.finditer(r"grandchild pid=(\d+)", output.text()):
            extra_pids.append(int(match.group(1)))


def test_a_required_process_that_cannot_start_fails_the_run(
    supervisors: list[Supervisor], tmp_path: Path
) -> None:
    commands = [
        Command("sleeper", PYTHON + [SLEEPER, "-"]),
        Command("missing", [str(tmp_path / "no-such-program")], required=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands)
    assert run_with_deadline(supervisor) == EXIT_CANNOT_START
    assert "cannot start missing" in output.text()
    assert all(gone(pid) for pid in supervisor.started_pids)


def test_sigint_to_the_supervisor_is_forwarded_and_children_are_gone(extra_pids: list[int]) -> None:
    """The supervisor as its own process (as `rl-bringup launch` runs), interrupted like Ctrl-C."""
    script = textwrap.dedent(
        """
        import json, sys
        from rl_bringup.run.processes import Command
        from rl_bringup.run.supervisor import Supervisor
        python, sleeper = json.loads(sys.argv[1])
        commands = [
            Command("obedient", python + [sleeper, "-"]),
            Command("stubborn", python + [sleeper, "-", "stubborn"]),
        ]
        sys.exit(Supervisor(commands, grace_period=1.0, terminate_timeout=1.0, poll_interval=0.02).run())
        """
    )
    python_path = [str(REPO_ROOT / "src" / "rl_bringup"), os.environ.get("PYTHONPATH", "")]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, python_path))}
    supervisor_process = subprocess.Popen(
        [sys.executable, "-u", "-c", script, json.dumps([PYTHON, SLEEPER])],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=environment,
        start_new_session=True,
    )
    output = LineCollector()
    assert supervisor_process.stdout is not None
    stdout = supervisor_process.stdout

    def copy_output() -> None:
        for line in stdout:
            output.write(line.decode(errors="replace"))

    reader = threading.Thread(target=copy_output, daemon=True)
    reader.start()
    child_pids: list[int] = []
    try:
        for name in ("obedient", "stubborn"):
            child_pids.append(int(output.wait_for(rf"^\[{name}\] ready pid=(\d+)").group(1)))
        extra_pids.extend(child_pids)
        supervisor_process.send_signal(signal.SIGINT)
        assert supervisor_process.wait(timeout=DEADLINE_S) == 128 + signal.SIGINT
        reader.join(5.0)
        text = output.text()
        assert "received SIGINT; stopping" in text
        assert "[obedient] stopping on SIGINT" in output.lines
        assert "sending SIGKILL to stubborn" in text
        assert all(gone(pid) for pid in child_pids), f"children still running: {child_pids}"
    finally:
        if supervisor_process.poll() is None:
            supervisor_process.kill()  # by PID: the Popen handle of the process started above
            supervisor_process.wait(5.0)
        if supervisor_process.stdout is not None:
            supervisor_process.stdout.close()


def test_second_stop_request_skips_the_grace_period(supervisors: list[Supervisor]) -> None:
    commands = [Command("stubborn", PYTHON + [SLEEPER, "-", "stubborn"])]
    supervisor, output = make_supervisor(supervisors, commands, grace_period=60.0, terminate_timeout=60.0)
    thread, result = start_on_thread(supervisor)
    try:
        output.wait_for(r"^\[stubborn\] ready pid=")
        supervisor.request_stop()
        output.wait_for(r"sending SIGINT to stubborn")
        supervisor.request_stop()
        output.wait_for(r"sending SIGTERM to stubborn")
        supervisor.request_stop()
        thread.join(DEADLINE_S)
        assert not thread.is_alive()
        assert result == [128 + signal.SIGINT]
        assert "stubborn was killed by SIGKILL" in output.text()
    finally:
        if thread.is_alive():
            supervisor.request_stop()


# ------------------------------------------------------------------ standby and retirement


def wait_for_state(supervisor: Supervisor, name: str, state: str,
                   timeout: float = DEADLINE_S) -> ProcessState:
    """The state of ``name`` once it is ``state`` (fails after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        current = supervisor.states()[name]
        if current.state == state:
            return current
        if time.monotonic() >= deadline:
            pytest.fail(f"{name} still {current.state}, not {state}, after {timeout} s")
        time.sleep(0.02)


def test_standby_processes_start_on_request_and_retire_without_respawn(
    supervisors: list[Supervisor], tmp_path: Path
) -> None:
    done = tmp_path / "done"
    commands = [
        Command("robot_0", PYTHON + [SLEEPER, "-"], respawn=True),
        Command("robot_1", PYTHON + [SLEEPER, "-"], respawn=True),
        # Required: ends the run with 0 once the test writes one line to ``done``.
        Command("learner", PYTHON + [WAIT_FOR_FILE_THEN_EXIT, str(done), "1", "0"],
                required=True, respawn=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands, standby=["robot_1"])
    thread, result = start_on_thread(supervisor)
    wait_for_state(supervisor, "robot_0", RUNNING)
    assert supervisor.states()["robot_1"] == ProcessState(STANDBY, None, None)
    supervisor.start_standby("robot_1")
    first_pid = wait_for_state(supervisor, "robot_1", RUNNING).pid
    output.wait_for(rf"\[robot_1\] ready pid={first_pid}")
    supervisor.retire("robot_1")
    # SIGINT first: the process stops cleanly (exit 0) and goes back to standby, not respawned.
    retired = wait_for_state(supervisor, "robot_1", STANDBY)
    assert retired.returncode == 0 and gone(first_pid)
    output.wait_for(r"robot_1 retired: it exited with code 0")
    assert "[robot_1] stopping on SIGINT" in output.lines
    # A retired process can be started again.
    supervisor.start_standby("robot_1")
    assert wait_for_state(supervisor, "robot_1", RUNNING).pid != first_pid
    assert supervisor.states()["robot_0"].state == RUNNING
    done.write_text("finish\n")
    thread.join(DEADLINE_S)
    assert result == [0], output.text()
    assert "restarting" not in output.text()


def test_retiring_a_stubborn_process_escalates_to_sigkill(supervisors: list[Supervisor]) -> None:
    commands = [
        Command("stubborn", PYTHON + [SLEEPER, "-", "stubborn"], respawn=True),
        Command("learner", PYTHON + [SLEEPER, "-"], required=True),
    ]
    supervisor, output = make_supervisor(supervisors, commands, grace_period=0.5,
                                         terminate_timeout=0.5)
    start_on_thread(supervisor)
    pid = wait_for_state(supervisor, "stubborn", RUNNING).pid
    output.wait_for(r"\[stubborn\] ready")
    supervisor.retire("stubborn")
    assert supervisor.states()["stubborn"].state in (RUNNING, RETIRING)
    retired = wait_for_state(supervisor, "stubborn", STANDBY)
    assert retired.returncode == -signal.SIGKILL and pid is not None and gone(pid)
    text = output.text()
    assert text.index("retiring stubborn: sending SIGINT") < text.index(
        "retiring stubborn: sending SIGTERM") < text.index("retiring stubborn: sending SIGKILL")
    assert supervisor.states()["learner"].state == RUNNING


def test_retire_refuses_required_and_unknown_processes(supervisors: list[Supervisor]) -> None:
    commands = [Command("learner", PYTHON + [SLEEPER, "-"], required=True),
                Command("robot_0", PYTHON + [SLEEPER, "-"])]
    supervisor, _ = make_supervisor(supervisors, commands)
    with pytest.raises(ValueError, match="learner is required"):
        supervisor.retire("learner")
    with pytest.raises(ValueError, match="no process named 'robot_9'"):
        supervisor.start_standby("robot_9")
    with pytest.raises(ValueError, match="standby names no process: robot_9"):
        make_supervisor(supervisors, commands, standby=["robot_9"])


HANGS_ONCE = textwrap.dedent(
    """
    import os, signal, sys, time
    with open(sys.argv[1], "a") as starts:
        starts.write("start\\n")
    if open(sys.argv[1]).read().count("start") > 1:
        print("respawned", flush=True)
        sys.exit(0)
    heartbeat = os.environ["RL_ROS2_HEARTBEAT_FILE"]
    for _ in range(5):
        open(heartbeat, "a").close()
        os.utime(heartbeat)
        time.sleep(0.1)
    print("hanging", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # a hung node: alive, but its thread never turns
    """
)


def test_a_hung_process_is_killed_and_respawned(supervisors: list[Supervisor],
                                                tmp_path: Path) -> None:
    """Issue 19: a process that stops beating is restarted, not only one that exits."""
    starts = tmp_path / "starts"
    commands = [Command("stuck", PYTHON + [HANGS_ONCE, str(starts)], respawn=True, required=True),
                Command("quiet", PYTHON + ["import time; time.sleep(60)"])]  # never beats
    supervisor, output = make_supervisor(supervisors, commands, heartbeat_timeout=1.0)
    assert run_with_deadline(supervisor) == 0
    text = output.text()
    assert "[stuck] hanging" in text and "[stuck] respawned" in text
    assert re.search(r"stuck is hung: no heartbeat for \d+ s \(more than 1 s\); killing it", text)
    assert "quiet is hung" not in text  # a process that never beat is not judged
    assert starts.read_text().count("start") == 2


HANGS_WHILE_STARTING = textwrap.dedent(
    """
    import os, signal, sys, time
    with open(sys.argv[1], "a") as starts:
        starts.write("start\\n")
    run = open(sys.argv[1]).read().count("start")
    if run == 3:
        print("respawned", flush=True)
        sys.exit(0)
    if run == 2:  # hung before its first beat, as a node stopped while it restores a snapshot
        print("hanging before a beat", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    heartbeat = os.environ["RL_ROS2_HEARTBEAT_FILE"]
    for _ in range(3):
        open(heartbeat, "a").close()
        os.utime(heartbeat)
        time.sleep(0.1)
    sys.exit(1)  # a crash: respawned
    """
)


def test_a_restarted_process_that_hangs_before_its_first_beat_is_killed(
        supervisors: list[Supervisor], tmp_path: Path) -> None:
    """A process whose earlier run beat gets STARTUP_TIMEOUTS heartbeat timeouts to beat again
    (measured: a trainer SIGSTOPped between its restart and its first beat was never noticed)."""
    starts = tmp_path / "starts"
    commands = [Command("node", PYTHON + [HANGS_WHILE_STARTING, str(starts)], respawn=True,
                        required=True),
                Command("quiet", PYTHON + ["import time; time.sleep(60)"])]  # never beats
    supervisor, output = make_supervisor(supervisors, commands, heartbeat_timeout=1.0)
    assert run_with_deadline(supervisor) == 0
    text = output.text()
    assert "[node] hanging before a beat" in text and "[node] respawned" in text
    assert re.search(r"node is hung: no heartbeat since it started \d+ s ago \(more than 2 s; "
                     r"its earlier runs beat\); killing it", text), text
    assert "quiet is hung" not in text
    assert starts.read_text().count("start") == 3
