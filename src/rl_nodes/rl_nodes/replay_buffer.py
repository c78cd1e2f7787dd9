"""Replay buffer node: stores ``/experience`` from every robot, serves ``sample``, ``save``, ``load``.

The buffer is sized from ``env_id``. A rate limiter (Reverb's ``SampleToInsertRatio``, see
:mod:`rl_core.replay.limited`) keeps learning at ``updates_per_step`` batches per transition:
``sample`` grants only the batches the data pays for, and when acting runs more than
``error_buffer`` transitions ahead of learning the node raises ``acting_paused`` on
``/replay_status`` (published at once on every change, and every second), which the simulators
obey. Inserts are never refused for rate reasons, so no experience is dropped. Malformed batches
are rejected with a logged reason and counted; what is stored stays.

With ``prioritized`` the answers say so, and the trainer's next request carries the TD errors of
the rows it learned on; they are checked (equal lengths, at most ``MAX_REQUEST_ROWS``, slots in
range, values finite and >= 0) and applied before that request's batches are drawn. A bad update
is rejected on its own, counted per reason; slots overwritten since they were drawn are skipped.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rl_core.config import ReplayConfig
from rl_core.envs import space_shapes
from rl_core.image_codecs import is_image_shape
from rl_core.replay import InvalidPriorities, OutOfBounds, PriorityUpdate, RateLimitedReplay, ReplayBuffer
from rl_core.replay.admission import ExperienceAdmission
from rl_core.replay.build import new_buffer, new_replay
from rl_core.replay.files import SNAPSHOT_FILE, SnapshotWriter, confined_path
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph
from rl_nodes.base import EXPERIENCE_QOS, OK, WARN, RLNode
from rl_nodes.conversions import (
    BUFFER_FILE_SERVICE,
    EXPERIENCE,
    EXPERIENCE_WITH_IMAGES,
    MAX_REQUEST_ROWS,
    SAMPLE_SERVICE,
    Experience,
    SampleRequest,
    SampleResult,
    plain,
)
from rl_nodes.image_transport import subscribe_with_images
from rl_nodes.intra_process import create_service
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.runtime import main_for

STATUS_PERIOD_S = 1.0
DEFAULT_FILE = "replay_buffer.npz"


class ReplayBufferNode(RLNode):
    """Shared experience storage for all robots."""

    def __init__(self, namespace: str = "") -> None:
        super().__init__("replay_buffer", namespace)
        self.config = declare_config(self, ReplayConfig)
        watch_config(self, lambda: self.config, self._apply_config)
        self.obs_shape, self.action_shape = space_shapes(self.config.env_id)
        self.replay = self._new_replay(self._new_buffer())
        # sample/save/load run on the executor (or a local caller's) thread, inserts on the
        # dispatch thread: one lock keeps them consistent (RateLimitedReplay locks its own state).
        self._lock = threading.Lock()
        self._last_status = (time.monotonic(), 0, 0)
        self._rates = (0.0, 0.0)  # inserts/s, batches/s over the last status period
        self.admission = ExperienceAdmission(self.config.deployment_robots)
        #: Priorities applied, and those skipped because their slot was written since the draw.
        self.priorities_applied = self.priorities_stale = 0
        if is_image_shape(self.obs_shape):  # image batches: their frames on the side topics
            subscribe_with_images(self, EXPERIENCE_WITH_IMAGES, graph.EXPERIENCE.name,
                                  EXPERIENCE_QOS, self._on_experience, "experience")
        else:
            self.zc_subscription(EXPERIENCE, graph.EXPERIENCE, self._on_experience)
        self.status_pub = self.zc_publisher(plain(ReplayStatus), graph.REPLAY_STATUS)
        create_service(self.ipc, self, SAMPLE_SERVICE, graph.SAMPLE.name, self.sample)
        create_service(self.ipc, self, BUFFER_FILE_SERVICE, graph.SAVE.name, self.save)
        create_service(self.ipc, self, BUFFER_FILE_SERVICE, graph.LOAD.name, self.load)
        self.zc_timer(STATUS_PERIOD_S, self._publish_status)
        self.snapshot_writer = (SnapshotWriter(self.files_dir, self._copy_state)
                          if self.files_dir is not None else None)
        self._restore_snapshot()
        if self.config.snapshot_period > 0:
            self.zc_timer(self.config.snapshot_period, self.snapshot)
        self.get_logger().info(
            f"replay buffer: capacity {self.config.capacity}, obs {self.obs_shape}, action "
            f"{self.action_shape}, prioritized {self.config.prioritized}; rate limit "
            f"{'on' if self.config.rate_limit else 'off (acting runs free, ratio reported)'}: "
            f"{self.config.updates_per_step} updates per transition after "
            f"{self.config.learning_starts}, acting at most {self.config.error_buffer} ahead")

    @property
    def buffer(self) -> ReplayBuffer:
        return self.replay.buffer

    def _apply_config(self, config: ReplayConfig) -> None:
        self.config = config
        if config.prioritized:
            self.buffer.beta = config.priority_beta

    def _new_buffer(self) -> ReplayBuffer:
        return new_buffer(self.config, self.obs_shape, self.action_shape)

    def _new_replay(self, buffer: ReplayBuffer) -> RateLimitedReplay:
        return new_replay(self.config, buffer)

    def _on_experience(self, msg: Experience) -> None:
        with self._lock:
            refusal = self.admission.refusal(msg.robot_id, msg.stream, msg.sequence)
            if refusal is not None:
                self.reject(*refusal)
                return
            try:
                changed = self.replay.add(msg.obs, msg.actions, msg.rewards, msg.next_obs,
                                          msg.terminated, msg.truncated, msg.policy_version)
            except OutOfBounds as error:  # checked by the buffer in its finiteness pass
                self.reject("experience (values out of bounds)", f"robot {msg.robot_id}: {error}")
                return
            except ValueError as error:
                self.reject("experience (malformed)", f"robot {msg.robot_id}: {error}")
                return
            self.admission.stored(msg.robot_id, msg.stream, msg.sequence)
        if changed:
            self._publish_status()

    def _sizes(self) -> tuple[int, int]:
        return len(self.replay), self.replay.total_inserted

    def sample(self, request: SampleRequest) -> SampleResult:
        """Apply the request's priorities, then grant up to ``request.max_batches`` batches
        (0 = only report sizes); thread-safe."""
        if request.priorities is not None:
            self._update_priorities(request.priorities)
        if request.max_batches and not 1 <= request.batch_size <= MAX_REQUEST_ROWS:
            message = f"batch_size must be between 1 and {MAX_REQUEST_ROWS}, got {request.batch_size}"
            self.reject("sample request", message)
            return SampleResult(False, message, [], *self._sizes())
        # One answer carries at most MAX_REQUEST_ROWS rows; the rest stays owed for the next.
        max_batches = min(request.max_batches, MAX_REQUEST_ROWS // max(request.batch_size, 1))
        with self._lock:
            size, total = self._sizes()
            if max_batches == 0:
                return SampleResult(True, "sizes only", [], size, total)
            if size == 0:
                return SampleResult(False, "buffer is empty; wait for experience", [], 0, total)
            draw, changed = self.replay.take(request.batch_size, max_batches,
                                             request.weights_version, request.insert_budget)
        if changed:
            self._publish_status()
        message = "" if draw.batches else "rate limited: learning is ahead of the data"
        return SampleResult(True, message, draw.batches, draw.buffer_size, draw.total_inserted,
                            self.buffer.prioritized)

    def _update_priorities(self, update: PriorityUpdate) -> None:
        """Apply a learner's priorities, or reject them (counted per reason) and keep going."""
        if not self.buffer.prioritized:
            self.reject("priorities (buffer not prioritized)", f"{len(update)} priorities sent "
                        "to a buffer that samples uniformly (prioritized: false)")
            return
        if max(len(update.indices), len(update.priorities)) > MAX_REQUEST_ROWS:
            self.reject("priorities (too many)", f"{len(update)} priorities in one request, "
                        f"more than the cap of {MAX_REQUEST_ROWS}")
            return
        with self._lock:
            try:
                applied = self.replay.update_priorities(update)
            except InvalidPriorities as error:
                self.reject(f"priorities ({error.kind})", str(error))
                return
            self.priorities_applied += applied
            self.priorities_stale += len(update) - applied

    # --- files: save/load services and snapshots, confined to output_dir/replay ----------------

    @property
    def files_dir(self) -> Path | None:
        """Where this buffer's files live (``output_dir/replay``); None without ``output_dir``."""
        return Path(self.config.output_dir) / "replay" if self.config.output_dir else None

    def save(self, path: str) -> tuple[bool, str, int, str]:
        """Write the buffer to ``output_dir/replay/<path>`` (.npz); thread-safe."""
        try:
            target = confined_path(self.files_dir, path, DEFAULT_FILE)
        except ValueError as error:
            self.reject("save request", str(error))
            return False, str(error), 0, path
        with self._lock:
            if len(self.buffer) == 0:
                return False, "buffer is empty; nothing to save", 0, str(target)
            try:
                self.buffer.save(target)
            except OSError as error:
                return False, f"could not write {target}: {error}", 0, str(target)
            return True, "saved", len(self.buffer), str(target)

    def load(self, path: str) -> tuple[bool, str, int, str]:
        """Replace the contents with ``output_dir/replay/<path>``; on failure nothing changes."""
        try:
            target = confined_path(self.files_dir, path, DEFAULT_FILE)
        except ValueError as error:
            self.reject("load request", str(error))
            return False, str(error), 0, path
        if not target.is_file():
            return False, f"no file {target}; pass the name of a saved buffer", 0, str(target)
        with self._lock:
            try:
                loaded = self._read_matching(target)
            except (OSError, ValueError) as error:
                return False, f"could not load {target}: {error}", 0, str(target)
            self.replay = self._new_replay(loaded)
            self.replay.limiter.insert(loaded.total_added)  # the stored data counts as inserted
            return True, "loaded", len(loaded), str(target)

    def _read_matching(self, path: Path) -> ReplayBuffer:
        """A saved buffer that fits this node's shapes and capacity (ValueError otherwise)."""
        loaded = ReplayBuffer.from_file(path, max_capacity=self.config.capacity)
        if (loaded.obs_shape, loaded.action_shape, loaded.capacity) != (
                self.obs_shape, self.action_shape, self.config.capacity):
            raise ValueError(f"it holds obs {loaded.obs_shape}, action {loaded.action_shape}, "
                             f"capacity {loaded.capacity}; this buffer has {self.obs_shape}, "
                             f"{self.action_shape}, {self.config.capacity}")
        loaded.value_bound = self.config.value_bound
        return loaded

    def _restore_snapshot(self) -> None:
        """Load the latest snapshot of this run, if there is one (a respawned buffer)."""
        if self.snapshot_writer is None or not self.snapshot_writer.exists():
            return
        base = self.snapshot_writer.base
        try:
            loaded = self._read_matching(base / SNAPSHOT_FILE)
            counters = self.snapshot_writer.read_counters()
        except (OSError, ValueError) as error:
            self.get_logger().error(f"snapshot in {base} not loaded ({error}); starting empty")
            return
        self.replay = self._new_replay(loaded)
        self.replay.limiter.load_state_dict(counters)
        self.get_logger().info(f"restored {len(loaded)} transitions ({loaded.total_added} "
                               f"inserted so far) from {base / SNAPSHOT_FILE}")

    def _copy_state(self) -> tuple[dict, dict]:
        with self._lock:
            return self.buffer.state_dict(), self.replay.limiter.state_dict()

    def snapshot(self, wait: bool = False) -> None:
        """Write the buffer and its rate-limiter counters to ``output_dir/replay`` (by a
        background thread unless ``wait``; inserts wait only while the state is copied)."""
        if self.snapshot_writer is not None:
            self.snapshot_writer.write(wait)

    def close(self) -> None:
        if self.snapshot_writer is not None:
            self.snapshot_writer.join(timeout_s=30.0)
        self.snapshot(wait=True)

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        size, total = self._sizes()
        stats = self.replay.stats()
        writer = self.snapshot_writer
        values = {"size": size, "capacity": self.config.capacity, "total inserted": total,
                  "fill": f"{size / self.config.capacity:.1%}",
                  "updates per transition": f"{stats.achieved_samples_per_insert:.3f}",
                  "target updates per transition": self.config.updates_per_step,
                  "acting paused": self.replay.acting_paused,
                  "acting blocked s": f"{stats.insert_blocked_s:.1f}",
                  "learner blocked s": f"{stats.sample_blocked_s:.1f}",
                  "policy lag (versions)": self.replay.policy_lag,
                  "lost experience messages": self.admission.lost_messages,
                  "priorities applied": self.priorities_applied,
                  "priorities skipped (slot overwritten)": self.priorities_stale,
                  "snapshots": writer.snapshots if writer else 0,
                  "snapshot hold ms": f"{1000 * writer.hold_s if writer else 0.0:.1f}"}
        if size == 0:
            return WARN, "empty: no experience received yet", values
        if self.replay.acting_paused:
            return OK, f"{size} transitions; acting paused while learning catches up", values
        return OK, f"{size} transitions", values

    def _publish_status(self) -> None:
        """Publish /replay_status (every STATUS_PERIOD_S, and at once when acting pauses/resumes)."""
        now = time.monotonic()
        size, total = self._sizes()
        stats = self.replay.stats()
        then, total_before, sampled_before = self._last_status
        elapsed = now - then
        if elapsed >= STATUS_PERIOD_S / 2:  # rates over a meaningful window only
            self._last_status = (now, total, stats.samples)
            self._rates = ((total - total_before) / elapsed, (stats.samples - sampled_before) / elapsed)
        insert_rate, sample_rate = self._rates
        msg = ReplayStatus(size=size, capacity=self.config.capacity, total_inserted=total,
                           insert_rate=insert_rate, sample_rate=sample_rate,
                           rejected_messages=self.rejected_messages,
                           rate_limited=self.config.rate_limit,
                           acting_paused=self.replay.acting_paused,
                           samples_per_insert=self.config.updates_per_step,
                           learning_starts=self.config.learning_starts,
                           updates_per_transition=stats.achieved_samples_per_insert,
                           total_sampled=stats.samples, insert_blocked_s=stats.insert_blocked_s,
                           sample_blocked_s=stats.sample_blocked_s,
                           newest_weights_version=self.replay.newest_weights_version,
                           acting_weights_version=self.replay.acting_weights_version)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.status_pub.publish(msg)


def main() -> int:
    return main_for("replay_buffer")


if __name__ == "__main__":
    raise SystemExit(main())
