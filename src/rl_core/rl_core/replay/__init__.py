"""Experience replay: ring-buffer storage with uniform or prioritised sampling."""

from rl_core.replay.buffer import Batch, ReplayBuffer
from rl_core.replay.sum_tree import SumTree

__all__ = ["Batch", "ReplayBuffer", "SumTree"]
