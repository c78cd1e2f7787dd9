"""Replay buffer node: stores ``/experience`` from every robot, serves ``sample``, ``save``, ``load``.

The buffer is sized from the first experience batch (or a loaded file), so it needs no knowledge of
the task. Malformed batches are rejected with a logged reason and counted; what is stored stays.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rl_core.config import ReplayConfig
from rl_core.replay import ReplayBuffer
from rl_interfaces.msg import ReplayStatus

from rl_nodes.base import EXPERIENCE_TOPIC, OK, REPLAY_STATUS_TOPIC, WARN, RLNode
from rl_nodes.conversions import BUFFER_FILE_SERVICE, EXPERIENCE, SAMPLE_SERVICE
from rl_nodes.conversions import Experience, SampleResult, plain
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
        self.buffer: ReplayBuffer | None = None
        # sample/save/load run on the executor thread (or a local caller's), inserts on the
        # dispatch thread: one lock keeps them consistent.
        self._lock = threading.Lock()
        self._sampled = 0
        self._last_status = (time.monotonic(), 0, 0)
        self.zc_subscription(EXPERIENCE, EXPERIENCE_TOPIC, self._on_experience)
        self.status_pub = self.zc_publisher(plain(ReplayStatus), REPLAY_STATUS_TOPIC)
        create_service(self.ipc, self, SAMPLE_SERVICE, "~/sample", self.sample)
        create_service(self.ipc, self, BUFFER_FILE_SERVICE, "~/save", self.save)
        create_service(self.ipc, self, BUFFER_FILE_SERVICE, "~/load", self.load)
        self.zc_timer(STATUS_PERIOD_S, self._publish_status)

    def _apply_config(self, config: ReplayConfig) -> None:
        self.config = config
        if self.buffer is not None and config.prioritized:
            self.buffer.beta = config.priority_beta

    def _on_experience(self, msg: Experience) -> None:
        with self._lock:
            if self.buffer is None:
                self.buffer = self._new_buffer(msg.obs.shape[1:], msg.actions.shape[1:])
            try:
                self.buffer.add(msg.obs, msg.actions, msg.rewards, msg.next_obs, msg.terminated,
                                msg.truncated)
            except ValueError as error:
                self.reject(f"experience from robot {msg.robot_id}", str(error))

    def _new_buffer(self, obs_shape: tuple[int, ...], action_shape: tuple[int, ...]) -> ReplayBuffer:
        self.get_logger().info(f"replay buffer: capacity {self.config.capacity}, obs {obs_shape}, "
                               f"action {action_shape}, prioritized {self.config.prioritized}")
        return ReplayBuffer(obs_shape, action_shape, self.config.capacity,
                            prioritized=self.config.prioritized, alpha=self.config.priority_alpha,
                            beta=self.config.priority_beta, seed=self.config.seed)

    def _sizes(self) -> tuple[int, int]:
        return (len(self.buffer), self.buffer.total_added) if self.buffer is not None else (0, 0)

    def sample(self, batch_size: int) -> SampleResult:
        """Draw ``batch_size`` transitions (0 = only report sizes); thread-safe."""
        with self._lock:
            size, total = self._sizes()
            if batch_size == 0:
                return SampleResult(True, "sizes only", None, size, total)
            if size == 0:
                return SampleResult(False, "buffer is empty; wait for experience", None, 0, total)
            batch = self.buffer.sample(batch_size)
            self._sampled += 1
            return SampleResult(True, "", batch, size, total)

    def save(self, path: str) -> tuple[bool, str, int, str]:
        """Write the buffer to ``path`` (.npz); thread-safe."""
        target = path or DEFAULT_FILE
        with self._lock:
            if self.buffer is None:
                return False, "buffer is empty; nothing to save", 0, target
            try:
                self.buffer.save(target)
            except OSError as error:
                return False, f"could not write {target}: {error}", 0, target
            return True, "saved", len(self.buffer), target

    def load(self, path: str) -> tuple[bool, str, int, str]:
        """Replace the contents with ``path``; on failure the current contents stay."""
        target = path or DEFAULT_FILE
        if not Path(target).is_file():
            return False, f"no file {target}; pass the path of a saved buffer", 0, target
        with self._lock:
            try:
                loaded = ReplayBuffer.from_file(target)
            except (OSError, ValueError) as error:
                return False, f"could not load {target}: {error}", 0, target
            self.buffer = loaded
            return True, "loaded", len(loaded), target

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        size, total = self._sizes()
        values = {"size": size, "capacity": self.config.capacity, "total inserted": total,
                  "fill": f"{size / self.config.capacity:.1%}"}
        if size == 0:
            return WARN, "empty: no experience received yet", values
        return OK, f"{size} transitions", values

    def _publish_status(self) -> None:
        now = time.monotonic()
        size, total = self._sizes()
        then, total_before, sampled_before = self._last_status
        elapsed = max(now - then, 1e-9)
        self._last_status = (now, total, self._sampled)
        msg = ReplayStatus(size=size, capacity=self.config.capacity, total_inserted=total,
                           insert_rate=(total - total_before) / elapsed,
                           sample_rate=(self._sampled - sampled_before) / elapsed,
                           rejected_messages=self.rejected_messages)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.status_pub.publish(msg)


def main() -> int:
    return main_for("replay_buffer")


if __name__ == "__main__":
    raise SystemExit(main())
