"""The replay buffer of a configuration: one builder for the bare loop and the replay node."""

from __future__ import annotations

import numpy as np

from rl_core.config import ConfigError, ReplayConfig
from rl_core.replay.buffer import ReplayBuffer
from rl_core.replay.demos import demo_buffer, load_demonstrations
from rl_core.replay.hindsight import Hindsight, goal_env_parts
from rl_core.replay.limited import RateLimitedReplay
from rl_core.wire.image_codecs import is_image_shape


def new_buffer(config: ReplayConfig, obs_shape: tuple[int, ...], action_shape: tuple[int, ...]
               ) -> ReplayBuffer:
    """An empty buffer of ``config``; image observations are stored as the uint8 frames they are."""
    return ReplayBuffer(obs_shape, action_shape, config.capacity, prioritized=config.prioritized,
                        alpha=config.priority_alpha, beta=config.priority_beta, seed=config.seed,
                        value_bound=config.value_bound,
                        obs_dtype=np.uint8 if is_image_shape(obs_shape) else np.float32)


def new_replay(config: ReplayConfig, buffer: ReplayBuffer) -> RateLimitedReplay:
    """``buffer`` behind the rate limiter and the schedule of ``config``
    (``updates_per_transition`` per transition after ``learning_starts``, up to
    ``total_env_steps``), with the demonstrations ``config.demos`` names beside it.

    :raises ConfigError: when the demonstrations cannot be read or are of another task, or
        ``her_k`` is set for a task that is not goal-conditioned.
    """
    demos, note = None, ""
    if config.demos:
        recorded = load_demonstrations(config.demos, buffer.obs_shape, buffer.action_shape,
                                       config.env_id)
        demos = demo_buffer(recorded, buffer, config.seed)
        note = (f"demonstrations: {len(recorded)} transitions ({recorded.episodes} episodes) "
                f"from {', '.join(map(str, recorded.files))}; {config.demo_ratio:.0%} of every "
                "batch is drawn from them")
    return RateLimitedReplay(buffer, config.updates_per_transition, config.learning_starts,
                             config.error_buffer, enforce=config.rate_limit,
                             total_env_steps=config.total_env_steps, demos=demos,
                             demo_ratio=config.demo_ratio, demo_note=note,
                             hindsight=new_hindsight(config, buffer.capacity))


def new_hindsight(config: ReplayConfig, capacity: int) -> Hindsight | None:
    """HER for ``config.her_k`` (None when it is 0).

    :raises ConfigError: when ``config.env_id`` is not goal-conditioned.
    """
    if not config.her_k:
        return None
    parts = goal_env_parts(config.env_id)
    if parts is None:
        raise ConfigError(HER_NEEDS_GOALS.format(k=config.her_k, env_id=config.env_id))
    return Hindsight(*parts, config.her_k, capacity, config.seed)


#: Why her_k is refused for a task.
HER_NEEDS_GOALS = ("her_k:={k} relabels goals, but env_id {env_id!r} is not goal-conditioned (a "
                   "Dict observation with achieved_goal and desired_goal, and compute_reward); "
                   "set her_k:=0 or choose a goal-conditioned env such as "
                   "rl_ros2/KukaReachGoal-v0")
