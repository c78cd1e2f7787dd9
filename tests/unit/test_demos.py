"""Demonstrations (rl_core.replay.demos): MCAP recordings of experience read into a demo buffer, and
batches that draw demo_ratio of their rows from it (RateLimitedReplay)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from mcap_ros2.writer import Writer

from rl_bringup.tools.operate.message_types import full_message_definition
from rl_core.config import ConfigError, ReplayConfig
from rl_core.replay import RateLimitedReplay, ReplayBuffer
from rl_core.replay.build import new_buffer, new_replay
from rl_core.replay.demos import EXPERIENCE_SCHEMA, demo_buffer, load_demonstrations
from rl_core.wire.image_codecs import compressed_format, encode_batch
from rl_core.wire.messages import DEMO_SLOT, PriorityUpdate

pytestmark = pytest.mark.unit
OBS, ACTION = (4,), (1,)


def experience(rows: int, first: float, sequence: int = 0, ends: tuple[int, ...] = (),
               obs_shape: tuple[int, ...] = OBS) -> dict:
    """An ExperienceBatch as mcap_ros2 writes it: observations count up from ``first``."""
    size = int(np.prod(obs_shape))
    obs = (first + np.arange(rows * size, dtype=np.float32)).tolist()
    return dict(header=dict(stamp=dict(sec=0, nanosec=0), frame_id=""), robot_id=0, stream=7,
                sequence=sequence, batch_size=rows, obs_shape=list(obs_shape),
                action_shape=list(ACTION), obs=obs, actions=[0.5] * rows, rewards=[1.0] * rows,
                next_obs=obs, terminated=[i in ends for i in range(rows)],
                truncated=[False] * rows, env_ids=[0] * rows, policy_version=0)


def write_recording(path: Path, messages: list[dict], topic: str = "/experience") -> Path:
    """An MCAP file as rl-bringup record writes one (ros2msg schema, cdr encoding)."""
    return write_topics(path, [(topic, EXPERIENCE_SCHEMA, message) for message in messages])


def write_topics(path: Path, messages: list[tuple[str, str, dict]]) -> Path:
    """An MCAP file of ``(topic, message type, message)`` in that order."""
    with open(path, "wb") as stream:
        writer = Writer(stream)
        schemas = {name: writer.register_msgdef(name, full_message_definition(name))
                   for name in dict.fromkeys(schema for _, schema, _ in messages)}
        for number, (topic, schema, message) in enumerate(messages):
            writer.write_message(topic, schemas[schema], message, log_time=number,
                                 publish_time=number)
        writer.finish()
    return path


def test_files_and_folders_load_in_order_with_their_episodes(tmp_path: Path) -> None:
    folder = tmp_path / "demos"
    (folder / "more").mkdir(parents=True)
    write_recording(folder / "a.mcap", [experience(3, 0.0, 0, ends=(2,)), experience(2, 100.0, 1)])
    write_recording(folder / "more" / "b.mcap", [experience(4, 200.0, ends=(1, 3))],
                    topic="/robot_3/experience")
    single = write_recording(tmp_path / "c.mcap", [experience(1, 300.0)])
    demos = load_demonstrations(f"{folder}, {single},{single}", OBS, ACTION)
    assert len(demos) == 10 and demos.episodes == 3
    assert demos.files == (folder / "a.mcap", folder / "more" / "b.mcap", single)
    assert demos.obs.shape == (10, 4) and demos.actions.shape == (10, 1)
    assert demos.obs[:, 0].tolist() == [0, 4, 8, 100, 104, 200, 204, 208, 212, 300]
    np.testing.assert_array_equal(demos.next_obs, demos.obs)
    assert demos.rewards.dtype == np.float32 and demos.terminated.dtype == bool


def test_bad_paths_and_foreign_files_say_what_and_how(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist.*rl-bringup record topics:=/experience"):
        load_demonstrations(str(tmp_path / "missing.mcap"), OBS, ACTION)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no .mcap file"):
        load_demonstrations(str(tmp_path / "empty"), OBS, ACTION)
    text = tmp_path / "notes.mcap"
    text.write_text("not a recording")
    with pytest.raises(ConfigError, match="notes.mcap' is not a readable MCAP file"):
        load_demonstrations(str(text), OBS, ACTION)
    other = tmp_path / "other.mcap"
    with open(other, "wb") as stream:
        writer = Writer(stream)
        schema = writer.register_msgdef("std_msgs/msg/String", "string data\n")
        writer.write_message("/chatter", schema, {"data": "hi"}, log_time=0, publish_time=0)
        writer.finish()
    with pytest.raises(ConfigError, match="holds no rl_interfaces/msg/ExperienceBatch"):
        load_demonstrations(str(other), OBS, ACTION)
    kuka = write_recording(tmp_path / "kuka.mcap", [experience(2, 0.0, obs_shape=(23,))])
    with pytest.raises(ConfigError, match=r"observations \[23\].*this task has \[4\] and \[1\]"):
        load_demonstrations(str(kuka), OBS, ACTION)
    with pytest.raises(ConfigError, match="no file given"):
        load_demonstrations(" , ", OBS, ACTION)


def add_online(replay: RateLimitedReplay, rows: int) -> None:
    """``rows`` online transitions of reward 0 (the demonstrations' are 1)."""
    replay.add(np.zeros((rows, 4)), np.zeros((rows, 1)), np.zeros(rows), np.zeros((rows, 4)),
               np.zeros(rows, dtype=bool))


def test_every_batch_draws_demo_ratio_of_its_rows_from_the_demonstrations(tmp_path: Path) -> None:
    demos = load_demonstrations(str(write_recording(tmp_path / "d.mcap", [experience(50, 0.0)])),
                                OBS, ACTION)
    buffer = ReplayBuffer(OBS, ACTION, 1000, prioritized=True, seed=1)
    replay = RateLimitedReplay(buffer, 1.0, learning_starts=100, error_buffer=100,
                               demos=demo_buffer(demos, buffer, seed=2), demo_ratio=0.25)
    add_online(replay, 200)
    draw, _ = replay.take(128, 3)
    assert len(draw.batches) == 3
    for batch in draw.batches:
        from_demos = batch.indices == DEMO_SLOT
        assert from_demos.sum() == 32 and batch.rewards[from_demos].tolist() == [1.0] * 32
        assert batch.rewards[~from_demos].tolist() == [0.0] * 96
        assert batch.obs.shape == (128, 4) and batch.weights.shape == (128,)
    # Priorities come back for every row; those of demonstration rows are dropped.
    batch = draw.batches[0]
    update = PriorityUpdate(batch.indices, np.full(128, 5.0, np.float32), draw.total_inserted)
    assert replay.update_priorities(update) == 96
    # The limiter counts online inserts only: 200 stored, 100 before learning, 3 granted.
    assert replay.stats().samples == 3


def test_all_or_nothing_from_demonstrations(tmp_path: Path) -> None:
    demos = load_demonstrations(str(write_recording(tmp_path / "d.mcap", [experience(5, 0.0)])),
                                OBS, ACTION)
    for ratio, from_demos in ((1.0, 16), (0.0, 0)):
        buffer = ReplayBuffer(OBS, ACTION, 100, seed=1)
        replay = RateLimitedReplay(buffer, 1.0, 1, 100, demos=demo_buffer(demos, buffer, 0),
                                   demo_ratio=ratio)
        add_online(replay, 10)
        batch = replay.take(16, 1)[0].batches[0]
        assert (batch.indices == DEMO_SLOT).sum() == from_demos and len(batch.rewards) == 16
    with pytest.raises(ValueError, match="demo_ratio"):
        RateLimitedReplay(buffer, 1.0, 1, 100, demo_ratio=1.5)


def test_the_config_loads_demonstrations_and_refuses_bad_ones(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "d.mcap", [experience(6, 0.0)])
    config = dataclasses.replace(ReplayConfig(), demos=str(recording), demo_ratio=0.5)
    replay = new_replay(config, new_buffer(config, OBS, ACTION))
    assert replay.demos is not None and len(replay.demos) == 6 and len(replay.buffer) == 0
    assert replay.demo_note == (f"demonstrations: 6 transitions (0 episodes) from {recording}; "
                                "50% of every batch is drawn from them")
    assert new_replay(ReplayConfig(), new_buffer(config, OBS, ACTION)).demos is None
    broken = dataclasses.replace(config, demos=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="does not exist"):
        new_replay(broken, new_buffer(broken, OBS, ACTION))


def test_rows_an_operator_drove_join_the_demonstrations() -> None:
    buffer = ReplayBuffer(OBS, ACTION, 100, seed=1)
    replay = RateLimitedReplay(buffer, 1.0, learning_starts=1, error_buffer=100)
    add_online(replay, 4)
    assert replay.demos is None  # no demonstrations, no operator yet: online batches only
    rewards = np.array([0.0, 1.0, 0.0, 1.0])
    replay.add(np.zeros((4, 4)), np.zeros((4, 1)), rewards, np.zeros((4, 4)),
               np.zeros(4, dtype=bool), intervened=np.array([False, True, False, True]))
    assert len(replay.buffer) == 8 and replay.intervened_rows == 2
    assert replay.demos is not None and len(replay.demos) == 2
    batch = replay.take(8, 1)[0].batches[0]
    from_demos = batch.indices == DEMO_SLOT
    assert from_demos.sum() == 4 and batch.rewards[from_demos].tolist() == [1.0] * 4


#: A pixel task's observations: 2 stacked frames of 4 x 5 pixels.
PIXELS = (2, 4, 5, 3)


def pixel_experience(robot: int, stamp: int, rows: int,
                     obs_shape: tuple[int, ...] = PIXELS) -> dict:
    """An image task's ExperienceBatch as it crosses DDS: its observations on the side topic."""
    return {**experience(rows, 0.0, obs_shape=obs_shape), "robot_id": robot, "obs": [],
            "next_obs": [], "header": dict(stamp=dict(sec=0, nanosec=stamp),
                                           frame_id="")}


def pixel_image(robot: int, stamp: int, frames: np.ndarray, codec: str) -> tuple[str, str, dict]:
    """The side-topic image of a batch: its obs rows, then its next_obs rows, as one column."""
    header = dict(stamp=dict(sec=0, nanosec=stamp), frame_id=f"robot_{robot}/camera")
    if codec == "raw":
        return ("/experience/image", "sensor_msgs/msg/Image", dict(
            header=header, height=frames.size // (3 * PIXELS[2]), width=PIXELS[2],
            encoding="rgb8", is_bigendian=0, step=3 * PIXELS[2], data=frames.tobytes()))
    return ("/experience/image/compressed", "sensor_msgs/msg/CompressedImage", dict(
        header=header, format=compressed_format("png"), data=encode_batch(frames, "png")))


def test_an_image_tasks_experience_joins_its_images_from_the_side_topics(tmp_path: Path) -> None:
    """A recording of /experience and its image side topic (raw or png): each message gets its
    rows' pixels by camera and stamp; one whose image the recording missed is left out."""
    rng = np.random.default_rng(0)
    pixels = {stamp: rng.integers(0, 256, (2 * 3, *PIXELS), dtype=np.uint8) for stamp in (2, 3)}
    recording = write_topics(tmp_path / "pixels.mcap", [
        ("/experience", EXPERIENCE_SCHEMA, pixel_experience(0, 1, 3)),  # its image was missed
        pixel_image(1, 3, pixels[3], "png"),  # before its batch message: joins either way
        ("/experience", EXPERIENCE_SCHEMA, pixel_experience(0, 2, 3)),
        pixel_image(0, 2, pixels[2], "raw"),
        ("/experience", EXPERIENCE_SCHEMA, pixel_experience(1, 3, 3)),
    ])
    demos = load_demonstrations(str(recording), PIXELS, ACTION)
    assert len(demos) == 6 and demos.obs.dtype == np.uint8
    np.testing.assert_array_equal(demos.obs, np.concatenate([pixels[2][:3], pixels[3][:3]]))
    np.testing.assert_array_equal(demos.next_obs, np.concatenate([pixels[2][3:], pixels[3][3:]]))

    config = ReplayConfig(demos=str(recording))
    replay = new_replay(config, new_buffer(config, PIXELS, ACTION))
    assert replay.demos is not None and len(replay.demos) == 6
    sampled = replay.demos.sample(16).obs
    assert sampled.dtype == np.uint8
    assert all((demos.obs == row).all(axis=(1, 2, 3, 4)).any() for row in sampled)


def test_an_image_tasks_experience_without_its_images_says_what_to_record(tmp_path: Path) -> None:
    alone = write_recording(tmp_path / "alone.mcap", [pixel_experience(0, 1, 2)])
    with pytest.raises(ConfigError, match="without its images.*topics:=/experience,/experience/"
                                          "image"):
        load_demonstrations(str(alone), PIXELS, ACTION)
    other_camera = write_topics(tmp_path / "other.mcap", [
        ("/experience", EXPERIENCE_SCHEMA, pixel_experience(0, 1, 2, obs_shape=(2, 4, 6, 3))),
        pixel_image(0, 1, np.zeros((4, 2, 4, 5, 3), dtype=np.uint8), "raw")])
    with pytest.raises(ConfigError, match="other.mcap'.*not a column of this task's 4 x 6"):
        load_demonstrations(str(other_camera), (2, 4, 6, 3), ACTION)
