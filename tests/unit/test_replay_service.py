"""What the replay node serves (rl_core.replay.service): admitted experience, sample answers,
priorities, files, snapshots and its figures, without ROS."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rl_core.config import ReplayConfig
from rl_core.replay import ReplayBuffer
from rl_core.replay.files import LIMITER_FILE, LOCK_FILE, MAX_SAVED_FILES, SNAPSHOT_FILE
from rl_core.replay.service import DEFAULT_FILE, RateMeter, ReplayService
from rl_core.wire.messages import MAX_REQUEST_ROWS, PriorityUpdate, max_answer_rows

pytestmark = pytest.mark.unit

MAX_ROWS = 64


class Node:
    """The node's side: the rejections it counts and the status it publishes at once."""

    def __init__(self) -> None:
        self.rejected: list[tuple[str, str]] = []
        self.pause_changes = 0

    def service(self, output_dir: Path | str = "", clock: Callable[[], float] = time.monotonic,
                **overrides: Any) -> ReplayService:
        settings: dict[str, Any] = {"capacity": 100, "learning_starts": 4, "error_buffer": 8,
                                    "output_dir": str(output_dir), **overrides}
        return ReplayService(ReplayConfig(**settings), (3,), (1,),
                             lambda kind, reason: self.rejected.append((kind, reason)),
                             self.on_pause_change, MAX_ROWS, clock=clock)

    def on_pause_change(self) -> None:
        self.pause_changes += 1

    @property
    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.rejected]


def experience(sequence: int, rows: int = 4, robot_id: int = 0, value: float = 0.5
               ) -> SimpleNamespace:
    """The fields of rl_nodes.messages.Experience the service reads."""
    obs = np.full((rows, 3), value, np.float32)
    return SimpleNamespace(robot_id=robot_id, stream=1, sequence=sequence, obs=obs,
                           actions=np.zeros((rows, 1), np.float32), rewards=np.ones(rows, np.float32),
                           next_obs=obs, terminated=np.zeros(rows, bool),
                           truncated=np.zeros(rows, bool), policy_version=2, intervened=None)


def request(batch_size: int = 8, max_batches: int = 1) -> SimpleNamespace:
    """The fields of rl_core.wire.messages.SampleRequest."""
    return SimpleNamespace(batch_size=batch_size, max_batches=max_batches)


def test_experience_is_stored_once_and_bad_batches_are_rejected_with_the_reason() -> None:
    node = Node()
    service = node.service(deployment_robots=2)
    service.insert(experience(0))
    service.insert(experience(0))  # again
    service.insert(experience(1, robot_id=5))
    service.insert(experience(2, value=float("nan")))
    service.insert(experience(3, value=1e9))  # beyond value_bound
    bad = experience(4)
    bad.terminated = np.full(4, 2.0, np.float32)
    service.insert(bad)
    assert node.kinds == ["experience (duplicate)", "experience (foreign robot)",
                          "experience (values out of bounds)", "experience (values out of bounds)",
                          "experience (malformed)"]
    assert node.rejected[-1][1].startswith("robot 0: terminated must be bool or 0/1")
    assert service.sizes() == (4, 4)
    service.insert(experience(7))  # 1 .. 6 of robot 0 were rejected or never came
    assert service.admission.lost_messages == 6 and service.sizes() == (8, 8)


def test_sample_answers_sizes_empty_rate_limited_and_granted() -> None:
    node = Node()
    service = node.service(updates_per_transition=0.5)
    assert tuple(service.sample(request(max_batches=0))) == (True, "sizes only", [], 0, 0, False,
                                                             20_000, False)
    assert service.sample(request()).message == "buffer is empty; wait for experience"
    service.insert(experience(0, rows=8))
    answer = service.sample(request(max_batches=10))
    assert answer.success and len(answer.batches) == 2, "(8 - 4) transitions * 0.5"
    assert answer.batches[0].obs.shape == (8, 3)
    assert (answer.buffer_size, answer.total_inserted, answer.prioritized) == (8, 8, False)
    answer = service.sample(request())
    assert answer.success and answer.message == "rate limited: learning is ahead of the data"
    assert service.replay.acting_weights_version == 2
    answer = service.sample(request(batch_size=MAX_ROWS + 1))
    assert not answer.success
    assert answer.message == f"batch_size must be between 1 and {MAX_ROWS}, got {MAX_ROWS + 1}"
    assert (answer.buffer_size, answer.total_inserted) == (8, 8) and node.kinds == ["sample request"]


def test_the_buffer_owns_the_schedule_and_says_when_the_run_is_done() -> None:
    """Budget 12, learning from 4, 1 update per transition: 8 updates, then "done", on the
    answers and on /replay_status; inserts past the budget are kept but pay for nothing."""
    node = Node()
    service = node.service(total_env_steps=12, updates_per_transition=1.0, error_buffer=100)
    service.insert(experience(0, rows=8))
    answer = service.sample(request(max_batches=100))
    assert len(answer.batches) == 4 and (answer.total_env_steps, answer.done) == (12, False)
    service.insert(experience(1, rows=8))  # 16 in: 4 past the budget
    status = service.status(0.0)
    assert (status.total_env_steps, status.done) == (12, False)  # 4 updates still due
    answer = service.sample(request(max_batches=3))
    assert len(answer.batches) == 3 and not answer.done
    answer = service.sample(request(max_batches=3))
    assert len(answer.batches) == 1 and answer.done  # the last one the budget pays for
    assert answer.message == "run done: the budget is in and its updates were granted"
    assert service.status(1.0).done and service.replay.stats().samples == 8
    assert len(service.sample(request(max_batches=3)).batches) == 0


def test_one_answer_carries_at_most_max_rows_rows() -> None:
    service = Node().service(updates_per_transition=8.0, error_buffer=100)
    service.insert(experience(0, rows=40))
    assert len(service.sample(request(batch_size=16, max_batches=100)).batches) == MAX_ROWS // 16


def test_acting_pauses_and_resumes_are_told_at_once() -> None:
    node = Node()
    service = node.service(updates_per_transition=1.0, learning_starts=4, error_buffer=2)
    service.insert(experience(0, rows=8))
    assert service.replay.acting_paused and node.pause_changes == 1
    service.sample(request(batch_size=2, max_batches=10))
    assert not service.replay.acting_paused and node.pause_changes == 2


def test_a_pause_change_is_told_after_the_lock_is_released() -> None:
    """The node publishes its status from the callback, and the status takes the one lock: a
    callback under it would deadlock."""
    node = Node()
    statuses = []
    service = node.service(updates_per_transition=1.0, learning_starts=4, error_buffer=2)
    service._on_pause_change = lambda: statuses.append(
        (service.lock.locked(), service.status(0.0).acting_paused))
    service.insert(experience(0, rows=8))
    service.sample(request(batch_size=2, max_batches=10))
    assert statuses == [(False, True), (False, False)]


def test_one_lock_keeps_the_rate_limiter_exact_across_threads() -> None:
    """Inserts on this thread; samples, statuses and diagnostics on another; no lock but the
    service's. Every insert and every granted batch counts once: 2,000 transitions pay for
    exactly 2,000 - learning_starts batches, the bare loop's number."""
    node = Node()
    service = node.service(capacity=10_000, updates_per_transition=1.0, learning_starts=4,
                           error_buffer=4)
    granted = []

    def learn() -> None:
        while True:
            inserted = service.sizes()[1]
            granted.append(len(service.sample(request(batch_size=2, max_batches=3)).batches))
            service.status(time.monotonic())
            service.diagnostics()
            if inserted == 2_000 and not granted[-1]:
                return

    learner = threading.Thread(target=learn, daemon=True)
    learner.start()
    for sequence in range(500):
        service.insert(experience(sequence))
    learner.join(timeout=60.0)
    assert not learner.is_alive()
    stats = service.replay.stats()
    assert (stats.inserts, stats.samples, sum(granted)) == (2_000, 1_996, 1_996)
    assert not node.rejected


def test_priorities_are_applied_or_rejected_per_reason() -> None:
    node = Node()
    uniform = node.service()
    update = PriorityUpdate(np.zeros(2, np.int64), np.ones(2, np.float32), 0)
    refused = uniform.update_priorities(update)
    assert not refused.success and "samples uniformly" in refused.message
    assert node.kinds == ["priorities (buffer not prioritized)"]
    service = node.service(prioritized=True)
    service.insert(experience(0, rows=8))
    too_many = PriorityUpdate(np.zeros(MAX_ROWS + 1, np.int64), np.ones(MAX_ROWS + 1, np.float32), 0)
    assert not service.update_priorities(too_many).success
    negative = PriorityUpdate(np.zeros(2, np.int64), np.full(2, -1.0, np.float32), 8)
    assert not service.update_priorities(negative).success
    assert node.kinds[1] == "priorities (too many)" and node.kinds[2].startswith("priorities (")
    good = PriorityUpdate(np.array([0, 1]), np.array([2.0, 3.0], np.float32), 8)
    assert service.update_priorities(good) == (True, "", 2, 0)
    assert service.sample(request(batch_size=4)).prioritized
    assert service.priorities_applied == 2 and service.priorities_stale == 0
    service.insert(experience(1, rows=4))
    later = PriorityUpdate(np.array([8, 1]), np.ones(2, np.float32), 8)
    assert service.update_priorities(later) == (True, "", 1, 1), "slot 8 rewritten"
    assert (service.priorities_applied, service.priorities_stale) == (3, 1)


def test_files_stay_in_output_dir_and_a_failed_load_keeps_the_contents(tmp_path: Path) -> None:
    node = Node()
    assert not node.service().save("a.npz")[0] and node.kinds == ["save request"]
    service = node.service(tmp_path)
    assert service.save("")[:2] == (False, "buffer is empty; nothing to save")
    service.insert(experience(0, rows=6))
    ok, message, saved, path = service.save("")
    assert ok and saved == 6 and path == str((tmp_path / "replay" / DEFAULT_FILE).resolve())
    ok, message, _, _ = service.load("../outside.npz")
    assert not ok and "relative" in message and node.kinds[-1] == "load request"
    assert "no file" in service.load("missing.npz")[1]
    # A name the file system refuses is a counted refusal, not an error (found by the fuzzing).
    ok, message, _, _ = service.load("x" * 300)
    assert not ok and "too long" in message and node.kinds[-1] == "load request"
    small = ReplayBuffer((2,), (1,), 100)
    rows = np.zeros((2, 2), np.float32)
    small.add(rows, np.zeros((2, 1), np.float32), np.zeros(2, np.float32), rows, np.zeros(2, bool),
              np.zeros(2, bool))
    small.save(tmp_path / "replay" / "small.npz")
    fresh = node.service(tmp_path)
    ok, message, _, _ = fresh.load("small.npz")
    assert not ok and "it holds obs (2,)" in message and len(fresh.buffer) == 0
    assert fresh.load("")[:3] == (True, "loaded", 6)
    assert fresh.replay.limiter.stats().inserts == 6, "the stored data counts as inserted"


def test_save_never_touches_the_buffers_own_files_and_keeps_a_quota(tmp_path: Path) -> None:
    node = Node()
    service = node.service(tmp_path, save_interval=0.0)
    service.insert(experience(0, rows=4))
    service.snapshot(wait=True)
    snapshot = (tmp_path / "replay" / SNAPSHOT_FILE).read_bytes()
    for name in (SNAPSHOT_FILE, LIMITER_FILE, LOCK_FILE, ".hidden.npz", "notes.txt"):
        ok, message, _, _ = service.save(name)
        assert not ok and node.kinds[-1] == "save request", name
    assert (tmp_path / "replay" / SNAPSHOT_FILE).read_bytes() == snapshot
    for index in range(MAX_SAVED_FILES):
        assert service.save(f"copy{index}.npz")[0]
    ok, message, _, _ = service.save("one_more.npz")
    assert not ok and "the most it keeps" in message
    assert service.save("copy0.npz")[0], "an existing name may be saved again"
    service.close()


def test_saves_come_at_most_once_per_save_interval(tmp_path: Path) -> None:
    """Issue 41, item 6: a save writes the whole buffer and holds up inserts meanwhile."""
    node, now = Node(), [100.0]
    service = node.service(tmp_path, clock=lambda: now[0])
    assert service.config.save_interval == 60.0
    service.insert(experience(0))
    assert service.save("a.npz")[:2] == (True, "saved")
    now[0] += 59.0
    ok, message, _, _ = service.save("b.npz")
    assert not ok and "save_interval 60 s" in message and node.kinds == ["save request"]
    assert not (tmp_path / "replay" / "b.npz").exists()
    now[0] += 1.0
    assert service.save("b.npz")[0]
    service.close()


def test_load_is_refused_once_the_run_is_active_and_never_moves_counters_back(
        tmp_path: Path) -> None:
    """Issue 41, item 6: ``save`` then ``load`` took a live buffer from 6,706 rows back to
    3,916 and moved ``total_inserted`` back."""
    node = Node()
    service = node.service(tmp_path, save_interval=0.0)
    for sequence in range(3):
        service.insert(experience(sequence, rows=8))
    assert service.save("early.npz")[0] and service.run_active
    service.insert(experience(3, rows=8))
    ok, message, _, _ = service.load("early.npz")
    assert not ok and "active" in message and node.kinds[-1] == "load request"
    assert service.sizes() == (32, 32)
    assert service.save("late.npz")[0]
    service.close()
    # A fresh buffer (nothing stored or granted since it started) loads; the counters only
    # move forward: a file of fewer inserts than the buffer holds is refused.
    fresh = node.service(tmp_path)
    assert fresh.load("late.npz")[:3] == (True, "loaded", 32) and not fresh.run_active
    ok, message, _, _ = fresh.load("early.npz")
    assert not ok and "roll the run back" in message and fresh.sizes() == (32, 32)
    assert fresh.replay.limiter.stats().inserts == 32
    # Granting a batch makes the run active as storing does.
    assert fresh.sample(request(batch_size=4)).batches and fresh.run_active
    assert not fresh.load("late.npz")[0] and fresh.sizes() == (32, 32)
    fresh.close()
    # A respawned buffer that restored its snapshot is not active, and keeps its counters.
    respawned = node.service(tmp_path)
    assert respawned.recover()[0] and respawned.replay.stats().samples == 1
    assert respawned.load("late.npz")[:3] == (True, "loaded", 32)
    assert respawned.replay.stats().samples == 1 and respawned.sizes() == (32, 32)
    respawned.close()


def test_priorities_over_value_bound_are_clipped_and_counted() -> None:
    """Issue 41, item 8: one ``3e38`` priority took nearly every draw, and every later insert
    inherited it as the largest priority seen."""
    node = Node()
    service = node.service(prioritized=True, priority_alpha=1.0, value_bound=100.0)
    service.insert(experience(0, rows=4))
    update = PriorityUpdate(np.array([0, 1]), np.array([3e38, 2.0], np.float32), 4)
    assert service.update_priorities(update) == (True, "", 2, 0)
    assert service.priorities_clipped == 1 and node.kinds == ["priorities (clipped)"]
    priorities = service.buffer.state_dict()["priorities"]
    assert priorities.max() == pytest.approx(100.0) and priorities[1] == pytest.approx(2.0)
    service.insert(experience(1, rows=4))  # a new row gets the largest priority seen
    assert service.buffer.state_dict()["priorities"].max() == pytest.approx(100.0)
    assert service.diagnostics()[2]["priorities clipped (over value_bound)"] == 1


def test_a_snapshot_restores_the_buffer_and_its_counters(tmp_path: Path) -> None:
    node = Node()
    assert node.service(tmp_path).recover() is None
    service = node.service(tmp_path)
    service.insert(experience(0, rows=8))
    service.sample(request(batch_size=2, max_batches=10))
    service.close()  # the last snapshot
    assert service.snapshot_writer is not None and service.snapshot_writer.snapshots == 1
    respawned = node.service(tmp_path)
    restored, message = respawned.recover()
    assert restored and message.startswith("restored 8 transitions (8 inserted so far) from ")
    assert respawned.replay.stats().samples == service.replay.stats().samples
    respawned.close()
    (tmp_path / "replay" / SNAPSHOT_FILE).write_bytes(b"not a snapshot")
    restored, message = node.service(tmp_path).recover()
    assert not restored and message.endswith("; starting empty")
    node.service().close()  # no output_dir: nothing to write


def test_diagnostics_and_status_report_the_figures() -> None:
    service = Node().service()
    healthy, message, values = service.diagnostics()
    assert (healthy, message) == (False, "empty: no experience received yet")
    assert values["snapshots"] == 0 and values["fill"] == "0.0%"
    service.insert(experience(0, rows=5))
    healthy, message, values = service.diagnostics()
    assert (healthy, message, values["size"], values["total inserted"]) == (True, "5 transitions", 5, 5)
    figures = service.status(now=time.monotonic() + 1.0)  # the service started just before
    assert (figures.size, figures.capacity, figures.total_inserted, figures.total_sampled) == (5, 100, 5, 0)
    assert figures.insert_rate == pytest.approx(5.0, rel=0.05) and figures.acting_weights_version == 2
    assert figures.rate_limited and figures.learning_starts == 4


def test_rates_are_taken_over_at_least_half_a_period() -> None:
    meter = RateMeter(period_s=1.0, now=10.0)
    assert meter.update(10.2, inserted=50, sampled=5) == (0.0, 0.0), "too short a window"
    assert meter.update(11.0, inserted=100, sampled=10) == (100.0, 10.0)
    assert meter.update(11.1, inserted=200, sampled=10) == (100.0, 10.0)
    assert meter.update(12.0, inserted=200, sampled=30) == (100.0, 20.0)


def test_a_sample_answer_is_bounded_in_bytes_for_image_tasks() -> None:
    """Issue 19: 2**20 rows of 84x84 frames would be tens of gigabytes; the cap follows the task."""
    node = Node()
    pixels = ReplayService(ReplayConfig(capacity=10, learning_starts=4), (3, 84, 84, 3), (1,),
                           lambda kind, reason: node.rejected.append((kind, reason)),
                           node.on_pause_change, MAX_REQUEST_ROWS)
    assert pixels.buffer.obs_dtype.itemsize == 1
    assert pixels.max_rows == max_answer_rows((3, 84, 84, 3), 1, (1,)) < 10_000
    answer = pixels.sample(request(batch_size=65536))
    assert not answer.success and f"between 1 and {pixels.max_rows}" in answer.message
    assert node.kinds == ["sample request"]
    assert Node().service().max_rows == MAX_ROWS  # state vectors: the row cap


def test_a_snapshot_keeps_the_demonstrations_and_what_operators_added(tmp_path: Path) -> None:
    node = Node()
    service = node.service(tmp_path)
    driven = experience(0, rows=4, value=0.25)
    driven.intervened = np.array([True, False, True, False])
    service.insert(driven)
    assert service.replay.intervened_rows == 2 and len(service.replay.demos) == 2
    service.close()  # the last snapshot
    respawned = node.service(tmp_path)
    restored, _ = respawned.recover()
    assert restored and respawned.replay.demos is not None
    assert len(respawned.replay.demos) == 2 and respawned.replay.intervened_rows == 2
    np.testing.assert_array_equal(respawned.replay.demos.sample(2).obs, np.full((2, 3), 0.25))
    assert respawned.replay.limiter.state_dict() == service.replay.limiter.state_dict()
    respawned.close()


def test_demonstrations_of_another_task_in_a_snapshot_are_reported_and_left_out(
        tmp_path: Path) -> None:
    node = Node()
    service = node.service(tmp_path)
    service.insert(experience(0, rows=4))
    foreign = ReplayBuffer((5,), (1,), 10)
    foreign.add(np.zeros((2, 5)), np.zeros((2, 1)), np.zeros(2), np.zeros((2, 5)),
                np.zeros(2, bool))
    service.replay.demos = foreign
    service.close()
    respawned = node.service(tmp_path)
    restored, _ = respawned.recover()
    assert restored and len(respawned.buffer) == 4 and respawned.replay.demos is None
    assert "snapshot (demonstrations)" in node.kinds
    respawned.close()
