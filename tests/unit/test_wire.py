"""rl_core.wire.messages: the caps, checks and encodings of what crosses the wire."""

from __future__ import annotations

import zlib
from types import SimpleNamespace

import numpy as np
import pytest

from rl_core.wire import messages as wire
from rl_core.wire.messages import Batch

pytestmark = pytest.mark.unit


def test_arrays_copy_their_values_with_the_wire_types() -> None:
    values = np.arange(6, dtype=np.float64).reshape(2, 3)
    floats = wire.float32_array(values)
    assert floats.typecode == "f" and list(floats) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    values[0, 0] = 9.0
    assert floats[0] == 0.0  # shares nothing
    assert wire.uint32_array([3, 64, 64]).typecode == "I"
    assert list(wire.int64_array(np.array([2**40, 1]))) == [2**40, 1]


def test_shaped_views_a_field_and_names_it_when_its_size_is_wrong() -> None:
    flat = wire.float32_array(np.arange(6, dtype=np.float32))
    view = wire.shaped(flat, 2, (3,), "obs")
    assert view.shape == (2, 3) and view[1, 2] == 5.0
    with pytest.raises(ValueError, match=r"field 'obs' has 6 values, but 4 rows of shape \[3\] "
                                         r"need 12"):
        wire.shaped(flat, 4, (3,), "obs")


def test_shapes_lengths_and_row_caps_are_checked() -> None:
    assert wire.positive_shape([3, 64, 64], "obs_shape") == (3, 64, 64)
    for bad in ([], [3, 0]):
        with pytest.raises(ValueError, match="field 'obs_shape' must list positive sizes"):
            wire.positive_shape(bad, "obs_shape")
    wire.check_length([True, False], 2, "terminated")
    with pytest.raises(ValueError, match="field 'terminated' has 1 entries, expected 2"):
        wire.check_length([True], 2, "terminated")
    wire.check_rows(wire.MAX_EXPERIENCE_ROWS, "transitions")
    with pytest.raises(ValueError, match="transitions in one message exceed the cap"):
        wire.check_rows(wire.MAX_EXPERIENCE_ROWS + 1, "transitions")


def test_finite_refuses_nan_and_infinity() -> None:
    values = np.ones(3, np.float32)
    assert wire.finite(values, "actions") is values
    for bad in (np.nan, np.inf):
        values[1] = bad
        with pytest.raises(ValueError, match="field 'actions' holds NaN or infinite values"):
            wire.finite(values, "actions")


def test_images_elsewhere_only_for_empty_image_rows() -> None:
    assert wire.images_elsewhere([], 2, (3, 64, 64, 3))
    assert not wire.images_elsewhere([], 2, (4,))  # a flat observation is never left out
    assert not wire.images_elsewhere([], 0, (3, 64, 64, 3))
    assert not wire.images_elsewhere([0.0], 2, (3, 64, 64, 3))
    assert "image side topic" in str(wire.side_topic_error("obs"))


def test_pixels_round_trip_and_refuse_what_does_not_inflate_to_the_batch() -> None:
    obs = np.arange(24, dtype=np.uint8).reshape(2, 12)
    data = wire.deflate_pixels(obs, obs + 1)
    pixels = wire.inflate_pixels(data, 48)
    np.testing.assert_array_equal(pixels[:24], obs.ravel())
    np.testing.assert_array_equal(pixels[24:], obs.ravel() + 1)
    with pytest.raises(ValueError, match="not zlib data"):
        wire.inflate_pixels(b"not zlib", 48)
    with pytest.raises(ValueError, match="does not inflate to the 48 bytes"):
        wire.inflate_pixels(data[:-4], 48)
    bomb = zlib.compress(bytes(10_000_000))
    with pytest.raises(ValueError, match="does not inflate to the 48 bytes"):
        wire.inflate_pixels(bomb, 48)  # stops after 48 bytes, whatever the data hold


def test_weights_are_checked_before_they_are_decoded() -> None:
    assert wire.weights_architecture("safetensors", 10, '{"hidden": [64]}') == {"hidden": [64]}
    with pytest.raises(ValueError, match="weights format 'pickle' is not supported"):
        wire.weights_architecture("pickle", 10, "{}")
    with pytest.raises(ValueError, match="exceed the .*-byte cap"):
        wire.weights_architecture("safetensors", wire.MAX_WEIGHTS_BYTES + 1, "{}")
    with pytest.raises(ValueError, match="weights architecture is not JSON"):
        wire.weights_architecture("safetensors", 10, "{")


def batch(start: int, rows: int) -> Batch:
    values = np.arange(start, start + rows, dtype=np.float32)
    return Batch(values[:, None], values[:, None], values, values[:, None], values,
                 np.arange(start, start + rows, dtype=np.int64), values)


def test_batches_join_and_split_back_and_uneven_answers_are_refused() -> None:
    first, second = batch(0, 3), batch(3, 3)
    whole = wire.join_batches([first, second])
    assert whole.rewards.tolist() == [0, 1, 2, 3, 4, 5] and whole.obs.shape == (6, 1)
    back = wire.split_batches(whole, 2)
    for got, want in zip(back, (first, second)):
        for column, expected in zip(got, want):
            np.testing.assert_array_equal(column, expected)
    for count in (4, 0):
        with pytest.raises(ValueError, match="not a multiple of its"):
            wire.split_batches(whole, count)


def test_payload_bytes_count_the_arrays_of_a_message() -> None:
    obs = SimpleNamespace(obs=[0.0] * 8, env_ids=[0, 1], obs_shape=[4])
    assert wire.observations_bytes(obs) == wire.FIXED_BYTES + 4 * 11
    experience = SimpleNamespace(obs=[0.0] * 8, next_obs=[0.0] * 8, actions=[0.0] * 2,
                                 rewards=[0.0] * 2, terminated=[False] * 2, truncated=[False] * 2,
                                 env_ids=[0, 1], obs_shape=[4], action_shape=[1],
                                 intervened=[])
    assert wire.experience_bytes(experience) == wire.FIXED_BYTES + 4 + 4 * 24
    experience.intervened = [True, False]  # one byte per row, like the other flags
    assert wire.experience_bytes(experience) == wire.FIXED_BYTES + 6 + 4 * 24
    assert wire.episodes_bytes(SimpleNamespace(env_ids=[0, 1, 2])) == wire.FIXED_BYTES + 39


def test_experience_images_travel_inline_or_on_the_side_topic_together() -> None:
    """The checks of an ExperienceBatch's flags and image placement (under a millisecond)."""
    image = (2, 4, 4, 3)
    batch = SimpleNamespace(truncated=[False, False], intervened=[], obs=[], next_obs=[])
    assert wire.experience_images_elsewhere(batch, 2, image, joined=True)
    with pytest.raises(ValueError, match="image side topic"):
        wire.experience_images_elsewhere(batch, 2, image, joined=False)
    with pytest.raises(ValueError, match="both travel inline"):
        wire.experience_images_elsewhere(SimpleNamespace(**{**vars(batch), "next_obs": [1.0]}),
                                         2, image, joined=True)
    with pytest.raises(ValueError, match="intervened"):
        wire.experience_images_elsewhere(SimpleNamespace(**{**vars(batch), "intervened": [1]}),
                                         2, image, joined=True)
    inline = SimpleNamespace(truncated=[False], intervened=[], obs=[0.0] * 3, next_obs=[0.0] * 3)
    assert not wire.experience_images_elsewhere(inline, 1, (3,), joined=False)
