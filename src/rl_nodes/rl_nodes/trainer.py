"""Trainer node: takes the batches the replay buffer grants, runs SAC updates, publishes weights.

The replay buffer's rate limiter decides how many gradient steps the data pays for
(``updates_per_step`` per transition after ``learning_starts``), in every mode. Gradient steps run
either interleaved on the dispatch thread right after each insert — when simulator and replay
buffer share the process (colocated), exactly as in the bare loop — or on the trainer's own
learner thread, which samples the buffer directly when it shares the process (hybrid's learner)
and otherwise keeps one sample request in flight over DDS while it updates (double buffering), so
it never waits a round trip per batch. ``update_mode`` selects it (``auto``: interleaved when a
simulator runs in this process) and the node logs which one it chose. Both paths run the same
:class:`rl_core.learner.Learner`, which the bare loop uses too.

When the replay buffer samples by priority (its answers say so), the TD errors of every batch
learned on travel back with the next sample request (:class:`rl_core.replay.PriorityFeedback`),
in every mode: as plain arrays to a buffer in the same process, as request fields over DDS.

When the replay buffer has received ``total_env_steps`` transitions and the updates they pay for
are done, the trainer evaluates the actor, writes the checkpoint, curve and ``result.json`` into
``output_dir`` and ends the process with exit code 0. A checkpoint is also written every
``checkpoint_period`` seconds and on shutdown.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import torch
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import Float64

from rl_core.algorithms.sac import SAC
from rl_core.checkpoint import CheckpointStore, load_checkpoint, restore_rng
from rl_core.config import SACConfig, TrainerConfig
from rl_core.device import describe, resolve_device
from rl_core.envs import space_shapes
from rl_core.image_codecs import is_image_shape
from rl_core.learner import Learner, TrainResult, seed_everything
from rl_core.periodic_evaluation import Evaluation, PeriodicEvaluator
from rl_core.replay import UNLIMITED_BATCHES, PriorityFeedback
from rl_core.replay.prefetch import IDLE_WAIT_S, PrefetchingSampler
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph
from rl_nodes.base import ERROR, OK, RLNode, load_weights_key
from rl_nodes.conversions import (
    EPISODES,
    EXPERIENCE,
    MAX_REQUEST_ROWS,
    SAMPLE_SERVICE,
    WEIGHTS,
    Episodes,
    Experience,
    SampleRequest,
    SampleResult,
    Weights,
    plain,
)
from rl_nodes.intra_process import IntraProcessClient, ServiceUnavailable
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.process_settings import learner_cpus, pin_current_thread
from rl_nodes.runtime import main_for

SAMPLE_SERVICE_NAME = graph.service_name(graph.SAMPLE)
#: Scalars published as std_msgs/Float64 on ~/<name> (rqt_plot) and written to TensorBoard.
METRICS = graph.TRAINER_METRICS
#: Batches asked for per sample request: over DDS one round trip costs about a gradient step.
BATCHES_PER_REQUEST = 8
#: ... but an answer over DDS stays below this many observation bytes, counted uncompressed
#: (camera frames compress far less than renders): Fast DDS took seconds, beyond the service
#: timeout, for answers of tens of MB (8 batches of stacked frames) while experience streamed.
MAX_ANSWER_OBS_BYTES = 4 * 1024 * 1024
PROGRESS_PERIOD_S = 2.0


class TrainerNode(RLNode):
    """SAC learner of the whole deployment."""

    def __init__(self, namespace: str = "") -> None:
        super().__init__("trainer", namespace)
        self.sac_config = declare_config(self, SACConfig)
        self.config = declare_config(self, TrainerConfig)
        watch_config(self, lambda: self.sac_config, self._apply_sac_config)
        watch_config(self, lambda: self.config, self._apply_config)
        if self.config.torch_threads:
            torch.set_num_threads(self.config.torch_threads)
        self.device = resolve_device(self.config.device)
        seed_everything(self.config.seed)
        obs_shape, action_shape = space_shapes(self.config.env_id)
        self._obs_bytes = 2 * int(np.prod(obs_shape)) * (1 if is_image_shape(obs_shape) else 4)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.output_dir = Path(self.config.output_dir or f"runs/train-{stamp}")
        self.checkpoints = CheckpointStore(self.output_dir / "checkpoints",
                                           self.config.keep_checkpoints)
        sac, counters = self._load_learner(obs_shape, action_shape)
        self.weights_version = int(counters.get("weights_version", 0))
        self.sac = sac
        self.weights_key = load_weights_key(self.get_logger())
        self.epoch = time.time_ns()  # orders this trainer's weights after any earlier run's
        self.evaluator = PeriodicEvaluator(self.config.env_id, self.config.eval_period,
                                           self.config.eval_episodes, self.config.seed,
                                           self.output_dir, on_evaluated=self._on_evaluated,
                                           resumed=sac.update_step > 0)
        self.learner = Learner(sac, self.config.env_id, self.config.solve_return, self.evaluator)
        self.learner.episodes = int(counters.get("episodes", 0))
        self.weights_pub = self.zc_publisher(WEIGHTS, graph.WEIGHTS)
        self.sampler = IntraProcessClient(self.ipc, self, SAMPLE_SERVICE, SAMPLE_SERVICE_NAME)
        #: TD errors waiting for the next sample request (prioritized buffers only).
        self.priorities = PriorityFeedback(MAX_REQUEST_ROWS)
        self.zc_subscription(EPISODES, graph.EPISODES, self._on_episodes)
        self.zc_subscription(plain(ReplayStatus), graph.REPLAY_STATUS, self._on_replay_status)
        self.zc_subscription(plain(DiagnosticArray), graph.DIAGNOSTICS, self._on_diagnostics)
        #: The latest boundary figures of each robot (robot_interface ros2_control), by namespace.
        self.robot_figures: dict[str, dict[str, str]] = {}
        self.zc_timer(PROGRESS_PERIOD_S, self._log_progress)
        self.total_inserted = 0
        self.replay_status: ReplayStatus | None = None
        self.metrics_pubs = {name: self.zc_publisher(plain(Float64), f"~/{name}")
                             for name in METRICS}
        self._tensorboard = None
        self._rates = {"updates_per_s": 0.0, "env_steps_per_s": 0.0}
        self.update_mode = ""
        self.finished = False
        self.result: TrainResult | None = None
        self._stop = threading.Event()
        self._learner_thread: threading.Thread | None = None
        self._prefetcher: PrefetchingSampler | None = None
        self._update_lock = threading.Lock()  # the learner thread vs. weights and checkpoints
        self._last_weights = self._last_checkpoint = time.monotonic()
        self._progress = (time.monotonic(), 0, 0)

    def _load_learner(self, obs_shape: tuple[int, ...], action_shape: tuple[int, ...]
                      ) -> tuple[SAC, dict]:
        """A fresh learner, or the one of ``resume`` or else of the newest valid checkpoint of
        this run (a respawned trainer), with its counters and random-number generator states."""
        resume = self.config.resume or self.checkpoints.newest_valid()
        if not resume:
            return SAC(obs_shape if is_image_shape(obs_shape) else int(np.prod(obs_shape)),
                       int(np.prod(action_shape)), self.sac_config,
                       seed=self.config.seed, device=self.device), {}
        sac, meta = load_checkpoint(resume, self.device)
        restore_rng(meta, resume)
        counters = meta["counters"]
        self.get_logger().info(
            f"resumed from {resume} at update {sac.update_step}, weights version "
            f"{counters.get('weights_version', 0)}, {counters.get('env_steps', 0)} env steps")
        return sac, counters

    # Compatibility views of the learner's bookkeeping (tools and tests read them).
    @property
    def episodes(self) -> int:
        return self.learner.episodes

    @property
    def failed_updates(self) -> int:
        return self.learner.failed_updates

    @property
    def metrics(self) -> dict[str, float]:
        return self.learner.metrics

    def _apply_sac_config(self, config: SACConfig) -> None:
        self.sac_config = self.sac.config = config
        self.sac.set_learning_rates(config.actor_lr, config.critic_lr, config.alpha_lr)

    def _apply_config(self, config: TrainerConfig) -> None:
        self.config = config

    def start(self) -> None:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        try:
            from torch.utils.tensorboard import SummaryWriter
            self._tensorboard = SummaryWriter(str(self.output_dir / "tensorboard"))
        except ImportError as error:  # tensorboard is optional for a robot-side install
            self.get_logger().warn(f"TensorBoard logging off ({error}); pip install tensorboard")
        self._publish_weights()
        simulator_here = self.ipc.has_local_publisher(graph.EXPERIENCE.name)
        interleave = self.sampler.is_local and (
            self.config.update_mode == "interleaved"
            or self.config.update_mode == "auto" and simulator_here)
        if self.config.update_mode == "interleaved" and not self.sampler.is_local:
            self.get_logger().warn("update_mode 'interleaved' needs the replay buffer in this "
                                   "process; using the learner thread instead")
        self.update_mode = "interleaved" if interleave else "thread"
        where = ("dispatch thread, after each insert" if interleave else
                 "learner thread, sampling the local buffer" if self.sampler.is_local else
                 "learner thread, batches prefetched over DDS")
        self.get_logger().info(
            f"update mode: {self.update_mode} ({where}) on {describe(self.device)}; the replay "
            f"buffer's rate limiter grants the batches; training until "
            f"{self.config.total_env_steps} transitions; output in {self.output_dir}")
        if interleave:
            self.zc_subscription(EXPERIENCE, graph.EXPERIENCE, self._on_experience)
            return
        if not self.sampler.is_local:
            self._prefetcher = PrefetchingSampler(
                lambda: self.sampler.call(self._request(self._batches_per_request())),
                lambda reason: self.reject("sample service", reason), ServiceUnavailable)
        self._learner_thread = threading.Thread(target=self._learner_loop, name="learner",
                                                daemon=True)
        self._learner_thread.start()

    # --- updates --------------------------------------------------------------------------------

    def _batches_per_request(self) -> int:
        """:data:`BATCHES_PER_REQUEST`, fewer where batches of images would make the answer too
        large for DDS (``obs`` and ``next_obs`` of every row; a local call copies nothing)."""
        if self.sampler.is_local:
            return BATCHES_PER_REQUEST
        batch_bytes = self.config.batch_size * self._obs_bytes
        return max(1, min(BATCHES_PER_REQUEST, MAX_ANSWER_OBS_BYTES // batch_bytes))

    def _request(self, batches: int) -> SampleRequest:
        return SampleRequest(self.config.batch_size, batches, self.weights_version,
                             self.config.total_env_steps, self.priorities.take())

    def _learn(self, result: SampleResult) -> int:
        """Run a gradient step on every granted batch (keeping its TD errors as new priorities
        when the buffer is prioritized); returns how many batches there were."""
        self.total_inserted = max(self.total_inserted, result.total_inserted)
        for batch in result.batches:
            with self._update_lock:
                ok = self.learner.update(batch)
                td_errors = self.sac.last_td_errors
            if not ok:
                self.reject("update", self.learner.last_error)
            elif result.prioritized:
                self.priorities.add(batch.indices, td_errors, result.total_inserted)
        if self.evaluator.due(self.total_inserted) and not self.finished:
            with self._update_lock:
                self.learner.evaluate_if_due(self.total_inserted, self._counters())
        return len(result.batches)

    def _on_evaluated(self, evaluation: Evaluation, best: Evaluation) -> None:
        """A periodic evaluation finished (on its own thread): TensorBoard and the log."""
        if self._tensorboard is not None:
            self._tensorboard.add_scalar("eval/mean_return", evaluation.mean_return,
                                         evaluation.env_steps)
            self._tensorboard.add_scalar("eval/best_mean_return", best.mean_return,
                                         evaluation.env_steps)
            if evaluation.success_rate is not None:
                self._tensorboard.add_scalar("eval/success_rate", evaluation.success_rate,
                                             evaluation.env_steps)
        success = (f", success {evaluation.success_rate:.0%}"
                   if evaluation.success_rate is not None else "")
        self.get_logger().info(
            f"evaluation at {evaluation.env_steps} transitions: return "
            f"{evaluation.mean_return:.1f}{success} | best {best.mean_return:.1f} at "
            f"{best.env_steps} transitions (kept in {self.evaluator.best_checkpoint})")

    def _budget_reached(self) -> bool:
        return self.total_inserted >= self.config.total_env_steps

    def _on_experience(self, msg: Experience) -> None:
        """Interleaved mode: run the updates the rate limiter grants after this insert."""
        if self.finished:
            return
        self._learn(self.sampler.call(self._request(UNLIMITED_BATCHES)))
        self._periodic()
        if self._budget_reached():
            self._finish()

    def _learner_loop(self) -> None:
        """Thread mode: update on every granted batch; finish once the budget's updates are done.

        An error in one round is counted and logged and the loop goes on; should the thread die
        anyway, the process ends with exit code 1 so that it is respawned.
        """
        try:
            pin_current_thread(learner_cpus())
            while not self._stop.is_set():
                try:
                    if self._learn_round():
                        return
                except Exception as error:  # noqa: BLE001 - counted and logged, then go on
                    self.reject("learner round", f"{type(error).__name__}: {error}")
                    self._stop.wait(0.1)
        except BaseException:
            self.ipc.request_shutdown(1)
            raise

    def _learn_round(self) -> bool:
        """One round of the learner thread; True when training is complete."""
        if self._prefetcher is not None:
            result = self._prefetcher.get(timeout_s=0.5)
            if result is None:
                return False
        else:
            result = self.sampler.call(self._request(self._batches_per_request()))
        learned = self._learn(result)
        self._periodic()
        if not learned:
            if self._budget_reached():  # every update the budget's data pays for is done
                self.ipc.post(self._finish)
                return True
            self._stop.wait(IDLE_WAIT_S)
        return False

    def _periodic(self) -> None:
        now = time.monotonic()
        if now - self._last_weights >= self.config.weights_period:
            self._publish_weights()
        if self.config.checkpoint_period and now - self._last_checkpoint >= self.config.checkpoint_period:
            self.save()

    def _publish_weights(self) -> None:
        self._last_weights = time.monotonic()
        self.weights_version += 1
        with self._update_lock:  # CPU copies: receivers and the wire format never see a GPU
            state = {k: v.detach().to("cpu", copy=True)
                     for k, v in self.sac.actor.state_dict().items()}
        weights = Weights(self.weights_version, self.sac.update_step, state,
                          self.sac.actor.architecture(), time.time_ns(), epoch=self.epoch)
        if self.weights_key is not None:
            weights.sign(self.weights_key)
        self.weights_pub.publish(weights)

    def save(self) -> Path:
        """Write a checkpoint of the learner now (kept with the last ``keep_checkpoints``)."""
        self._last_checkpoint = time.monotonic()
        with self._update_lock:
            return self.checkpoints.save(self.sac, self._counters(), env_id=self.config.env_id)

    def _counters(self) -> dict[str, int]:
        return {"env_steps": self.total_inserted, "episodes": self.episodes,
                "weights_version": self.weights_version}

    # --- progress and the end ---------------------------------------------------------------------

    def _on_episodes(self, msg: Episodes) -> None:
        robots = self.config.deployment_robots
        if robots and msg.robot_id >= robots:
            self.reject("episodes (foreign robot)", f"robot id {msg.robot_id} is not one of this "
                        f"deployment's robots 0..{robots - 1}")
            return
        returns = np.asarray(msg.returns, dtype=np.float64)
        if not np.all(np.isfinite(returns)):
            self.reject("episodes (non-finite return)", f"robot {msg.robot_id}: returns "
                        f"{returns.tolist()[:8]}")
            return
        for episode_return in returns:
            self.learner.record_episode(float(episode_return), self.total_inserted)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        """Keep each robot boundary's latency, rate and safety counts for result.json."""
        for status in msg.status:
            values = {item.key: item.value for item in status.values}
            if graph.LATENCY_P50_KEY in values:
                self.robot_figures[status.hardware_id] = {
                    key: value for key, value in values.items()
                    if key in (graph.LATENCY_P50_KEY, graph.LATENCY_P99_KEY,
                               graph.CONTROL_RATE_KEY) or key.startswith(graph.SAFETY_KEY_PREFIX)}

    def _on_replay_status(self, msg: ReplayStatus) -> None:
        self.replay_status = msg

    def _replay_scalars(self) -> dict[str, float]:
        status = self.replay_status
        if status is None:
            return {}
        return {"updates_per_transition": float(status.updates_per_transition),
                "policy_lag": float(max(0, int(status.newest_weights_version)
                                        - int(status.acting_weights_version))),
                "acting_blocked_s": float(status.insert_blocked_s),
                "learner_blocked_s": float(status.sample_blocked_s)}

    def _scalars(self) -> dict[str, float]:
        return {**{k: float(v) for k, v in self.metrics.items() if k in METRICS},
                "mean_return": self.learner.mean_return, **self._rates, **self._replay_scalars()}

    def _log_progress(self) -> None:
        now = time.monotonic()
        then, steps_then, updates_then = self._progress
        self._progress = (now, self.total_inserted, self.sac.update_step)
        elapsed = max(now - then, 1e-9)
        rate = (self.total_inserted - steps_then) / elapsed
        self._rates = {"updates_per_s": (self.sac.update_step - updates_then) / elapsed,
                       "env_steps_per_s": rate}
        scalars = self._scalars()
        for name, value in scalars.items():
            if name in self.metrics_pubs and np.isfinite(value):
                self.metrics_pubs[name].publish(Float64(data=value))
        if self._tensorboard is not None:
            for name, value in scalars.items():
                if np.isfinite(value):
                    self._tensorboard.add_scalar(f"train/{name}", value, self.total_inserted)
        ratio = scalars.get("updates_per_transition")
        self.get_logger().info(
            f"steps {self.total_inserted}/{self.config.total_env_steps} | {rate:,.0f} steps/s | "
            f"episodes {self.episodes} | return(last {len(self.learner.recent_returns)}) "
            f"{self.learner.mean_return:.1f} | updates {self.sac.update_step}"
            + (f" ({ratio:.2f}/transition)" if ratio is not None else "")
            + f" | weights v{self.weights_version} | "
            f"critic loss {self.metrics.get('critic_loss', float('nan')):.3f}")

    def _finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        self._stop.set()
        if self._prefetcher is not None:
            self._prefetcher.stop()  # joined in close(), once the executor turns again
        self._publish_weights()
        status = self.replay_status
        # learning_starts is the replay buffer's parameter; without its status, count them all.
        learning_starts = int(status.learning_starts) if status is not None else 0
        with self._update_lock:
            self.result = self.learner.finish(
                self.total_inserted,
                min(self.total_inserted, self.config.total_env_steps) - learning_starts,
                self.config.eval_episodes, self.config.seed, self.output_dir,
                counters=self._counters(),
                title=f"{self.config.env_id} (SAC, {self.update_mode})",
                extra={"update_mode": self.update_mode, "device": self.device.type,
                       "weights_version": self.weights_version,
                       **({"robots": dict(sorted(self.robot_figures.items()))}
                          if self.robot_figures else {}),
                       **{name: value for name, value in self._replay_scalars().items()
                          if name != "updates_per_transition"}})
        self._last_checkpoint = time.monotonic()
        result = self.result
        self.get_logger().info(
            f"done: {result.env_steps} transitions, {result.updates} updates "
            f"({result.updates_per_transition:.3f} per transition), {result.episodes} episodes | "
            f"evaluation return {result.eval_mean_return:.1f} ± {result.eval_std_return:.1f} over "
            f"{len(result.eval_returns)} episodes | checkpoint {result.checkpoint_dir}"
            + (f" | best: return {result.best_eval_mean_return:.1f} at {result.best_env_steps} "
               f"transitions, {result.best_checkpoint_dir}"
               if result.best_eval_mean_return is not None else "")
            + f" | output {self.output_dir}")
        self.ipc.request_shutdown(0)

    def diagnose(self) -> tuple[int, str, dict[str, object]]:
        scalars = self._scalars()
        values = {"updates": self.sac.update_step, "weights version": self.weights_version,
                  "transitions": self.total_inserted, "failed updates": self.failed_updates,
                  **{k: f"{v:.4g}" for k, v in scalars.items()}}
        loss = self.metrics.get("critic_loss")
        if self.failed_updates or (loss is not None and not np.isfinite(loss)):
            return ERROR, "loss is NaN/inf: updates are skipped (lower learning rates?)", values
        if self.finished:
            return OK, "training finished", values
        if self.sac.update_step == 0:
            return OK, f"warming up ({self.total_inserted} transitions, no update granted yet)", values
        return OK, f"training ({self.update_mode})", values

    def close(self) -> None:
        self.evaluator.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        self._stop.set()
        if self._prefetcher is not None:
            self._prefetcher.close()
        if self._learner_thread is not None:
            self._learner_thread.join(timeout=5.0)
        if not self.finished:  # interrupted: keep what was learned
            path = self.save()
            self.get_logger().info(f"stopped before the end; checkpoint written to {path}")


def main() -> int:
    return main_for("trainer")


if __name__ == "__main__":
    raise SystemExit(main())
