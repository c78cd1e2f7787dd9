"""A synchronous vector of environments with same-step autoreset.

Unlike gymnasium's vector environments (whose default autoreset happens on the
*next* call to ``step``), this one resets a finished environment inside the
same ``step`` call and returns both the true final observation, for the replay
buffer, and the reset observation, for the policy. That keeps an off-policy
collection loop free of "was the previous step terminal?" bookkeeping.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium
import numpy as np

__all__ = ["EpisodeRecord", "VectorEnv", "VectorStep"]


class EpisodeRecord(NamedTuple):
    """Summary of one finished episode.

    Attributes:
        env_index: Index of the environment in the vector.
        episode_return: Undiscounted sum of the episode's rewards.
        length: Number of steps in the episode.
        is_success: ``info["is_success"]`` of the last step, or None when the
            environment does not report success.
    """

    env_index: int
    episode_return: float
    length: int
    is_success: bool | None


class VectorStep(NamedTuple):
    """Result of :meth:`VectorEnv.step`.

    Attributes:
        next_obs: ``(num_envs, *obs_shape)`` true successor observation of each
            env; for an env whose episode just ended, its final observation.
        rewards: ``(num_envs,)`` float32 rewards.
        terminated: ``(num_envs,)`` bool, the episode reached a terminal state.
        truncated: ``(num_envs,)`` bool, the episode was cut off (time limit).
        obs: ``(num_envs, *obs_shape)`` observation to act on next; equals
            ``next_obs`` except for envs that were reset in this step.
        episodes: Records of the episodes that ended in this step.
    """

    next_obs: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    obs: np.ndarray
    episodes: list[EpisodeRecord]


class VectorEnv:
    """``num_envs`` instances of one registered env, stepped in a loop in this process.

    Attributes:
        env_id: The gymnasium id the environments were made from.
        num_envs: Number of environments.
        envs: The environments (wrapped by ``gymnasium.make``); use
            ``envs[i].unwrapped`` for the introspection methods.
        single_observation_space: Observation space of one environment.
        single_action_space: Action space of one environment.
    """

    def __init__(self, env_id: str, num_envs: int, **env_kwargs: Any) -> None:
        """Creates the environments.

        Args:
            env_id: A registered gymnasium id, e.g. ``rl_ros2/CartPoleBalance-v0``.
            num_envs: Number of environments; at least 1.
            **env_kwargs: Passed to ``gymnasium.make`` for every environment.

        Raises:
            ValueError: If ``num_envs`` is less than 1 or the spaces are not Boxes.
        """
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        # Imported here so that make_env's registration has run whichever
        # module the caller imported first.
        from rl_core.envs import register_envs

        register_envs()
        self.env_id = env_id
        self.num_envs = int(num_envs)
        # The passive checker only inspects the first calls, but it is one
        # more wrapper layer per step; conformance is covered by the unit tests.
        env_kwargs.setdefault("disable_env_checker", True)
        self.envs: list[gymnasium.Env] = []
        try:
            for _ in range(self.num_envs):
                self.envs.append(gymnasium.make(env_id, **env_kwargs))
        except BaseException:
            self.close()
            raise
        observation_space = self.envs[0].observation_space
        action_space = self.envs[0].action_space
        if not isinstance(observation_space, gymnasium.spaces.Box) or not isinstance(
            action_space, gymnasium.spaces.Box
        ):
            self.close()
            raise ValueError(
                f"VectorEnv supports Box spaces only, {env_id} has "
                f"{observation_space} and {action_space}"
            )
        self.single_observation_space: gymnasium.spaces.Box = observation_space
        self.single_action_space: gymnasium.spaces.Box = action_space
        self._batch_obs_shape = (self.num_envs, *observation_space.shape)
        self._batch_action_shape = (self.num_envs, *action_space.shape)
        self._returns = np.zeros(self.num_envs, dtype=np.float64)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._needs_reset = True

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Resets every environment.

        Args:
            seed: Env ``i`` is reset with ``seed + i``; None resets without seeding.

        Returns:
            ``(num_envs, *obs_shape)`` initial observations.
        """
        obs = np.empty(self._batch_obs_shape, dtype=self.single_observation_space.dtype)
        for index, env in enumerate(self.envs):
            obs[index], _ = env.reset(seed=None if seed is None else seed + index)
        self._returns[:] = 0.0
        self._lengths[:] = 0
        self._needs_reset = False
        return obs

    def step(self, actions: np.ndarray) -> VectorStep:
        """Steps every environment once and resets those whose episode ended.

        Args:
            actions: ``(num_envs, *action_shape)`` finite actions.

        Returns:
            A :class:`VectorStep`.

        Raises:
            RuntimeError: If :meth:`reset` has not been called.
            ValueError: If ``actions`` has the wrong shape or non-finite values.
        """
        if self._needs_reset:
            raise RuntimeError("call reset() before step() (and do not step a closed VectorEnv)")
        actions = np.asarray(actions, dtype=self.single_action_space.dtype)
        if actions.shape != self._batch_action_shape:
            raise ValueError(
                f"actions must have shape {self._batch_action_shape} "
                f"(num_envs, *action_shape), got {actions.shape}"
            )
        if not np.all(np.isfinite(actions)):
            raise ValueError("actions must be finite, got NaN or infinity")

        next_obs = np.empty(self._batch_obs_shape, dtype=self.single_observation_space.dtype)
        obs = np.empty_like(next_obs)
        rewards = np.empty(self.num_envs, dtype=np.float32)
        terminated = np.empty(self.num_envs, dtype=bool)
        truncated = np.empty(self.num_envs, dtype=bool)
        episodes: list[EpisodeRecord] = []
        for index, env in enumerate(self.envs):
            observation, reward, term, trunc, info = env.step(actions[index])
            next_obs[index] = observation
            rewards[index] = reward
            terminated[index] = term
            truncated[index] = trunc
            self._returns[index] += reward
            self._lengths[index] += 1
            if term or trunc:
                success = info.get("is_success")
                episodes.append(
                    EpisodeRecord(
                        env_index=index,
                        episode_return=float(self._returns[index]),
                        length=int(self._lengths[index]),
                        is_success=None if success is None else bool(success),
                    )
                )
                self._returns[index] = 0.0
                self._lengths[index] = 0
                observation, _ = env.reset()
            obs[index] = observation
        return VectorStep(next_obs, rewards, terminated, truncated, obs, episodes)

    def close(self) -> None:
        """Closes every environment; calling it again is harmless."""
        for env in self.envs:
            env.close()
        self.envs = []
        self._needs_reset = True

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
