"""Convolutional encoder for image observations, and the actor and critics built on it.

Follows the pixel-SAC recipe of SAC-AE / DrQ (Yarats et al. 2020, 2021): one encoder, trained by
the critic's loss only, feeds both critics; the actor reads the same features detached, so its
loss never moves the encoder; the target critics keep their own slowly-following copy of it;
batches are augmented by random shifts (pad by a few pixels, crop back at a random offset).

Observations arrive as stacked RGB frames ``uint8 (N, stack, height, width, 3)`` (the layout of
``rl_core.envs.pixels``) and are scaled and folded to ``float32 (N, 3 * stack, height, width)``
once by :func:`image_to_tensor`; the modules below take that folded form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from rl_core.algorithms.networks import EnsembleQ, SquashedGaussianActor
from rl_core.wire.image_codecs import as_shape, is_image_shape

__all__ = ["EncodedActor", "EncodedQ", "PixelEncoder", "actor_from_architecture",
           "image_to_tensor", "is_image_shape", "make_actor", "random_shift"]


def image_to_tensor(images: np.ndarray | torch.Tensor,
                    device: torch.device | None = None) -> torch.Tensor:
    """``uint8 (N, stack, h, w, 3)`` frames -> ``float32 (N, 3 * stack, h, w)`` in [-0.5, 0.5]
    on ``device`` (the frames cross as uint8, a quarter of the bytes)."""
    if isinstance(images, np.ndarray) and not images.flags.writeable:
        images = images.copy()  # frames decoded from a message are read-only views; torch warns
    frames = torch.as_tensor(images, device=device)
    count, stack, height, width, channels = frames.shape
    folded = frames.permute(0, 1, 4, 2, 3).reshape(count, stack * channels, height, width)
    return folded.to(torch.float32).div_(255.0).sub_(0.5)


def random_shift(images: torch.Tensor, pad: int) -> torch.Tensor:
    """DrQ augmentation: shift every image by its own random offset in ``[-pad, pad]`` pixels.

    Edges are padded by replication, so a shifted image shows no black border.

    :param images: ``(N, C, h, w)`` float images.
    :param pad: largest shift in pixels; 0 returns ``images`` unchanged.
    """
    if pad == 0:
        return images
    count, _, height, width = images.shape
    padded = nn.functional.pad(images, (pad, pad, pad, pad), mode="replicate")
    offsets = torch.randint(0, 2 * pad + 1, (count, 2)).tolist()  # host RNG, like the CPU path
    # One slice copy per image: about four times faster on CPU than one advanced-indexing gather.
    return torch.stack([padded[index, :, row:row + height, col:col + width]
                        for index, (row, col) in enumerate(offsets)])


class PixelEncoder(nn.Module):
    """Three 3x3 convolutions (stride 2, 2, 1) and a layer-normalised linear projection.

    Sized for CPU training on small frames (64x64: about 6 M multiply-adds per image); the
    published recipes use four convolutions on 84x84 frames.

    :param obs_shape: ``(stack, h, w, 3)``.
    :param feature_dim: size of the output features.
    :param channels: filters of every convolution.
    """

    def __init__(self, obs_shape: Sequence[int], feature_dim: int, channels: int = 32) -> None:
        super().__init__()
        if not is_image_shape(obs_shape):
            raise ValueError(f"obs_shape must be (stack, height, width, 3), got {tuple(obs_shape)}")
        stack, height, width, _ = obs_shape
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.feature_dim = int(feature_dim)
        self.channels = int(channels)
        self.convs = nn.Sequential(
            nn.Conv2d(3 * stack, channels, 3, stride=2), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, stride=2), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat_size = self.convs(torch.zeros(1, 3 * stack, height, width)).shape[1]
        self.projection = nn.Sequential(nn.Linear(flat_size, feature_dim),
                                        nn.LayerNorm(feature_dim), nn.Tanh())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``float32 (N, 3 * stack, h, w)`` (:func:`image_to_tensor`) -> ``(N, feature_dim)``."""
        return self.projection(self.convs(images))


class EncodedActor(nn.Module):
    """The policy on images: the (shared) encoder followed by a squashed Gaussian head.

    It holds the critic's encoder, not a copy: the learner optimises only ``head`` with the
    actor's loss, and a policy node that loads ``state_dict()`` gets encoder and head together.

    :param encoder: the critics' encoder.
    :param head: policy on ``encoder.feature_dim`` features.
    """

    def __init__(self, encoder: PixelEncoder, head: SquashedGaussianActor) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = head
        self.obs_shape = encoder.obs_shape
        self.obs_dim = int(np.prod(self.obs_shape))
        self.action_dim = head.action_dim
        self.hidden_sizes = head.hidden_sizes

    def forward(self, images: torch.Tensor, deterministic: bool = False,
                with_log_prob: bool = True, noise: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(action, log_prob)`` for folded images, as :class:`SquashedGaussianActor`."""
        return self.head(self.encoder(images), deterministic, with_log_prob, noise)

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Actions ``float32 (N, action_dim)`` for ``uint8 (N, stack, h, w, 3)`` frames."""
        images = image_to_tensor(obs, self.head.mean.weight.device)
        action, _ = self.forward(images, deterministic, with_log_prob=False)
        return action.cpu().numpy()

    def architecture(self) -> dict[str, object]:
        """Description of the network that receivers check before loading weights."""
        return {
            "kind": "encoded_squashed_gaussian_actor",
            "obs_shape": list(self.obs_shape),
            "feature_dim": self.encoder.feature_dim,
            "encoder_channels": self.encoder.channels,
            "action_dim": self.action_dim,
            "hidden_sizes": list(self.hidden_sizes),
        }


class EncodedQ(nn.Module):
    """Q networks on encoded images; the encoder is trained by their loss.

    :param encoder: the encoder (owned here; the actor borrows it).
    :param heads: the Q ensemble on ``encoder.feature_dim`` features.
    """

    def __init__(self, encoder: PixelEncoder, heads: EnsembleQ) -> None:
        super().__init__()
        self.encoder = encoder
        self.heads = heads

    def forward(self, images: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The members' Q estimates for folded images, shape ``(members, N)``."""
        return self.heads(self.encoder(images), action)


def actor_from_architecture(architecture: dict[str, Any]) -> EncodedActor:
    """A randomly initialised encoded actor of ``architecture`` (the dict of
    :meth:`EncodedActor.architecture` that travels with the weights), to load them into.

    :raises ValueError: when ``architecture`` is not an encoded actor's.
    """
    if architecture.get("kind") != "encoded_squashed_gaussian_actor":
        raise ValueError(f"weights of a {architecture.get('kind')!r} carry no image encoder")
    try:
        return EncodedActor(
            PixelEncoder(architecture["obs_shape"], int(architecture["feature_dim"]),
                         int(architecture["encoder_channels"])),
            SquashedGaussianActor(int(architecture["feature_dim"]), int(architecture["action_dim"]),
                                  [int(size) for size in architecture["hidden_sizes"]]))
    except (KeyError, TypeError) as error:
        raise ValueError(f"malformed encoded-actor architecture {architecture}: {error}") from error


def make_actor(obs_shape: int | Sequence[int], action_dim: int, hidden_sizes: Sequence[int],
               feature_dim: int, encoder_channels: int) -> SquashedGaussianActor | EncodedActor:
    """A stand-alone actor for observations of ``obs_shape`` (inference: checkpoints, policy
    nodes): an encoded actor with its own encoder for images, a plain one for flat vectors."""
    shape = as_shape(obs_shape)
    if is_image_shape(shape):
        return EncodedActor(PixelEncoder(shape, feature_dim, encoder_channels),
                            SquashedGaussianActor(feature_dim, action_dim, hidden_sizes))
    return SquashedGaussianActor(int(np.prod(shape)), action_dim, hidden_sizes)
