"""Reading a robot's joint states and measuring its control loop (plain Python, no rclpy).

:class:`JointStateReader` turns the fields of a ``sensor_msgs/JointState`` (any joint order,
more joints than the task's, velocities or efforts left out) into a :class:`JointSample` of the
task's joints; :class:`ControlStats` keeps the latency from a state to its command and the
achieved command rate with pauses left out.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

import numpy as np

from rl_core.robot import JointLimits, JointSample
from rl_core.robot.task import Task

#: A gap between two commands longer than this many control periods is a pause, left out of
#: the achieved control rate.
PAUSE_PERIODS = 5
#: Latencies kept for the percentiles.
LATENCY_WINDOW = 1000


class JointStateError(ValueError):
    """A joint state that cannot be read; the message says why and how to fix it."""


class JointStateReader:
    """The task's joints out of a robot's joint states.

    :param joints: the robot's names of the task's joints, in the task's order.
    """

    def __init__(self, joints: Sequence[str]) -> None:
        self.joints = tuple(joints)
        self._index_of: dict[tuple[str, ...], np.ndarray] = {}

    def read(self, stamp: float, names: Sequence[str], position: Sequence[float],
             velocity: Sequence[float], effort: Sequence[float]) -> JointSample:
        """:raises JointStateError: a joint missing, positions that do not match the names, or
        non-finite positions or velocities."""
        names = tuple(names)
        index = self._index_of.get(names)
        if index is None:
            missing = [name for name in self.joints if name not in names]
            if missing:
                raise JointStateError(f"joint_states lacks {missing} (it has {list(names)}); set "
                                      "joints:= to the robot's joint names")
            index = np.asarray([names.index(name) for name in self.joints])
            self._index_of[names] = index
        count = len(names)
        positions = np.asarray(position, dtype=np.float64)
        if len(positions) != count:
            raise JointStateError(f"{len(positions)} positions for {count} names")

        def optional(values: Sequence[float]) -> np.ndarray:
            array = np.asarray(values, dtype=np.float64)
            return array[index] if len(array) == count else np.zeros(len(index))

        sample = JointSample(stamp, positions[index], optional(velocity), optional(effort))
        if not (np.all(np.isfinite(sample.position)) and np.all(np.isfinite(sample.velocity))):
            raise JointStateError("non-finite joint positions or velocities")
        return sample


class ControlStats:
    """Latency from a joint state to its command, and the achieved command rate.

    :param period: the control period, seconds (gaps over :data:`PAUSE_PERIODS` of it, or
        0.1 s, are pauses: rate limiter, e-stop, resets, not a slow loop).
    """

    def __init__(self, period: float) -> None:
        self.period = period
        self.latencies: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self.commands_sent = 0
        self._driven_s = 0.0
        self._driven_commands = 0
        self._last_sent_at = -float("inf")

    def command_sent(self, now: float) -> None:
        self.commands_sent += 1
        gap = now - self._last_sent_at
        if gap < max(PAUSE_PERIODS * self.period, 0.1):
            self._driven_s += gap
            self._driven_commands += 1
        self._last_sent_at = now

    def answered(self, latency_s: float) -> None:
        """A command went out ``latency_s`` after the state it answers arrived."""
        self.latencies.append(latency_s)

    @property
    def rate_hz(self) -> float:
        """Commands per second while the robot is driven (pauses left out), since the start."""
        return self._driven_commands / self._driven_s if self._driven_s > 0 else 0.0

    def latency_percentiles(self) -> tuple[float, float]:
        """(p50, p99) seconds from receiving a joint state to sending the command for it."""
        if not self.latencies:
            return 0.0, 0.0
        p50, p99 = np.percentile(np.asarray(self.latencies), [50, 99])
        return float(p50), float(p99)


def command_limits(task: Task) -> JointLimits:
    """The commanded joints' limits from the task's URDF (unbounded without one)."""
    names = tuple(task.commanded)
    if task.urdf_path:
        from rl_core.robot.urdf import UrdfModel

        return UrdfModel.from_file(task.urdf_path).limits(list(names))
    inf = np.full(len(names), np.inf)
    return JointLimits(names, -inf, inf.copy(), inf.copy(), inf.copy())
