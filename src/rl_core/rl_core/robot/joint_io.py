"""Reading a robot's joint states and measuring its control loop (plain Python, no rclpy).

:class:`JointStateReader` turns the fields of a ``sensor_msgs/JointState`` (any joint order,
more joints than the task's, velocities or efforts left out) into a :class:`JointSample` of the
task's joints; :class:`StateSource` accepts states from one publisher only, pinned while it is
the only one (anyone on the domain can publish ``joint_states``); :class:`StateCheck` refuses
states no robot can be in
(outside the URDF's limits, moving faster than the positions change, stamps that go back or
come from the future); :class:`ControlStats` keeps the latency from a state to its command and
the achieved command rate with pauses left out.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

import numpy as np

from rl_core.config import ConfigError
from rl_core.robot import JointLimits, JointSample
from rl_core.robot.task import Task

#: A gap between two commands longer than this many control periods is a pause, left out of
#: the achieved control rate.
PAUSE_PERIODS = 5
#: Latencies kept for the percentiles.
LATENCY_WINDOW = 1000
#: Distinct joint name orders a reader remembers (a robot has one; a forger may send many).
MAX_NAME_ORDERS = 8
#: A joint state's position may lie this far outside the URDF's limits (rad or m): encoders and
#: simulators overshoot a hard stop a little.
POSITION_MARGIN = 0.05
#: Stamps up to this far ahead of the boundary's clock are taken (seconds).
FUTURE_TOLERANCE_S = 1.0
#: Between two states, positions may move :data:`SPEED_SLACK` times the velocity limit times
#: the time between them, plus this much (rad or m); velocities up to that multiple are taken.
MOTION_SLACK = 0.05
SPEED_SLACK = 3.0


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
            if len(self._index_of) >= MAX_NAME_ORDERS:
                self._index_of.clear()  # bounded: a forger's many orders cost lookups, not memory
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


class StateSource:
    """Which publisher the robot's state comes from: one is pinned, and states from any other
    are refused while the pinned one is on the topic (a robot driver that restarts gets a new
    identity, and is pinned once the old one has left).

    A publisher is pinned only while it is the topic's only one: with two there (a forger that
    came before the robot, or while a crashed driver was away), which is the robot cannot be
    told, so every state is refused (the robot is held by the command deadline) until one
    leaves. A forger alone on the topic before the robot's first state is still pinned: that
    needs DDS security (SROS2).

    :param publishers: the DDS GIDs of the joint_states topic's publishers now, in the form
        the states' sender GIDs come in.
    """

    def __init__(self, publishers: Callable[[], Sequence[bytes]]) -> None:
        self.publishers = publishers
        self.pinned: bytes | None = None
        self.refused = 0

    def refusal(self, gid: bytes | None) -> str | None:
        """Why a state from ``gid`` (``None``: from this process) is not the robot's, or
        ``None`` when it is (counted in :attr:`refused` when it is not)."""
        if gid is None or gid == self.pinned:
            return None
        present = self.publishers()
        if self.pinned is not None and self.pinned in present:
            why = ("from a second publisher: the robot's state comes from the one pinned while "
                   "it is on the topic")
        elif any(other != gid for other in present):
            why = (f"{len(present)} publishers on joint_states and none pinned: which is the "
                   "robot cannot be told, so the robot is held until only one publishes (ros2 "
                   "topic info -v names them)")
        else:
            self.pinned = gid
            return None
        self.refused += 1
        return why

    def may_be(self, gid: bytes | None) -> bool:
        """Whether a state from ``gid`` may be the robot's, without pinning or counting (what
        another thread that sees the states too asks)."""
        return gid is None or self.pinned is None or gid == self.pinned


class StateCheck:
    """Refuses joint states that no robot with these limits can be in.

    :param limits: limits of the task's joints, in the task's order (``inf`` where the URDF
        has none: continuous joints).
    """

    def __init__(self, limits: JointLimits) -> None:
        self.lower = limits.lower - POSITION_MARGIN
        self.upper = limits.upper + POSITION_MARGIN
        self.speed = limits.velocity
        self._last: JointSample | None = None

    def restart(self) -> None:
        """Forget the last state (the robot was reset or restarted: positions jump)."""
        self._last = None

    def problem(self, sample: JointSample, now: float) -> str | None:
        """Why ``sample`` is implausible (``now``: the boundary's clock, same base as the
        stamps), or ``None``; a plausible sample becomes the reference for the next."""
        position = np.asarray(sample.position, dtype=np.float64)
        velocity = np.asarray(sample.velocity, dtype=np.float64)
        if np.any(position < self.lower) or np.any(position > self.upper):
            return (f"positions {np.round(position, 3).tolist()} outside the URDF limits "
                    "(+ margin)")
        if np.any(np.abs(velocity) > SPEED_SLACK * self.speed):
            return f"velocities {np.round(velocity, 3).tolist()} beyond the velocity limits"
        if sample.stamp > now + FUTURE_TOLERANCE_S:
            return (f"stamp {sample.stamp:.3f} s is {sample.stamp - now:.1f} s ahead of this "
                    "clock")
        last = self._last
        if last is not None and sample.stamp >= last.stamp:
            elapsed = sample.stamp - last.stamp
            moved = np.abs(position - np.asarray(last.position, dtype=np.float64))
            reach = np.where(np.isfinite(self.speed), SPEED_SLACK * self.speed * elapsed, np.inf)
            if np.any(moved > reach + MOTION_SLACK):
                return (f"positions moved {np.round(moved, 3).tolist()} in {elapsed:.3f} s, "
                        "faster than the velocity limits allow")
        self._last = sample
        return None


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


def task_limits(task: Task, urdf_path: str = "") -> JointLimits:
    """The limits of the task's joints from ``urdf_path`` or else the task's URDF.

    :raises ConfigError: when neither names a URDF: a robot without limits is refused."""
    path = urdf_path or task.urdf_path
    if not path:
        raise ConfigError(f"task {type(task).__name__} names no URDF, so the safety layer would "
                          "have no joint limits: give the robot's with limits_urdf:=FILE")
    from rl_core.robot.urdf import UrdfModel

    return UrdfModel.from_file(path).limits(list(task.joint_names))


def command_limits(task: Task, urdf_path: str = "") -> JointLimits:
    """The commanded joints' limits, in command order (:func:`task_limits`)."""
    return joint_limits(task_limits(task, urdf_path), task.commanded)


def joint_limits(limits: JointLimits, names: Sequence[str]) -> JointLimits:
    """The limits of ``names`` only, in that order."""
    index = [limits.names.index(name) for name in names]
    return JointLimits(tuple(names), limits.lower[index], limits.upper[index],
                       limits.velocity[index], limits.effort[index])
