"""rl_core.wire.encoding: each message's fields and the objects decoded back from them, the
array encodings, and the checks of what arrives from the wire; no ROS (under a second)."""

from __future__ import annotations

import zlib
from types import SimpleNamespace

import numpy as np
import pytest

from rl_core.wire import encoding
from rl_core.wire.messages import (
    MAX_EXPERIENCE_ROWS,
    MAX_WEIGHTS_BYTES,
    Actions,
    AwaitingImages,
    Batch,
    Episodes,
    Experience,
    Observations,
    Weights,
)

pytestmark = pytest.mark.unit


def test_arrays_copy_their_values_with_the_wire_types() -> None:
    values = np.arange(6, dtype=np.float64).reshape(2, 3)
    floats = encoding.float32_array(values)
    assert floats.typecode == "f" and list(floats) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    values[0, 0] = 9.0
    assert floats[0] == 0.0  # shares nothing
    assert encoding.uint32_array([3, 64, 64]).typecode == "I"
    assert list(encoding.int64_array(np.array([2**40, 1]))) == [2**40, 1]


def test_shaped_views_a_field_and_names_it_when_its_size_is_wrong() -> None:
    flat = encoding.float32_array(np.arange(6, dtype=np.float32))
    view = encoding.shaped(flat, 2, (3,), "obs")
    assert view.shape == (2, 3) and view[1, 2] == 5.0
    with pytest.raises(ValueError, match=r"field 'obs' has 6 values, but 4 rows of shape \[3\] "
                                         r"need 12"):
        encoding.shaped(flat, 4, (3,), "obs")


def test_shapes_lengths_and_row_caps_are_checked() -> None:
    assert encoding.positive_shape([3, 64, 64], "obs_shape") == (3, 64, 64)
    for bad in ([], [3, 0]):
        with pytest.raises(ValueError, match="field 'obs_shape' must list positive sizes"):
            encoding.positive_shape(bad, "obs_shape")
    encoding.check_length([True, False], 2, "terminated")
    with pytest.raises(ValueError, match="field 'terminated' has 1 entries, expected 2"):
        encoding.check_length([True], 2, "terminated")
    encoding.check_rows(MAX_EXPERIENCE_ROWS, "transitions")
    with pytest.raises(ValueError, match="transitions in one message exceed the cap"):
        encoding.check_rows(MAX_EXPERIENCE_ROWS + 1, "transitions")


def test_checked_fields_refuse_nan_and_infinity() -> None:
    values = np.ones(3, np.float32)
    assert encoding.shaped(values, 3, (), "actions", check_finite=True).tolist() == [1, 1, 1]
    for bad in (np.nan, np.inf):
        values[1] = bad
        assert encoding.shaped(values, 3, (), "rewards").shape == (3,)  # not asked to check
        with pytest.raises(ValueError, match="field 'actions' holds NaN or infinite values"):
            encoding.shaped(values, 3, (), "actions", check_finite=True)


def test_images_elsewhere_only_for_empty_image_rows() -> None:
    assert encoding.images_elsewhere([], 2, (3, 64, 64, 3))
    assert not encoding.images_elsewhere([], 2, (4,))  # a flat observation is never left out
    assert not encoding.images_elsewhere([], 0, (3, 64, 64, 3))
    assert not encoding.images_elsewhere([0.0], 2, (3, 64, 64, 3))
    assert "image side topic" in str(encoding.side_topic_error("obs"))


def test_pixels_round_trip_and_refuse_what_does_not_inflate_to_the_batch() -> None:
    obs = np.arange(24, dtype=np.uint8).reshape(2, 12)
    data = encoding.deflate_pixels(obs, obs + 1)
    pixels = encoding.inflate_pixels(data, 48)
    np.testing.assert_array_equal(pixels[:24], obs.ravel())
    np.testing.assert_array_equal(pixels[24:], obs.ravel() + 1)
    with pytest.raises(ValueError, match="not zlib data"):
        encoding.inflate_pixels(b"not zlib", 48)
    with pytest.raises(ValueError, match="does not inflate to the 48 bytes"):
        encoding.inflate_pixels(data[:-4], 48)
    bomb = zlib.compress(bytes(10_000_000))
    with pytest.raises(ValueError, match="does not inflate to the 48 bytes"):
        encoding.inflate_pixels(bomb, 48)  # stops after 48 bytes, whatever the data hold


def test_weights_are_checked_before_they_are_decoded() -> None:
    assert encoding.weights_architecture("safetensors", 10, '{"hidden": [64]}') == {"hidden": [64]}
    with pytest.raises(ValueError, match="weights format 'pickle' is not supported"):
        encoding.weights_architecture("pickle", 10, "{}")
    with pytest.raises(ValueError, match="exceed the .*-byte cap"):
        encoding.weights_architecture("safetensors", MAX_WEIGHTS_BYTES + 1, "{}")
    with pytest.raises(ValueError, match="weights architecture is not JSON"):
        encoding.weights_architecture("safetensors", 10, "{")


def batch(start: int, rows: int) -> Batch:
    values = np.arange(start, start + rows, dtype=np.float32)
    return Batch(values[:, None], values[:, None], values, values[:, None], values,
                 np.arange(start, start + rows, dtype=np.int64), values)


def test_batches_join_and_split_back_and_uneven_answers_are_refused() -> None:
    first, second = batch(0, 3), batch(3, 3)
    whole = encoding.join_batches([first, second])
    assert whole.rewards.tolist() == [0, 1, 2, 3, 4, 5] and whole.obs.shape == (6, 1)
    back = encoding.split_batches(whole, 2)
    for got, want in zip(back, (first, second)):
        for column, expected in zip(got, want):
            np.testing.assert_array_equal(column, expected)
    for count in (4, 0):
        with pytest.raises(ValueError, match="not a multiple of its"):
            encoding.split_batches(whole, count)


def test_payload_bytes_count_the_arrays_of_a_message() -> None:
    obs = SimpleNamespace(obs=[0.0] * 8, env_ids=[0, 1], obs_shape=[4])
    assert encoding.observations_bytes(obs) == encoding.FIXED_BYTES + 4 * 11
    experience = SimpleNamespace(obs=[0.0] * 8, next_obs=[0.0] * 8, actions=[0.0] * 2,
                                 rewards=[0.0] * 2, terminated=[False] * 2, truncated=[False] * 2,
                                 env_ids=[0, 1], obs_shape=[4], action_shape=[1],
                                 intervened=[])
    assert encoding.experience_bytes(experience) == encoding.FIXED_BYTES + 4 + 4 * 24
    experience.intervened = [True, False]  # one byte per row, like the other flags
    assert encoding.experience_bytes(experience) == encoding.FIXED_BYTES + 6 + 4 * 24
    assert encoding.episodes_bytes(SimpleNamespace(env_ids=[0, 1, 2])) == encoding.FIXED_BYTES + 39


def test_experience_images_travel_inline_or_on_the_side_topic_together() -> None:
    """The checks of an ExperienceBatch's flags and image placement (under a millisecond)."""
    image = (2, 4, 4, 3)
    batch = SimpleNamespace(truncated=[False, False], intervened=[], obs=[], next_obs=[])
    assert encoding.experience_images_elsewhere(batch, 2, image, joined=True)
    with pytest.raises(ValueError, match="image side topic"):
        encoding.experience_images_elsewhere(batch, 2, image, joined=False)
    with pytest.raises(ValueError, match="both travel inline"):
        encoding.experience_images_elsewhere(SimpleNamespace(**{**vars(batch), "next_obs": [1.0]}),
                                         2, image, joined=True)
    with pytest.raises(ValueError, match="intervened"):
        encoding.experience_images_elsewhere(SimpleNamespace(**{**vars(batch), "intervened": [1]}),
                                         2, image, joined=True)
    inline = SimpleNamespace(truncated=[False], intervened=[], obs=[0.0] * 3, next_obs=[0.0] * 3)
    assert not encoding.experience_images_elsewhere(inline, 1, (3,), joined=False)


# --- each message's fields, and the object decoded back from them --------------------------------

def arrived(fields: dict[str, object]) -> SimpleNamespace:
    """A received message of these fields: what an encoder leaves out arrives empty."""
    return SimpleNamespace(**{"obs": [], "next_obs": [], "intervened": [], "pixels": [],
                              **fields})


def test_observations_and_actions_come_back_as_they_went() -> None:
    obs = Observations(3, 17, np.arange(6, dtype=np.float32).reshape(2, 3), stamp_ns=5)
    back = encoding.decode_observations(arrived(encoding.observation_fields(obs)), 5)
    assert isinstance(back, Observations) and (back.robot_id, back.step, back.stamp_ns) == (3, 17, 5)
    np.testing.assert_array_equal(back.obs, obs.obs)
    actions = Actions(3, 17, np.ones((2, 4), np.float32), policy_version=9, mac=b"\x01" * 32)
    fields = encoding.action_fields(actions)
    got = encoding.decode_actions(arrived(fields), 0)
    assert (got.robot_id, got.step, got.policy_version, got.mac) == (3, 17, 9, b"\x01" * 32)
    np.testing.assert_array_equal(got.actions, actions.actions)
    fields["actions"][0] = float("nan")
    with pytest.raises(ValueError, match="field 'actions' holds NaN"):
        encoding.decode_actions(arrived(fields), 0)


def test_image_observations_wait_for_their_image_where_it_is_joined() -> None:
    images = Observations(0, 1, np.zeros((2, 1, 4, 4, 3), np.uint8))
    fields = encoding.observation_fields(images)
    assert "obs" not in fields  # they travel on the side topic
    waiting = encoding.decode_observations(arrived(fields), 0, images=True)
    assert isinstance(waiting, AwaitingImages) and waiting.size == 2 * 48
    assert waiting.complete(np.ones(96, np.uint8)).obs.shape == (2, 1, 4, 4, 3)
    with pytest.raises(ValueError, match="image side topic"):
        encoding.decode_observations(arrived(fields), 0)


def test_experience_comes_back_with_its_ids_and_operator_flags() -> None:
    obs = np.arange(6, dtype=np.float32).reshape(2, 3)
    experience = Experience(1, obs, np.ones((2, 2), np.float32), np.array([0.5, -1], np.float32),
                            obs + 1, np.array([True, False]), np.array([False, True]),
                            policy_version=4, stamp_ns=8, env_ids=np.array([5, 6], np.uint32),
                            stream=2, sequence=3, intervened=np.array([False, True]))
    back = encoding.decode_experience(arrived(encoding.experience_fields(experience)), 8)
    assert isinstance(back, Experience)
    for name in ("obs", "actions", "rewards", "next_obs", "terminated", "truncated", "env_ids",
                 "intervened"):
        np.testing.assert_array_equal(getattr(back, name), getattr(experience, name), name)
    assert (back.policy_version, back.stamp_ns, back.stream, back.sequence) == (4, 8, 2, 3)
    fields = encoding.experience_fields(experience)
    fields["rewards"] = fields["rewards"][:1]
    with pytest.raises(ValueError, match="field 'rewards' has 1 values"):
        encoding.decode_experience(arrived(fields), 0)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_a_sample_answer_travels_joined_and_comes_back_split(dtype: type) -> None:
    batches = [b._replace(terminated=b.terminated % 2) for b in (batch(0, 2), batch(2, 2))]
    if dtype is np.uint8:  # image observations travel as compressed pixels
        batches = [b._replace(obs=b.obs.astype(np.uint8), next_obs=b.next_obs.astype(np.uint8))
                   for b in batches]
    fields = encoding.transition_fields(encoding.join_batches(batches))
    assert ("pixels" in fields) == (dtype is np.uint8)
    answer = SimpleNamespace(success=True, batches=2, transitions=arrived(fields))
    for got, want in zip(encoding.sampled_batches(answer), batches):
        for column, expected in zip(got, want):
            np.testing.assert_array_equal(column, expected)
    assert encoding.sampled_batches(SimpleNamespace(**{**vars(answer), "success": False})) == []


def test_weights_and_episodes_come_back_as_they_went() -> None:
    import torch

    weights = Weights(3, 40, {"w": torch.ones(2)}, {"hidden": [8]}, epoch=1, signature="s")
    back = encoding.decode_weights(SimpleNamespace(**encoding.weights_fields(weights)), 0)
    assert (back.version, back.update_step, back.architecture, back.epoch, back.signature) == (
        3, 40, {"hidden": [8]}, 1, "s")
    assert back.tensors()["w"].tolist() == [1.0, 1.0]
    episodes = Episodes(2, [0, 1], [1.5, 2.0], [10, 20], [True, False], 7, 300, 4, stamp_ns=6)
    fields = encoding.episode_fields(episodes)
    assert encoding.decode_episodes(SimpleNamespace(**fields), 6) == episodes
    fields["lengths"] = [10]
    with pytest.raises(ValueError, match="field 'lengths' has 1 entries, expected 2"):
        encoding.decode_episodes(SimpleNamespace(**fields), 6)


def test_a_peer_of_another_wire_version_is_named_with_the_fix() -> None:
    own = ("rl_interfaces/msg/ExperienceBatch", "RIHS01_" + "a" * 64)
    assert encoding.peer_version_refusal("/experience", own, ("/robot_0/simulator", *own)) is None
    # A middleware that gives no hash: the type alone decides.
    assert encoding.peer_version_refusal("/experience", own, ("/x", own[0], "")) is None
    other = encoding.peer_version_refusal("/experience", own,
                                          ("/robot_1/simulator", own[0], "RIHS01_" + "b" * 64))
    assert other is not None and other.startswith("/robot_1/simulator publishes "
                                                  "rl_interfaces/msg/ExperienceBatch (RIHS01_bbbb")
    assert "install the same rl_interfaces everywhere" in other
    assert "std_msgs/msg/String" in str(encoding.peer_version_refusal(
        "/experience", own, ("/x", "std_msgs/msg/String", "RIHS01_" + "c" * 64)))
