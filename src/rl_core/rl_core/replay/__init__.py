"""Experience replay: ring-buffer storage with uniform or prioritised sampling, and a
samples-per-insert rate limiter."""

from rl_core.replay.buffer import Batch, OutOfBounds, ReplayBuffer
from rl_core.replay.limited import Draw, RateLimitedReplay
from rl_core.replay.rate_limiter import RateLimiterCancelled, RateLimiterStats, SampleToInsertRatio
from rl_core.replay.sum_tree import SumTree

__all__ = ["Batch", "Draw", "OutOfBounds", "RateLimitedReplay", "RateLimiterCancelled", "RateLimiterStats", "ReplayBuffer",
           "SampleToInsertRatio", "SumTree"]
