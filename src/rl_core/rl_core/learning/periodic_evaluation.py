"""Periodic evaluation during training and the best checkpoint (Stable-Baselines3's EvalCallback).

Every ``eval_period`` transitions the learner hands a snapshot of itself (a deep copy, taken by
the thread that updates it, so no update is ever half seen) to :class:`PeriodicEvaluator`, which
evaluates the snapshot's actor on a thread of its own: acting and learning go on meanwhile. The
snapshot with the best score so far is written as a full checkpoint to ``<output_dir>/best``
(resumable, exportable, evaluable like ``<output_dir>/checkpoint``, the final one).

Scores: the success rate where the task reports one, then the mean return; a tie goes to the
later snapshot (more training behind it). The periodic evaluations all run the same
*selection* episodes (seeds ``seed + SELECTION_SEED_OFFSET + i``), so snapshots are compared on
equal terms; the final evaluation's episodes (seeds ``seed + 10000 + i``, those of
:func:`rl_core.learning.evaluation.evaluate`) are not among them, so the final figures of the best
checkpoint are measured on episodes that did not choose it.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from rl_core.algorithms import Algorithm
from rl_core.envs import make_env
from rl_core.learning.evaluation import EvalResult, evaluate, evaluation_env_id
from rl_core.runs.checkpoint import load_actor, read_checkpoint_meta, save_checkpoint
from rl_core.runs.run_checkpoints import BEST_DIRECTORY

#: Added to the run's seed for the selection episodes; far from the final evaluation's 10000+.
SELECTION_SEED_OFFSET = 50_000


@dataclass(frozen=True)
class Evaluation:
    """One periodic evaluation: when, and how the snapshot did on the selection episodes."""

    env_steps: int
    #: The snapshot's gradient updates.
    updates: int
    mean_return: float
    success_rate: float | None = None
    #: Seconds into the run when the snapshot was taken.
    wall_time_s: float = 0.0

    def score(self) -> tuple[float, float]:
        return (self.success_rate if self.success_rate is not None else 0.0, self.mean_return)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class PeriodicEvaluator:
    """Evaluates learner snapshots on a worker thread and keeps the best as a checkpoint.

    :param env_id: the task (a robot task is evaluated on its in-process twin; a task without
        one is not evaluated, and :attr:`enabled` is False).
    :param period: transitions between two evaluations (0: none).
    :param episodes: deterministic episodes per evaluation.
    :param seed: the run's seed (the selection episodes' seeds are derived from it).
    :param directory: the run's output directory, where the best checkpoint goes (None: kept
        in memory only).
    :param on_evaluated: called on the worker thread after each evaluation with it and the best
        so far (TensorBoard scalars, a log line).
    :param resumed: the learner continues a run (respawned or resumed): the best checkpoint
        already in ``directory`` stays the one to beat. A fresh learner replaces it.
    :param target_success_rate: the success rate that meets the task's criterion
        (:attr:`target_met`; 0: none).
    :param target_return: the mean return that meets it where ``target_success_rate`` is 0
        (0: none).
    """

    def __init__(self, env_id: str, period: int, episodes: int, seed: int,
                 directory: Path | None = None,
                 on_evaluated: Callable[[Evaluation, Evaluation], None] | None = None,
                 resumed: bool = False, target_success_rate: float = 0.0,
                 target_return: float = 0.0) -> None:
        self.task_id = env_id
        self.env_id = evaluation_env_id(env_id)
        self.period = period
        self.episodes = episodes
        self.seed = seed
        self.directory = directory
        self._on_evaluated = on_evaluated
        self.enabled = self.env_id is not None and period > 0 and episodes > 0
        self.target_success_rate = target_success_rate
        self.target_return = target_return
        #: The first evaluation that met the target (None: none yet, or no target).
        self.target_met: Evaluation | None = None
        self.started = time.monotonic()
        self.history: list[Evaluation] = []
        self.best: Evaluation | None = None
        #: The best snapshot (None after a restart until :meth:`best_actor` loads it).
        self.best_sac: Algorithm | None = None
        self.best_checkpoint: Path | None = None
        self.errors: list[str] = []
        self._next = period
        self._env: gym.Env | None = None
        self._pending: threading.Thread | None = None
        self._lock = threading.Lock()
        if resumed:
            self._restore_best()

    def _restore_best(self) -> None:
        """A respawned or resumed learner keeps competing against the best it had."""
        if self.directory is None or not (self.directory / BEST_DIRECTORY).is_dir():
            return
        try:
            meta = read_checkpoint_meta(self.directory / BEST_DIRECTORY)
            counters = meta["counters"]
            self.best = Evaluation(int(counters["env_steps"]), int(meta["update_step"]),
                                   float(counters["selection_return"]),
                                   counters.get("selection_success_rate"))
        except (OSError, ValueError, KeyError, TypeError):
            return  # unreadable or not one of ours: the next evaluation replaces it
        self.best_checkpoint = self.directory / BEST_DIRECTORY
        self._next = (self.best.env_steps // max(self.period, 1) + 1) * self.period

    def due(self, env_steps: int) -> bool:
        return self.enabled and env_steps >= self._next

    def submit(self, sac: Algorithm, env_steps: int, counters: dict[str, Any] | None = None
               ) -> bool:
        """Evaluate a snapshot of ``sac`` at ``env_steps`` when an evaluation is due and the
        previous one is done (a slow evaluation is skipped, never queued). Call it from the
        thread that updates ``sac``; the snapshot costs a deep copy of the networks."""
        if not self.due(env_steps):
            return False
        if self._pending is not None and self._pending.is_alive():
            return False
        self._next = (env_steps // self.period + 1) * self.period
        snapshot = copy.deepcopy(sac)
        self._pending = threading.Thread(target=self._evaluate_snapshot,
                                         args=(snapshot, env_steps, dict(counters or {}),
                                               time.monotonic() - self.started),
                                         name="periodic-evaluation", daemon=True)
        self._pending.start()
        return True

    def evaluate_now(self, sac: Algorithm, env_steps: int,
                     counters: dict[str, Any] | None = None
                     ) -> Evaluation | None:
        """Evaluate ``sac`` itself on this thread (the final weights, once updates stopped);
        weights evaluated already (the last snapshot had them) are not evaluated again."""
        self.wait()
        if not self.enabled:
            return None
        last = self.history[-1] if self.history else None
        if last is not None and (last.env_steps, last.updates) == (env_steps, sac.update_step):
            return last
        return self._evaluate_snapshot(sac, env_steps, dict(counters or {}),
                                       time.monotonic() - self.started)

    def wait(self, timeout_s: float | None = None) -> None:
        if self._pending is not None:
            self._pending.join(timeout_s)

    def close(self) -> None:
        self.wait()
        with self._lock:
            if self._env is not None:
                self._env.close()
                self._env = None

    def best_actor(self) -> Any:
        """The best snapshot's actor (loaded from its checkpoint after a restart), or None."""
        if self.best_sac is not None:
            return self.best_sac.actor
        if self.best_checkpoint is not None:
            return load_actor(self.best_checkpoint)[0]
        return None

    def _selection_episodes(self, sac: Algorithm) -> EvalResult:
        assert self.env_id is not None  # enabled only with an in-process twin
        with self._lock:  # one evaluation at a time shares the environment
            if self._env is None:
                self._env = make_env(self.env_id)
            return evaluate(sac.actor, self.env_id, self.episodes,
                            seed=self.seed + SELECTION_SEED_OFFSET, env=self._env)

    def meets_target(self, evaluation: Evaluation) -> bool:
        """Whether ``evaluation`` meets the task's criterion: its success rate where
        ``target_success_rate`` is set, else its mean return where ``target_return`` is."""
        if self.target_success_rate > 0.0:
            return evaluation.success_rate is not None and \
                evaluation.success_rate >= self.target_success_rate
        return self.target_return != 0.0 and evaluation.mean_return >= self.target_return

    def _evaluate_snapshot(self, sac: Algorithm, env_steps: int, counters: dict[str, Any],
                           wall_time_s: float) -> Evaluation | None:
        try:
            result = self._selection_episodes(sac)
            evaluation = Evaluation(env_steps, sac.update_step, result.mean, result.success_rate,
                                    wall_time_s)
            if not math.isfinite(evaluation.mean_return):
                return None
            self.history.append(evaluation)
            if self.target_met is None and self.meets_target(evaluation):
                self.target_met = evaluation
            best = self.best
            if best is None or evaluation.score() >= best.score():
                self._keep(sac, evaluation, counters)
                best = evaluation
            if self._on_evaluated is not None:
                self._on_evaluated(evaluation, best)
            return evaluation
        except Exception as error:  # noqa: BLE001 - training goes on; reported at the end
            self.errors.append(f"evaluation at {env_steps} transitions: "
                               f"{type(error).__name__}: {error}")
            return None

    def _keep(self, sac: Algorithm, evaluation: Evaluation, counters: dict[str, Any]) -> None:
        if self.directory is not None:
            meta = {**counters, "env_steps": evaluation.env_steps,
                    "selection_return": evaluation.mean_return,
                    "selection_success_rate": evaluation.success_rate}
            self.best_checkpoint = save_checkpoint(self.directory / BEST_DIRECTORY, sac, meta,
                                                   env_id=self.task_id)
        self.best_sac = sac
        self.best = evaluation
