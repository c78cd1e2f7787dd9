"""ReplayBuffer with uint8 image observations: storage, ring order, validation, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.replay import ReplayBuffer

pytestmark = pytest.mark.unit

OBS_SHAPE = (2, 4, 5, 3)


def transitions(count: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.integers(0, 256, (count, *OBS_SHAPE), dtype=np.uint8),
        "actions": rng.uniform(-1, 1, (count, 1)).astype(np.float32),
        # The reward numbers the transition, to find it in a batch.
        "rewards": np.arange(count, dtype=np.float32),
        "next_obs": rng.integers(0, 256, (count, *OBS_SHAPE), dtype=np.uint8),
        "terminated": np.zeros(count, dtype=np.float32),
    }


@pytest.mark.parametrize("prioritized", [False, True])
def test_frames_come_back_as_stored_uint8_across_the_ring_wrap(prioritized: bool) -> None:
    buffer = ReplayBuffer(OBS_SHAPE, 1, 6, obs_dtype=np.uint8, prioritized=prioritized, seed=0)
    data = transitions(10)
    buffer.add(**{k: v[:4] for k, v in data.items()})
    buffer.add(**{k: v[4:] for k, v in data.items()})  # wraps: keeps transitions 4..9
    batch = buffer.sample(64)
    assert batch.obs.dtype == np.uint8 and batch.obs.shape == (64, *OBS_SHAPE)
    assert batch.actions.dtype == np.float32
    numbers = batch.rewards.astype(int)
    assert set(numbers) <= set(range(4, 10))
    np.testing.assert_array_equal(batch.obs, data["obs"][numbers])
    np.testing.assert_array_equal(batch.next_obs, data["next_obs"][numbers])
    np.testing.assert_array_equal(batch.actions, data["actions"][numbers])


def test_frames_take_a_quarter_of_float_storage() -> None:
    images = ReplayBuffer(OBS_SHAPE, 1, 100, obs_dtype=np.uint8)
    floats = ReplayBuffer(OBS_SHAPE, 1, 100)
    image_bytes = images._storage.nbytes + sum(a.nbytes for a in images._images.values())
    assert image_bytes < 0.3 * floats._storage.nbytes
    assert images.obs_dtype == np.uint8 and floats.obs_dtype == np.float32


def test_non_uint8_frames_and_other_dtypes_are_rejected() -> None:
    buffer = ReplayBuffer(OBS_SHAPE, 1, 4, obs_dtype=np.uint8)
    data = transitions(2)
    data["obs"] = data["obs"].astype(np.float32)
    with pytest.raises(ValueError, match="takes uint8 only"):
        buffer.add(**data)
    assert len(buffer) == 0
    with pytest.raises(ValueError, match="obs_dtype"):
        ReplayBuffer(OBS_SHAPE, 1, 4, obs_dtype=np.int16)


def test_state_round_trips_and_dtype_mismatch_is_refused(tmp_path) -> None:
    buffer = ReplayBuffer(OBS_SHAPE, 1, 8, obs_dtype=np.uint8, seed=1)
    buffer.add(**transitions(5))
    buffer.save(tmp_path / "replay.npz")
    restored = ReplayBuffer.from_file(tmp_path / "replay.npz")
    assert restored.obs_dtype == np.uint8 and len(restored) == 5
    a, b = buffer.sample(16), restored.sample(16)
    np.testing.assert_array_equal(a.obs, b.obs)
    np.testing.assert_array_equal(a.next_obs, b.next_obs)
    with pytest.raises(ValueError, match="obs_dtype"):
        ReplayBuffer(OBS_SHAPE, 1, 8).load(tmp_path / "replay.npz")
