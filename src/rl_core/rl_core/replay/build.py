"""The replay buffer of a configuration: one builder for the bare loop and the replay node."""

from __future__ import annotations

import numpy as np

from rl_core.config import ReplayConfig
from rl_core.replay.buffer import ReplayBuffer
from rl_core.replay.demos import demo_buffer, load_demonstrations
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

    :raises ConfigError: when the demonstrations cannot be read or are of another task.
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
                             demo_ratio=config.demo_ratio, demo_note=note)
