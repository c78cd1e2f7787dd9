"""What a training run reports: rates, progress lines, TensorBoard scalars and its summary.

The bare loop and the trainer node report through these, so a run reads the same whichever
mode made it, and tools that parse the progress line (tests, ``rl-bringup status``) see one
format. :class:`RobotFigures` keeps the robots' boundary figures the trainer hears on
``/diagnostics`` (for result.json and TensorBoard), bounded and checked: any peer on the domain
can publish there (issue 41).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # this module stays light: the graph imports the names of the scalars
    from rl_core.learning.learner import Learner, TrainResult
    from rl_core.learning.periodic_evaluation import Evaluation

#: The trainer's progress scalars: ``/trainer/<name>`` topics (std_msgs/Float64, rqt_plot),
#: TensorBoard's ``train/<name>`` and the trainer's diagnostics.
TRAINER_SCALARS = ("critic_loss", "actor_loss", "bc_loss", "alpha", "q_mean", "entropy",
                   "mean_return", "updates_per_s", "env_steps_per_s", "updates_per_transition",
                   "policy_lag", "acting_blocked_s", "learner_blocked_s")


#: Robots whose boundary figures :class:`RobotFigures` keeps: twice rl_bringup's largest fleet.
MAX_FIGURE_ROBOTS = 128
#: Figures kept per robot: the boundary's four and the safety layer's counts (about ten kinds).
MAX_FIGURES_PER_ROBOT = 32
#: Longest figure text kept: a number never needs more.
MAX_FIGURE_CHARS = 32


def is_deployment_robot(hardware_id: str, robots: int) -> bool:
    """Whether ``hardware_id`` (a node's namespace, as it sends on ``/diagnostics``) is one of
    a deployment's ``robots`` (``.../robot_<k>``, k < robots; 0 robots: any ``robot_<k>``)."""
    match = re.fullmatch(r"(?:/[\w/]*)?/robot_(\d+)/?", hardware_id)
    return match is not None and (robots <= 0 or int(match.group(1)) < robots)


class RobotFigures:
    """Each robot's latest boundary figures, by hardware id, as the strings they came in.

    Bounded, since anyone on the domain can publish ``/diagnostics``: at most ``max_robots`` ids
    and ``max_figures`` figures each. A new id beyond the bound evicts the one heard least
    recently among those ``known`` says are not the deployment's, else (when the new one is
    known) the least recent of all; an unknown id never pushes out a known one, it is dropped.
    Only finite numbers are kept: a figure whose text is none is skipped, so reading the table
    never raises. :attr:`dropped` counts ids and figures left out for room, :attr:`malformed` the
    figures skipped.

    :param keys: the figures kept by name; ``prefixes``: and those starting with one of these.
    :param known: whether a hardware id is one of the deployment's robots.
    """

    def __init__(self, keys: tuple[str, ...], prefixes: tuple[str, ...] = (),
                 known: Callable[[str], bool] = lambda _hardware_id: True,
                 max_robots: int = MAX_FIGURE_ROBOTS,
                 max_figures: int = MAX_FIGURES_PER_ROBOT) -> None:
        if max_robots < 1 or max_figures < 1:
            raise ValueError(f"max_robots and max_figures must be >= 1, got {max_robots}, "
                             f"{max_figures}")
        self.keys, self.prefixes, self.known = keys, prefixes, known
        self.max_robots, self.max_figures = max_robots, max_figures
        self.dropped = self.malformed = 0
        #: Oldest heard first (an update moves its id to the end).
        self._figures: dict[str, dict[str, str]] = {}

    def __len__(self) -> int:
        return len(self._figures)

    def update(self, hardware_id: str, values: Mapping[str, str]) -> None:
        """Take one status' ``values``: its figures replace what ``hardware_id`` had."""
        figures = {key: value for key, value in values.items()
                   if self._kept(key) and self._number(value)}
        if len(figures) > self.max_figures:
            self.dropped += len(figures) - self.max_figures
            figures = dict(list(figures.items())[:self.max_figures])
        if not figures:
            return
        if self._figures.pop(hardware_id, None) is None and not self._make_room(hardware_id):
            self.dropped += 1
            return
        self._figures[hardware_id] = figures

    def numbers(self, key: str) -> dict[str, float]:
        """Figure ``key`` of every robot that has it, as a number."""
        return {robot: float(figures[key]) for robot, figures in self._figures.items()
                if key in figures}

    def table(self) -> dict[str, dict[str, str]]:
        """Every robot's figures, sorted by hardware id (result.json's ``robots``)."""
        return {robot: dict(self._figures[robot]) for robot in sorted(self._figures)}

    def _kept(self, key: str) -> bool:
        return key in self.keys or key.startswith(self.prefixes)

    def _number(self, text: str) -> bool:
        try:
            number = float(text) if len(text) <= MAX_FIGURE_CHARS else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number):
            self.malformed += 1
            return False
        return True

    def _make_room(self, hardware_id: str) -> bool:
        """Evict one robot where the table is full; False when ``hardware_id`` must go instead."""
        if len(self._figures) < self.max_robots:
            return True
        victim = next((robot for robot in self._figures if not self.known(robot)), None)
        if victim is None:
            if not self.known(hardware_id):
                return False
            victim = next(iter(self._figures))
        del self._figures[victim]
        self.dropped += 1
        return True


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
