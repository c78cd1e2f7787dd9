"""Gymnasium's synchronous vector env, shaped for an off-policy collection loop.

The environments run in :class:`gymnasium.vector.SyncVectorEnv` with
``AutoresetMode.SAME_STEP``: an environment whose episode ends is reset inside the
same ``step`` call, its final observation and info kept in ``info["final_obs"]`` and
``info["final_info"]``. Each environment is wrapped in
:class:`gymnasium.wrappers.RecordEpisodeStatistics`, which puts the finished episode's
return and length into that final info; the per-env wrapper costs far less than gymnasium's
vector one (docs/performance.md, "The vector env").

:class:`VectorEnv` only turns that result into a :class:`VectorStep`: the true successor
observations for the replay buffer, the observations to act on next, and one
:class:`EpisodeRecord` per finished episode. It checks the shape of an action batch before any
environment steps, so that a batch for another vector width cannot leave the vector half-stepped.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import RecordEpisodeStatistics

from rl_core.envs.spaces import (
    action_choices,
    action_row_shape,
    unsupported_spaces,
    with_rl_spaces,
)
from rl_core.wire.messages import choice_indices

__all__ = ["EpisodeRecord", "VectorEnv", "VectorStep"]


class EpisodeRecord(NamedTuple):
    """Summary of one finished episode.

    :ivar env_index: Index of the environment in the vector.
    :ivar episode_return: Undiscounted sum of the episode's rewards.
    :ivar length: Number of steps in the episode.
    :ivar is_success: ``info["is_success"]`` of the last step, or None when the
        environment does not report success.
    """

    env_index: int
    episode_return: float
    length: int
    is_success: bool | None


class VectorStep(NamedTuple):
    """Result of :meth:`VectorEnv.step`.

    :ivar next_obs: ``(num_envs, *obs_shape)`` true successor observation of each
        env; for an env whose episode just ended, its final observation.
    :ivar rewards: ``(num_envs,)`` float32 rewards.
    :ivar terminated: ``(num_envs,)`` bool, the episode reached a terminal state.
    :ivar truncated: ``(num_envs,)`` bool, the episode was cut off (time limit).
    :ivar obs: ``(num_envs, *obs_shape)`` observation to act on next; equals
        ``next_obs`` except for envs that were reset in this step.
    :ivar episodes: Records of the episodes that ended in this step.
    """

    next_obs: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    obs: np.ndarray
    episodes: list[EpisodeRecord]


class VectorEnv:
    """``num_envs`` instances of one registered env, stepped in a loop in this process.

    :ivar env_id: The gymnasium id the environments were made from.
    :ivar num_envs: Number of environments.
    :ivar vector_env: The gymnasium vector env (a same-step autoresetting ``SyncVectorEnv``).
    :ivar envs: The environments (wrapped by ``gymnasium.make`` and
        ``RecordEpisodeStatistics``); use
        ``envs[i].unwrapped`` for the introspection methods.
    :ivar single_observation_space: Observation space of one environment.
    :ivar single_action_space: Action space of one environment.
    """

    def __init__(self, env_id: str, num_envs: int, **env_kwargs: Any) -> None:
        """Creates the environments.

        :param env_id: A registered gymnasium id, e.g. ``rl_ros2/CartPoleBalance-v0``.
        :param num_envs: Number of environments; at least 1.
        :param **env_kwargs: Passed to ``gymnasium.make`` for every environment
            (e.g. ``max_episode_steps``).
        :raises ValueError: If ``num_envs`` is less than 1 or the spaces are not supported
            (rl_core.envs.spaces).
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

        def make_recorded_env() -> gymnasium.Env:
            return RecordEpisodeStatistics(with_rl_spaces(
                gymnasium.make(env_id, **env_kwargs)))

        # copy=False: step() copies the batch out of gymnasium's buffer itself,
        # into the two arrays it returns.
        self.vector_env = SyncVectorEnv(
            [make_recorded_env] * self.num_envs,
            copy=False,
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
        self.envs: list[gymnasium.Env] = self.vector_env.envs
        observation_space = self.vector_env.single_observation_space
        action_space = self.vector_env.single_action_space
        refusal = unsupported_spaces(env_id, observation_space, action_space)
        if refusal is not None:
            self.close()
            raise ValueError(refusal)
        assert isinstance(observation_space, gymnasium.spaces.Box)
        assert isinstance(action_space, (gymnasium.spaces.Box, gymnasium.spaces.Discrete))
        # (an arm-and-choice action is a Box: rl_core.envs.spaces.HybridBox)
        self.single_observation_space: gymnasium.spaces.Box = observation_space
        self.single_action_space: gymnasium.spaces.Box | gymnasium.spaces.Discrete = action_space
        #: Shape of one action row (``(1,)``, the index, for a Discrete action).
        self.action_shape = action_row_shape(action_space)
        #: The number of choices of a Discrete or arm-and-choice action (the last value of its
        #: rows); 0 for a Box.
        self.choices = action_choices(action_space)
        self._batch_action_shape = (self.num_envs, *self.action_shape)

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Resets every environment.

        :param seed: Env ``i`` is reset with ``seed + i``; None resets without seeding.
            Later autoresets continue each env's random stream unseeded.
        :returns: ``(num_envs, *obs_shape)`` initial observations.
        """
        obs, _ = self.vector_env.reset(seed=seed)
        return obs.copy()

    def step(self, actions: np.ndarray) -> VectorStep:
        """Steps every environment once and resets those whose episode ended.

        :param actions: ``(num_envs, *action_shape)`` finite actions (a Discrete action's rows
            hold indices, :func:`~rl_core.wire.messages.choice_indices`). Finiteness is left
            to the environments, which raise ValueError for a non-finite action;
            the simulator node rejects such a batch before it gets here, so a
            whole-batch check here would be a third one on the hot path.
        :returns: A :class:`VectorStep`.
        :raises gymnasium.error.ResetNeeded: If :meth:`reset` has not been called.
        :raises ValueError: If ``actions`` has the wrong shape (before any environment
            steps) or an environment rejects its action.
        """
        actions = np.asarray(actions, dtype=np.float32 if self.choices
                             else self.single_action_space.dtype)
        if actions.shape != self._batch_action_shape:
            raise ValueError(
                f"actions must have shape {self._batch_action_shape} "
                f"(num_envs, *action_shape), got {actions.shape}"
            )
        if self.choices:
            indices = choice_indices(actions, self.choices)
            if self.action_shape == (1,):  # a Discrete action takes the index itself
                actions = indices
        batch_obs, rewards, terminated, truncated, info = self.vector_env.step(actions)
        obs = batch_obs.copy()
        next_obs = batch_obs.copy()
        episodes: list[EpisodeRecord] = []
        if "_final_obs" in info:
            ended = info["_final_obs"]
            next_obs[ended] = np.stack(info["final_obs"][ended])
            episodes = _episode_records(info)
        return VectorStep(
            next_obs, rewards.astype(np.float32), terminated, truncated, obs, episodes
        )

    def close(self) -> None:
        """Closes every environment; calling it again is harmless."""
        self.vector_env.close()

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _episode_records(info: dict[str, Any]) -> list[EpisodeRecord]:
    """The episodes that ended in a step, from the vector ``info`` of that step."""
    final_info = info["final_info"]
    statistics = final_info["episode"]
    success = final_info.get("is_success")
    reports_success = final_info.get("_is_success")
    return [
        EpisodeRecord(
            env_index=int(index),
            episode_return=float(statistics["r"][index]),
            length=int(statistics["l"][index]),
            is_success=bool(success[index]) if success is not None and reports_success[index]
            else None,
        )
        for index in np.flatnonzero(final_info["_episode"])
    ]
