"""A second DDS participant against a live learner (issue 41, items 5 and 8): what anyone on the
domain can call or publish must not stall the run for good or reach into the process' secrets.

One supervised learner container (replay buffer and trainer, no robots, so no gradient steps:
cheap on a shared 2-core machine) serves the module, started the way rl-bringup starts it, with
remote composition switched on so that its refusals can be tested. The tests run in file order;
the last one restarts the learner. The attacker is a plain rclpy participant in this process.
Starting the learner costs about 7 s once (measured on the shared 2-core machine); the module
about 35 s in all.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import rclpy
import yaml
from composition_interfaces.srv import ListNodes, LoadNode, UnloadNode
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from rl_bringup.run.processes import Command
from rl_bringup.run.supervisor import Supervisor
from rl_nodes import graph
from rl_nodes.lifecycle import EXIT_RESTART
from tests.processes import REPO, Child
from tests.service_calls import first_answer

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent
CONFIG = REPO / "config" / "cartpole.yaml"
START_TIMEOUT_S = 90.0
PROGRESS = re.compile(r"^\[learner\] .*\bsteps \d+/\d+ \|")


class Lines(io.TextIOBase):
    """The supervisor's output, kept line by line; tests wait for a line with a deadline."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            *complete, self._partial = (self._partial + text).split("\n")
            self.lines.extend(complete)
        return len(text)

    def count(self, pattern: re.Pattern[str], start: int = 0) -> int:
        with self._lock:
            return sum(bool(pattern.search(line)) for line in self.lines[start:])

    def wait_for(self, pattern: re.Pattern[str], timeout_s: float, start: int = 0,
                 times: int = 1) -> None:
        deadline = time.monotonic() + timeout_s
        while self.count(pattern, start) < times:
            assert time.monotonic() < deadline, (
                f"{times} line(s) matching {pattern.pattern!r} did not come in {timeout_s:g} s:\n"
                + "\n".join(self.lines[-60:]))
            time.sleep(0.05)


class Attacker:
    """A second rclpy participant on the learner's domain."""

    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
        self.node = rclpy.create_node("attacker", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin(self, future: Any, seconds: float) -> None:
        self.executor.spin_until_future_complete(future, timeout_sec=seconds)

    def spin_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, f"no {what} in {timeout_s:g} s"
            self.executor.spin_once(timeout_sec=0.1)

    def client(self, srv_type: type, name: str, timeout_s: float = START_TIMEOUT_S) -> Any:
        client = self.node.create_client(srv_type, name)
        assert client.wait_for_service(timeout_sec=timeout_s), f"{name} never appeared"
        return client

    def ask(self, srv_type: type, name: str, request: Any) -> Any:
        return first_answer(self.client(srv_type, name), request, self.spin)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture(scope="module")
def attacker() -> Iterator[Attacker]:
    made = Attacker()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def learner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Supervisor, Lines]]:
    """The supervised learner container, its first progress line out; stopped by PID after."""
    directory = tmp_path_factory.mktemp("learner")
    overrides = directory / "overrides.yaml"
    never = 10**9  # no robots: nothing to learn from; the budget is never met
    overrides.write_text(yaml.safe_dump({
        "/**/replay_buffer": {"ros__parameters": {"total_env_steps": never,
                                                  "output_dir": str(directory / "run")}},
        "/**/trainer": {"ros__parameters": {"output_dir": str(directory / "run")}}}))
    command = Command("learner", [
        str(BIN / "container"), "--remote-composition", "--node", "replay_buffer@/",
        "--node", "trainer@/", "--ros-args", "--params-file", str(CONFIG),
        "--params-file", str(overrides)], respawn=True, required=True)
    output = Lines()
    supervisor = Supervisor([command], output=output, grace_period=10.0, respawn_delay=0.5,
                            label="supervisor")
    thread = threading.Thread(target=supervisor.run, kwargs={"install_signal_handlers": False},
                              daemon=True)
    thread.start()
    try:
        output.wait_for(PROGRESS, START_TIMEOUT_S)
        yield supervisor, output
    finally:
        supervisor.request_stop()
        thread.join(30.0)
        for pid in supervisor.started_pids:  # what a stuck stop left behind: ours, by PID
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).ppid() == os.getpid():
                    os.kill(pid, signal.SIGKILL)


def diagnostics(statuses: list[DiagnosticStatus]) -> DiagnosticArray:
    return DiagnosticArray(status=statuses)


def forged(hardware_id: str, rate: str) -> DiagnosticStatus:
    return DiagnosticStatus(name=f"{hardware_id}/simulator", hardware_id=hardware_id,
                            values=[KeyValue(key=graph.INTERVENTION_RATE_KEY, value=rate)])


def test_forged_diagnostics_neither_grow_the_trainers_table_nor_stop_its_progress_lines(
        learner: tuple[Supervisor, Lines], attacker: Attacker) -> None:
    """A flood of robots that do not exist and one intervention rate that is no number: the
    trainer keeps at most its bound, counts what it dropped and skipped, and its progress line
    still comes every 2 s (before, float() raised in its timer and no line came again).
    About 7 s (three progress periods)."""
    _, output = learner
    trainer_values: dict[str, str] = {}

    def on_diagnostics(message: DiagnosticArray) -> None:
        for status in message.status:
            if status.name == "/trainer":
                trainer_values.update({item.key: item.value for item in status.values})

    attacker.node.create_subscription(DiagnosticArray, graph.DIAGNOSTICS.name, on_diagnostics,
                                      graph.DIAGNOSTICS.qos.profile())
    publisher = attacker.node.create_publisher(DiagnosticArray, graph.DIAGNOSTICS.name,
                                               graph.DIAGNOSTICS.qos.profile())
    # Our own subscription counts too: the trainer's reader is the second.
    attacker.spin_until(lambda: publisher.get_subscription_count() >= 2, 30.0,
                        "/diagnostics reader in the learner")
    before = len(output.lines)
    publisher.publish(diagnostics([forged("/robot_0", "not a number"),
                                   *(forged(f"/robot_{1000 + k}", "0.5") for k in range(500))]))
    output.wait_for(PROGRESS, 15.0, start=before, times=3)
    attacker.spin_until(lambda: int(trainer_values.get("robot figures malformed", 0)) >= 1
                        and int(trainer_values.get("robot figures dropped", 0)) >= 500 - 128,
                        15.0, "counts on the trainer's /diagnostics")
    # rl_nodes.runtime.CallbackErrors' words for a callback that raised
    assert not [line for line in output.lines[before:] if "the node keeps running" in line]


def test_load_node_refuses_launch_only_parameters_and_the_learning_nodes_stay(
        learner: tuple[Supervisor, Lines], attacker: Attacker) -> None:
    """allow_unsigned:=true for a policy loaded into the process that holds the signing key is
    refused with the reason, and so is unloading the trainer (learning would stop while the
    process beats on). About 2 s."""
    _, output = learner
    request = LoadNode.Request(package_name="rl_nodes", plugin_name="rl_nodes::Policy",
                               node_namespace="/robot_9",
                               parameters=[Parameter("allow_unsigned", value=True).to_parameter_msg()])
    answer = attacker.ask(LoadNode, "/container/_container/load_node", request)
    assert not answer.success and "may not set allow_unsigned" in answer.error_message, answer
    listed = attacker.ask(ListNodes, "/container/_container/list_nodes", ListNodes.Request())
    assert "/robot_9/policy" not in listed.full_node_names, listed
    trainer_id = listed.unique_ids[list(listed.full_node_names).index("/trainer")]
    answer = attacker.ask(UnloadNode, "/container/_container/unload_node",
                          UnloadNode.Request(unique_id=trainer_id))
    assert not answer.success and "/trainer is not unloaded" in answer.error_message, answer
    before = len(output.lines)
    output.wait_for(PROGRESS, 10.0, start=before)  # the trainer still reports


def test_without_remote_composition_a_container_serves_no_load_or_unload(
        ros_env: dict[str, str], attacker: Attacker) -> None:
    """The default container (rl-bringup's, ros2 launch's without use_composition) serves
    list_nodes alone. About 7 s (a container with the light diagnostics aggregator)."""
    bystander = Child([str(BIN / "container"), "--node", "diagnostics_aggregator@/bystander"],
                      env=ros_env)
    try:
        attacker.client(ListNodes, "/bystander/container/_container/list_nodes", 60.0)
        names = {name for name, _ in attacker.node.get_service_names_and_types()}
        assert "/bystander/container/_container/list_nodes" in names
        assert not {"/bystander/container/_container/load_node",
                    "/bystander/container/_container/unload_node"} & names, sorted(names)
    finally:
        bystander.stop(grace_s=5.0)


def test_a_lifecycle_shutdown_from_outside_restarts_the_process_and_the_run_resumes(
        learner: tuple[Supervisor, Lines], attacker: Attacker) -> None:
    """``change_state`` shutdown on the trainer: it writes its checkpoint, its process exits
    with EXIT_RESTART, the supervisor starts it again, and the new trainer resumes from that
    checkpoint, active, reporting progress (before, the process beat on with learning stopped
    for good). About 12 s (one restart of the learner process)."""
    supervisor, output = learner
    pids = supervisor.started_pids
    before = len(output.lines)
    client = attacker.client(ChangeState, "/trainer/change_state")
    future = client.call_async(ChangeState.Request(
        transition=Transition(id=Transition.TRANSITION_ACTIVE_SHUTDOWN)))
    attacker.spin(future, 5.0)  # the answer may not come: the process is on its way out
    if future.done():
        assert future.result().success
    output.wait_for(re.compile(rf"learner exited with code {EXIT_RESTART}; restarting"), 30.0,
                    start=before)
    output.wait_for(re.compile(r"^\[learner\] .*resumed from .*checkpoint"), START_TIMEOUT_S,
                    start=before)
    output.wait_for(PROGRESS, 30.0, start=before)
    assert len(supervisor.started_pids) == len(pids) + 1
    state = attacker.ask(GetState, "/trainer/get_state", GetState.Request())
    assert state.current_state.label == "active", state
