"""Trainer node: samples the replay buffer, runs SAC updates, publishes versioned weights.

Gradient steps run either interleaved on the dispatch thread — exactly ``updates_per_step`` per
collected transition, as in the bare loop; possible when the replay buffer lives in the same
process — or in a learner thread that runs as fast as the data allows (never more than
``updates_per_step`` per transition), so long updates never stall acting. ``update_mode`` selects
it (``auto``: interleaved when possible) and the node logs which one it chose.

When the replay buffer has received ``total_env_steps`` transitions the trainer evaluates the
actor, writes the checkpoint and ``result.json`` into ``output_dir`` and ends the process with
exit code 0. A checkpoint is also written every ``checkpoint_period`` seconds and on shutdown.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from rl_core.algorithms.sac import SAC
from rl_core.checkpoint import load_checkpoint, save_checkpoint
from rl_core.config import SACConfig, TrainerConfig
from rl_core.envs import space_shapes
from rl_core.replay import Batch
from rl_core.evaluation import evaluate
from rl_core.plotting import plot_training_curve
from rl_core.training import TrainResult, UpdateSchedule, seed_everything

from std_msgs.msg import Float64

from rl_nodes.base import EPISODES_TOPIC, EXPERIENCE_TOPIC, LATCHED_QOS, WEIGHTS_TOPIC, RLNode
from rl_nodes.base import ERROR, OK, WARN
from rl_nodes.conversions import EPISODES, EXPERIENCE, SAMPLE_SERVICE, WEIGHTS, plain
from rl_nodes.conversions import Episodes, Experience, SampleResult, Weights
from rl_nodes.intra_process import IntraProcessClient, ServiceUnavailable
from rl_nodes.parameters import declare_config, watch_config
from rl_nodes.runtime import main_for

SAMPLE_SERVICE_NAME = "/replay_buffer/sample"
#: Scalars published as std_msgs/Float64 on ~/<name> (rqt_plot) and written to TensorBoard.
METRICS = ("critic_loss", "actor_loss", "alpha", "q_mean", "entropy", "mean_return",
           "updates_per_s", "env_steps_per_s")
PREFETCH_BATCHES = 8


def split_batch(result: SampleResult, parts: int) -> list[SampleResult]:
    """Split one sampled batch of ``parts * B`` transitions into ``parts`` batches of ``B``."""
    if result.batch is None or parts <= 1:
        return [result] if result.batch is not None else []
    return [replace(result, batch=Batch(*(field[i::parts] for field in result.batch)))
            for i in range(parts)]
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
        seed_everything(self.config.seed)
        obs_shape, action_shape = space_shapes(self.config.env_id)
        self.weights_version = 0
        if self.config.resume:
            self.sac, meta = load_checkpoint(self.config.resume)
            self.weights_version = int(meta["counters"].get("weights_version", 0))
            self.get_logger().info(f"resumed from {self.config.resume} at update "
                                   f"{self.sac.update_step}, weights version {self.weights_version}")
        else:
            self.sac = SAC(int(np.prod(obs_shape)), int(np.prod(action_shape)), self.sac_config,
                           seed=self.config.seed)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.output_dir = Path(self.config.output_dir or f"runs/train-{stamp}")
        self.schedule = UpdateSchedule(self.config.updates_per_step, self.config.learning_starts)
        self.weights_pub = self.zc_publisher(WEIGHTS, WEIGHTS_TOPIC, LATCHED_QOS)
        self.sampler = IntraProcessClient(self.ipc, self, SAMPLE_SERVICE, SAMPLE_SERVICE_NAME)
        self.zc_subscription(EPISODES, EPISODES_TOPIC, self._on_episodes)
        self.zc_timer(PROGRESS_PERIOD_S, self._log_progress)
        self.metrics: dict[str, float] = {}
        self.total_inserted = 0
        self.episodes = 0
        self.recent_returns: deque[float] = deque(maxlen=20)
        self.curve: list[tuple[int, float]] = []  # (transitions so far, episode return)
        self.failed_updates = 0
        self.metrics_pubs = {name: self.zc_publisher(plain(Float64), f"~/{name}")
                             for name in METRICS}
        self._tensorboard = None
        self._rates = {"updates_per_s": 0.0, "env_steps_per_s": 0.0}
        self.update_mode = ""
        self.finished = False
        self.result: TrainResult | None = None
        self._stop = threading.Event()
        self._learner: threading.Thread | None = None
        self._update_lock = threading.Lock()  # the learner thread vs. checkpoints on shutdown
        self._started_at = time.monotonic()
        self._last_weights = self._last_checkpoint = self._started_at
        self._progress = (self._started_at, 0, 0)

    def _apply_sac_config(self, config: SACConfig) -> None:
        self.sac_config = self.sac.config = config
        self.sac.set_learning_rates(config.actor_lr, config.critic_lr, config.alpha_lr)

    def _apply_config(self, config: TrainerConfig) -> None:
        self.config = config
        self.schedule.updates_per_step = config.updates_per_step

    def start(self) -> None:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        try:
            from torch.utils.tensorboard import SummaryWriter
            self._tensorboard = SummaryWriter(str(self.output_dir / "tensorboard"))
        except ImportError as error:  # tensorboard is optional for a robot-side install
            self.get_logger().warn(f"TensorBoard logging off ({error}); pip install tensorboard")
        self._publish_weights()
        interleave = self.sampler.is_local and self.config.update_mode != "thread"
        if self.config.update_mode == "interleaved" and not interleave:
            self.get_logger().warn("update_mode 'interleaved' needs the replay buffer in this "
                                   "process; using a learner thread instead")
        self.update_mode = "interleaved" if interleave else "thread"
        self.get_logger().info(
            f"update mode: {self.update_mode} ({self.config.updates_per_step} updates per "
            f"transition after {self.config.learning_starts}); training until "
            f"{self.config.total_env_steps} transitions; output in {self.output_dir}")
        if interleave:
            self.zc_subscription(EXPERIENCE, EXPERIENCE_TOPIC, self._on_experience)
        else:
            self._learner = threading.Thread(target=self._learner_loop, name="learner", daemon=True)
            self._learner.start()

    # --- updates --------------------------------------------------------------------------------

    def _update(self, result: SampleResult) -> bool:
        """One gradient step on a sampled batch; a failed step is logged and skipped."""
        self.total_inserted = result.total_inserted
        if result.batch is None:
            return False
        with self._update_lock:
            try:
                self.metrics = self.sac.update(result.batch)
            except ValueError as error:
                self.failed_updates += 1
                self.reject("update", str(error))
                return False
        return True

    def _on_experience(self, msg: Experience) -> None:
        """Interleaved mode: run the updates this batch of transitions pays for."""
        if self.finished:
            return
        status = self.sampler.call(0)
        self.total_inserted = status.total_inserted
        for _ in range(self.schedule.due(len(msg), status.buffer_size)):
            self._update(self.sampler.call(self.config.batch_size))
        self._periodic()
        if self.total_inserted >= self.config.total_env_steps:
            self._finish()

    def _learner_loop(self) -> None:
        """Thread mode: update while the data allows, publish and checkpoint on time.

        Every sample answer carries the buffer's insert count, so the loop learns how much new
        data arrived without extra calls; it asks for sizes only while it owes no update. Over
        DDS one round trip costs about as much as a gradient step, so it fetches up to
        ``PREFETCH_BATCHES`` batches per call and splits them.
        """
        owed = 0  # updates paid for by transitions and not yet done
        seen = 0  # transitions already counted towards the schedule
        while not self._stop.is_set():
            batches = min(owed, PREFETCH_BATCHES) if owed > 0 else 0
            try:
                result = self.sampler.call(self.config.batch_size * batches)
            except ServiceUnavailable as error:
                self.reject("sample service", str(error))
                self._stop.wait(1.0)
                continue
            self.total_inserted = result.total_inserted
            if self.total_inserted >= self.config.total_env_steps:
                self.ipc.post(self._finish)
                return
            owed += self.schedule.due(self.total_inserted - seen, result.buffer_size)
            seen = self.total_inserted
            for part in split_batch(result, batches):
                if self._stop.is_set():
                    break
                if self._update(part):
                    owed -= 1
            self._periodic()
            if owed <= 0:
                self._stop.wait(0.005)

    def _periodic(self) -> None:
        now = time.monotonic()
        if now - self._last_weights >= self.config.weights_period:
            self._publish_weights()
        if self.config.checkpoint_period and now - self._last_checkpoint >= self.config.checkpoint_period:
            self.save()

    def _publish_weights(self) -> None:
        self._last_weights = time.monotonic()
        self.weights_version += 1
        with self._update_lock:
            state = {k: v.detach().clone() for k, v in self.sac.actor.state_dict().items()}
        self.weights_pub.publish(Weights(self.weights_version, self.sac.update_step, state,
                                         self.sac.actor.architecture(), time.time_ns()))

    def save(self) -> Path:
        """Write a checkpoint of the learner now."""
        self._last_checkpoint = time.monotonic()
        with self._update_lock:
            return save_checkpoint(self.output_dir / "checkpoint", self.sac, {
                "env_steps": self.total_inserted, "episodes": self.episodes,
                "weights_version": self.weights_version}, env_id=self.config.env_id)

    # --- progress and the end ---------------------------------------------------------------------

    def _on_episodes(self, msg: Episodes) -> None:
        self.episodes += len(msg.returns)
        self.recent_returns.extend(msg.returns)
        self.curve.extend((self.total_inserted, float(r)) for r in msg.returns)

    def _scalars(self) -> dict[str, float]:
        mean_return = float(np.mean(self.recent_returns)) if self.recent_returns else float("nan")
        return {**{k: float(v) for k, v in self.metrics.items() if k in METRICS},
                "mean_return": mean_return, **self._rates}

    def _log_progress(self) -> None:
        now = time.monotonic()
        then, steps_then, updates_then = self._progress
        self._progress = (now, self.total_inserted, self.sac.update_step)
        elapsed = max(now - then, 1e-9)
        rate = (self.total_inserted - steps_then) / elapsed
        self._rates = {"updates_per_s": (self.sac.update_step - updates_then) / elapsed,
                       "env_steps_per_s": rate}
        mean_return = np.mean(self.recent_returns) if self.recent_returns else float("nan")
        scalars = self._scalars()
        for name, value in scalars.items():
            if name in self.metrics_pubs and np.isfinite(value):
                self.metrics_pubs[name].publish(Float64(data=value))
        if self._tensorboard is not None:
            for name, value in scalars.items():
                if np.isfinite(value):
                    self._tensorboard.add_scalar(f"train/{name}", value, self.total_inserted)
        self.get_logger().info(
            f"steps {self.total_inserted}/{self.config.total_env_steps} | {rate:,.0f} steps/s | "
            f"episodes {self.episodes} | return(last {len(self.recent_returns)}) {mean_return:.1f} | "
            f"updates {self.sac.update_step} | weights v{self.weights_version} | "
            f"critic loss {self.metrics.get('critic_loss', float('nan')):.3f}")

    def _finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        self._stop.set()
        self._publish_weights()
        evaluation = evaluate(self.sac.actor, self.config.env_id, self.config.eval_episodes,
                              seed=self.config.seed)
        checkpoint = self.save()
        steps, returns = zip(*self.curve) if self.curve else ((), ())
        curve = plot_training_curve(steps, returns, self.output_dir / "training_curve.png",
                                    title=f"{self.config.env_id} (SAC, {self.update_mode})",
                                    evaluation=evaluation.mean)
        self.result = TrainResult(self.total_inserted, self.sac.update_step, self.episodes,
                                  time.monotonic() - self._started_at, evaluation.mean,
                                  evaluation.std, evaluation.returns.tolist(), str(checkpoint))
        (self.output_dir / "result.json").write_text(json.dumps(
            {**asdict(self.result), "update_mode": self.update_mode,
             "weights_version": self.weights_version}, indent=2))
        self.get_logger().info(
            f"done: {self.total_inserted} transitions, {self.sac.update_step} updates, "
            f"{self.episodes} episodes | evaluation return {evaluation.mean:.1f} ± "
            f"{evaluation.std:.1f} over {len(evaluation.returns)} episodes | checkpoint {checkpoint}"
            f" | curve {curve}")
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
        if self.total_inserted < self.config.learning_starts:
            return OK, f"warming up ({self.total_inserted}/{self.config.learning_starts})", values
        if self.sac.update_step == 0:
            return WARN, "enough data but no updates yet", values
        return OK, f"training ({self.update_mode})", values

    def close(self) -> None:
        if self._tensorboard is not None:
            self._tensorboard.close()
        self._stop.set()
        if self._learner is not None:
            self._learner.join(timeout=5.0)
        if not self.finished:  # interrupted: keep what was learned
            path = self.save()
            self.get_logger().info(f"stopped before the end; checkpoint written to {path}")


def main() -> int:
    return main_for("trainer")


if __name__ == "__main__":
    raise SystemExit(main())
