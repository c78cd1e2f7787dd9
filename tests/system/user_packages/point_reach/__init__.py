"""A user's own task, kept outside the project's packages: a point moved in the plane by two
velocity-commanded prismatic joints ``x`` and ``y`` towards a random goal.

The test puts ``tests/system/user_packages`` on the ``PYTHONPATH`` of the run and names the task
as ``task:=point_reach:PointReach``, as a user would name ``my_package.tasks:Reach``. The task has
no URDF (its joints are unbounded, and nothing is shown in rviz) and no in-process twin
(``env_id`` None: the trainer skips its final evaluation).
"""

from __future__ import annotations

from typing import ClassVar

import gymnasium
import numpy as np

from rl_core.robot import JointSample, JointTarget
from rl_core.robot.task import Outcome, Task

#: Half-width (m) of the square the start positions and goals are drawn from.
ARENA = 0.5
#: Distance (m) to the goal below which the episode ends as a success.
SUCCESS_DISTANCE = 0.05


class PointReach(Task):
    """Drive the point ``(x, y)`` to a goal.

    * Action: ``Box(-1, 1, (2,))``, the joint velocities as a fraction of ``max_speed`` m/s.
    * Observation (float32): ``x, y, goal_x - x, goal_y - y``.
    * Reward: minus the distance to the goal. Episode end: within ``SUCCESS_DISTANCE``, a success.
    * Start: position and goal uniform in ``[-ARENA, ARENA]`` squared (position drawn first).

    :param max_speed: m/s for an action of magnitude 1.
    """

    joint_names: ClassVar[tuple[str, ...]] = ("x", "y")
    command_interface: ClassVar[str] = "velocity"
    control_period: ClassVar[float] = 0.05
    max_episode_steps: ClassVar[int] = 50
    urdf_path: ClassVar[str | None] = None
    env_id: ClassVar[str | None] = None

    def __init__(self, max_speed: float = 1.0) -> None:
        self.max_speed = float(max_speed)
        self.goal = np.zeros(2)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        high = np.full(4, 8.0 * ARENA, dtype=np.float32)
        self.observation_space = gymnasium.spaces.Box(-high, high, dtype=np.float32)

    @property
    def action_scale(self) -> np.ndarray:
        return np.full(2, self.max_speed)

    def reset(self, rng: np.random.Generator) -> JointTarget:
        start = rng.uniform(-ARENA, ARENA, size=2)
        self.goal = rng.uniform(-ARENA, ARENA, size=2)
        return JointTarget(position=start, velocity=np.zeros(2))

    def observe(self, state: JointSample) -> np.ndarray:
        position = np.asarray(state.position, dtype=np.float64)
        return np.concatenate((position, self.goal - position)).astype(np.float32)

    def outcome(self, action: np.ndarray, state: JointSample) -> Outcome:
        distance = float(np.linalg.norm(self.goal - np.asarray(state.position)))
        success = distance < SUCCESS_DISTANCE
        return Outcome(reward=-distance, terminated=success, success=success)
