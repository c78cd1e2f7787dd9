"""Experience replay: ring-buffer storage with uniform or prioritised sampling, a
samples-per-insert rate limiter, and the priorities a learner sends back."""

from rl_core.replay.buffer import InvalidPriorities, OutOfBounds, ReplayBuffer
from rl_core.replay.limited import UNLIMITED_BATCHES, Draw, RateLimitedReplay
from rl_core.replay.priorities import PriorityFeedback, PriorityUpdate
from rl_core.replay.rate_limiter import RateLimiterStats, SampleToInsertRatio
from rl_core.replay.sum_tree import SumTree

__all__ = ["Draw", "InvalidPriorities", "OutOfBounds", "PriorityFeedback", "PriorityUpdate",
           "RateLimitedReplay", "RateLimiterStats", "ReplayBuffer", "SampleToInsertRatio",
           "SumTree", "UNLIMITED_BATCHES"]
