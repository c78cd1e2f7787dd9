"""What a training run reports: rates, progress lines, TensorBoard scalars and its summary.

The bare loop and the trainer node report through these, so a run reads the same whichever
mode made it, and tools that parse the progress line (tests, ``rl-bringup status``) see one
format.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # this module stays light: the graph imports the names of the scalars
    from rl_core.learner import Learner, TrainResult
    from rl_core.periodic_evaluation import Evaluation

#: The trainer's progress scalars: ``/trainer/<name>`` topics (std_msgs/Float64, rqt_plot),
#: TensorBoard's ``train/<name>`` and the trainer's diagnostics.
TRAINER_SCALARS = ("critic_loss", "actor_loss", "bc_loss", "alpha", "q_mean", "entropy",
                   "mean_return", "updates_per_s", "env_steps_per_s", "updates_per_transition",
                   "policy_lag", "acting_blocked_s", "learner_blocked_s")


class RateMeter:
    """Environment steps and updates per second between two reads."""

    def __init__(self) -> None:
        self._then = (time.monotonic(), 0, 0)
        self.rates = {"updates_per_s": 0.0, "env_steps_per_s": 0.0}

    def read(self, env_steps: int, updates: int) -> dict[str, float]:
        """The rates since the previous read (or since construction)."""
        now = time.monotonic()
        then, steps_then, updates_then = self._then
        self._then = (now, env_steps, updates)
        elapsed = max(now - then, 1e-9)
        self.rates = {"updates_per_s": (updates - updates_then) / elapsed,
                      "env_steps_per_s": (env_steps - steps_then) / elapsed}
        return self.rates


def progress_line(learner: Learner, env_steps: int, total_env_steps: int, steps_per_s: float,
                  updates_note: str = "", details: tuple[str, ...] = ()) -> str:
    """``steps N/T | R steps/s | episodes E | return(last K) M | updates U<note> | ...``,
    ending with the critic loss (``steps N/?`` while the budget ``T`` is not known: 0)."""
    critic_loss = learner.metrics.get("critic_loss", float("nan"))
    return " | ".join((
        f"steps {env_steps}/{total_env_steps or '?'}", f"{steps_per_s:,.0f} steps/s",
        f"episodes {learner.episodes}",
        f"return(last {len(learner.recent_returns)}) {learner.mean_return:.1f}",
        f"updates {learner.sac.update_step}{updates_note}", *details,
        f"critic loss {critic_loss:.3f}"))


def evaluation_line(evaluation: Evaluation, best: Evaluation, best_checkpoint: Path | None) -> str:
    """The log line of one periodic evaluation."""
    success = (f", success {evaluation.success_rate:.0%}"
               if evaluation.success_rate is not None else "")
    return (f"evaluation at {evaluation.env_steps} transitions: return "
            f"{evaluation.mean_return:.1f}{success} | best {best.mean_return:.1f} at "
            f"{best.env_steps} transitions (kept in {best_checkpoint})")


def summary_line(result: TrainResult) -> str:
    """The last line of a run: what it did and where its result is."""
    parts = [f"done: {result.env_steps} transitions, {result.updates} updates "
             f"({result.updates_per_transition:.3f} per transition), {result.episodes} episodes "
             f"in {result.wall_time_s:.0f} s",
             f"evaluation return {result.eval_mean_return:.1f} ± {result.eval_std_return:.1f} "
             f"over {len(result.eval_returns)} episodes"]
    if result.eval_success_rate is not None:
        parts.append(f"success {result.eval_success_rate:.0%}")
    if result.checkpoint_dir:
        parts.append(f"checkpoint {result.checkpoint_dir}")
    if result.best_eval_mean_return is not None:
        parts.append(f"best: return {result.best_eval_mean_return:.1f} at "
                     f"{result.best_env_steps} transitions, {result.best_checkpoint_dir}")
    if result.target_env_steps is not None:
        parts.append(f"target met at {result.target_env_steps} transitions "
                     f"({result.target_wall_time_s:.0f} s)")
    return " | ".join(parts)


class TensorBoardLog:
    """Scalars for TensorBoard under ``<output_dir>/tensorboard`` (``train/*``, ``eval/*``).

    TensorBoard is optional (a robot-side install may lack it): without it, :attr:`error` says
    why and every write is a no-op.
    """

    def __init__(self, output_dir: Path) -> None:
        self.error = ""
        self._writer: Any = None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:
            self.error = f"TensorBoard logging off ({error}); pip install tensorboard"
            return
        self._writer = SummaryWriter(str(output_dir / "tensorboard"))

    def scalars(self, prefix: str, values: Mapping[str, float], step: int) -> None:
        """Write every finite value as ``<prefix>/<name>`` at ``step``."""
        if self._writer is None:
            return
        for name, value in values.items():
            if math.isfinite(value):
                self._writer.add_scalar(f"{prefix}/{name}", value, step)

    def evaluation(self, evaluation: Evaluation, best: Evaluation) -> None:
        """One periodic evaluation, at its transitions."""
        values = {"mean_return": evaluation.mean_return, "best_mean_return": best.mean_return}
        if evaluation.success_rate is not None:
            values["success_rate"] = evaluation.success_rate
        self.scalars("eval", values, evaluation.env_steps)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
