"""Central batched inference (SEED RL style) in plain Python: pending observation batches of
several robots answered by one forward pass, and the figures of that batching.

The central policy node (``rl_nodes.policy`` with ``robots: N``) adds each robot's batch as it
comes and runs :meth:`CentralBatcher.forward` once every robot has one pending, or when the oldest
has waited the batch window; the actions are then split and published per robot with each batch's
own ``robot_id`` and ``step``, MAC'd over the digest of that batch's own observations
(rl_core.security.action_auth.answer: a simulator steps only with an answer to what it published, so
:meth:`CentralBatcher.forward` hands each batch back with its message as it came, never the
concatenation). The window's timer and the publishing stay in the node. Robots per forward pass
and the latency batching adds are kept in :attr:`CentralBatcher.stats` and reported by
:meth:`CentralBatcher.diagnostics`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np


class PendingBatch(NamedTuple):
    """An observation batch waiting for the central forward pass."""

    robot: int  # k of the /robot_k/observations subscription it came on
    msg: Any  # the observations (``.obs``: rows x observation)
    arrived_at: float  # time.monotonic() when it came


@dataclass
class BatchingStats:
    """Running totals of a central policy's batching (differences give rates and means)."""

    forward_passes: int = 0
    batches: int = 0  # observation batches answered
    robot_slots: int = 0  # sum over forward passes of the distinct robots in each
    rows: int = 0  # observations (environments) inferred
    wait_s: float = 0.0  # sum over batches of arrival -> forward pass start (what batching adds)
    latency_s: float = 0.0  # sum over batches of arrival -> actions ready (wait + inference)

    @property
    def robots_per_pass(self) -> float:
        """Mean number of robots answered by one forward pass."""
        return self.robot_slots / self.forward_passes if self.forward_passes else 0.0

    @property
    def rows_per_pass(self) -> float:
        """Mean forward-pass batch size in observations."""
        return self.rows / self.forward_passes if self.forward_passes else 0.0

    @property
    def mean_wait_ms(self) -> float:
        return 1e3 * self.wait_s / self.batches if self.batches else 0.0

    @property
    def mean_latency_ms(self) -> float:
        return 1e3 * self.latency_s / self.batches if self.batches else 0.0

    def since(self, earlier: BatchingStats) -> BatchingStats:
        """The totals accumulated after ``earlier`` (a copy taken before)."""
        return BatchingStats(**{f.name: getattr(self, f.name) - getattr(earlier, f.name)
                                for f in fields(self)})

    def copy(self) -> BatchingStats:
        return BatchingStats(**{f.name: getattr(self, f.name) for f in fields(self)})


class CentralBatcher:
    """The batches of ``robots`` robots waiting for one forward pass.

    :param robots: robots served (their batches arrive with index ``0..robots-1``).
    :param window_s: longest wait of a batch for the other robots' (0: answer each at once).
    """

    def __init__(self, robots: int, window_s: float = 0.0) -> None:
        self.robots = robots
        self.window_s = window_s
        self.pending: list[PendingBatch] = []
        self._pending_per_robot = [0] * robots
        self._robots_waiting = 0  # robots with at least one pending batch
        #: Batches received per robot (diagnostics: which robots went silent).
        self.robot_batches = [0] * robots
        self.stats = BatchingStats()
        self._max_wait_s = 0.0  # longest wait since the last report
        self._reported = BatchingStats()
        self._reported_robot_batches = [0] * robots

    def add(self, robot: int, msg: Any, now: float) -> bool:
        """Queue a robot's batch; True when every robot has one pending (forward now)."""
        self.robot_batches[robot] += 1
        self.pending.append(PendingBatch(robot, msg, now))
        if self._pending_per_robot[robot] == 0:
            self._robots_waiting += 1
        self._pending_per_robot[robot] += 1
        return self._robots_waiting == self.robots

    def oldest_wait_s(self, now: float) -> float:
        """How long the oldest pending batch has waited (0 with none)."""
        return now - self.pending[0].arrived_at if self.pending else 0.0

    def tick_is_early(self, now: float) -> bool:
        """Whether a deadline tick at ``now`` came for a round already answered: the oldest
        pending batch has waited less than half the window (the timer was reset for it)."""
        return bool(self.pending) and self.oldest_wait_s(now) < 0.5 * self.window_s

    def forward(self, act: Callable[[np.ndarray], np.ndarray]
                ) -> list[tuple[PendingBatch, np.ndarray]]:
        """One call of ``act`` over every pending batch's rows; each batch with its actions."""
        batches, self.pending = self.pending, []
        self._pending_per_robot = [0] * self.robots
        robots, self._robots_waiting = self._robots_waiting, 0
        if not batches:
            return []
        started = time.monotonic()
        obs = (batches[0].msg.obs if len(batches) == 1
               else np.concatenate([batch.msg.obs for batch in batches]))
        actions = act(obs)
        ready = time.monotonic()
        answers, start = [], 0
        for batch in batches:
            end = start + len(batch.msg.obs)
            answers.append((batch, actions[start:end]))
            start = end
        stats = self.stats
        stats.forward_passes += 1
        stats.batches += len(batches)
        stats.robot_slots += robots
        stats.rows += len(obs)
        stats.wait_s += sum(started - batch.arrived_at for batch in batches)
        stats.latency_s += sum(ready - batch.arrived_at for batch in batches)
        self._max_wait_s = max(self._max_wait_s, started - batches[0].arrived_at)
        return answers

    def report(self) -> tuple[BatchingStats, float, list[int]]:
        """The totals since the last report, the longest wait then (s), and the robots that
        sent nothing meanwhile."""
        recent = self.stats.since(self._reported)
        self._reported = self.stats.copy()
        silent = [robot for robot, count in enumerate(self.robot_batches)
                  if count == self._reported_robot_batches[robot]]
        self._reported_robot_batches = list(self.robot_batches)
        max_wait, self._max_wait_s = self._max_wait_s, 0.0
        return recent, max_wait, silent

    def diagnostics(self) -> tuple[dict[str, object], list[int]]:
        """The diagnostics values of the batching since the last report, and the robots that
        sent nothing meanwhile."""
        recent, max_wait_s, silent = self.report()
        values = {"robots": self.robots, "batch window ms": f"{self.window_s * 1e3:g}",
                  "forward passes": recent.forward_passes,
                  "robots per forward pass": f"{recent.robots_per_pass:.2f}",
                  "observations per forward pass": f"{recent.rows_per_pass:.1f}",
                  "batch wait ms": f"{recent.mean_wait_ms:.3f}",
                  "batch wait max ms": f"{max_wait_s * 1e3:.3f}",
                  "answer latency ms": f"{recent.mean_latency_ms:.3f}"}
        return values, silent
