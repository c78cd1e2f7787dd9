"""Learning algorithms of rl_core (SAC first)."""

from rl_core.algorithms.sac import SAC

__all__ = ["SAC"]
