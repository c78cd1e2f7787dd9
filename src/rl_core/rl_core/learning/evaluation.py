"""Deterministic evaluation of a policy on fresh environments."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import gymnasium as gym
import numpy as np

from rl_core.algorithms.discrete_sac import CategoricalActor
from rl_core.envs import make_env
from rl_core.monitoring import heartbeat

if TYPE_CHECKING:
    from rl_core.algorithms import Actor

EVAL_SEED_OFFSET = 10_000  # evaluation episodes never reuse a training seed


class EvalResult(NamedTuple):
    """Returns of the evaluation episodes, and whether each reached the task's goal."""

    returns: np.ndarray
    lengths: np.ndarray
    #: ``info["is_success"]`` at the end of each episode; empty when the task reports none.
    successes: np.ndarray = np.zeros(0, dtype=bool)

    @property
    def success_rate(self) -> float | None:
        """Fraction of episodes that reached the goal (None: the task has no success signal)."""
        return float(self.successes.mean()) if len(self.successes) else None

    @property
    def mean(self) -> float:
        return float(self.returns.mean()) if len(self.returns) else float("nan")

    @property
    def std(self) -> float:
        return float(self.returns.std()) if len(self.returns) else float("nan")


def evaluation_env_id(env_id: str) -> str | None:
    """The gymnasium id to evaluate a policy for ``env_id`` on: ``env_id`` itself, or the
    in-process twin of a robot task (rl_core.robot.tasks); None for a task that exists only on
    a robot (nothing to evaluate on here)."""
    from rl_core.robot.tasks import is_task_name, load_task

    if is_task_name(env_id):
        return load_task(env_id).env_id
    return env_id


def evaluate(actor: Actor, env_id: str,
             episodes: int, seed: int = 0, env: gym.Env | None = None) -> EvalResult:
    """Run ``episodes`` deterministic episodes (mean action, or most probable choice) and
    return their returns.

    :param env_id: a gymnasium id, or a robot task's name (evaluated on its in-process twin;
        no episodes for a task without one).
    :param env: an environment to reuse (e.g. one with ``render_mode``); made from ``env_id``
        when omitted, and closed afterwards only then.
    """
    own_env = env is None
    if env is None:
        twin = evaluation_env_id(env_id)
        if twin is None:
            return EvalResult(np.zeros(0), np.zeros(0, dtype=np.int64))
        env_id = twin
    env = env if env is not None else make_env(env_id)
    returns, lengths, successes = [], [], []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + EVAL_SEED_OFFSET + episode)
            total, length, done = 0.0, 0, False
            while not done:
                action = actor.act(obs[None, :], deterministic=True)[0]
                if isinstance(actor, CategoricalActor):  # the choice's index
                    action = int(action[0])
                obs, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
                length += 1
                done = terminated or truncated
            returns.append(total)
            lengths.append(length)
            heartbeat.beat_from_here()  # an evaluation on a node's dispatch thread is no hang
            if "is_success" in info:
                successes.append(bool(info["is_success"]))
    finally:
        if own_env:
            env.close()
    return EvalResult(np.asarray(returns, dtype=np.float64), np.asarray(lengths, dtype=np.int64),
                      np.asarray(successes if len(successes) == len(returns) else [], dtype=bool))
