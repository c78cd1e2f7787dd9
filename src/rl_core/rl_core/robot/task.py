"""What a robot learns, computed from its joints: the :class:`Task` interface.

A task turns joint readings into observations, rewards and episode ends, and says where an
episode starts. It knows nothing of ROS or of the simulator: the boundary (the simulator node
with ``robot_interface: ros2_control``) feeds it :class:`~rl_core.robot.JointSample` values and
sends the commands. A user's task is a subclass named by entry point, ``my_package.tasks:Reach``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import gymnasium
import numpy as np

from rl_core.robot import COMMAND_INTERFACES, JointSample, JointTarget
from rl_core.robot.gripper import GRIPPER_CHOICES, GripperSpec


@dataclass(frozen=True)
class Outcome:
    """What one control period earned.

    :param reward: the transition's reward.
    :param terminated: the task ended (success or failure), as gymnasium's ``terminated``.
    :param success: whether the task counts as solved (``None``: the task has no such notion).
    """

    reward: float
    terminated: bool
    success: bool | None = None


class Task(ABC):
    """A learning task over a robot's joints.

    Subclasses set the class attributes and the two spaces (in ``__init__`` or as attributes)
    and implement :meth:`reset`, :meth:`observe` and :meth:`outcome`. Actions are normalised to
    ``[-1, 1]``; the boundary multiplies them by :attr:`action_scale` to get commands in
    physical units of :attr:`command_interface` (REP-103).
    """

    #: Joints the task reads (from ``joint_states``), in the order of :class:`JointSample`.
    joint_names: ClassVar[tuple[str, ...]] = ()
    #: Joints the task commands, in command order (the controller's ``joints``); a subset of
    #: :attr:`joint_names`; empty: all of them.
    command_joints: ClassVar[tuple[str, ...]] = ()
    #: What an action means: one of rl_core.robot.COMMAND_INTERFACES.
    command_interface: ClassVar[str] = "velocity"
    #: Seconds per control period (one action, one transition).
    control_period: ClassVar[float] = 0.05
    #: The episode is truncated after this many control periods.
    max_episode_steps: ClassVar[int] = 200
    #: The robot's URDF (joint limits, kinematics, rviz); None when the task has none.
    urdf_path: ClassVar[str | None] = None
    #: The gymnasium environment that simulates the same task in-process, when there is one
    #: (the trainer's evaluation runs there); None for tasks that exist only on a robot.
    env_id: ClassVar[str | None] = None
    #: The reward of the control period an operator declares a success (the boundary's
    #: ``operator_success`` topic), for tasks whose success a program cannot see; None: the
    #: task's own reward of that period.
    success_reward: ClassVar[float | None] = None
    #: Axis-aligned box (low xyz, high xyz, m) the end effector must stay in; None: no box.
    workspace: ClassVar[tuple[tuple[float, float, float], tuple[float, float, float]] | None] = None
    #: The gripper beside the arm (rl_core.robot.gripper), None for none. With one the action
    #: space is ``Dict(arm=Box(-1, 1, (len(command_joints),)), gripper=Discrete(3))``.
    gripper: ClassVar[GripperSpec | None] = None

    observation_space: gymnasium.spaces.Box
    action_space: gymnasium.spaces.Box | gymnasium.spaces.Dict

    @property
    def commanded(self) -> tuple[str, ...]:
        """The commanded joints (:attr:`command_joints`, or every joint when it is empty)."""
        return self.command_joints or self.joint_names

    @property
    def action_row_shape(self) -> tuple[int, ...]:
        """One action row as the policy sends it: the arm's values, then (with a gripper) the
        gripper's choice, 0 close, 1 stay, 2 open (rl_core.envs.spaces.HybridBox)."""
        return (len(self.commanded) + (self.gripper is not None),)

    @property
    def choices(self) -> int:
        """The gripper's choices (the last value of an action row); 0 without a gripper."""
        return len(GRIPPER_CHOICES) if self.gripper is not None else 0

    @property
    def action_scale(self) -> np.ndarray:
        """Physical units per unit of action, one per commanded joint (the command for 1)."""
        return np.ones(len(self.commanded))

    @abstractmethod
    def reset(self, rng: np.random.Generator) -> JointTarget:
        """Start an episode: draw the task's own inputs (e.g. a goal) and the start state."""

    @abstractmethod
    def observe(self, state: JointSample) -> np.ndarray:
        """The observation (float32, ``observation_space.shape``) of ``state``."""

    @abstractmethod
    def outcome(self, action: np.ndarray, state: JointSample) -> Outcome:
        """Reward and end of the control period that applied ``action`` (normalised, clipped to
        [-1, 1]) and ended in ``state``."""

    def end_effector(self, state: JointSample) -> np.ndarray | None:
        """The end effector's position (m, world frame) in ``state``, for :attr:`workspace`;
        None for tasks without one."""
        return None

    def check(self) -> None:
        """Raise ``ValueError`` saying what is wrong with the task's declaration."""
        name = type(self).__name__
        if not self.joint_names:
            raise ValueError(f"task {name} names no joints (joint_names)")
        if self.command_interface not in COMMAND_INTERFACES:
            raise ValueError(f"task {name}: command_interface must be one of "
                             f"{', '.join(COMMAND_INTERFACES)}, got {self.command_interface!r}")
        if not (self.control_period > 0 and self.max_episode_steps >= 1):
            raise ValueError(f"task {name}: control_period must be > 0 and max_episode_steps "
                             ">= 1")
        unknown = set(self.commanded) - set(self.joint_names)
        if unknown:
            raise ValueError(f"task {name}: command_joints {sorted(unknown)} are not in "
                             "joint_names")
        # Checked first so that a task that never set a space gets this message and not an
        # AttributeError from the shape checks below.
        if not isinstance(getattr(self, "observation_space", None), gymnasium.spaces.Box):
            raise ValueError(f"task {name}: observation_space must be a gymnasium.spaces.Box, "
                             f"got {type(getattr(self, 'observation_space', None)).__name__}")
        if self.gripper is not None:
            self.gripper.check(name, self.joint_names, self.commanded)
            space = getattr(self, "action_space", None)
            parts = space.spaces if isinstance(space, gymnasium.spaces.Dict) else {}
            arm, gripper = parts.get("arm"), parts.get("gripper")
            if not (set(parts) == {"arm", "gripper"} and isinstance(arm, gymnasium.spaces.Box)
                    and arm.shape == (len(self.commanded),)
                    and isinstance(gripper, gymnasium.spaces.Discrete)
                    and gripper.n == len(GRIPPER_CHOICES)):
                raise ValueError(f"task {name} has a gripper: action_space must be "
                                 f"Dict(arm=Box(-1, 1, ({len(self.commanded)},)), "
                                 f"gripper=Discrete(3)), got {space}")
        elif not isinstance(getattr(self, "action_space", None), gymnasium.spaces.Box):
            raise ValueError(f"task {name}: action_space must be a gymnasium.spaces.Box, got "
                             f"{type(getattr(self, 'action_space', None)).__name__}")
        elif self.action_space.shape != (len(self.commanded),):
            raise ValueError(f"task {name}: action_space must have shape "
                             f"({len(self.commanded)},), one value per commanded joint, got "
                             f"{self.action_space.shape}")
        if np.shape(self.action_scale) != (len(self.commanded),):
            raise ValueError(f"task {name}: action_scale must have one value per commanded "
                             "joint")
