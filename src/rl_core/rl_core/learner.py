"""The learner's side of a run, shared by the bare loop and the trainer node.

One update step (:meth:`Learner.update`: a SAC gradient step on a granted batch, with non-finite
failures counted instead of crashing), the bookkeeping of finished episodes (progress, training
curve, when the task was first solved) and one end of run (:meth:`Learner.finish`: evaluate,
checkpoint, curve, ``result.json``), with the periodic evaluations and the best checkpoint of
:class:`rl_core.periodic_evaluation.PeriodicEvaluator` when one is given. How batches are
obtained — from a local :class:`rl_core.replay.RateLimitedReplay` or prefetched over ROS — is
the caller's business; the
replay's rate limiter decides how many updates the data pays for, in every mode.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rl_core.algorithms.sac import SAC
from rl_core.checkpoint import save_checkpoint
from rl_core.evaluation import EvalResult, evaluate
from rl_core.periodic_evaluation import PeriodicEvaluator
from rl_core.plotting import plot_training_curve
from rl_core.replay import Batch

#: Training episodes averaged for the "solved" check (solve_return).
SOLVE_WINDOW = 10
#: Most recent episodes kept for the training curve (older points are thinned, not kept forever).
CURVE_POINTS = 20_000


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (CleanRL style); envs are seeded through ``reset(seed=...)``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class TrainResult:
    """Outcome of a training run (written to ``result.json``)."""

    env_steps: int
    updates: int
    episodes: int
    wall_time_s: float
    eval_mean_return: float
    eval_std_return: float
    eval_returns: list[float]
    checkpoint_dir: str | None
    #: Gradient updates per transition collected after ``learning_starts``.
    updates_per_transition: float = 0.0
    #: Seconds and transitions until the mean of the last 10 training returns reached
    #: ``solve_return`` (None: never, or not tracked).
    solved_at_s: float | None = None
    solved_at_env_steps: int | None = None
    #: Fraction of evaluation episodes that reached the task's goal (None: no success signal).
    eval_success_rate: float | None = None
    #: The best checkpoint (periodic evaluation, ``eval_period``; None: no periodic
    #: evaluation): its directory, the transitions it was taken at, and its final evaluation on
    #: the same episodes as the final weights' (``eval_*``), which did not select it.
    best_checkpoint_dir: str | None = None
    best_env_steps: int | None = None
    best_eval_mean_return: float | None = None
    best_eval_std_return: float | None = None
    best_eval_success_rate: float | None = None
    #: Every periodic evaluation: env_steps, mean_return, success_rate (selection episodes).
    evaluations: list[dict[str, Any]] = field(default_factory=list)


class Learner:
    """SAC updates, episode bookkeeping and the end of a run.

    :param sac: the learner's networks and optimisers.
    :param env_id: task of the final evaluation.
    :param solve_return: mean training return that counts as solved (0: not tracked).
    :param evaluator: periodic evaluation and the best checkpoint (None: the final one only).
    """

    def __init__(self, sac: SAC, env_id: str, solve_return: float = 0.0,
                 evaluator: PeriodicEvaluator | None = None) -> None:
        self.sac = sac
        self.env_id = env_id
        self.solve_return = solve_return
        self.evaluator = evaluator
        self.metrics: dict[str, float] = {}
        self.failed_updates = 0
        self.last_error = ""
        self.episodes = 0
        self.recent_returns: deque[float] = deque(maxlen=20)
        self._solve_window: deque[float] = deque(maxlen=SOLVE_WINDOW)
        self.curve: deque[tuple[int, float]] = deque(maxlen=CURVE_POINTS)
        self.solved_at_s: float | None = None
        self.solved_at_env_steps: int | None = None
        self.started = time.monotonic()

    def update(self, batch: Batch) -> bool:
        """One gradient step; a non-finite loss is counted, remembered and skipped."""
        try:
            self.metrics = self.sac.update(batch)
        except ValueError as error:
            self.failed_updates += 1
            self.last_error = str(error)
            return False
        return True

    def record_episode(self, episode_return: float, env_steps: int) -> None:
        """Count a finished training episode (``env_steps``: transitions collected so far)."""
        self.episodes += 1
        self.recent_returns.append(episode_return)
        self._solve_window.append(episode_return)
        self.curve.append((env_steps, episode_return))
        if (self.solve_return and self.solved_at_s is None
                and len(self._solve_window) == SOLVE_WINDOW
                and float(np.mean(self._solve_window)) >= self.solve_return):
            self.solved_at_s = time.monotonic() - self.started
            self.solved_at_env_steps = env_steps

    def evaluate_if_due(self, env_steps: int, counters: dict[str, Any] | None = None) -> None:
        """Hand a snapshot to the periodic evaluation when one is due (call it from the thread
        that updates the networks, between two updates)."""
        if self.evaluator is not None:
            self.evaluator.submit(self.sac, env_steps, counters)

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.recent_returns)) if self.recent_returns else float("nan")

    def finish(self, env_steps: int, paying_transitions: int, eval_episodes: int, seed: int,
               output_dir: Path | None, counters: dict[str, Any] | None = None,
               title: str = "", extra: dict[str, Any] | None = None) -> TrainResult:
        """Evaluate the actor, write checkpoint, curve and ``result.json`` (when ``output_dir``).

        :param env_steps: transitions collected.
        :param paying_transitions: transitions that paid for updates (those of the budget after
            ``learning_starts``), the denominator of ``updates_per_transition``.

        :param counters: extra counters stored with the checkpoint (weights version, ...).
        :param extra: extra keys for ``result.json`` (update mode, weights version, ...).
        """
        evaluation = evaluate(self.sac.actor, self.env_id, eval_episodes, seed=seed)
        counters = {"env_steps": env_steps, "episodes": self.episodes, **(counters or {})}
        checkpoint_dir = None
        if output_dir is not None:
            output_dir.mkdir(parents=True, exist_ok=True)
            checkpoint_dir = str(save_checkpoint(output_dir / "checkpoint", self.sac, counters,
                                                 env_id=self.env_id))
        result = TrainResult(env_steps, self.sac.update_step, self.episodes,
                             time.monotonic() - self.started, evaluation.mean, evaluation.std,
                             evaluation.returns.tolist(), checkpoint_dir,
                             self.sac.update_step / max(paying_transitions, 1), self.solved_at_s,
                             self.solved_at_env_steps, evaluation.success_rate)
        if self.evaluator is not None:
            self._finish_best(result, evaluation, env_steps, counters, eval_episodes, seed)
        if output_dir is not None:
            document = {**asdict(result), **(extra or {})}
            # No evaluation episodes (a task with no in-process twin): null, not NaN (strict JSON).
            for key in ("eval_mean_return", "eval_std_return"):
                if not math.isfinite(document[key]):
                    document[key] = None
            (output_dir / "result.json").write_text(json.dumps(document, indent=2))
            steps, returns = zip(*self.curve) if self.curve else ((), ())
            plot_training_curve(steps, returns, output_dir / "training_curve.png",
                                title=title or f"{self.env_id} (SAC)", evaluation=evaluation.mean)
        return result

    def _finish_best(self, result: TrainResult, final: EvalResult, env_steps: int,
                     counters: dict[str, Any], eval_episodes: int, seed: int) -> None:
        """The final weights compete with the periodic snapshots; the winner gets the final
        evaluation's episodes (the final weights' figures, where they won)."""
        evaluator = self.evaluator
        assert evaluator is not None
        final_selection = evaluator.evaluate_now(self.sac, env_steps, counters)
        evaluator.close()
        result.evaluations = [evaluation.as_dict() for evaluation in evaluator.history]
        best = evaluator.best
        if best is None:
            return
        if best is final_selection:
            figures = final
        else:
            actor = evaluator.best_actor()
            figures = evaluate(actor, self.env_id, eval_episodes, seed=seed)
        result.best_env_steps = best.env_steps
        result.best_checkpoint_dir = (str(evaluator.best_checkpoint)
                                      if evaluator.best_checkpoint is not None else None)
        if len(figures.returns):
            result.best_eval_mean_return = figures.mean
            result.best_eval_std_return = figures.std
        result.best_eval_success_rate = figures.success_rate
