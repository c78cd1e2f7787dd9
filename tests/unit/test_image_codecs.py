"""Batch codecs of image observations: round trips, sizes, refusals, and the image message
fields they go with."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.envs import CARTPOLE_PIXELS_ID, VectorEnv
from rl_core.names.codecs import IMAGE_CODECS
from rl_core.wire.image_codecs import (
    compressed_format,
    decode_batch,
    decode_raw_tall,
    encode_batch,
    format_codec,
)

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


def test_raw_images_decode_to_their_rows_and_other_layouts_are_refused(
        rendered: np.ndarray) -> None:
    width = rendered.shape[3]
    height = rendered.size // (3 * width)
    data = encode_batch(rendered, "raw")
    tall = decode_raw_tall(data, "rgb8", height, width, 3 * width)
    np.testing.assert_array_equal(tall.reshape(rendered.shape), rendered)
    with pytest.raises(ValueError, match="rgb8 image with step"):
        decode_raw_tall(data, "bgr8", height, width, 3 * width)
    with pytest.raises(ValueError, match="rgb8 image with step"):
        decode_raw_tall(data, "rgb8", height, width, 3 * width + 4)  # padded rows
    with pytest.raises(ValueError, match=f"holds {len(data) - 3} bytes"):
        decode_raw_tall(data[:-3], "rgb8", height, width, 3 * width)


@pytest.mark.parametrize("codec", IMAGE_CODECS[1:])
def test_compressed_formats_name_their_codec(codec: str) -> None:
    assert compressed_format(codec) == f"rgb8; {codec} compressed bgr8"
    assert format_codec(compressed_format(codec)) == codec
    assert format_codec(codec.upper()) == codec


@pytest.mark.parametrize("image_format", ["rgb8; webp compressed bgr8", "", "png and jpeg"])
def test_formats_naming_no_single_codec_are_refused(image_format: str) -> None:
    with pytest.raises(ValueError, match="names neither png nor jpeg"):
        format_codec(image_format)
