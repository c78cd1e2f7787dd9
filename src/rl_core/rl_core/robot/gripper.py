"""A gripper beside the arm at the ros2_control boundary: its declaration by a task, and its
commands, limited and held like the arm's.

A task with a gripper (``Task.gripper``) acts with a ``Dict`` of the arm (a ``Box``) and the
gripper (``Discrete(3)``: close, stay, open, as HIL-SERL's grasp critic chooses); the learner
sees it as one arm-and-choice row (rl_core.envs.spaces.HybridBox). The gripper's fingers take
position targets on a controller of their own (a forward position controller,
``<gripper controller>/commands``). Every target passes a :class:`SafetyLayer` of the fingers:
clipped to their URDF limits and moved at most ``speed * control period`` a period, ramped in
after a hold; a hold (the e-stop, a missed deadline, the end of acting) stops the fingers where
they are, as it stops the arm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_core.robot import JointLimits, JointSample
from rl_core.robot.safety import SafetyLayer

#: The gripper's choices, by index: HIL-SERL's grasp critic's close, stay, open.
CLOSE, STAY, OPEN = 0, 1, 2
GRIPPER_CHOICES = ("close", "stay", "open")


@dataclass(frozen=True)
class GripperSpec:
    """A task's gripper.

    :param joints: the finger joints (in the task's ``joint_names``, not among its commanded
        arm joints).
    :param closed: each finger's position target when closed (m or rad).
    :param opened: each finger's position target when open; episodes start open.
    :param speed: the fastest a target moves (m/s or rad/s); the safety layer's change limit.
    :param controller: the fingers' forward position controller (``<controller>/commands``).
    """

    joints: tuple[str, ...]
    closed: tuple[float, ...]
    opened: tuple[float, ...]
    speed: float = 0.1
    controller: str = "gripper_controller"

    def check(self, task: str, joint_names: tuple[str, ...], commanded: tuple[str, ...]) -> None:
        """Raise ``ValueError`` saying what is wrong with the declaration of ``task``."""
        if not self.joints:
            raise ValueError(f"task {task}: gripper names no joints")
        wrong = [j for j in self.joints if j not in joint_names or j in commanded]
        if wrong:
            raise ValueError(f"task {task}: gripper joints {wrong} must be among joint_names and "
                             "not among the arm's command_joints")
        if not (len(self.closed) == len(self.opened) == len(self.joints)):
            raise ValueError(f"task {task}: gripper closed and opened need one position per "
                             f"gripper joint ({len(self.joints)})")
        if not (np.all(np.isfinite(self.closed + self.opened)) and self.speed > 0):
            raise ValueError(f"task {task}: gripper positions must be finite and speed > 0")


def check_choice(choice: int) -> None:
    """:raises ValueError: for a gripper choice that is none of the three."""
    if choice not in (CLOSE, STAY, OPEN):
        raise ValueError(f"a gripper choice is 0 (close), 1 (stay) or 2 (open), got {choice}")


class Gripper:
    """The gripper's commands for one robot: a goal per choice, the fingers' safety layer.

    :param spec: the task's gripper.
    :param limits: the finger joints' limits, in ``spec.joints`` order (from the URDF).
    :param indices: each finger joint's place in a :class:`JointSample`.
    :param control_period: seconds per command.
    :param ramp_periods: commands after a hold blend in over this many periods.
    :raises ValueError: when a closed or open position lies outside the fingers' limits.
    """

    def __init__(self, spec: GripperSpec, limits: JointLimits, indices: np.ndarray,
                 control_period: float, ramp_periods: int = 0) -> None:
        self.spec = spec
        self.closed = np.asarray(spec.closed, dtype=np.float64)
        self.opened = np.asarray(spec.opened, dtype=np.float64)
        for name, goal in (("closed", self.closed), ("opened", self.opened)):
            if np.any(goal < limits.lower) or np.any(goal > limits.upper):
                raise ValueError(f"gripper {name} positions {goal.tolist()} lie outside the "
                                 f"limits of {list(spec.joints)} ({limits.lower.tolist()} .. "
                                 f"{limits.upper.tolist()})")
        self.safety = SafetyLayer("position", limits, indices, control_period,
                                  np.full(len(spec.joints), spec.speed * control_period),
                                  ramp_periods=ramp_periods)
        self.goal = self.opened  # where the fingers are sent (stay keeps it)
        self._moved = False  # the first target moves from where the fingers are

    def begin_episode(self) -> None:
        """An episode starts open (a ``stay`` before any choice opens), from where a reset put
        the fingers (not from the last episode's last target)."""
        self.goal, self._moved = self.opened, False

    def command(self, choice: int, state: JointSample) -> np.ndarray:
        """The fingers' targets for ``choice`` (:data:`CLOSE`, :data:`STAY`, :data:`OPEN`) in
        ``state``: a step towards the chosen goal, inside the limits.

        :raises ValueError: for a choice that is none of the three.
        """
        check_choice(choice)
        if choice != STAY:
            self.goal = self.closed if choice == CLOSE else self.opened
        if not self._moved:
            self.safety.hold(state)
            self._moved = True
        return self.safety.filter(self.goal, state)

    def open(self, state: JointSample) -> np.ndarray:
        """A step towards open: how an episode starts."""
        return self.command(OPEN, state)

    def hold(self, state: JointSample) -> np.ndarray:
        """The fingers stopped where they are (the goal, too: a hold is not undone by the next
        ``stay``)."""
        command = self.safety.hold(state)
        self.goal, self._moved = command, True
        return command


__all__ = ["CLOSE", "GRIPPER_CHOICES", "OPEN", "STAY", "Gripper", "GripperSpec", "check_choice"]
