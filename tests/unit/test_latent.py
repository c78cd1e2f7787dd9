"""The robot-side image encoder (rl_core.acting.latent): it takes the encoder of actor weights for its
camera only, keeps the previous one on a refusal, and encodes like the actor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_core.acting.latent import LatentFeatures
from rl_core.algorithms.encoders import image_to_tensor, make_actor

pytestmark = pytest.mark.unit

SHAPE = (3, 16, 16, 3)  # (stack, h, w, rgb)


def frames(rows: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (rows, *SHAPE), dtype=np.uint8)


def expected_features(actor, images: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return actor.encoder(image_to_tensor(images)).numpy()


def test_the_encoder_follows_loaded_weights_and_reuses_the_network() -> None:
    latent = LatentFeatures(SHAPE)
    assert not latent.ready
    with pytest.raises(RuntimeError, match="load weights first"):
        latent.encode(frames(1))
    actor = make_actor(SHAPE, 1, (16,), 50, 8)
    latent.load(actor.architecture(), actor.state_dict())
    images = frames(2)
    np.testing.assert_allclose(latent.encode(images), expected_features(actor, images), atol=1e-6)
    encoder = latent.encoder
    newer = make_actor(SHAPE, 1, (16,), 50, 8)  # same network, other weights
    latent.load(newer.architecture(), newer.state_dict())
    assert latent.encoder is encoder, "the same architecture loads into the same network"
    np.testing.assert_allclose(latent.encode(images), expected_features(newer, images), atol=1e-6)


def test_weights_for_another_camera_or_without_an_encoder_are_refused() -> None:
    latent = LatentFeatures(SHAPE)
    other = make_actor((2, *SHAPE[1:]), 1, (16,), 50, 8)  # another frame stack
    with pytest.raises(ValueError, match=r"camera gives \[3, 16, 16, 3\]; use the same env_id"):
        latent.load(other.architecture(), other.state_dict())
    state_actor = make_actor((4,), 1, (16,), 0, 0)
    with pytest.raises(ValueError, match="no usable encoder"):
        latent.load({**state_actor.architecture(), "obs_shape": list(SHAPE)},
                    state_actor.state_dict())
    actor = make_actor(SHAPE, 1, (16,), 50, 8)
    latent.load(actor.architecture(), actor.state_dict())
    truncated = dict(list(actor.state_dict().items())[:-1])
    with pytest.raises(ValueError, match="no usable encoder"):
        latent.load(actor.architecture(), truncated)
    images = frames(1)
    np.testing.assert_allclose(latent.encode(images), expected_features(actor, images), atol=1e-6,
                               err_msg="a refused load keeps the previous encoder")
