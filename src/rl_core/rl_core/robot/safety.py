"""The safety layer between a policy's actions and a robot's controllers.

Every command the boundary sends passes :meth:`SafetyLayer.filter`: it changes by at most
``max_change`` from the last command sent (across episode starts and holds too), ramps in from a
hold over ``ramp_periods`` (Isaac ROS Deploy's blend from the previous controller), is clipped to
the joint limits of the robot model (position, velocity or effort, by the command interface)
after the change limit so that it never leaves them, is kept from driving a joint past its
position limits, and is held when, standing for the whole command deadline, it would take the
end effector further out of the task's workspace box. :meth:`SafetyLayer.hold` is the command
that stops the robot where it is (the current positions, inside the limits, for the position
interface; zero velocity or effort otherwise), sent on an e-stop, at every end of acting and
when no fresh action came within the command deadline; :meth:`SafetyLayer.beyond_envelope` tells
when a joint moves faster than the velocity envelope allows. Each intervention is counted by
kind (:attr:`SafetyLayer.interventions`), so none is silent: the simulator node reports the
counts on ``/diagnostics``.
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
RAMPED = "ramped in from a hold"
ENVELOPE = "held: velocity envelope"
IMPLAUSIBLE = "held: implausible joint state"
STOPPED = "held: acting stopped"
INTERVENTIONS = (CLIPPED, CHANGE_LIMITED, POSITION_LIMIT, WORKSPACE, TIMEOUT, ESTOP, RAMPED,
                 ENVELOPE, IMPLAUSIBLE, STOPPED)


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
    :param standing_time: the longest a command may stand (the command deadline, s): the
        workspace and position limits are checked over it (at least one control period).
    :param ramp_periods: commands after a hold (and the first one) blend from the hold to the
        filtered command over this many periods (0 = no ramp).
    :param velocity_envelope: a joint whose speed exceeds this multiple of its velocity limit
        is out of the envelope (0 = no check).
    """

    def __init__(self, interface: str, limits: JointLimits, indices: np.ndarray,
                 control_period: float, max_change: np.ndarray,
                 end_effector: Callable[[JointSample], np.ndarray | None] | None = None,
                 workspace: tuple[tuple[float, float, float],
                                  tuple[float, float, float]] | None = None,
                 standing_time: float = 0.0, ramp_periods: int = 0,
                 velocity_envelope: float = 0.0) -> None:
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
        self.standing_time = max(float(standing_time), self.period)
        self.ramp_periods = int(ramp_periods)
        self.velocity_envelope = float(velocity_envelope)
        self.interventions: dict[str, int] = {kind: 0 for kind in INTERVENTIONS}
        self._last: np.ndarray | None = None  # the last command sent, across episodes
        self._held: np.ndarray | None = None  # the hold a ramp starts from (None: the state's)
        self._ramp_step = 0  # commands since the last hold

    def count(self, kind: str) -> None:
        """Count an intervention the boundary made itself (timeout, e-stop)."""
        self.interventions[kind] += 1

    def hold(self, state: JointSample) -> np.ndarray:
        """The command that keeps the robot where it is (inside the limits); remembered as the
        last command, and the next commands ramp in from it."""
        command = self._hold_command(state)
        self._last, self._held, self._ramp_step = command, command, 0
        return command.copy()

    def _hold_command(self, state: JointSample) -> np.ndarray:
        if self.interface == "position":
            position = np.asarray(state.position, dtype=np.float64)[self.indices]
            return np.clip(position, self.limits.lower, self.limits.upper)
        return np.zeros(len(self.indices))

    def beyond_envelope(self, state: JointSample) -> bool:
        """Whether a commanded joint moves faster than ``velocity_envelope`` times its limit."""
        if not self.velocity_envelope > 0:
            return False
        speed = np.abs(np.asarray(state.velocity, dtype=np.float64)[self.indices])
        return bool(np.any(speed > self.velocity_envelope * self.limits.velocity))

    def filter(self, command: np.ndarray, state: JointSample) -> np.ndarray:
        """The safe version of ``command`` (physical units, command order) in ``state``."""
        command = np.asarray(command, dtype=np.float64).copy()
        if command.shape != (len(self.indices),):
            raise ValueError(f"expected {len(self.indices)} command values, got shape "
                             f"{command.shape}")
        if not np.all(np.isfinite(command)):
            raise ValueError("command values must be finite")
        command = self._ramp(command, state)
        if self._last is not None:
            changed = np.clip(command, self._last - self.max_change, self._last + self.max_change)
            if np.any(changed != command):
                self.count(CHANGE_LIMITED)
            command = changed
        # The range last, so that no command leaves it (a hold or a change limit outside it).
        low, high = self._range()
        clipped = np.clip(command, low, high)
        if np.any(clipped != command):
            self.count(CLIPPED)
        command = self._keep_inside_position_limits(clipped, state)
        if self.workspace is not None and self._leaves_workspace(command, state):
            self.count(WORKSPACE)
            return self.hold(state)
        self._last = command
        return command.copy()

    def _ramp(self, command: np.ndarray, state: JointSample) -> np.ndarray:
        """Blend from the hold towards ``command`` over the periods after a hold."""
        if self._ramp_step >= self.ramp_periods:
            return command
        self._ramp_step += 1
        held = self._held if self._held is not None else self._hold_command(state)
        blended = held + (command - held) * (self._ramp_step / self.ramp_periods)
        if np.any(blended != command):
            self.count(RAMPED)
        return blended

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
        ahead = position + moving * self.period  # within a period the next command corrects it
        outward = (((ahead > self.limits.upper) & (command > 0))
                   | ((ahead < self.limits.lower) & (command < 0)))
        if np.any(outward):
            self.count(POSITION_LIMIT)
            command = np.where(outward, 0.0, command)
        return command

    def _leaves_workspace(self, command: np.ndarray, state: JointSample) -> bool:
        """Whether the command, standing for up to :attr:`standing_time` (the deadline after
        which the boundary holds the robot), moves the end effector further outside the box
        than it is: one control period ahead and at the deadline (the joints move along a
        straight line; each point costs a forward kinematics, about 0.1 ms for the KUKA)."""
        assert self.end_effector is not None and self.workspace is not None
        if self.interface == "effort":
            return False  # an effort command's motion is not predictable without dynamics
        now = self.end_effector(state)
        if now is None:
            return False
        start = np.asarray(state.position, dtype=np.float64)
        checks = (1.0,) if self.interface == "position" else (
            self.period / self.standing_time, 1.0)
        for fraction in checks:
            position = start.copy()
            if self.interface == "position":
                position[self.indices] = command
            else:
                position[self.indices] += command * self.standing_time * fraction
            ahead = self.end_effector(JointSample(state.stamp, position, state.velocity,
                                                  state.effort))
            if ahead is not None and (_outside(ahead, *self.workspace)
                                      > _outside(now, *self.workspace) + 1e-12):
                return True
        return False


def _outside(point: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    """How far ``point`` lies outside the box (0 inside)."""
    return float(np.linalg.norm(np.maximum(low - point, 0.0) + np.maximum(point - high, 0.0)))
