"""Learning algorithms of rl_core and the networks they share with the policy side: SAC
(``sac``), SAC for a discrete action (``discrete_sac``), the actor and critics (``networks``),
the image encoder and the pixel actor and critics built on it (``encoders``)."""

from rl_core.algorithms.discrete_sac import DiscreteSAC
from rl_core.algorithms.sac import SAC

#: A learner's algorithm: what the learner, its periodic evaluation and checkpoints drive.
Algorithm = SAC | DiscreteSAC

__all__ = ["SAC", "Algorithm", "DiscreteSAC"]
