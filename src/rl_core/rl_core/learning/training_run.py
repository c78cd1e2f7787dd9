"""The trainer's run outside ROS: learner, checkpoints, weights versions, progress and the end.

The trainer node owns the endpoints and threads; everything it decides or computes without ROS
lives here, so it is tested without a graph: where the run resumes from, the counters a
checkpoint keeps, the actor state a weights message carries, the figures of the progress line,
TensorBoard and diagnostics, and the end of the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rl_core.config import SACConfig, TrainerConfig
from rl_core.learning.device import resolve_device
from rl_core.learning.learner import Learner, Report, TrainResult, seed_everything
from rl_core.learning.periodic_evaluation import Evaluation, PeriodicEvaluator
from rl_core.monitoring.progress import TRAINER_SCALARS, RateMeter, TensorBoardLog, progress_line
from rl_core.runs.checkpoint import CheckpointStore, resume_or_new
from rl_core.runs.run_checkpoints import resolve_checkpoint
from rl_core.runs.run_lock import RunLock
from rl_core.wire.image_codecs import is_image_shape

#: Batches asked for per sample request: over DDS one round trip costs about a gradient step.
BATCHES_PER_REQUEST = 8
#: ... but an answer over DDS stays below this many observation bytes, counted uncompressed
#: (camera frames compress far less than renders): Fast DDS took seconds, beyond the service
#: timeout, for answers of tens of MB (8 batches of stacked frames) while experience streamed.
MAX_ANSWER_OBS_BYTES = 4 * 1024 * 1024
#: Held by the trainer in output_dir (rl_core.runs.run_lock): one trainer per run directory.
TRAINER_LOCK_FILE = "trainer.lock"
INTERLEAVED = "interleaved"
THREAD = "thread"


def choose_update_mode(update_mode: str, replay_here: bool, simulator_here: bool
                       ) -> tuple[str, str, str]:
    """Where gradient steps run, for the ``update_mode`` parameter and where the replay buffer
    and a simulator run: ``(mode, where in words, warning or '')``."""
    warning = ""
    if update_mode == INTERLEAVED and not replay_here:
        warning = ("update_mode 'interleaved' needs the replay buffer in this process; using "
                   "the learner thread instead")
    if replay_here and (update_mode == INTERLEAVED or update_mode == "auto" and simulator_here):
        return INTERLEAVED, "dispatch thread, after each insert", warning
    where = ("learner thread, sampling the local buffer" if replay_here else
             "learner thread, batches prefetched over DDS")
    return THREAD, where, warning


def batches_per_request(batch_size: int, obs_shape: tuple[int, ...], over_dds: bool) -> int:
    """:data:`BATCHES_PER_REQUEST`, fewer where batches of images would make an answer over DDS
    too large (``obs`` and ``next_obs`` of every row; a call in the process copies nothing)."""
    if not over_dds:
        return BATCHES_PER_REQUEST
    obs_bytes = 2 * int(np.prod(obs_shape)) * (1 if is_image_shape(obs_shape) else 4)
    return max(1, min(BATCHES_PER_REQUEST, MAX_ANSWER_OBS_BYTES // (batch_size * obs_bytes)))


def replay_figures(status: Any, weights_version: int) -> dict[str, float]:
    """The scalars of a replay buffer's status (``rl_interfaces/ReplayStatus``; None: none);
    the policy lag is ``weights_version`` (the learner's newest) minus the version that acted
    in the newest data."""
    if status is None:
        return {}
    return {"updates_per_transition": float(status.updates_per_transition),
            "policy_lag": float(max(0, weights_version - int(status.acting_weights_version))),
            "acting_blocked_s": float(status.insert_blocked_s),
            "learner_blocked_s": float(status.sample_blocked_s)}


class TrainingRun:
    """One training run of the trainer node.

    :param obs_shape, action_shape: the task's spaces.
    :param choices: of the task's ``Discrete`` or arm-and-choice action (rl_core.algorithms
        picks the learner); 0 for a ``Box`` action.
    :param report: receives each failed update or round (what, why).
    :param log: receives the run's own log lines (where it resumed from).
    :param on_evaluated: called on the evaluation thread after each periodic evaluation.
    :param priority_rows: most TD-error rows held for the next sample request.
    """

    def __init__(self, config: TrainerConfig, sac_config: SACConfig,
                 obs_shape: tuple[int, ...], action_shape: tuple[int, ...], *, choices: int = 0,
                 report: Report,
                 log: Callable[[str], None],
                 on_evaluated: Callable[[Evaluation, Evaluation], None] | None,
                 priority_rows: int) -> None:
        if config.torch_threads:
            torch.set_num_threads(config.torch_threads)
        self.config = config
        self.device = resolve_device(config.device)
        seed_everything(config.seed)
        self.output_dir = Path(config.output_dir or f"runs/train-{time.strftime('%Y%m%d-%H%M%S')}")
        self.run_lock = RunLock(self.output_dir / TRAINER_LOCK_FILE, "trainer")
        self.checkpoints = CheckpointStore(self.output_dir / "checkpoints", config.keep_checkpoints)
        # The run's own newest checkpoint beats resume:= (a respawn continues where it was).
        own = self.checkpoints.newest_valid()
        # resume:= may name a run: its final checkpoint continues where its training stopped.
        resume = own or (resolve_checkpoint(config.resume, prefer="final") if config.resume
                         else None)
        if own and config.resume:
            log(f"resume:={config.resume} is not used: {own}, this run's own newest checkpoint "
                "in output_dir, continues it")
        self.sac, counters = resume_or_new(resume, obs_shape, action_shape, choices, sac_config,
                                           config.seed, self.device)
        if resume:
            log(f"resumed from {resume} at update {self.sac.update_step}, weights version "
                f"{counters.get('weights_version', 0)}, {counters.get('env_steps', 0)} env steps")
        self.weights_version = int(counters.get("weights_version", 0))
        #: Orders this run's weights after any earlier run's: after the resumed checkpoint's
        #: epoch even where this host's clock is behind the one that wrote it.
        self.epoch = max(time.time_ns(), int(counters.get("epoch", 0)) + 1)
        self.evaluator = PeriodicEvaluator(config.env_id, config.eval_period, config.eval_episodes,
                                           config.seed, self.output_dir, on_evaluated=on_evaluated,
                                           resumed=self.sac.update_step > 0,
                                           target_success_rate=config.target_success_rate,
                                           target_return=config.target_return)
        self.learner = Learner(self.sac, config.env_id, config.solve_return, self.evaluator,
                               report=report, stop_at_target=config.stop_at_target,
                               counters=lambda: {"weights_version": self.weights_version,
                                                 "epoch": self.epoch},
                               priority_rows=priority_rows)
        self.learner.episodes = int(counters.get("episodes", 0))
        self.tensorboard: TensorBoardLog | None = None
        self.rates = RateMeter()
        self.result: TrainResult | None = None

    @property
    def env_steps(self) -> int:
        """Transitions the replay buffer had received at the newest grant."""
        return self.learner.env_steps

    @property
    def done(self) -> bool:
        """The replay buffer said that the run is done (with the last grant learned on)."""
        return self.learner.done

    def total_env_steps(self, replay_status: Any) -> int:
        """The run's budget as the replay buffer reported it (0: not heard yet)."""
        if self.learner.total_env_steps:
            return self.learner.total_env_steps
        return int(replay_status.total_env_steps) if replay_status is not None else 0

    def record_episodes(self, robot_id: int, returns: Sequence[float]) -> tuple[str, str] | None:
        """Count a robot's finished episodes; what was refused and why (None: nothing was)."""
        robots = self.config.deployment_robots
        if robots and robot_id >= robots:
            return ("episodes (foreign robot)",
                    f"robot id {robot_id} is not one of this deployment's robots 0..{robots - 1}")
        values = np.asarray(returns, dtype=np.float64)
        if not np.all(np.isfinite(values)):
            return "episodes (non-finite return)", f"robot {robot_id}: returns {values.tolist()[:8]}"
        for episode_return in values:
            self.learner.record_episode(float(episode_return), self.env_steps)
        return None

    def start(self) -> str:
        """Create the output directory and TensorBoard's log; returns a warning ('' = none)."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.tensorboard = TensorBoardLog(self.output_dir)
        return self.tensorboard.error

    def next_weights(self) -> tuple[int, dict[str, torch.Tensor]]:
        """A new weights version and CPU copies of the actor's tensors (receivers and the wire
        format never see a GPU)."""
        self.weights_version += 1
        with self.learner.lock:
            state = {k: v.detach().to("cpu", copy=True)
                     for k, v in self.sac.actor.state_dict().items()}
        return self.weights_version, state

    def counters(self) -> dict[str, int]:
        return {"env_steps": self.env_steps, "episodes": self.learner.episodes,
                "weights_version": self.weights_version, "epoch": self.epoch}

    def save(self) -> Path:
        """A checkpoint of the learner now (kept with the last ``keep_checkpoints``)."""
        with self.learner.lock:
            return self.checkpoints.save(self.sac, self.counters(), env_id=self.config.env_id)

    def scalars(self, replay_status: Any) -> dict[str, float]:
        """The progress scalars: learner metrics, mean return, rates, replay figures."""
        return {**{k: float(v) for k, v in self.learner.metrics.items() if k in TRAINER_SCALARS},
                "mean_return": self.learner.mean_return, **self.rates.rates,
                **replay_figures(replay_status, self.weights_version)}

    def intervention_rates(self, rates: Mapping[str, float]) -> None:
        """Each robot's share of steps an operator drove, to TensorBoard as
        ``intervention_rate/<robot>`` at the transitions so far."""
        if rates and self.tensorboard is not None:
            self.tensorboard.scalars("intervention_rate",
                                     {robot.strip("/"): rate for robot, rate in rates.items()},
                                     self.env_steps)

    def progress(self, replay_status: Any) -> tuple[str, dict[str, float]]:
        """The progress line and scalars of now (rates since the previous call); the scalars
        also go to TensorBoard."""
        self.rates.read(self.env_steps, self.sac.update_step)
        scalars = self.scalars(replay_status)
        if self.tensorboard is not None:
            self.tensorboard.scalars("train", scalars, self.env_steps)
        ratio = scalars.get("updates_per_transition")
        line = progress_line(self.learner, self.env_steps, self.total_env_steps(replay_status),
                             scalars["env_steps_per_s"],
                             f" ({ratio:.2f}/transition)" if ratio is not None else "",
                             (f"weights v{self.weights_version}",))
        return line, scalars

    def finish(self, update_mode: str, replay_status: Any, extra: Mapping[str, Any]
               ) -> TrainResult:
        """End the run: final evaluation, checkpoint, curve and ``result.json``."""
        self.learner.ended = True
        # The schedule is the replay buffer's; without its status, count every transition.
        learning_starts = int(replay_status.learning_starts) if replay_status is not None else 0
        budget = self.total_env_steps(replay_status) or self.env_steps
        figures = {name: value for name, value in replay_figures(replay_status, self.weights_version).items()
                   if name != "updates_per_transition"}
        with self.learner.lock:
            self.result = self.learner.finish(
                self.env_steps, min(self.env_steps, budget) - learning_starts,
                self.config.eval_episodes, self.config.seed, self.output_dir,
                counters=self.counters(), title=f"{self.config.env_id} (SAC, {update_mode})",
                extra={"update_mode": update_mode, "device": self.device.type,
                       "weights_version": self.weights_version, **extra, **figures})
        return self.result

    def health(self) -> str:
        """Why learning is broken ('' = it is not)."""
        loss = self.learner.metrics.get("critic_loss")
        if self.learner.failed_updates or (loss is not None and not np.isfinite(loss)):
            return "loss is NaN/inf: updates are skipped (lower learning rates?)"
        return ""

    def diagnosis(self, replay_status: Any, update_mode: str, finished: bool
                  ) -> tuple[bool, str, dict[str, object]]:
        """The trainer's ``/diagnostics`` entry: whether learning is healthy, what it is doing,
        and its figures."""
        values: dict[str, object] = {
            "updates": self.sac.update_step, "weights version": self.weights_version,
            "transitions": self.env_steps, "failed updates": self.learner.failed_updates,
            **{k: f"{v:.4g}" for k, v in self.scalars(replay_status).items()}}
        problem = self.health()
        if problem:
            return False, problem, values
        if finished:
            return True, "training finished", values
        if self.sac.update_step == 0:
            return True, f"warming up ({self.env_steps} transitions, no update granted yet)", values
        return True, f"training ({update_mode})", values

    def close(self) -> None:
        """Stop the evaluator and TensorBoard, then let ``output_dir`` go (the run lock)."""
        self.evaluator.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        self.run_lock.release()
