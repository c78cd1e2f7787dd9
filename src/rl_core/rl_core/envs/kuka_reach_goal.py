"""KukaReach as a goal-conditioned task: ``Dict`` observations and a sparse reward that
``compute_reward`` recomputes for any goal, the interface of gymnasium-robotics' goal envs
(``GoalEnv``) that hindsight relabelling (HER) needs.

Registered as ``rl_ros2/KukaReachGoal-v0``. The nodes and the bare loop see its observations
flattened (rl_core.envs.spaces: keys in sorted order, ``achieved_goal``, ``desired_goal``,
``observation``).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from rl_core.envs.kuka_reach import KukaReachEnv

#: The reward of a step that did not reach the goal; 0 when it did.
MISSED = -1.0


class KukaReachGoalEnv(KukaReachEnv):
    """Reach a goal point with the end effector of a 7-joint KUKA iiwa (as :class:`KukaReachEnv`).

    * Observation: ``Dict`` of ``observation`` (joint positions and velocities, 14),
      ``achieved_goal`` (the end-effector position, 3) and ``desired_goal`` (the target, 3).
    * Reward: 0 within ``success_distance`` of the goal, else -1 (:meth:`compute_reward`).
    * An episode never terminates (goal envs do not: a relabelled goal may be reached at any
      step); it is truncated by the time limit, with ``info["is_success"]`` on every step.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        joints = self.observation_space
        assert isinstance(joints, gymnasium.spaces.Box)
        n = len(self.HOME_POSITIONS)
        point = gymnasium.spaces.Box(-self.WORKSPACE_BOUND, self.WORKSPACE_BOUND, (3,), np.float32)
        self.observation_space = gymnasium.spaces.Dict({  # type: ignore[assignment]
            "observation": gymnasium.spaces.Box(joints.low[:2 * n], joints.high[:2 * n],
                                                dtype=np.float32),
            "achieved_goal": point, "desired_goal": point})

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray,
                       info: Any = None) -> np.ndarray | float:
        """The reward of reaching ``achieved_goal`` when ``desired_goal`` was asked for, for one
        pair or for batches ``(N, 3)`` of them (a float, or ``(N,)`` float32)."""
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        reward = np.where(distance < self.success_distance, 0.0, MISSED).astype(np.float32)
        return float(reward) if reward.ndim == 0 else reward

    def _goal_observation(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        n = len(self.HOME_POSITIONS)
        return {"observation": flat[:2 * n], "achieved_goal": flat[2 * n:2 * n + 3],
                "desired_goal": flat[2 * n + 3:2 * n + 6]}

    def reset(self, *, seed: int | None = None,  # type: ignore[override]
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        return self._goal_observation(observation), info

    def step(self, action: np.ndarray  # type: ignore[override]
             ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        observation, _, _, truncated, info = super().step(action)
        goal = self._goal_observation(observation)
        reward = self.compute_reward(goal["achieved_goal"], goal["desired_goal"], info)
        return goal, float(reward), False, truncated, info
