"""A user's gymnasium environments, registered when the module is imported: named as
``user_env_module:UserEnv-v0`` (gymnasium's ``module:Id`` convention), they train without being
part of the project or installed.

* ``UserEnv-v0``: move a point on a line to a random goal (no URDF, nothing for rviz).
* ``PointGrip-v0``: the same point with a gripper to close at the goal, a ``Dict`` action of the
  motion (``Box``) and the gripper (``Discrete(3)``: close, stay, open), as an arm's is.
* ``Broken-v0``: an environment whose ``reset`` always fails, as a misconfigured user env would:
  every simulator that steps it crashes at start.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np


class UserEnv(gymnasium.Env):
    """Observation ``[x, goal - x]``, action a velocity in ``[-1, 1]`` (0.1 per step), reward
    minus the distance to the goal; terminated within 0.05 of it."""

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(-4.0, 4.0, shape=(2,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self._x = 0.0
        self._goal = 0.0

    def _obs(self) -> np.ndarray:
        return np.array([self._x, self._goal - self._x], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._x, self._goal = self.np_random.uniform(-1.0, 1.0, size=2)
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._x = float(np.clip(self._x + 0.1 * float(np.clip(action[0], -1.0, 1.0)), -2.0, 2.0))
        distance = abs(self._goal - self._x)
        success = distance < 0.05
        return self._obs(), -distance, success, False, {"is_success": success}


class PointGrip(UserEnv):
    """:class:`UserEnv` with a gripper: observation ``[x, goal - x, closed]``, action
    ``{"move": velocity, "gripper": 0 close, 1 stay, 2 open}``. Reward minus the distance to the
    goal, and minus 1 while the gripper is closed away from the goal (0.1 or further) or open at
    it; terminated (a success) once closed within 0.05 of it."""

    NEAR = 0.1
    WRONG = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = gymnasium.spaces.Box(-4.0, 4.0, shape=(3,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Dict({
            "move": gymnasium.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32),
            "gripper": gymnasium.spaces.Discrete(3)})
        self._closed = 0.0

    def _obs(self) -> np.ndarray:
        return np.array([self._x, self._goal - self._x, self._closed], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        self._closed = 0.0
        return super().reset(seed=seed, options=options)

    def step(self, action: dict[str, Any]) -> tuple[np.ndarray, float, bool, bool,
                                                     dict[str, Any]]:
        gripper = int(action["gripper"])
        if not self.action_space["gripper"].contains(gripper):
            raise ValueError(f"gripper must be 0, 1 or 2, got {action['gripper']!r}")
        self._closed = {0: 1.0, 1: self._closed, 2: 0.0}[gripper]
        _, reward, _, _, _ = super().step(np.asarray(action["move"], dtype=np.float32))
        near = -reward < self.NEAR
        wrong = (self._closed == 1.0) != near
        success = bool(self._closed == 1.0 and -reward < 0.05)
        return self._obs(), reward - self.WRONG * wrong, success, False, {"is_success": success}


class BrokenEnv(UserEnv):
    """Constructs (so the policy and the trainer can size their networks) but cannot reset."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        raise RuntimeError("BrokenEnv.reset: this environment is broken on purpose")


for _id, _entry_point in (("UserEnv-v0", f"{__name__}:UserEnv"),
                          ("PointGrip-v0", f"{__name__}:PointGrip"),
                          ("Broken-v0", f"{__name__}:BrokenEnv")):
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_entry_point, max_episode_steps=50)
