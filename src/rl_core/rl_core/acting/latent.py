"""The image encoder of the trainer's actor, run where the frames are taken.

With ``observation_codec`` latent a robot encodes its camera frames itself and only the features
cross to the policy. The encoder is the one of the latest actor weights: this object builds the
actor from the architecture that travels with them (reusing it while the architecture stays),
checks it against the robot's camera, loads the weights and encodes frames. Which weights may be
loaded at all (signature, version, NaN) is the caller's check (rl_nodes.image_transport).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from rl_core.algorithms.encoders import EncodedActor, PixelEncoder, actor_from_architecture, image_to_tensor

__all__ = ["LatentFeatures"]


class LatentFeatures:
    """Features of stacked frames under the encoder of the latest loaded actor weights.

    Until weights are loaded there is no encoder (:attr:`ready` is false): a random one would not
    match the policy's head.

    :param obs_shape: the task's image observation shape ``(stack, h, w, 3)``.
    """

    def __init__(self, obs_shape: Sequence[int]) -> None:
        torch.set_num_threads(1)  # one small forward pass per step, beside the physics
        self.obs_shape = tuple(obs_shape)
        self.encoder: PixelEncoder | None = None
        self._actor: EncodedActor | None = None  # the actor the encoder belongs to, reused

    @property
    def ready(self) -> bool:
        return self.encoder is not None

    def load(self, architecture: dict[str, Any], state: Mapping[str, torch.Tensor]) -> None:
        """Take the encoder of actor weights ``state`` of ``architecture``.

        :raises ValueError: with the reason when the weights are for another camera or hold no
            usable encoder; the previous encoder stays.
        """
        if tuple(architecture.get("obs_shape", ())) != self.obs_shape:
            raise ValueError(f"weights are for observations {architecture.get('obs_shape')}, this "
                             f"robot's camera gives {list(self.obs_shape)}; use the same env_id")
        actor = self._actor
        try:
            if actor is None or actor.architecture() != architecture:
                actor = actor_from_architecture(architecture)
            actor.load_state_dict(state)
        except (ValueError, RuntimeError) as error:
            raise ValueError(f"the weights hold no usable encoder: {error}") from error
        self._actor = actor
        self.encoder = actor.encoder.eval()

    def encode(self, frames: np.ndarray) -> np.ndarray:
        """``uint8 (N, stack, h, w, 3)`` frames -> ``float32 (N, feature_dim)`` features."""
        if self.encoder is None:
            raise RuntimeError("no encoder yet: load weights first")
        with torch.no_grad():
            result: np.ndarray = self.encoder(image_to_tensor(frames)).numpy()
        return result
