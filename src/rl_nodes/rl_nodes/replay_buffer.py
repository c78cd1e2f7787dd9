"""Replay buffer node: stores ``/experience`` from every robot, serves ``sample``,
``update_priorities``, ``save`` and ``load``.

The buffer is sized from ``env_id``. A rate limiter (Reverb's ``SampleToInsertRatio``, see
:mod:`rl_core.replay.limited`) keeps learning at ``updates_per_transition`` batches per transition:
``sample`` grants only the batches the data pays for, and when acting runs more than
``error_buffer`` transitions ahead of learning the node raises ``acting_paused`` on
``/replay_status`` (at once on every change, and every second), which the simulators obey.
Inserts are never refused for rate reasons, so no experience is dropped; malformed batches and
bad priority updates are rejected with a logged reason and counted (docs/replay.md).

What is stored and answered, the files and the figures are :mod:`rl_core.replay.service`'s; this
node connects it to the topics, services and timers.
"""

from __future__ import annotations

import dataclasses
import threading
import time

from rl_core.config import ReplayConfig
from rl_core.replay import RateLimitedReplay, ReplayBuffer
from rl_core.replay.service import ReplayService
from rl_core.robot.tasks import space_shapes
from rl_core.security.signed_status import StatusSigner, sign_status
from rl_core.wire.image_codecs import is_image_shape
from rl_core.wire.messages import MAX_REQUEST_ROWS, FileAnswer, SampleAnswer, SampleRequest
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph
from rl_nodes.base import EXPERIENCE_QOS, OK, WARN, RLNode, load_signing_key
from rl_nodes.image_transport import subscribe_with_images
from rl_nodes.intra_process_endpoints import create_service
from rl_nodes.messages import (
    BUFFER_FILE_SERVICE,
    EXPERIENCE_WITH_IMAGES,
    PRIORITIES_SERVICE,
    SAMPLE_SERVICE,
    Experience,
)
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.runtime import main_for

STATUS_PERIOD_S = 1.0


class ReplayBufferNode(RLNode):
    """Shared experience storage for all robots."""

    NAME = "replay_buffer"

    def build(self) -> None:
        self.config = declare_config(self, ReplayConfig)
        watch_config(self, lambda: self.config, self._apply_config)
        self.obs_shape, self.action_shape = space_shapes(self.config.env_id)
        self._status_lock = threading.Lock()
        self.service = ReplayService(self.config, self.obs_shape, self.action_shape, self.reject,
                                     self._publish_status, MAX_REQUEST_ROWS, STATUS_PERIOD_S,
                                     StatusSigner(load_signing_key(self.get_logger())))
        if is_image_shape(self.obs_shape):  # image batches: their frames on the side topics
            subscribe_with_images(self, EXPERIENCE_WITH_IMAGES, graph.EXPERIENCE.name,
                                  EXPERIENCE_QOS, self._on_experience, "experience",
                                  self.obs_shape)
        else:
            self.subscription(graph.EXPERIENCE, self._on_experience)
        self.status_pub = self.publisher(graph.REPLAY_STATUS)
        create_service(self.ipc, self, SAMPLE_SERVICE, graph.SAMPLE.name, self.sample)
        create_service(self.ipc, self, PRIORITIES_SERVICE, graph.UPDATE_PRIORITIES.name,
                       self.service.update_priorities)
        create_service(self.ipc, self, BUFFER_FILE_SERVICE, graph.SAVE.name, self.save)
        create_service(self.ipc, self, BUFFER_FILE_SERVICE, graph.LOAD.name, self.load)
        self.timer(STATUS_PERIOD_S, self._publish_status)
        self._recover()
        if self.config.snapshot_period > 0:
            self.timer(self.config.snapshot_period, self.service.snapshot)
        if not self.config.output_dir:
            self.get_logger().warn(
                "no output_dir: no snapshots, so a crash of this node loses every stored "
                "transition (rl-bringup and the launch files always give one; set output_dir)")
        self.get_logger().info(
            f"replay buffer: capacity {self.config.capacity}, obs {self.obs_shape}, action "
            f"{self.action_shape}, prioritized {self.config.prioritized}; rate limit "
            f"{'on' if self.config.rate_limit else 'off (acting runs free, ratio reported)'}: "
            f"{self.config.updates_per_transition} updates per transition after "
            f"{self.config.learning_starts}, acting at most {self.config.error_buffer} ahead")
        if self.replay.demo_note:
            self.get_logger().info(self.replay.demo_note)

    @property
    def replay(self) -> RateLimitedReplay:
        """The service's rate-limited buffer; it has no lock of its own, so another thread
        reads it under ``self.service.lock`` (or through the service's methods)."""
        return self.service.replay

    @property
    def buffer(self) -> ReplayBuffer:
        return self.service.buffer

    def _apply_config(self, config: ReplayConfig) -> None:
        self.config = config
        self.service.configure(config)

    def _on_experience(self, msg: Experience) -> None:
        self.service.insert(msg)

    def sample(self, request: SampleRequest) -> SampleAnswer:
        """Grant up to ``request.max_batches`` batches (0 = only report sizes); thread-safe.
        Deactivated, the buffer stores on and grants nothing: learning waits."""
        if not self.active:
            request = dataclasses.replace(request, max_batches=0)
        return self.service.sample(request)

    def save(self, path: str) -> FileAnswer:
        """Write the buffer to ``output_dir/replay/<path>`` (.npz), at most once per
        ``save_interval``; thread-safe."""
        return self.service.save(path)

    def load(self, path: str) -> FileAnswer:
        """Replace the contents with ``output_dir/replay/<path>`` before the run is active
        (nothing stored or granted since start); on failure or refusal nothing changes."""
        return self.service.load(path)

    def _recover(self) -> None:
        """Restore this run's latest snapshot and the insert log after it (a respawned buffer)."""
        outcome = self.service.recover()
        if outcome is not None:
            restored, message = outcome
            (self.get_logger().info if restored else self.get_logger().error)(message)

    def close(self) -> None:
        # One int read without the service's lock: atomic in CPython, and a late insert only
        # makes it one batch old.
        interventions = self.replay.intervened_rows
        if interventions:
            self.get_logger().info(
                f"interventions: {interventions} transitions an operator drove "
                "were stored online and among the demonstrations")
        self.service.close()
        if self.service.snapshot_error:
            self.get_logger().error(f"last snapshot not written: {self.service.snapshot_error}; "
                                    "a respawn restores the one before and the insert log")

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        healthy, message, values = self.service.diagnostics()
        return (OK if healthy else WARN), message, values

    def _publish_status(self) -> None:
        """Publish /replay_status (every STATUS_PERIOD_S, and at once when acting pauses/resumes)."""
        # One at a time (the timer, and the insert that paused acting): statuses leave in the
        # order of their sequence numbers, which receivers require.
        with self._status_lock:
            figures = self.service.status(time.monotonic())
            msg = ReplayStatus(**dataclasses.asdict(figures),
                               rejected_messages=self.rejected_messages)
            msg.header.stamp = self.get_clock().now().to_msg()
            sign_status(msg, self.service.signer)
            self.status_pub.publish(msg)


def main() -> int:
    return main_for("replay_buffer")


if __name__ == "__main__":
    raise SystemExit(main())
