"""Learning algorithms of rl_core (SAC first) and the networks they share with the policy side:
the actor and critics (``networks``), the image encoder and the pixel actor and critics built on
it (``encoders``)."""

from rl_core.algorithms.sac import SAC

__all__ = ["SAC"]
