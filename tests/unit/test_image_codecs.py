"""Batch codecs of image observations: round trips, sizes, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.envs import CARTPOLE_PIXELS_ID, VectorEnv
from rl_core.image_codecs import IMAGE_CODECS, decode_batch, encode_batch

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def rendered() -> np.ndarray:
    """Two robots' stacked cart-pole frames, as a simulator would send them."""
    envs = VectorEnv(CARTPOLE_PIXELS_ID, 2)
    try:
        envs.reset(seed=0)
        return envs.step(np.ones((2, 1), dtype=np.float32)).obs
    finally:
        envs.close()


@pytest.mark.parametrize("codec", ["raw", "png"])
def test_lossless_codecs_round_trip_exactly(rendered: np.ndarray, codec: str) -> None:
    data = encode_batch(rendered, codec)
    np.testing.assert_array_equal(decode_batch(data, codec, rendered.shape), rendered)


def test_jpeg_is_close_and_smaller_than_png_and_raw(rendered: np.ndarray) -> None:
    sizes = {codec: len(encode_batch(rendered, codec, quality=80)) for codec in IMAGE_CODECS}
    assert sizes["raw"] == rendered.nbytes
    assert sizes["jpeg"] < sizes["raw"] and sizes["png"] < sizes["raw"]
    decoded = decode_batch(encode_batch(rendered, "jpeg", quality=95), "jpeg", rendered.shape)
    assert np.abs(decoded.astype(int) - rendered).mean() < 3.0
    assert len(encode_batch(rendered, "jpeg", quality=20)) < len(
        encode_batch(rendered, "jpeg", quality=95))


@pytest.mark.parametrize("codec", IMAGE_CODECS)
def test_wrong_shapes_and_corrupt_data_are_refused(rendered: np.ndarray, codec: str) -> None:
    data = encode_batch(rendered, codec)
    with pytest.raises(ValueError):
        decode_batch(data, codec, (3, *rendered.shape[1:]))
    with pytest.raises(ValueError):
        decode_batch(data[: len(data) // 2], codec, rendered.shape)


def test_bad_arguments_are_refused(rendered: np.ndarray) -> None:
    with pytest.raises(ValueError, match="codec"):
        encode_batch(rendered, "webp")
    with pytest.raises(ValueError, match="quality"):
        encode_batch(rendered, "jpeg", quality=0)
    with pytest.raises(ValueError, match="uint8"):
        encode_batch(rendered.astype(np.float32), "png")
