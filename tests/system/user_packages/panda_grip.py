"""A user's task with a gripper, kept outside the project's packages: pybullet_data's Franka
Panda turns its first joint to a goal angle and opens or closes its two fingers as the goal says.

Named ``task:=panda_grip:PandaGrip`` (tests/system/user_packages on the PYTHONPATH). The arm's
seven joints take velocity commands; the fingers (``panda_finger_joint1``, ``2``) are the task's
gripper (rl_core.robot.gripper), position targets on ``gripper_controller/commands``. No
in-process twin (``env_id`` None): the trainer skips its final evaluation.
"""

from __future__ import annotations

import os
from typing import ClassVar

import gymnasium
import numpy as np
import pybullet_data

from rl_core.robot import JointSample, JointTarget
from rl_core.robot.gripper import GripperSpec
from rl_core.robot.task import Outcome, Task

ARM = tuple(f"panda_joint{k}" for k in range(1, 8))
FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
#: Where the arm starts: the Panda's usual ready pose (rad).
READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
#: Finger positions (m) of an open and a closed gripper.
OPEN, CLOSED = 0.04, 0.0
#: Within this of the goal angle (rad) and the goal opening (m) the episode is a success.
ANGLE_TOLERANCE, OPENING_TOLERANCE = 0.1, 0.01


class PandaGrip(Task):
    """Turn ``panda_joint1`` to a goal and set the gripper to a goal opening.

    * Action: ``Dict(arm=Box(-1, 1, (7,)), gripper=Discrete(3))``: joint velocities as a
      fraction of ``max_speed`` rad/s, and close, stay or open.
    * Observation (float32): the nine joints' positions and velocities, the goal angle minus
      joint 1's, and the goal opening (0 closed, 1 open).
    * Reward: minus the angle error and ten times the opening error. Episode end: both within
      tolerance, a success.
    """

    joint_names: ClassVar[tuple[str, ...]] = ARM + FINGERS
    command_joints: ClassVar[tuple[str, ...]] = ARM
    command_interface: ClassVar[str] = "velocity"
    control_period: ClassVar[float] = 0.05
    max_episode_steps: ClassVar[int] = 60
    urdf_path: ClassVar[str | None] = os.path.join(pybullet_data.getDataPath(),
                                                    "franka_panda", "panda.urdf")
    env_id: ClassVar[str | None] = None
    gripper: ClassVar[GripperSpec | None] = GripperSpec(FINGERS, (CLOSED, CLOSED), (OPEN, OPEN),
                                                        speed=0.1)

    def __init__(self, max_speed: float = 0.5) -> None:
        self.max_speed = float(max_speed)
        self.goal_angle, self.goal_open = 0.0, 1.0
        self.action_space = gymnasium.spaces.Dict(
            arm=gymnasium.spaces.Box(-1.0, 1.0, shape=(7,), dtype=np.float32),
            gripper=gymnasium.spaces.Discrete(3))
        self.observation_space = gymnasium.spaces.Box(-10.0, 10.0, shape=(20,), dtype=np.float32)

    @property
    def action_scale(self) -> np.ndarray:
        return np.full(7, self.max_speed)

    def reset(self, rng: np.random.Generator) -> JointTarget:
        self.goal_angle = float(rng.uniform(-0.5, 0.5))
        self.goal_open = float(rng.integers(0, 2))
        return JointTarget(position=np.concatenate((READY, [OPEN, OPEN])), velocity=np.zeros(9))

    def _errors(self, state: JointSample) -> tuple[float, float]:
        opening = float(np.mean(np.asarray(state.position)[7:]))
        return (abs(self.goal_angle - float(state.position[0])),
                abs(self.goal_open * OPEN - opening))

    def observe(self, state: JointSample) -> np.ndarray:
        return np.concatenate((state.position, state.velocity,
                               [self.goal_angle - state.position[0], self.goal_open])
                              ).astype(np.float32)

    def outcome(self, action: np.ndarray, state: JointSample) -> Outcome:
        angle, opening = self._errors(state)
        success = angle < ANGLE_TOLERANCE and opening < OPENING_TOLERANCE
        return Outcome(reward=-angle - 10.0 * opening, terminated=success, success=success)
