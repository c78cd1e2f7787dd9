"""Experience replay: ring-buffer storage with uniform or prioritised sampling, a
samples-per-insert rate limiter, and the priorities a learner sends back."""

from rl_core.replay.buffer import InvalidPriorities, OutOfBounds, ReplayBuffer
from rl_core.replay.limited import (
           UNLIMITED_BATCHES,
           Draw,
           RateLimitedReplay,
           RateLimiterStats,
           SampleToInsertRatio,
)
from rl_core.replay.priorities import PriorityFeedback
from rl_core.replay.sum_tree import SumTree

__all__ = ["Draw", "InvalidPriorities", "OutOfBounds", "PriorityFeedback",
           "RateLimitedReplay", "RateLimiterStats", "ReplayBuffer", "SampleToInsertRatio",
           "SumTree", "UNLIMITED_BATCHES"]
