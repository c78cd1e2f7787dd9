"""The safety layer between a policy's actions and a robot's controllers.

Every command the boundary sends passes :meth:`SafetyLayer.filter`: it is clipped to the joint
limits of the robot model (position, velocity or effort, by the command interface), to a change
per control period, kept from driving a joint past its position limits, and held when it would
take the end effector out of the task's workspace box. :meth:`SafetyLayer.hold` is the command
that stops the robot where it is (the current positions for the position interface, zero
velocity or effort otherwise), sent on an e-stop and when no fresh action came within the
command deadline. Each intervention is counted by kind (:attr:`SafetyLayer.interventions`), so
none is silent: the simulator node reports the counts on ``/diagnostics``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rl_core.robot import COMMAND_INTERFACES, JointLimits, JointSample

#: Intervention kinds, as counted and reported.
CLIPPED = "clipped to joint limits"
CHANGE_LIMITED = "change per period limited"
POSITION_LIMIT = "stopped at a position limit"
WORKSPACE = "held at the workspace box"
TIMEOUT = "held: command deadline"
ESTOP = "held: e-stop"
INTERVENTIONS = (CLIPPED, CHANGE_LIMITED, POSITION_LIMIT, WORKSPACE, TIMEOUT, ESTOP)


class SafetyLayer:
    """Limits commands for one robot's commanded joints.

    :param interface: the command interface, one of ``COMMAND_INTERFACES``.
    :param limits: limits of the commanded joints, in command order.
    :param indices: where each commanded joint sits in a :class:`JointSample` (the task's
        ``joint_names`` order).
    :param control_period: seconds per command.
    :param max_change: largest change of a command from one period to the next, per joint, in
        the interface's units (for position: rad or m per period); ``inf`` switches it off.
    :param end_effector: the end effector's position (m) for joint positions of a sample, with
        ``workspace``; ``None`` when the task has no workspace box.
    :param workspace: ``(low xyz, high xyz)`` in m.
    """

    def __init__(self, interface: str, limits: JointLimits, indices: np.ndarray,
                 control_period: float, max_change: np.ndarray,
                 end_effector: Callable[[JointSample], np.ndarray | None] | None = None,
                 workspace: tuple[tuple[float, float, float],
                                  tuple[float, float, float]] | None = None) -> None:
        if interface not in COMMAND_INTERFACES:
            raise ValueError(f"command interface must be one of {', '.join(COMMAND_INTERFACES)}, "
                             f"got {interface!r}")
        if not control_period > 0:
            raise ValueError(f"control_period must be > 0, got {control_period}")
        self.interface = interface
        self.limits = limits
        self.indices = np.asarray(indices, dtype=np.int64)
        self.period = float(control_period)
        self.max_change = np.broadcast_to(np.asarray(max_change, dtype=np.float64),
                                          (len(limits.names),)).copy()
        if np.any(~(self.max_change > 0)):
            raise ValueError(f"max_change must be > 0 per joint, got {max_change}")
        self.end_effector = end_effector if workspace is not None else None
        self.workspace = (None if workspace is None else
                          (np.asarray(workspace[0], dtype=np.float64),
                           np.asarray(workspace[1], dtype=np.float64)))
        self.interventions: dict[str, int] = {kind: 0 for kind in INTERVENTIONS}
        self._last: np.ndarray | None = None  # the last command sent

    def count(self, kind: str) -> None:
        """Count an intervention the boundary made itself (timeout, e-stop)."""
        self.interventions[kind] += 1

    def reset(self) -> None:
        """Forget the last command (a new episode starts from a held robot)."""
        self._last = None

    def hold(self, state: JointSample) -> np.ndarray:
        """The command that keeps the robot where it is; remembered as the last command."""
        if self.interface == "position":
            command = np.asarray(state.position, dtype=np.float64)[self.indices].copy()
        else:
            command = np.zeros(len(self.indices))
        self._last = command
        return command.copy()

    def filter(self, command: np.ndarray, state: JointSample) -> np.ndarray:
        """The safe version of ``command`` (physical units, command order) in ``state``."""
        command = np.asarray(command, dtype=np.float64).copy()
        if command.shape != (len(self.indices),):
            raise ValueError(f"expected {len(self.indices)} command values, got shape "
                             f"{command.shape}")
        if not np.all(np.isfinite(command)):
            raise ValueError("command values must be finite")
        low, high = self._range()
        clipped = np.clip(command, low, high)
        if np.any(clipped != command):
            self.count(CLIPPED)
        command = clipped
        if self._last is not None:
            changed = np.clip(command, self._last - self.max_change, self._last + self.max_change)
            if np.any(changed != command):
                self.count(CHANGE_LIMITED)
            command = changed
        command = self._keep_inside_position_limits(command, state)
        if self.workspace is not None and self._leaves_workspace(command, state):
            self.count(WORKSPACE)
            return self.hold(state)
        self._last = command
        return command.copy()

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        limits = self.limits
        if self.interface == "position":
            return limits.lower, limits.upper
        bound = limits.velocity if self.interface == "velocity" else limits.effort
        return -bound, bound

    def _keep_inside_position_limits(self, command: np.ndarray, state: JointSample
                                     ) -> np.ndarray:
        """A velocity or effort that would push a joint at (or within one period of) its
        position limit further out is set to zero for that joint."""
        if self.interface == "position":
            return command
        position = np.asarray(state.position, dtype=np.float64)[self.indices]
        velocity = np.asarray(state.velocity, dtype=np.float64)[self.indices]
        moving = command if self.interface == "velocity" else velocity
        ahead = position + moving * self.period
        outward = (((ahead > self.limits.upper) & (command > 0))
                   | ((ahead < self.limits.lower) & (command < 0)))
        if np.any(outward):
            self.count(POSITION_LIMIT)
            command = np.where(outward, 0.0, command)
        return command

    def _leaves_workspace(self, command: np.ndarray, state: JointSample) -> bool:
        """Whether the command moves the end effector further outside the box than it is."""
        assert self.end_effector is not None and self.workspace is not None
        now = self.end_effector(state)
        if now is None:
            return False
        position = np.asarray(state.position, dtype=np.float64).copy()
        if self.interface == "position":
            position[self.indices] = command
        elif self.interface == "velocity":
            position[self.indices] += command * self.period
        else:
            return False  # an effort command's motion is not predictable without dynamics
        ahead_state = JointSample(state.stamp, position, state.velocity, state.effort)
        ahead = self.end_effector(ahead_state)
        return bool(ahead is not None and _outside(ahead, *self.workspace)
                    > _outside(now, *self.workspace) + 1e-12)


def _outside(point: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    """How far ``point`` lies outside the box (0 inside)."""
    return float(np.linalg.norm(np.maximum(low - point, 0.0) + np.maximum(point - high, 0.0)))
