"""Image observations on the wire: batch messages without their frames, side-topic images, the
join of the two (its queues: test_image_join.py), sample answers carrying pixels, and the byte
count."""

from __future__ import annotations

import array
import io
import struct
import zlib

import numpy as np
import pytest
from rclpy.serialization import serialize_message

from rl_core.wire.image_codecs import Camera
from rl_core.wire.image_join import MAX_WAITING_BYTES, Frames, camera_frame
from rl_core.wire.messages import Batch, SampleAnswer
from rl_nodes.image_transport import ImageJoin, image_topic_type, side_topic
from rl_nodes.messages import (
    EPISODES,
    EXPERIENCE,
    EXPERIENCE_WITH_IMAGES,
    OBSERVATIONS,
    OBSERVATIONS_WITH_IMAGES,
    SAMPLE_SERVICE,
    AwaitingImages,
    Episodes,
    Experience,
    Observations,
)

pytestmark = pytest.mark.unit

SHAPE = (3, 16, 16, 3)  # (stack, h, w, rgb)
CAMERA = Camera.of(SHAPE)
#: How a receiver of this task decodes both side topics (the codec is read from the message).
RAW_IMAGES = image_topic_type("raw", camera=CAMERA)
COMPRESSED_IMAGES = image_topic_type("png", camera=CAMERA)


def frames(rows: int, seed: int = 0) -> np.ndarray:
    """A flat colour per frame with a gentle gradient, like the renders (compressible)."""
    rng = np.random.default_rng(seed)
    colours = rng.integers(0, 200, (rows, SHAPE[0], 1, 1, 3))
    gradient = np.arange(SHAPE[2]).reshape(1, 1, 1, -1, 1) * 3
    return np.broadcast_to(colours + gradient, (rows, *SHAPE)).astype(np.uint8)


def observations(rows: int = 2, robot: int = 1, stamp: int = 1_700_000_000_123_456_789
                 ) -> Observations:
    return Observations(robot, 7, frames(rows), stamp)


def experience(rows: int = 2, robot: int = 0) -> Experience:
    return Experience(robot, frames(rows, 1), np.zeros((rows, 1), np.float32),
                      np.ones(rows, np.float32), frames(rows, 2), np.zeros(rows, bool),
                      np.zeros(rows, bool), 3, 1_700_000_000_000_000_001, np.arange(rows),
                      11, 4)


class Collected:
    """A join's outputs and rejections."""

    def __init__(self, what: str = "observations") -> None:
        self.delivered: list[object] = []
        self.rejected: list[tuple[str, str]] = []
        self.join = ImageJoin(self.delivered.append, lambda *reason: self.rejected.append(reason),
                              what)


def over_dds(data: Observations | Experience, codec: str, batch_type, quality: int = 90
             ) -> tuple[object, Frames]:
    """What a receiver decodes from the batch message and the side-topic image of ``data``."""
    image_msg = image_topic_type(codec, quality).to_msg(data)
    receiving = RAW_IMAGES if codec == "raw" else COMPRESSED_IMAGES
    return batch_type.from_msg(batch_type.to_msg(data)), receiving.from_msg(image_msg)


@pytest.mark.parametrize("codec", ["raw", "png"])
def test_observations_join_back_exactly_with_a_lossless_codec(codec: str) -> None:
    data = observations()
    msg = OBSERVATIONS.to_msg(data)
    assert len(msg.obs) == 0 and list(msg.obs_shape) == list(SHAPE), "frames leave the batch"
    batch, image = over_dds(data, codec, OBSERVATIONS_WITH_IMAGES)
    assert isinstance(batch, AwaitingImages)
    assert image.frame_id == camera_frame(1) and image.stamp_ns == data.stamp_ns
    out = Collected()
    out.join.on_batch(batch)
    assert out.delivered == [], "the batch waits for its image"
    out.join.on_frames(image)
    (joined,) = out.delivered
    np.testing.assert_array_equal(joined.obs, data.obs)
    assert (joined.robot_id, joined.step, joined.stamp_ns) == (1, 7, data.stamp_ns)
    assert out.rejected == [] and out.join.joined == 1


def test_experience_joins_image_first_and_jpeg_stays_close() -> None:
    data = experience()
    batch, image = over_dds(data, "jpeg", EXPERIENCE_WITH_IMAGES, quality=95)
    out = Collected("experience")
    out.join.on_frames(image)
    out.join.on_batch(batch)
    (joined,) = out.delivered
    for name in ("obs", "next_obs"):
        assert getattr(joined, name).shape == (2, *SHAPE)
        assert np.abs(getattr(joined, name).astype(int) - getattr(data, name)).mean() < 4.0
    np.testing.assert_array_equal(joined.rewards, data.rewards)
    assert (joined.stream, joined.sequence) == (11, 4)


def test_local_objects_pass_the_join_whole_and_state_batches_stay_inline() -> None:
    out = Collected()
    local = observations()
    out.join.on_batch(local)
    out.join.on_frames(local)  # a local object on the side topic is ignored
    assert out.delivered == [local]
    state = Observations(0, 1, np.arange(8, dtype=np.float32).reshape(2, 4), 5)
    msg = OBSERVATIONS.to_msg(state)
    np.testing.assert_array_equal(OBSERVATIONS_WITH_IMAGES.from_msg(msg).obs, state.obs)


def test_a_receiver_without_the_join_refuses_image_batches_with_the_reason() -> None:
    with pytest.raises(ValueError, match="image side topic.*image_transport"):
        OBSERVATIONS.from_msg(OBSERVATIONS.to_msg(observations()))
    with pytest.raises(ValueError, match="image side topic"):
        EXPERIENCE.from_msg(EXPERIENCE.to_msg(experience()))


def test_an_image_of_another_size_is_refused_and_nothing_is_delivered() -> None:
    batch, _ = over_dds(observations(rows=2), "raw", OBSERVATIONS_WITH_IMAGES)
    _, wrong = over_dds(observations(rows=3), "raw", OBSERVATIONS_WITH_IMAGES)
    out = Collected()
    out.join.on_batch(batch)
    out.join.on_frames(wrong)
    assert out.delivered == []
    (what, reason), = out.rejected
    assert what == "observations image" and "1 x 2 observations" in reason


@pytest.mark.parametrize("bad", ["format", "data", "encoding"])
def test_malformed_images_are_refused_when_decoded(bad: str) -> None:
    data = observations()
    if bad == "encoding":
        msg = image_topic_type("raw").to_msg(data)
        msg.encoding = "bgr16"
        with pytest.raises(ValueError, match="rgb8"):
            RAW_IMAGES.from_msg(msg)
        return
    msg = image_topic_type("png").to_msg(data)
    if bad == "format":
        msg.format = "rgb8; webp compressed bgr8"
        match = "neither png nor jpeg"
    else:
        msg.data = msg.data[: len(msg.data) // 2]
        match = "cannot decode png"
    with pytest.raises(ValueError, match=match):
        COMPRESSED_IMAGES.from_msg(msg)


def test_side_topics_follow_image_transport_naming() -> None:
    assert side_topic("observations", "raw") == "observations/image"
    assert side_topic("/experience", "jpeg") == "/experience/image/compressed"
    assert image_topic_type("jpeg").to_msg(observations()).format == "rgb8; jpeg compressed bgr8"


def test_sample_answers_carry_image_batches_as_uint8_pixels() -> None:
    rows = 4
    batch = Batch(frames(rows, 3), np.zeros((rows, 1), np.float32), np.ones(rows, np.float32),
                  frames(rows, 4), np.zeros(rows, np.float32), np.arange(rows),
                  np.ones(rows, np.float32))
    msg = SAMPLE_SERVICE.response_to_msg(SampleAnswer(True, "", [batch], 10, 10))
    assert len(msg.transitions.obs) == 0 and 0 < len(msg.transitions.pixels) < batch.obs.nbytes, \
        "compressed"
    (back,) = SAMPLE_SERVICE.response_from_msg(msg).batches
    assert back.obs.dtype == np.uint8
    np.testing.assert_array_equal(back.obs, batch.obs)
    np.testing.assert_array_equal(back.next_obs, batch.next_obs)
    pixels = bytes(msg.transitions.pixels)
    for bad, match in ((pixels[:-4], "does not inflate"), (b"not zlib", "not zlib data"),
                       (zlib.compress(bytes(10 * batch.obs.nbytes)), "does not inflate")):
        msg.transitions.pixels = array.array("B", bad)
        with pytest.raises(ValueError, match=match):
            SAMPLE_SERVICE.response_from_msg(msg)


def test_counted_bytes_are_close_to_the_serialised_size() -> None:
    state = Observations(0, 1, np.ones((4, 64), np.float32), 5)
    episodes = Episodes(0, [0, 1], [10.0, 12.0], [10, 12], [False, True], 2, 22, 1, 5)
    for topic_type, data in ((OBSERVATIONS, state), (OBSERVATIONS, observations()),
                             (EXPERIENCE, experience()), (EPISODES, episodes),
                             (image_topic_type("raw"), observations()),
                             (image_topic_type("png"), observations())):
        msg = topic_type.to_msg(data)
        counted, serialised = topic_type.wire_bytes(msg), len(serialize_message(msg))
        assert abs(counted - serialised) <= 0.1 * serialised + 64, (type(msg), counted,
                                                                    serialised)


def png_of_size(width: int, height: int) -> bytes:
    """A PNG whose header says ``width`` x ``height`` (its pixel data are a 16-row image's)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, 16)).save(buffer, "PNG")
    data = bytearray(buffer.getvalue())
    struct.pack_into(">I", data, 20, height)  # IHDR: length, type, width, height, ...
    struct.pack_into(">I", data, 29, zlib.crc32(bytes(data[12:29])))
    return bytes(data)


@pytest.mark.parametrize(("width", "height", "match"), [
    (17, 48, "not a column of this task's 16 x 16 frames"),
    (16, 40, "not a column"),
    (16, 16 * (CAMERA.max_frames + 1), "more than the"),
])
def test_an_image_header_that_does_not_fit_the_camera_is_refused_before_decoding(
        width: int, height: int, match: str) -> None:
    """Issue 19: a 20 KB PNG can claim half a gigabyte of pixels; only the header is read."""
    msg = image_topic_type("png").to_msg(observations())
    msg.data = array.array("B", png_of_size(width, height))
    with pytest.raises(ValueError, match=match):
        COMPRESSED_IMAGES.from_msg(msg)
    raw = image_topic_type("raw").to_msg(observations())
    raw.width, raw.height, raw.step = width, height, 3 * width
    with pytest.raises(ValueError, match=match):
        RAW_IMAGES.from_msg(raw)


def test_a_decompression_bomb_is_a_counted_error_not_an_escape() -> None:
    msg = image_topic_type("png").to_msg(observations())
    msg.data = array.array("B", png_of_size(16, 12_000_000))  # 192 Mpx: Pillow's bomb error
    with pytest.raises(ValueError, match="DecompressionBombError"):
        image_topic_type("png").from_msg(msg)  # even without a camera to check against


def test_waiting_images_are_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Collected()
    frame = np.zeros((16, 16, 3), np.uint8)
    monkeypatch.setattr("rl_core.wire.image_join.MAX_WAITING_BYTES", 3 * frame.nbytes)
    for stamp in range(5):  # images whose batches never come
        out.join.on_frames(Frames(camera_frame(1), stamp, frame.copy()))
    assert out.join.waiting_bytes == 3 * frame.nbytes
    assert [what for what, _ in out.rejected] == ["observations (unmatched)"] * 2
    assert MAX_WAITING_BYTES >= 256 * 1024 * 1024
