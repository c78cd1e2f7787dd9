"""Trainer node: takes the batches the replay buffer grants, runs SAC updates, publishes weights.

The replay buffer's rate limiter decides how many gradient steps the data pays for, in every
mode; the updates run through the one loop of :class:`rl_core.learning.learner.Learner` (the bare loop's
too), fed by one of three sources (``update_mode``; docs/architecture.md, "Learning"): a grant
after each insert on the dispatch thread (colocated), or the learner thread sampling the buffer
in this process (hybrid's learner) or prefetching over DDS. When the buffer samples by priority,
TD errors travel back with the next sample request. The replay buffer owns the schedule: once it
says that the run is done (its ``total_env_steps`` are in and their updates granted), the node
learns on the last batches, writes checkpoint, curve and ``result.json`` into ``output_dir`` and
ends the process with exit code 0; it also checkpoints every ``checkpoint_period`` seconds and on
shutdown.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import Float64

from rl_core.config import SACConfig, TrainerConfig
from rl_core.learning.device import describe
from rl_core.learning.learner import GETTING_BATCHES, WEIGHTS_AND_CHECKPOINTS, Grant, PrefetchingSampler
from rl_core.learning.periodic_evaluation import Evaluation
from rl_core.learning.training_run import INTERLEAVED, TrainingRun, batches_per_request, choose_update_mode
from rl_core.monitoring.progress import (
    TRAINER_SCALARS,
    RobotFigures,
    evaluation_line,
    is_deployment_robot,
    summary_line,
)
from rl_core.replay import UNLIMITED_BATCHES
from rl_core.robot.tasks import space_shapes, task_choices
from rl_core.security.signed_status import StatusCheck
from rl_core.security.weights_auth import sign_weights
from rl_core.wire.messages import MAX_REQUEST_ROWS, SampleRequest
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph
from rl_nodes.base import ERROR, OK, RLNode, load_signing_key
from rl_nodes.intra_process_endpoints import IntraProcessClient, ServiceUnavailable
from rl_nodes.messages import PRIORITIES_SERVICE, SAMPLE_SERVICE, Episodes, Experience, Weights, plain
from rl_nodes.parameters import declare_config, declare_moved, watch_config
from rl_nodes.process_settings import learner_cpus, pin_current_thread
from rl_nodes.runtime import main_for

SAMPLE_SERVICE_NAME = graph.service_name(graph.SAMPLE)
PRIORITIES_SERVICE_NAME = graph.service_name(graph.UPDATE_PRIORITIES)
PROGRESS_PERIOD_S = 2.0
#: How often a deactivated learner thread looks whether it is active again.
PAUSED_POLL_S = 0.1
#: Diagnostic keys of a robot boundary kept for result.json (and those starting with safety).
ROBOT_FIGURE_KEYS = (graph.LATENCY_P50_KEY, graph.LATENCY_P99_KEY, graph.CONTROL_RATE_KEY,
                     graph.INTERVENTION_RATE_KEY)


class TrainerNode(RLNode):
    """SAC learner of the whole deployment."""

    NAME = "trainer"

    def build(self) -> None:
        self.sac_config = declare_config(self, SACConfig)
        self.config = declare_config(self, TrainerConfig)
        watch_config(self, lambda: self.sac_config, self._apply_sac_config)
        watch_config(self, lambda: self.config, self._apply_config)
        declare_moved(self, "total_env_steps")  # the replay buffer's
        obs_shape, action_shape = space_shapes(self.config.env_id)
        self._obs_shape = obs_shape
        self.run = TrainingRun(self.config, self.sac_config, obs_shape, action_shape,
                               choices=task_choices(self.config.env_id), report=self.reject,
                               log=self.get_logger().info, on_evaluated=self._on_evaluated,
                               priority_rows=MAX_REQUEST_ROWS)
        self.sac, self.learner, self.device = self.run.sac, self.run.learner, self.run.device
        self.weights_key = load_signing_key(self.get_logger())
        # The buffer signs its status with the same key; a trainer without one is a
        # development run, whose buffer signs nothing either.
        self.status_check = StatusCheck(self.weights_key.public if self.weights_key else None,
                                        allow_unsigned=self.weights_key is None)
        self.weights_pub = self.publisher(graph.WEIGHTS)
        self.sampler = IntraProcessClient(self.ipc, self, SAMPLE_SERVICE, SAMPLE_SERVICE_NAME)
        self.prioritizer = IntraProcessClient(self.ipc, self, PRIORITIES_SERVICE,
                                              PRIORITIES_SERVICE_NAME)
        self.subscription(graph.EPISODES, self._on_episodes)
        self.subscription(graph.REPLAY_STATUS, self._on_replay_status)
        self.subscription(graph.DIAGNOSTICS, self._on_diagnostics)
        #: The latest boundary figures of each robot (robot_interface ros2_control), by
        #: namespace; bounded and checked, as anyone can publish /diagnostics.
        self.robot_figures = RobotFigures(ROBOT_FIGURE_KEYS, (graph.SAFETY_KEY_PREFIX,), known=(
            lambda robot: is_deployment_robot(robot, self.config.deployment_robots)))
        self.timer(PROGRESS_PERIOD_S, self._log_progress)
        self.replay_status: ReplayStatus | None = None
        self.metrics_pubs = {name: self.publisher(f"~/{name}", plain(Float64))
                             for name in TRAINER_SCALARS}
        self.update_mode = ""
        self.finished = False
        self._stop = threading.Event()
        self._learner_thread: threading.Thread | None = None
        self._prefetcher: PrefetchingSampler | None = None
        self._last_weights = self._last_checkpoint = time.monotonic()

    def _apply_sac_config(self, config: SACConfig) -> None:
        self.sac_config = self.sac.config = config
        self.sac.set_learning_rates(config.actor_lr, config.critic_lr, config.alpha_lr)

    def _apply_config(self, config: TrainerConfig) -> None:
        self.config = self.run.config = config
        self.learner.stop_at_target = config.stop_at_target  # the learner holds a copy

    def begin(self) -> None:
        warning = self.run.start()
        if warning:
            self.get_logger().warn(warning)
        self._publish_weights()
        self.update_mode, where, warning = choose_update_mode(
            self.config.update_mode, self.sampler.is_local,
            self.ipc.has_local_publisher(self.resolve_topic_name(graph.EXPERIENCE.name)))
        if warning:
            self.get_logger().warn(warning)
        compiling = ("; compile_update: the first gradient step compiles the update "
                     "(torch.compile, about 15-40 s; acting waits for it)"
                     if self.sac_config.compile_update else "")
        self.get_logger().info(
            f"update mode: {self.update_mode} ({where}) on {describe(self.device)}, products in "
            f"{self.sac_config.update_precision}; the replay "
            f"buffer's rate limiter grants the batches and says when the run is done; "
            f"output in {self.run.output_dir}{compiling}")
        if self.update_mode == INTERLEAVED:
            self.subscription(graph.EXPERIENCE, self._on_experience)
            return
        self._learner_thread = threading.Thread(target=self._learner_thread_main, name="learner",
                                                daemon=True)
        self._learner_thread.start()

    # --- the three sources of grants ------------------------------------------------------------

    def _sample(self, batches: int) -> Grant:
        """The learner's new priorities go back first, so that the batches drawn next follow
        them; then the request."""
        update = self.learner.priorities.take()
        if update is not None:
            answer = self.prioritizer.call(update)
            if not answer.success:
                self.reject("priorities", answer.message)
        return self.sampler.call(SampleRequest(self.config.batch_size, batches))

    def _on_experience(self, _msg: Experience | None = None) -> None:
        """Interleaved: learn on what the rate limiter grants after this insert (deactivated:
        nothing; the grants wait in the buffer)."""
        if self.finished or not self.active:
            return
        with self.learner.timed(GETTING_BATCHES):
            grant = self._sample(UNLIMITED_BATCHES)
        self.learner.learn(grant)
        with self.learner.timed(WEIGHTS_AND_CHECKPOINTS):
            self._periodic()
        if self.run.done:
            # After what is queued: the replay buffer's last status first, so that robots in
            # this process stop acting (and are held) before the final checkpoint is written.
            self.ipc.post_for(self, self._finish)

    def _learner_thread_main(self) -> None:
        """Thread mode: the learner's loop over the local buffer or the prefetching client;
        should the thread die, the process ends with exit code 1 so that it is respawned."""
        try:
            pin_current_thread(learner_cpus())
            sample = functools.partial(self._sample, batches_per_request(
                self.config.batch_size, self._obs_shape, over_dds=not self.sampler.is_local))
            source: Callable[[], Grant | None] = sample
            if not self.sampler.is_local:
                self._prefetcher = PrefetchingSampler(
                    sample, lambda reason: self.reject("sample service", reason),
                    ServiceUnavailable)
                source = functools.partial(self._prefetcher.get, timeout_s=0.5)
            if self.learner.run(functools.partial(self._while_active, source), self._stop,
                                self._periodic):
                self.ipc.post_for(self, self._finish)
        except BaseException:
            self.ipc.request_shutdown(1)
            raise

    def _while_active(self, source: Callable[[], Grant | None]) -> Grant | None:
        """The next grant, or none while the node is deactivated (lifecycle)."""
        if self.active:
            return source()
        self._stop.wait(PAUSED_POLL_S)
        return None

    # --- weights and checkpoints ----------------------------------------------------------------

    def _periodic(self) -> None:
        now = time.monotonic()
        if now - self._last_weights >= self.config.weights_period:
            self._publish_weights()
        if self.config.checkpoint_period and now - self._last_checkpoint >= self.config.checkpoint_period:
            self.save()

    def _publish_weights(self) -> None:
        self._last_weights = time.monotonic()
        version, state = self.run.next_weights()
        weights = Weights(version, self.sac.update_step, state, self.sac.actor.architecture(),
                          time.time_ns(), epoch=self.run.epoch)
        if self.weights_key is not None:
            sign_weights(weights, self.weights_key)
        self.weights_pub.publish(weights)

    def save(self) -> Path:
        """Write a checkpoint of the learner now (kept with the last ``keep_checkpoints``)."""
        self._last_checkpoint = time.monotonic()
        return self.run.save()

    # --- progress and the end ---------------------------------------------------------------------

    def _on_episodes(self, msg: Episodes) -> None:
        refused = self.run.record_episodes(msg.robot_id, msg.returns)
        if refused:
            self.reject(*refused)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        """Keep each robot boundary's latency, rate and safety counts, and each robot's
        intervention rate, for result.json."""
        for status in msg.status:
            values = {item.key: item.value for item in status.values}
            if graph.LATENCY_P50_KEY in values or graph.INTERVENTION_RATE_KEY in values:
                self.robot_figures.update(status.hardware_id, values)

    def _on_replay_status(self, msg: ReplayStatus) -> None:
        if self.status_obeyed(msg, self.status_check):
            self.replay_status = msg
            if self.update_mode == INTERLEAVED and msg.acting_paused:
                # Grants left waiting with acting held (this trainer or the replay buffer
                # activated again after a pause): no insert would come to trigger them.
                self._on_experience()

    def _on_evaluated(self, evaluation: Evaluation, best: Evaluation) -> None:
        """A periodic evaluation finished (on its own thread): TensorBoard and the log."""
        if self.run.tensorboard is not None:
            self.run.tensorboard.evaluation(evaluation, best)
        self.get_logger().info(evaluation_line(evaluation, best, self.run.evaluator.best_checkpoint))

    def _log_progress(self) -> None:
        line, scalars = self.run.progress(self.replay_status)
        self.run.intervention_rates(self.robot_figures.numbers(graph.INTERVENTION_RATE_KEY))
        for name, value in scalars.items():
            if name in self.metrics_pubs and np.isfinite(value):
                self.metrics_pubs[name].publish(Float64(data=value))
        self.get_logger().info(line)

    def _finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        self._stop.set()
        if self._prefetcher is not None:
            self._prefetcher.stop()  # joined in close(), once the executor turns again
        self._publish_weights()
        robots = {"robots": self.robot_figures.table()} if len(self.robot_figures) else {}
        result = self.run.finish(self.update_mode, self.replay_status, robots)
        self._last_checkpoint = time.monotonic()
        self.get_logger().info(f"{summary_line(result)} | output {self.run.output_dir}")
        self.ipc.request_shutdown(0)

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        healthy, message, values = self.run.diagnosis(self.replay_status, self.update_mode,
                                                      self.finished)
        values = {**values, "robot figures dropped": self.robot_figures.dropped,
                  "robot figures malformed": self.robot_figures.malformed}
        return (OK if healthy else ERROR), message, values

    def close(self) -> None:
        self._stop.set()
        if self._prefetcher is not None:
            self._prefetcher.close()
        if self._learner_thread is not None:
            self._learner_thread.join(timeout=5.0)
        if not self.finished:  # interrupted: keep what was learned
            path = self.save()
            self.get_logger().info(f"stopped before the end; checkpoint written to {path}")
        self.run.close()  # last: it lets output_dir go


def main() -> int:
    return main_for("trainer")


if __name__ == "__main__":
    raise SystemExit(main())
