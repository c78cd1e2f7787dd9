"""The observation codecs, named once (plain strings, no codec code).

``rl_core.config`` checks the ``observation_codec`` parameter against these names, and
``rl_core.wire.image_codecs`` encodes and decodes with the image ones.
"""

from __future__ import annotations

#: Codecs that send images.
IMAGE_CODECS = ("raw", "png", "jpeg")
#: Every value of the ``observation_codec`` parameter (it applies to image observations only;
#: state vectors always travel as they are).
OBSERVATION_CODECS = (*IMAGE_CODECS, "latent")
