"""Issue 41 over real DDS: a replay buffer process, robot 0's genuine experience from this
process, and an attacker on a second DDS participant (an rclpy context of its own) that sniffs
``/experience``.

The attacker replays a sniffed batch with ``sequence = 2**64 - 1`` (it locked the robot out:
inserts went from 247/s to 0), floods 1,100 new streams (more than the 1,024 the buffer used to
remember in all) and replays the sniffed batch as it was. The genuine stream keeps being stored
and the plain replay is still refused as a duplicate. Then ``save`` and ``load``: the load is
refused (the run is active) and neither the row count nor ``total_inserted`` goes back (a
buffer went from 6,706 rows to 3,916).

Costs about 6 s (6.2 s on 2 shared cores, 3.5 s of it the buffer's start).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from rl_core.wire.messages import SampleRequest
from rl_interfaces.msg import ExperienceBatch
from rl_nodes import graph
from rl_nodes.base import EXPERIENCE_QOS
from rl_nodes.messages import BUFFER_FILE_SERVICE, SAMPLE_SERVICE, Experience, experience_to_msg
from tests.integration.in_process import overrides_file
from tests.processes import REPO, Child

pytestmark = pytest.mark.integration
CONFIG = REPO / "config" / "cartpole.yaml"
BIN = Path(sys.executable).parent
REPLAY = {"capacity": 5000, "learning_starts": 10, "rate_limit": False, "snapshot_period": 0.0,
          "total_env_steps": 10**6, "deployment_robots": 1}
STREAM, ROWS = 1_234_567, 2
#: Genuine batches before the attack: more than PROVEN_BATCHES (rl_core.replay.admission).
PROVEN = 40
FLOOD, FLOOD_CHUNK = 1_100, 220


def batch(sequence: int, stream: int = STREAM, rows: int = ROWS) -> ExperienceBatch:
    obs = np.full((rows, 4), 0.1, np.float32)
    return experience_to_msg(Experience(0, obs, np.zeros((rows, 1), np.float32),
                                        np.ones(rows, np.float32), obs.copy(),
                                        np.zeros(rows, bool), np.zeros(rows, bool),
                                        stream=stream, sequence=sequence))


def wait_until(condition: Callable[[], bool], timeout_s: float,
               what: str | Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what if isinstance(what, str) else what()
        time.sleep(0.02)


def ask(client: Any, request: Any, per_call_s: float = 1.0, timeout_s: float = 20.0) -> Any:
    """The answer to ``request``, asked again every ``per_call_s`` until the server answers (it
    drops answers to a client whose response reader it has not matched yet,
    tests/service_calls.py); ``per_call_s`` = ``timeout_s`` for a request asked once."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _, event=done: event.set())
        if done.wait(per_call_s):
            return future.result()
        client.remove_pending_request(future)
        assert time.monotonic() < deadline, f"{client.srv_name} never answered"


class Participant:
    """A node spun by an executor thread in its own rclpy context: its own DDS participant."""

    def __init__(self, name: str) -> None:
        self.context = Context()
        rclpy.init(args=[], context=self.context)
        self.node = Node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()


@pytest.fixture
def deployment(tmp_path: Path, ros_env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """The replay buffer process, robot 0 (this process) and the attacker (its own
    participant), each publisher matched by the buffer."""
    overrides = overrides_file(tmp_path, {"replay_buffer": {
        **REPLAY, "output_dir": str(tmp_path / "run")}})
    replay = Child([str(BIN / "replay_buffer"), "--ros-args", "--params-file", str(CONFIG),
                    "--params-file", str(overrides)], env=ros_env)
    robot, attacker = Participant("robot_0_stream"), Participant("attacker")
    try:
        sniffed: list[ExperienceBatch] = []
        attacker.node.create_subscription(ExperienceBatch, graph.EXPERIENCE.name,
                                          sniffed.append, EXPERIENCE_QOS)
        parts = {"replay": replay, "sniffed": sniffed,
                 "robot": robot.node.create_publisher(ExperienceBatch, graph.EXPERIENCE.name,
                                                      EXPERIENCE_QOS),
                 "forger": attacker.node.create_publisher(ExperienceBatch, graph.EXPERIENCE.name,
                                                          EXPERIENCE_QOS)}
        for name in ("sample", "save", "load"):
            service = SAMPLE_SERVICE if name == "sample" else BUFFER_FILE_SERVICE
            parts[name] = robot.node.create_client(service.srv_type, f"/replay_buffer/{name}")
        # The buffer and the sniffer read robot 0 and the attacker (the sniffer is in the
        # attacker's own participant: matched too).
        wait_until(lambda: parts["robot"].get_subscription_count() >= 2
                   and parts["forger"].get_subscription_count() >= 2
                   and parts["sample"].service_is_ready(), 60.0, lambda: replay.output()[-3000:])
        yield parts
    finally:
        attacker.close()
        robot.close()
        replay.stop()


def test_a_replayed_batch_and_a_flood_of_streams_lock_no_robot_out_and_nothing_rolls_back(
        deployment: dict[str, Any]) -> None:
    replay, robot, forger = deployment["replay"], deployment["robot"], deployment["forger"]

    def sizes() -> tuple[int, int]:
        answer = SAMPLE_SERVICE.response_from_msg(ask(deployment["sample"], SAMPLE_SERVICE
                                                      .request_to_msg(SampleRequest(1, 0))))
        return answer.buffer_size, answer.total_inserted

    def refused(kind: str) -> None:
        assert replay.wait_for_line(lambda line: f"rejected experience ({kind})" in line,
                                    20.0), replay.output()[-3000:]

    for sequence in range(PROVEN):
        robot.publish(batch(sequence))
    wait_until(lambda: sizes()[1] == PROVEN * ROWS and len(deployment["sniffed"]) == PROVEN,
               20.0, "robot 0's batches were not all stored and sniffed")
    forged = deployment["sniffed"][5]
    forged.sequence = 2**64 - 1
    forger.publish(forged)
    refused("sequence jump")
    total = PROVEN * ROWS
    for first in range(0, FLOOD, FLOOD_CHUNK):  # paced: none falls out of a history
        for stream in range(first, first + FLOOD_CHUNK):
            forger.publish(batch(0, stream=10**9 + stream, rows=1))
        total += FLOOD_CHUNK
        wait_until(lambda expected=total: sizes()[1] == expected, 20.0, "the flood was not stored")
    forged.sequence = 5
    forger.publish(forged)  # robot 0's state survived the flood: a duplicate still is one
    refused("duplicate")
    assert sizes()[1] == total
    for sequence in range(PROVEN, PROVEN + 20):
        robot.publish(batch(sequence))
    total += 20 * ROWS
    wait_until(lambda: sizes()[1] == total, 20.0, "robot 0 is locked out")

    # Refused requests first, asked until answered, so that the ones that change something are
    # asked once (a second save would come too soon).
    save, load = deployment["save"], deployment["load"]
    assert "no file" in ask(load, BUFFER_FILE_SERVICE.request_to_msg("missing.npz")).message
    assert not ask(save, BUFFER_FILE_SERVICE.request_to_msg("snapshot.npz")).success  # own file
    answer = ask(save, BUFFER_FILE_SERVICE.request_to_msg("attacked.npz"), per_call_s=20.0)
    assert answer.success and answer.size == total, answer.message
    again = ask(save, BUFFER_FILE_SERVICE.request_to_msg("again.npz"), per_call_s=20.0)
    assert not again.success and "save_interval" in again.message
    for sequence in range(PROVEN + 20, PROVEN + 25):
        robot.publish(batch(sequence))
    total += 5 * ROWS
    wait_until(lambda: sizes()[1] == total, 20.0, "robot 0's later batches were not stored")
    answer = ask(load, BUFFER_FILE_SERVICE.request_to_msg("attacked.npz"), per_call_s=20.0)
    assert not answer.success and "active" in answer.message, answer.message
    assert sizes() == (total, total), "load moved the buffer back"
