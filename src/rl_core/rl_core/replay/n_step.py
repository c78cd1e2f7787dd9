"""n-step returns (``n_step``): one-step transitions of a group of environments turned into
transitions whose reward is the discounted sum of the next ``n`` rewards and whose next
observation is the one ``n`` steps on, so the critics bootstrap with ``gamma ** n``
(``SACConfig.bootstrap_discount``), as Ape-X's actors and TorchRL's ``MultiStep`` compute them at the
source. The simulator (rl_core.acting.stepping) and the bare loop apply it before experience is
published or stored, so the replay buffer, its snapshots and the wire carry ordinary rows.

A terminated episode gives all its rows, the last ``n - 1`` with fewer rewards and nothing to
bootstrap from. At a truncation (a time limit) the last ``n - 1`` rows are left out: they would
bootstrap with ``gamma ** k`` for their own ``k < n``, which the rows do not carry.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np


class Rows(NamedTuple):
    """Transitions of some of the group's environments; ``env_index`` says whose."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    intervened: np.ndarray | None
    env_index: np.ndarray


class NStepReturns:
    """The last ``n`` steps of a fixed group of environments stepped together, and the n-step
    transitions each step completes.

    :param n: rewards summed per transition (at least 1; 1 gives the rows back as they are).
    :param gamma: the discount of the sum.
    """

    def __init__(self, n: int, gamma: float) -> None:
        if n < 1:
            raise ValueError(f"n_step must be at least 1, got {n}")
        self.n, self.gamma = n, float(gamma)
        #: (obs, actions, rewards, intervened) of the last n steps, oldest first.
        self._steps: deque[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = deque(
            maxlen=n)
        self._count: np.ndarray | None = None  # per environment: its episode's steps held

    def add(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
            next_obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
            intervened: np.ndarray | None = None) -> Rows:
        """One step of every environment of the group (row i: environment i, every call);
        the n-step transitions it completes (possibly none)."""
        rows = len(rewards)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        if self.n == 1:
            return Rows(obs, actions, rewards, next_obs, terminated, truncated, intervened,
                        np.arange(rows))
        flags = np.zeros(rows, dtype=bool) if intervened is None else \
            np.asarray(intervened, dtype=bool)
        if self._count is None or len(self._count) != rows:
            self._count, self._steps = np.zeros(rows, dtype=np.int64), deque(maxlen=self.n)
        self._steps.append((obs, actions, np.asarray(rewards, dtype=np.float32), flags))
        self._count = np.minimum(self._count + 1, self.n)
        parts: list[tuple[int, np.ndarray, np.ndarray]] = []  # (start, env indices, returns)
        returns = np.zeros(rows, dtype=np.float32)
        held = len(self._steps)
        for start in range(held - 1, -1, -1):  # newest start first: the sum grows backwards
            returns = self._steps[start][2] + np.float32(self.gamma) * returns
            length = held - start
            complete = (self._count >= length) & ((length == self.n) | terminated)
            if complete.any():
                index = np.flatnonzero(complete)
                parts.append((start, index, returns[index]))
        self._count[terminated | truncated] = 0
        parts.reverse()  # oldest start first
        index = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)

        def column(k: int) -> np.ndarray:
            if not parts:
                return self._steps[-1][k][:0]
            return np.concatenate([self._steps[start][k][at] for start, at, _ in parts])

        full = np.zeros(len(index), dtype=bool) if not parts else np.concatenate(
            [np.full(len(at), held - start == self.n) for start, at, _ in parts])
        marked = column(3)
        return Rows(column(0), column(1),
                    np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.float32),
                    next_obs[index], terminated[index], truncated[index] & full,
                    marked if marked.any() else None, index)
