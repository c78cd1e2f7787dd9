"""Unit tests for rl_core.replay (no ROS needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rl_core.replay import ReplayBuffer, SumTree
from rl_core.wire.messages import Batch

pytestmark = pytest.mark.unit

OBS_SHAPE = (3,)
ACTION_SHAPE = (2,)
BASE_ARGUMENTS: dict[str, object] = {
    "obs_shape": OBS_SHAPE,
    "action_shape": ACTION_SHAPE,
    "capacity": 8,
}


def make_transitions(count: int, start: int = 0) -> dict[str, np.ndarray]:
    """Transitions whose every field encodes its sequence number ``start + i``."""
    ids = np.arange(start, start + count, dtype=np.float32)
    return {
        "obs": np.repeat(ids[:, None], OBS_SHAPE[0], axis=1),
        "actions": np.repeat(ids[:, None], ACTION_SHAPE[0], axis=1) + 0.5,
        "rewards": ids * 10.0,
        "next_obs": np.repeat(ids[:, None], OBS_SHAPE[0], axis=1) + 1.0,
        "terminated": (ids % 2).astype(np.float32),
        "truncated": ((ids % 3) == 0).astype(np.float32),
    }


def make_buffer(capacity: int = 8, **kwargs: object) -> ReplayBuffer:
    kwargs.setdefault("seed", 0)
    return ReplayBuffer(OBS_SHAPE, ACTION_SHAPE, capacity, **kwargs)  # type: ignore[arg-type]


def stored_ids(buffer: ReplayBuffer) -> np.ndarray:
    """Sequence numbers held in slots 0 .. len-1, read back through the state."""
    return buffer.state_dict()["obs"][:, 0]


def assert_buffers_equal(first: ReplayBuffer, second: ReplayBuffer) -> None:
    state_a, state_b = first.state_dict(), second.state_dict()
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        np.testing.assert_array_equal(state_a[key], state_b[key], err_msg=key)


# ---------------------------------------------------------------- ring / add


@pytest.mark.unit
@pytest.mark.parametrize(
    ("capacity", "chunks"),
    [
        (8, [3, 3, 3]),  # straddles the end
        (8, [5, 5, 5, 5]),  # several wraps
        (8, [8, 1]),  # exactly full, then one
        (8, [20]),  # one batch bigger than capacity
        (8, [3, 13]),  # bigger-than-capacity batch starting mid-ring
        (1, [1, 2, 3]),
    ],
)
@pytest.mark.parametrize("prioritized", [False, True])
def test_wraparound_matches_sequential_inserts(
    capacity: int, chunks: list[int], prioritized: bool
) -> None:
    batched = make_buffer(capacity, prioritized=prioritized)
    sequential = make_buffer(capacity, prioritized=prioritized)
    start = 0
    for count in chunks:
        indices = batched.add(**make_transitions(count, start))
        assert len(indices) == min(count, capacity)
        for offset in range(count):
            sequential.add(**make_transitions(1, start + offset))
        start += count
    assert_buffers_equal(batched, sequential)
    assert batched.total_inserted == sum(chunks)
    assert len(batched) == min(sum(chunks), capacity)
    assert batched.is_full == (sum(chunks) >= capacity)


@pytest.mark.unit
def test_wraparound_order_and_content() -> None:
    buffer = make_buffer(8)
    buffer.add(**make_transitions(6))
    indices = buffer.add(**make_transitions(5, start=6))
    np.testing.assert_array_equal(indices, [6, 7, 0, 1, 2])
    # Slots 0..2 overwritten by ids 8..10; 3..5 still hold ids 3..5.
    np.testing.assert_array_equal(stored_ids(buffer), [8, 9, 10, 3, 4, 5, 6, 7])
    state = buffer.state_dict()
    np.testing.assert_array_equal(state["rewards"], stored_ids(buffer) * 10.0)
    np.testing.assert_array_equal(state["next_obs"][:, 0], stored_ids(buffer) + 1.0)
    np.testing.assert_array_equal(state["terminated"], stored_ids(buffer) % 2)
    assert int(state["position"]) == 3
    assert buffer.is_full and buffer.total_inserted == 11


@pytest.mark.unit
def test_batch_larger_than_capacity_keeps_last_items() -> None:
    buffer = make_buffer(4)
    buffer.add(**make_transitions(1))
    indices = buffer.add(**make_transitions(10, start=1))
    # ids 7..10 survive; id k sits in slot k % 4.
    np.testing.assert_array_equal(indices, [3, 0, 1, 2])
    np.testing.assert_array_equal(stored_ids(buffer), [8, 9, 10, 7])
    assert buffer.total_inserted == 11


@pytest.mark.unit
def test_add_accepts_bool_int_and_float64_and_default_truncated() -> None:
    buffer = make_buffer(4)
    buffer.add(
        obs=np.ones((2, 3), dtype=np.float64),
        actions=np.ones((2, 2), dtype=np.int32),
        rewards=[1, 2],
        next_obs=np.zeros((2, 3)),
        terminated=np.array([True, False]),
    )
    state = buffer.state_dict()
    assert state["obs"].dtype == np.float32
    np.testing.assert_array_equal(state["terminated"], [1.0, 0.0])
    np.testing.assert_array_equal(state["truncated"], [0.0, 0.0])


@pytest.mark.unit
def test_add_empty_batch_is_noop() -> None:
    buffer = make_buffer(4)
    assert buffer.add(**make_transitions(0)).shape == (0,)
    assert len(buffer) == 0 and buffer.total_inserted == 0


# ---------------------------------------------------------------- bad input


def _with(field: str, value: object) -> dict[str, object]:
    transitions: dict[str, object] = dict(make_transitions(4))
    transitions[field] = value
    return transitions


def _nan_rows(field: str, rows: int) -> np.ndarray:
    values = make_transitions(4)[field].copy()
    values[:rows] = np.nan
    return values


@pytest.mark.unit
@pytest.mark.parametrize(
    ("transitions", "message"),
    [
        (_with("obs", np.zeros((4, 5))), r"obs has shape \(4, 5\), expected \(N, 3\)"),
        (_with("actions", np.zeros((4, 3))), r"actions has shape \(4, 3\), expected \(4, 2\)"),
        (_with("rewards", np.zeros((4, 1))), r"rewards has shape \(4, 1\), expected \(4,\)"),
        (_with("obs", np.zeros(3)), r"use obs\[None\] for one transition"),
        (_with("next_obs", np.zeros((5, 3))), r"mismatched batch size: next_obs has N=5 .* N=4"),
        (_with("terminated", np.zeros((4, 1))), r"terminated has shape \(4, 1\), expected \(4,\)"),
        (_with("truncated", np.zeros(3)), r"mismatched batch size: truncated has N=3"),
        (_with("obs", _nan_rows("obs", 2)), r"obs contains non-finite .* in 2 of 4 rows"),
        (_with("rewards", _nan_rows("rewards", 1)), r"rewards contains non-finite .* 1 of 4"),
        (
            _with("next_obs", np.full((4, 3), np.inf)),
            r"next_obs contains non-finite values \(NaN/inf, .*\) in 4 of 4 rows",
        ),
        (_with("actions", np.full((4, 2), 1e300)), r"actions .* beyond float32 range\) in 4 of"),
        (_with("terminated", [0, 0.5, 1, 0]), r"terminated must be bool or 0/1, .* 1 of 4 rows"),
        (_with("terminated", [0, np.nan, 1, 0]), r"terminated must be bool or 0/1"),
        (_with("truncated", [0, 2, 1, 0]), r"truncated must be bool or 0/1"),
        (_with("actions", np.full((4, 2), "a")), r"actions has dtype <U1, which cannot be cast"),
        (_with("rewards", np.ones(4, dtype=complex)), r"rewards has dtype complex128"),
        (_with("obs", [[1.0, 2.0, 3.0], [1.0]]), r"obs cannot be converted to an array"),
    ],
)
@pytest.mark.parametrize("prioritized", [False, True])
def test_bad_add_raises_and_leaves_buffer_unchanged(
    transitions: dict[str, object], message: str, prioritized: bool
) -> None:
    buffer = make_buffer(6, prioritized=prioritized)
    buffer.add(**make_transitions(5, start=100))  # next add would wrap
    before = buffer.state_dict()
    with pytest.raises(ValueError, match=message):
        buffer.add(**transitions)  # type: ignore[arg-type]
    after = buffer.state_dict()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key], err_msg=key)
    assert buffer.total_inserted == 5


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": 0}, r"capacity must be > 0, got 0"),
        ({"capacity": -3}, r"capacity must be > 0"),
        ({"capacity": 2.5}, r"capacity must be an int, got float"),
        ({"capacity": True}, r"capacity must be an int, got bool"),
        ({"obs_shape": (3, 0)}, r"obs_shape must contain positive ints"),
        ({"obs_shape": "abc"}, r"obs_shape must be an int or a sequence of ints"),
        ({"action_shape": (-1,)}, r"action_shape must contain positive ints"),
        ({"alpha": -0.1}, r"alpha must be finite and >= 0"),
        ({"alpha": float("nan")}, r"alpha must be finite"),
        ({"beta": 1.5}, r"beta must be in \[0, 1\], got 1.5"),
        ({"epsilon": -1e-3}, r"epsilon must be finite and >= 0"),
        ({"seed": -1}, r"seed must be None or a non-negative int"),
        ({"prioritized": "yes"}, r"prioritized must be a bool"),
    ],
)
def test_bad_constructor_args(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = dict(BASE_ARGUMENTS)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ReplayBuffer(**arguments)  # type: ignore[arg-type]


@pytest.mark.unit
@pytest.mark.parametrize("prioritized", [False, True])
def test_sample_from_empty_buffer_raises(prioritized: bool) -> None:
    with pytest.raises(RuntimeError, match="buffer is empty; add experience before sampling"):
        make_buffer(prioritized=prioritized).sample(4)


@pytest.mark.unit
@pytest.mark.parametrize(("batch_size", "message"), [(0, "> 0, got 0"), (-2, "> 0"), (1.0, "int")])
def test_bad_batch_size(batch_size: object, message: str) -> None:
    buffer = make_buffer()
    buffer.add(**make_transitions(2))
    with pytest.raises(ValueError, match=f"batch_size must be .*{message}"):
        buffer.sample(batch_size)  # type: ignore[arg-type]


@pytest.mark.unit
def test_set_beta_validates() -> None:
    buffer = make_buffer(prioritized=True)
    buffer.set_beta(1.0)
    assert buffer.beta == 1.0
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\]"):
        buffer.beta = -0.5
    assert buffer.beta == 1.0


# ---------------------------------------------------------------- sampling


@pytest.mark.unit
def test_batch_types_and_shapes() -> None:
    buffer = make_buffer(8, prioritized=True)
    buffer.add(**make_transitions(5))
    batch = buffer.sample(16)
    assert isinstance(batch, Batch)
    assert batch.obs.shape == (16, 3) and batch.next_obs.shape == (16, 3)
    assert batch.actions.shape == (16, 2)
    for name in ("obs", "actions", "rewards", "next_obs", "terminated", "weights"):
        assert getattr(batch, name).dtype == np.float32, name
    assert batch.indices.dtype == np.int64
    # Rows are consistent: every field comes from the same transition.
    ids = batch.obs[:, 0]
    np.testing.assert_array_equal(batch.rewards, ids * 10.0)
    np.testing.assert_array_equal(batch.terminated, ids % 2)
    np.testing.assert_array_equal(ids, batch.indices)


@pytest.mark.unit
def test_uniform_sampling_is_uniform_over_stored_items() -> None:
    capacity, stored, draws = 16, 10, 200_000
    buffer = make_buffer(capacity, seed=123)
    buffer.add(**make_transitions(stored))
    counts = np.bincount(buffer.sample(draws).indices, minlength=capacity)
    assert counts[stored:].sum() == 0
    expected = draws / stored
    chi_square = float(((counts[:stored] - expected) ** 2 / expected).sum())
    # 9 degrees of freedom: P(chi2 > 27.88) = 0.001.
    assert chi_square < 27.88
    np.testing.assert_array_equal(buffer.sample(4).weights, np.ones(4, dtype=np.float32))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("priorities", "alpha"),
    [([1.0, 9.0], 1.0), ([1.0, 9.0], 0.5), ([1.0, 2.0, 3.0, 4.0], 0.6), ([5.0, 5.0, 5.0], 0.6)],
)
def test_prioritised_frequencies_follow_priority_power_alpha(
    priorities: list[float], alpha: float
) -> None:
    count, draws = len(priorities), 100_000
    buffer = make_buffer(8, prioritized=True, alpha=alpha, epsilon=0.0, seed=7)
    buffer.add(**make_transitions(count))
    buffer.update_priorities(np.arange(count), priorities)
    frequencies = np.bincount(buffer.sample(draws).indices, minlength=count) / draws
    expected = np.asarray(priorities) ** alpha
    expected /= expected.sum()
    np.testing.assert_allclose(frequencies, expected, atol=0.006)
    if priorities == [1.0, 9.0] and alpha == 1.0:
        assert abs(frequencies[0] - 0.1) < 0.006 and abs(frequencies[1] - 0.9) < 0.006


@pytest.mark.unit
def test_prioritised_wraparound_keeps_tree_consistent() -> None:
    buffer = make_buffer(8, prioritized=True, alpha=1.0, epsilon=0.0)
    buffer.add(**make_transitions(6))
    buffer.update_priorities(np.arange(6), np.arange(1.0, 7.0))
    buffer.add(**make_transitions(5, start=6))  # slots 6, 7, 0, 1, 2 get max priority 6
    priorities = buffer.state_dict()["priorities"]
    np.testing.assert_allclose(priorities, [6.0, 6.0, 6.0, 4.0, 5.0, 6.0, 6.0, 6.0])
    frequencies = np.bincount(buffer.sample(80_000).indices, minlength=8) / 80_000
    np.testing.assert_allclose(frequencies, priorities / priorities.sum(), atol=0.006)


@pytest.mark.unit
def test_new_items_get_max_priority() -> None:
    buffer = make_buffer(8, prioritized=True, alpha=1.0, epsilon=0.0)
    buffer.add(**make_transitions(2))
    buffer.update_priorities([0, 1], [4.0, 0.5])
    buffer.add(**make_transitions(1, start=2))
    priorities = buffer.state_dict()["priorities"]
    np.testing.assert_allclose(priorities, [4.0, 0.5, 4.0])


@pytest.mark.unit
@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_importance_sampling_weights_known_case(beta: float) -> None:
    # Priorities 1 and 3, alpha = 1 -> P = [0.25, 0.75], N = 2.
    # w = (N P)^-beta = [0.5^-beta, 1.5^-beta]; normalised by max -> [1, 3^-beta].
    buffer = make_buffer(4, prioritized=True, alpha=1.0, beta=beta, epsilon=0.0, seed=3)
    buffer.add(**make_transitions(2))
    buffer.update_priorities([0, 1], [1.0, 3.0])
    batch = buffer.sample(64)
    assert set(batch.indices.tolist()) == {0, 1}
    expected = np.where(batch.indices == 0, 1.0, 3.0**-beta)
    np.testing.assert_allclose(batch.weights, expected, rtol=1e-6)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("indices", "priorities", "message"),
    [
        ([0, 5], [1.0, 1.0], r"indices must lie in \[0, 3\) \(stored items\)"),
        ([-1], [1.0], r"indices must lie in"),
        ([0.0], [1.0], r"indices must be integers"),
        ([0, 1], [1.0], r"must be 1-D of equal length"),
        ([0, 1], [1.0, np.nan], r"priorities must be finite, got 1 NaN/inf"),
        ([0, 1], [np.inf, 1.0], r"priorities must be finite"),
        ([0], [-0.5], r"priorities must be >= 0"),
    ],
)
def test_update_priorities_validation(
    indices: list[float], priorities: list[float], message: str
) -> None:
    buffer = make_buffer(8, prioritized=True)
    buffer.add(**make_transitions(3))
    before = buffer.state_dict()["priorities"]
    with pytest.raises(ValueError, match=message):
        buffer.update_priorities(indices, priorities)
    np.testing.assert_array_equal(buffer.state_dict()["priorities"], before)


@pytest.mark.unit
def test_update_priorities_zero_needs_epsilon() -> None:
    buffer = make_buffer(8, prioritized=True, epsilon=0.0)
    buffer.add(**make_transitions(3))
    with pytest.raises(ValueError, match=r"> 0 after adding epsilon"):
        buffer.update_priorities([0], [0.0])
    uniform = make_buffer(8)
    uniform.add(**make_transitions(3))
    with pytest.raises(RuntimeError, match="prioritized=True"):
        uniform.update_priorities([0], [1.0])


# ---------------------------------------------------------------- sum-tree


@pytest.mark.unit
@pytest.mark.parametrize("branching", [2, 3, 16])
@pytest.mark.parametrize("capacity", [1, 2, 5, 8, 33, 1000])
def test_sum_tree_total_and_find_match_brute_force(capacity: int, branching: int) -> None:
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity, branching=branching)
    leaves = np.zeros(capacity)
    for _ in range(5):  # several partial updates, with duplicates and zeros
        indices = rng.integers(0, capacity, size=max(1, capacity // 2))
        # Multiples of 1/4 keep all sums exact, so boundary prefix sums are
        # compared without rounding noise; zeros exercise the skip logic.
        values = rng.integers(0, 6, indices.size) / 4.0
        tree.update(indices, values)
        for index, value in zip(indices, values):  # brute-force reference, last wins
            leaves[index] = value
    for _ in range(3):  # contiguous-range path used by inserts
        start = int(rng.integers(0, capacity))
        stop = int(rng.integers(start, capacity + 1))
        value = int(rng.integers(0, 6)) / 4.0
        tree.set_range(start, stop, value)
        leaves[start:stop] = value
    tree.update([0], [0.75])  # guarantee a positive total
    leaves[0] = 0.75
    assert tree.total == pytest.approx(leaves.sum(), rel=1e-12)
    np.testing.assert_array_equal(tree.priorities, leaves)

    cumulative = np.cumsum(leaves)
    prefix_sums = np.concatenate([rng.random(2000) * tree.total, cumulative[leaves > 0][:-1]])
    expected = np.searchsorted(cumulative, prefix_sums, side="right")
    np.testing.assert_array_equal(tree.find(prefix_sums), expected)
    # The very top of the range must land on the last positive leaf, not padding.
    assert tree.find([tree.total])[0] == np.flatnonzero(leaves)[-1]


@pytest.mark.unit
@pytest.mark.parametrize("branching", [2, 16])
def test_sum_tree_find_with_float_noise_stays_on_positive_leaves(branching: int) -> None:
    rng = np.random.default_rng(5)
    capacity = 777
    leaves = rng.random(capacity) * rng.integers(0, 2, capacity)
    tree = SumTree(capacity, branching=branching)
    tree.update(np.arange(capacity), leaves)
    prefix_sums = np.concatenate([rng.random(20_000), [0.0, 1.0]]) * tree.total
    found = tree.find(prefix_sums)
    assert np.all(leaves[found] > 0.0)
    cumulative = np.cumsum(leaves)
    lower = np.where(found > 0, cumulative[found - 1], 0.0)
    tolerance = 1e-9 * tree.total
    assert np.all(lower - tolerance <= prefix_sums)
    assert np.all(prefix_sums <= cumulative[found] + tolerance)


@pytest.mark.unit
@pytest.mark.parametrize("branching", [2, 16])
def test_sum_tree_exact_fallback_walk_matches_brute_force(branching: int) -> None:
    # The sequential-cumsum walk only runs after a rare BLAS rounding miss, so
    # exercise it directly (private method) on exactly representable values.
    rng = np.random.default_rng(9)
    leaves = rng.integers(0, 4, 300) / 4.0
    tree = SumTree(300, branching=branching)
    tree.update(np.arange(300), leaves)
    cumulative = np.cumsum(leaves)
    targets = np.concatenate([rng.random(500) * tree.total, cumulative[leaves > 0][:-1]])
    found = tree._descend(targets, exact=True)
    np.testing.assert_array_equal(found, np.searchsorted(cumulative, targets, side="right"))


@pytest.mark.unit
def test_sum_tree_skips_zero_leaves_and_tracks_max() -> None:
    tree = SumTree(6)
    tree.update([1, 4], [2.0, 3.0])
    assert tree.max_priority == 3.0
    found = tree.find(np.linspace(0.0, 5.0, 101))
    assert set(found.tolist()) <= {1, 4}
    tree.update([4], [1.0])
    assert tree.max_priority == 3.0  # running maximum
    assert SumTree(1_000_000).depth == 5 and SumTree(1_000_000, branching=2).depth == 20
    assert tree.total == pytest.approx(3.0)
    np.testing.assert_array_equal(tree.get([1, 4, 0]), [2.0, 1.0, 0.0])


@pytest.mark.unit
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda tree: tree.update([4], [1.0]), r"indices must lie in \[0, 4\)"),
        (lambda tree: tree.update([0], [-1.0]), r"priorities must be >= 0"),
        (lambda tree: tree.update([0], [np.nan]), r"priorities must be finite"),
        (lambda tree: tree.find([0.5]), r"total is 0"),
        (lambda tree: tree.set_range(2, 5, 1.0), r"range \[2, 5\) is not within \[0, 4\]"),
        (lambda tree: tree.set_range(0, 2, -1.0), r"priorities must be >= 0"),
        (lambda tree: tree.update([0, 1], [1.0, 2.0, 3.0]), r"does not match indices shape"),
        (lambda tree: SumTree(0), r"capacity must be > 0"),
        (lambda tree: SumTree(4, branching=1), r"branching must be an int >= 2"),
    ],
)
def test_sum_tree_validation(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(SumTree(4))  # type: ignore[operator]


@pytest.mark.unit
def test_sum_tree_find_rejects_out_of_range() -> None:
    tree = SumTree(4)
    tree.update([0, 1], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"prefix_sums must lie in \[0, 2.0\]"):
        tree.find([2.5])


# ---------------------------------------------------------------- persistence


@pytest.mark.unit
@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("inserted", [0, 5, 19])
def test_save_load_round_trip_continues_identically(
    tmp_path: Path, prioritized: bool, inserted: int
) -> None:
    original = make_buffer(8, prioritized=prioritized, alpha=0.7, beta=0.5, seed=11)
    original.add(**make_transitions(inserted))
    if inserted:
        batch = original.sample(6)
        if prioritized:
            original.update_priorities(batch.indices, np.arange(1.0, 7.0))
    path = tmp_path / "replay.npz"
    original.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["replay.npz"]  # no temp file left

    loaded_into = make_buffer(8, prioritized=prioritized, seed=999)
    loaded_into.load(path)
    from_file = ReplayBuffer.from_file(path)
    for restored in (loaded_into, from_file):
        assert_buffers_equal(original, restored)
        assert len(restored) == len(original)
        assert restored.total_inserted == original.total_inserted
        assert restored.beta == 0.5 and restored.alpha == 0.7

    if inserted:
        expected = original.sample(32)
        for restored in (loaded_into, from_file):
            got = restored.sample(32)
            for name, value in expected._asdict().items():
                np.testing.assert_array_equal(getattr(got, name), value, err_msg=name)
    # Inserts continue at the same position too.
    for buffer in (original, loaded_into, from_file):
        buffer.add(**make_transitions(3, start=500))
    assert_buffers_equal(original, loaded_into)
    assert_buffers_equal(original, from_file)


@pytest.mark.unit
def test_save_overwrites_atomically(tmp_path: Path) -> None:
    path = tmp_path / "replay.npz"
    buffer = make_buffer(4)
    buffer.add(**make_transitions(2))
    buffer.save(path)
    buffer.add(**make_transitions(1, start=2))
    buffer.save(path)
    assert len(ReplayBuffer.from_file(path)) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replay.npz"]


@pytest.mark.unit
def test_load_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.npz"
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        make_buffer().load(missing)
    with pytest.raises(FileNotFoundError, match="replay buffer file not found: .*nope.npz"):
        ReplayBuffer.from_file(missing)


@pytest.mark.unit
def test_load_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.npz"
    path.write_bytes(b"this is not a zip archive")
    with pytest.raises(ValueError, match=r"cannot read replay buffer file .*corrupt.npz"):
        make_buffer().load(path)
    plain = tmp_path / "plain.npy"
    np.save(plain, np.zeros(3))
    with pytest.raises(ValueError, match="not an .npz archive"):
        ReplayBuffer.from_file(plain)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("other", "message"),
    [
        ({"capacity": 16}, r"incompatible capacity: saved 8, this buffer has 16"),
        ({"obs_shape": (4,)}, r"incompatible obs_shape: saved \(3,\), this buffer has \(4,\)"),
        ({"action_shape": (1,)}, r"incompatible action_shape"),
        ({"prioritized": True}, r"incompatible prioritized flag"),
    ],
)
def test_load_incompatible_file(tmp_path: Path, other: dict[str, object], message: str) -> None:
    path = tmp_path / "replay.npz"
    source = make_buffer(8)
    source.add(**make_transitions(3))
    source.save(path)
    arguments: dict[str, object] = dict(BASE_ARGUMENTS)
    arguments.update(other)
    target = ReplayBuffer(**arguments)  # type: ignore[arg-type]
    before = target.state_dict()
    with pytest.raises(ValueError, match=message):
        target.load(path)
    after = target.state_dict()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key], err_msg=key)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.pop("rng_state"), r"missing key\(s\): rng_state"),
        (
            lambda s: s.update(obs=s["obs"][:2]),
            r"obs in state has shape \(2, 3\), expected \(3, 3\)",
        ),
        (lambda s: s.update(size=np.array(9)), r"size 9 in state is outside \[0, 8\]"),
        (lambda s: s.update(position=np.array(1)), r"position 1 in state is inconsistent"),
        (lambda s: s.update(rng_state=np.array("{bad json")), r"rng_state in state is invalid"),
        (lambda s: s.update(format_version=np.array(99)), r"unsupported format_version 99"),
        (lambda s: s.update(rewards=np.full(3, np.nan)), r"rewards in state contains non-finite"),
    ],
)
def test_load_state_dict_rejects_inconsistent_state(
    tmp_path: Path, mutate: object, message: str
) -> None:
    source = make_buffer(8)
    source.add(**make_transitions(3))
    state = source.state_dict()
    mutate(state)  # type: ignore[operator]
    target = make_buffer(8)
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(state)
    assert len(target) == 0
    path = tmp_path / "bad.npz"
    np.savez(path, **state)
    with pytest.raises(ValueError, match=rf"invalid replay buffer file .*bad.npz: .*{message}"):
        ReplayBuffer.from_file(path)


@pytest.mark.unit
def test_a_value_bound_refuses_huge_but_finite_values_in_the_same_pass() -> None:
    from rl_core.replay import OutOfBounds

    buffer = ReplayBuffer((2,), (1,), 8, value_bound=1e6)
    obs = np.zeros((1, 2), np.float32)
    with pytest.raises(OutOfBounds, match="rewards .* beyond"):
        buffer.add(obs, np.zeros((1, 1)), np.array([1e20]), obs, np.zeros(1))
    with pytest.raises(OutOfBounds, match="obs"):
        buffer.add(np.full((1, 2), np.nan), np.zeros((1, 1)), np.zeros(1), obs, np.zeros(1))
    assert len(buffer) == 0
    buffer.add(obs, np.zeros((1, 1)), np.array([1e5]), obs, np.zeros(1))
    assert len(buffer) == 1


def test_a_state_of_release_0_1_loads_with_its_former_counter_name() -> None:
    buffer = make_buffer(8)
    buffer.add(np.ones((3, 3), np.float32), np.zeros((3, 2), np.float32), np.ones(3, np.float32),
               np.ones((3, 3), np.float32), np.zeros(3, bool))
    state = dict(buffer.state_dict())
    state["total_added"] = state.pop("total_inserted")  # the key files of release 0.1 carry
    restored = make_buffer(8)
    restored.load_state_dict(state)
    assert restored.total_inserted == 3 and len(restored) == 3
