"""Encoding a batch of image observations for one DDS hop (``observation_codec``).

A batch of stacked frames ``uint8 (N, stack, h, w, 3)`` (N robots' or envs' observations) is
encoded **once**, as one tall image of ``N * stack * h`` rows, so one message carries the batch and
the codec's per-call overhead is paid once per batch, not per frame:

* ``raw``: the bytes as they are (a ``sensor_msgs/Image`` with encoding ``rgb8``);
* ``png``: lossless, zlib level 1 (the fastest; higher levels shrink these renders little);
* ``jpeg``: lossy, ``quality`` 1-100 (``sensor_msgs/CompressedImage`` with format ``jpeg``).

Pillow does the work: it is already a dependency, wraps libjpeg-turbo and zlib, and is kept up to
date. (``latent`` needs no codec: encoder features travel like state observations.) Nothing here
imports ROS or torch; the nodes put the bytes into messages (rl_nodes.messages).
"""

from __future__ import annotations

import array
import io
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from rl_core.names.codecs import IMAGE_CODECS

__all__ = ["MAX_ENVS", "Camera", "check_image_size",
           "compressed_format", "decode_batch",
           "decode_raw_tall", "decode_tall", "encode_batch", "format_codec", "is_image_shape"]

#: zlib level of PNG: the fastest; see the module docstring.
PNG_COMPRESS_LEVEL = 1
#: The most environments one simulator steps (``num_envs``): the most batches one image holds.
MAX_ENVS = 1024


class Camera(NamedTuple):
    """What an image message of a task may hold: whole frames of the task's camera, at most
    ``max_frames`` of them (checked on the header, before the pixels are decoded)."""

    height: int
    width: int
    max_frames: int

    @classmethod
    def of(cls, obs_shape: Sequence[int]) -> Camera:
        """The camera of image observations ``(stack, height, width, 3)``: a batch image holds
        at most :data:`MAX_ENVS` environments' observations and next observations."""
        stack, height, width, _ = (int(d) for d in obs_shape)
        return cls(height, width, 2 * MAX_ENVS * stack)


def as_shape(size: int | Sequence[int]) -> tuple[int, ...]:
    """A shape from a size (``4`` -> ``(4,)``) or a sequence of sizes."""
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(d) for d in size)


def is_image_shape(shape: Sequence[int]) -> bool:
    """Whether an observation of ``shape`` is a stack of RGB frames ``(stack, h, w, 3)``."""
    return len(shape) == 4 and shape[-1] == 3


def _check_frames(frames: np.ndarray) -> None:
    if frames.dtype != np.uint8 or frames.ndim != 5 or frames.shape[-1] != 3:
        raise ValueError(f"frames must be uint8 (N, stack, h, w, 3), got {frames.dtype} "
                         f"{frames.shape}")


def encode_batch(frames: np.ndarray, codec: str, quality: int = 90) -> bytes:
    """Encode a batch of stacked frames once.

    :param frames: ``uint8 (N, stack, h, w, 3)``.
    :param codec: one of :data:`IMAGE_CODECS`.
    :param quality: JPEG quality, 1-100 (ignored by the other codecs).
    :raises ValueError: on another codec, a quality outside 1-100 or frames of another layout.
    """
    _check_frames(frames)
    if codec == "raw":
        return np.ascontiguousarray(frames).tobytes()
    if codec not in IMAGE_CODECS:
        raise ValueError(f"codec must be one of {IMAGE_CODECS}, got {codec!r}")
    if not 1 <= quality <= 100:
        raise ValueError(f"quality must be in 1..100, got {quality}")
    from PIL import Image  # imported on first use: config validation needs only the names

    width = frames.shape[3]
    tall = Image.fromarray(np.ascontiguousarray(frames).reshape(-1, width, 3), mode="RGB")
    out = io.BytesIO()
    if codec == "png":
        tall.save(out, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    else:
        tall.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def decode_batch(data: bytes, codec: str, shape: Sequence[int]) -> np.ndarray:
    """Invert :func:`encode_batch`.

    :param data: the encoded bytes.
    :param codec: the codec they were encoded with.
    :param shape: ``(N, stack, h, w, 3)`` of the batch.
    :raises ValueError: when the data do not decode to ``shape`` (truncated, another codec,
        another batch size).
    """
    shape = tuple(int(d) for d in shape)
    expected = int(np.prod(shape))
    if codec == "raw":
        if len(data) != expected:
            raise ValueError(f"raw batch holds {len(data)} bytes, expected {expected} for {shape}")
        return np.frombuffer(data, dtype=np.uint8).reshape(shape).copy()
    pixels = decode_tall(data, codec)
    if pixels.size != expected:
        raise ValueError(f"{codec} batch decodes to {pixels.shape}, expected {shape}")
    return pixels.reshape(shape)


def check_image_size(width: int, height: int, camera: Camera | None) -> None:
    """Refuse an image whose size does not fit ``camera``: another width, a height that is not
    whole frames, or more frames than the camera's ``max_frames``.

    :raises ValueError: naming what does not fit.
    """
    if camera is None:
        return
    if width != camera.width or height <= 0 or height % camera.height:
        raise ValueError(f"image of {height} x {width} pixels is not a column of this task's "
                         f"{camera.height} x {camera.width} frames")
    if height // camera.height > camera.max_frames:
        raise ValueError(f"image of {height // camera.height} frames, more than the "
                         f"{camera.max_frames} one batch of this task may hold")


def decode_tall(data: bytes, codec: str, camera: Camera | None = None) -> np.ndarray:
    """Decode a png or jpeg image to ``uint8 (rows, width, 3)``, before its batch shape is known
    (a receiver joins it with the batch message that gives the shape).

    :param camera: the task's camera: the header must fit it (:func:`check_image_size`)
        before the pixels are decoded.
    :raises ValueError: on another codec, a header that does not fit, or data that do not
        decode (whatever the decoder raises, a decompression bomb included).
    """
    if codec not in IMAGE_CODECS[1:]:
        raise ValueError(f"codec must be one of {IMAGE_CODECS[1:]}, got {codec!r}")
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != codec.upper():
                raise ValueError(f"the data are {image.format}, not {codec}")
            check_image_size(image.width, image.height, camera)
            return np.asarray(image.convert("RGB"))
    except ValueError:
        raise
    except Exception as error:  # noqa: BLE001 - Pillow's errors (DecompressionBombError, OSError, SyntaxError, ...) all mean "not an image of ours"
        raise ValueError(f"cannot decode {codec} batch: {type(error).__name__}: {error}") \
            from error


def decode_raw_tall(data: bytes | array.array[int], encoding: str, height: int, width: int,
                    step: int, camera: Camera | None = None) -> np.ndarray:
    """The pixels of a raw image (``sensor_msgs/Image`` fields) as ``uint8 (height, width, 3)``,
    without a copy of ``data``.

    :param camera: the task's camera (:func:`check_image_size`).
    :raises ValueError: on another encoding than rgb8, rows with padding, a size that does not
        fit ``camera``, or data of another size.
    """
    if encoding != "rgb8" or step != 3 * width:
        raise ValueError(f"expected an rgb8 image with step {3 * width}, got encoding "
                         f"{encoding!r} and step {step}")
    check_image_size(width, height, camera)
    pixels = np.frombuffer(data, dtype=np.uint8)
    if pixels.size != height * step:
        raise ValueError(f"image of {height} x {width} holds {pixels.size} bytes, "
                         f"expected {height * step}")
    return pixels.reshape(height, width, 3)


def compressed_format(codec: str) -> str:
    """The ``format`` of a ``sensor_msgs/CompressedImage`` of ``codec`` (png, jpeg), in
    image_transport's form: the raw encoding, then what was compressed (OpenCV decodes to bgr8)."""
    return f"rgb8; {codec} compressed bgr8"


def format_codec(image_format: str) -> str:
    """The codec a ``sensor_msgs/CompressedImage`` ``format`` names (png or jpeg).

    :raises ValueError: when it names neither, or both.
    """
    codecs = [codec for codec in IMAGE_CODECS[1:] if codec in image_format.lower()]
    if len(codecs) != 1:
        raise ValueError(f"compressed image format {image_format!r} names neither png nor jpeg")
    return codecs[0]
