"""Hindsight experience replay (HER, Andrychowicz et al. 2017), "future" strategy, for
goal-conditioned envs whose flattened observations hold ``achieved_goal`` and ``desired_goal``
(rl_core.envs.spaces flattens their ``Dict``).

The replay buffer's rows come from many robots and environments at once, so :class:`Hindsight`
follows each ``(robot, environment)`` episode by the slots its rows went to; an episode can be
relabelled once it has ended. A sampled row of an ended episode gets, with probability
``k / (k + 1)``, the goal its episode achieved at a random later step (or at its own), and the
reward the env's ``compute_reward`` gives for it; ``terminated`` is kept (goal envs do not
terminate). Rows of an episode in progress, and rows whose later rows were overwritten, are
sampled as they were stored. Episodes are not in snapshots: after a restart, relabelling starts
with the episodes that end from then on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt

from rl_core.wire.messages import Batch

#: The keys of a goal-conditioned observation that relabelling reads and writes.
GOAL_KEYS = ("achieved_goal", "desired_goal")
#: ``compute_reward(achieved_goal, desired_goal, info)`` for batches ``(N, goal)``.
RewardFunction = Callable[[np.ndarray, np.ndarray, Any], Any]


@dataclass(frozen=True)
class GoalLayout:
    """Where a goal env's goals lie in its flattened observation."""

    achieved: slice
    desired: slice

    @classmethod
    def of(cls, space: gymnasium.Space) -> GoalLayout | None:
        """The layout of a goal env's (unflattened) observation space; None for any other."""
        if not isinstance(space, gymnasium.spaces.Dict) or not set(GOAL_KEYS) <= set(space.spaces):
            return None
        offsets, start = {}, 0
        for key, part in space.spaces.items():  # the order gymnasium flattens them in
            size = gymnasium.spaces.flatdim(part)
            offsets[key] = slice(start, start + size)
            start += size
        return cls(offsets["achieved_goal"], offsets["desired_goal"])


class Hindsight:
    """Episodes of a replay buffer's slots, and the relabelling of sampled batches.

    :param layout: where the goals lie in an observation.
    :param compute_reward: the env's reward for achieved and desired goals.
    :param k: relabelled goals per real one (the "future" strategy's ``k``).
    :param capacity: the buffer's slots.
    :param seed: seed of the draws (which rows, which later step).
    """

    def __init__(self, layout: GoalLayout, compute_reward: RewardFunction, k: int,
                 capacity: int, seed: int = 0) -> None:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.layout = layout
        self.compute_reward = compute_reward
        self.probability = k / (k + 1)
        self._rng = np.random.default_rng(seed)
        self._capacity = capacity
        #: Rows relabelled so far (diagnostics).
        self.relabelled = 0
        self.clear()

    def clear(self) -> None:
        """Forget every episode (the buffer's slots were filled otherwise: a loaded file)."""
        #: Per slot: its ended episode (-1: none yet), its step in it, and the row written to it
        #: (a count of rows: a slot written again no longer holds the episode's row).
        self._episode = np.full(self._capacity, -1, dtype=np.int64)
        self._step = np.zeros(self._capacity, dtype=np.int64)
        self._row = np.full(self._capacity, -1, dtype=np.int64)
        self._rows = 0
        self._episodes: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id -> (slots, rows)
        #: (robot, env) key -> the (slot, row) of its episode in progress (at most a buffer's).
        self._open: dict[int, deque[tuple[int, int]]] = {}
        self._next_episode = 0

    def __len__(self) -> int:
        """Ended episodes that can be relabelled."""
        return len(self._episodes)

    def record(self, slots: npt.NDArray[np.int64], keys: npt.ArrayLike,
               ended: npt.ArrayLike) -> None:
        """Rows just stored in ``slots``, of the episodes ``keys`` names (one per robot and
        environment), ``ended`` where their episode ended (terminated or truncated). ``keys``
        and ``ended`` are aligned with ``slots`` (the last rows of a batch, where the buffer
        kept fewer)."""
        keys = np.asarray(keys, dtype=np.int64)[-len(slots):]
        ended = np.asarray(ended, dtype=bool)[-len(slots):]
        for episode in np.unique(self._episode[slots]):
            if episode >= 0:
                self._forget(int(episode))
        rows = self._rows + np.arange(len(slots), dtype=np.int64)
        self._rows += len(slots)
        self._row[slots] = rows
        for slot, key, row, end in zip(slots.tolist(), keys.tolist(), rows.tolist(),
                                       ended.tolist()):
            episode = self._open.get(key)
            if episode is None:
                episode = self._open[key] = deque(maxlen=self._capacity)
            episode.append((slot, row))
            if end:
                self._close(self._open.pop(key))

    def _close(self, episode: deque[tuple[int, int]]) -> None:
        slots = np.fromiter((slot for slot, _ in episode), np.int64, len(episode))
        rows = np.fromiter((row for _, row in episode), np.int64, len(episode))
        kept = self._row[slots] == rows  # a long episode may have lost its first rows
        if not kept.any():
            return
        slots, rows = slots[kept], rows[kept]
        self._episodes[self._next_episode] = (slots, rows)
        self._episode[slots] = self._next_episode
        self._step[slots] = np.arange(len(slots))
        self._next_episode += 1

    def _forget(self, episode: int) -> None:
        slots, rows = self._episodes.pop(episode)
        still = self._row[slots] == rows
        self._episode[slots[still]] = -1

    def relabel(self, batch: Batch, next_obs_at: Callable[[np.ndarray], np.ndarray]) -> Batch:
        """``batch`` (sampled from the buffer: ``indices`` are its slots) with the rows drawn for
        relabelling given a goal achieved later in their episode and its reward;
        ``next_obs_at(slots)`` reads stored next observations."""
        episodes = self._episode[batch.indices] if len(batch.indices) else np.zeros(0, np.int64)
        chosen = np.flatnonzero((episodes >= 0)
                                & (self._rng.random(len(batch.indices)) < self.probability))
        future_slots, rows = [], []
        for index in chosen.tolist():
            slots, written = self._episodes[int(episodes[index])]
            step = int(self._step[batch.indices[index]])
            later = int(self._rng.integers(step, len(slots)))
            if self._row[slots[later]] == written[later]:
                future_slots.append(slots[later])
                rows.append(index)
        if not rows:
            return batch
        picked = np.asarray(rows, dtype=np.int64)
        goals = next_obs_at(np.asarray(future_slots, dtype=np.int64))[:, self.layout.achieved]
        obs, next_obs, rewards = batch.obs.copy(), batch.next_obs.copy(), batch.rewards.copy()
        obs[picked, self.layout.desired] = goals
        next_obs[picked, self.layout.desired] = goals
        rewards[picked] = np.asarray(self.compute_reward(
            next_obs[picked, self.layout.achieved], goals, None), dtype=np.float32).reshape(-1)
        self.relabelled += len(picked)
        return batch._replace(obs=obs, next_obs=next_obs, rewards=rewards)


def episode_keys(robot_id: int, env_ids: npt.ArrayLike) -> np.ndarray:
    """One key per row naming its episode stream: its robot and environment."""
    return (np.int64(robot_id) << 32) | np.asarray(env_ids, dtype=np.int64)


def _made(env_id: str) -> gymnasium.Env[Any, Any]:
    from rl_core.envs import register_envs

    register_envs()
    return gymnasium.make(env_id, disable_env_checker=True)


def _goal_parts(env: gymnasium.Env[Any, Any]) -> tuple[GoalLayout, RewardFunction] | None:
    layout = GoalLayout.of(env.observation_space)
    compute_reward = getattr(env.unwrapped, "compute_reward", None)
    return None if layout is None or compute_reward is None else (layout, compute_reward)


def goal_env_parts(env_id: str) -> tuple[GoalLayout, RewardFunction] | None:
    """The goal layout of ``env_id`` and its ``compute_reward`` (the env it belongs to lives as
    long as it does); None when ``env_id`` is no goal-conditioned env."""
    env = _made(env_id)
    parts = _goal_parts(env)
    if parts is None:
        env.close()
    return parts


def is_goal_env(env_id: str) -> bool:
    """Whether HER can relabel ``env_id``'s goals (the env made to find out is closed again)."""
    env = _made(env_id)
    try:
        return _goal_parts(env) is not None
    finally:
        env.close()
