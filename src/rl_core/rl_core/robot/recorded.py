"""Transitions from a robot's own topics, as an operator drove it: the joint states it reported
and the commands sent to its forward command controller, turned into what the boundary would
have learned from.

Every command is one control period: the joint state in effect when it was sent is the
observation, the action is the command in the task's units (``command / action_scale``, clipped
to [-1, 1]), and the joint state in effect when the next command was sent ends the period; the
task's :meth:`~Task.observe` and :meth:`~Task.outcome` give the next observation, the reward and
whether the episode ended. An episode starts with a command (:meth:`~Task.reset`) and ends where
the task says so, after ``max_episode_steps``, or where the commands pause (more than
:data:`PAUSE_PERIODS` control periods, or the end of the recording). A task whose observation
holds inputs the recording does not (KukaReach's target) gets the ones its ``reset`` draws:
consistent transitions, but not aimed at them (docs/human_in_the_loop.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.robot import JointSample
from rl_core.robot.task import Task

__all__ = ["PAUSE_PERIODS", "TimedCommand", "TimedState", "operator_transitions"]

#: Commands further apart than this many control periods are two episodes.
PAUSE_PERIODS = 5


@dataclass(frozen=True)
class TimedState:
    """A joint state and when it was received (seconds, the recording's clock)."""

    at: float
    state: JointSample


@dataclass(frozen=True)
class TimedCommand:
    """A command (physical units, the controller's joint order) and when it was sent."""

    at: float
    command: np.ndarray


def operator_transitions(task: Task, states: Sequence[TimedState],
                         commands: Sequence[TimedCommand], seed: int = 0
                         ) -> dict[str, np.ndarray]:
    """The transitions of a recording, as arrays (``obs``, ``actions``, ``rewards``,
    ``next_obs``, ``terminated``, ``truncated``; row ``i`` of each one transition).

    :param states: joint states in the order they were received.
    :param commands: commands in the order they were sent.
    :raises ValueError: for a command of another size than the task's commanded joints.
    """
    rng = np.random.default_rng(seed)
    scale = np.asarray(task.action_scale, dtype=np.float64)
    received = np.asarray([timed.at for timed in states])
    pause = PAUSE_PERIODS * task.control_period
    rows: list[tuple[np.ndarray, np.ndarray, float, np.ndarray, bool, bool]] = []
    episode_steps = -1  # no episode in progress
    for k, timed in enumerate(commands):
        command = np.asarray(timed.command, dtype=np.float64).reshape(-1)
        if command.shape != scale.shape:
            raise ValueError(f"a command of {command.size} values, but the task commands "
                             f"{scale.size} joints {list(task.commanded)}")
        following = commands[k + 1].at if k + 1 < len(commands) else math.inf
        paused = following - timed.at > pause
        ends_at = timed.at + task.control_period if paused else following
        before = int(np.searchsorted(received, timed.at, side="right")) - 1
        after = int(np.searchsorted(received, ends_at, side="right")) - 1
        if before < 0 or after <= before:
            continue  # no state to act in yet, or the robot reported none since
        if episode_steps < 0:
            task.reset(rng)
            episode_steps = 0
        action = np.clip(command / scale, -1.0, 1.0).astype(np.float32)
        obs = task.observe(states[before].state)
        outcome = task.outcome(action, states[after].state)
        episode_steps += 1
        truncated = not outcome.terminated and (paused
                                                or episode_steps >= task.max_episode_steps)
        rows.append((obs, action, float(outcome.reward), task.observe(states[after].state),
                     bool(outcome.terminated), truncated))
        if outcome.terminated or truncated:
            episode_steps = -1
    if not rows:
        return {}
    columns = [np.asarray(column) for column in zip(*rows)]
    return {name: column.astype(dtype) for (name, dtype), column in zip(
        (("obs", np.float32), ("actions", np.float32), ("rewards", np.float32),
         ("next_obs", np.float32), ("terminated", bool), ("truncated", bool)), columns)}
