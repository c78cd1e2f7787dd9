"""Ring-buffer experience replay with optional proportional prioritisation.

Storage is one preallocated ``float32`` array written as a ring, one row per transition with the
fields (obs, actions, reward, next_obs, terminated, truncated) side by side. Inserts are batched
(``add`` takes ``N`` transitions at once) and land in at most two slice copies; a sample gathers
one contiguous record per index, which is faster than gathering six separate arrays once the
buffer no longer fits in cache. Nothing here imports ROS: nodes convert messages to arrays and
call into this module.

Image observations (``obs_dtype=np.uint8``) live in two ``uint8`` rings of their own (a float32
copy would take four times the memory), written in the same slots, and batches hand them out as
``uint8``. Prioritised mode follows Schaul et al. (2016), proportional variant
(docs/replay.md, "Sampling"). The buffer is not thread-safe; callers that add and sample from
different threads must hold a lock around both.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt

from rl_core.replay.sum_tree import SumTree
from rl_core.runs.atomic_files import write_atomically
from rl_core.wire.messages import Batch

__all__ = ["InvalidPriorities", "OutOfBounds", "ReplayBuffer"]

FloatArray = npt.NDArray[np.float32]
_T = TypeVar("_T")

_STATE_FORMAT_VERSION = 1
_DATA_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")
#: Fields kept out of the float rows (in uint8 rings) when observations are images.
_IMAGE_FIELDS = ("obs", "next_obs")
#: Observation dtypes a buffer can store.
_OBS_DTYPES = (np.dtype(np.float32), np.dtype(np.uint8))
_STATE_KEYS = (
    "format_version",
    "capacity",
    "obs_shape",
    "action_shape",
    "prioritized",
    "alpha",
    "beta",
    "epsilon",
    "position",
    "size",
    "total_inserted",
    "max_priority",
    "priorities",
    "rng_state",
    *_DATA_FIELDS,
)


class OutOfBounds(ValueError):
    """``add`` got NaN, inf or values beyond the buffer's ``value_bound``; nothing was stored."""


class InvalidPriorities(ValueError):
    """``update_priorities`` got malformed input; nothing was changed.

    :ivar kind: What was wrong, for counting rejections per reason: ``"malformed"``
        (shapes, lengths, dtypes), ``"index out of range"``, ``"not finite"``,
        ``"negative"`` or ``"zero"`` (0 with ``epsilon`` 0).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Field(NamedTuple):
    """Where one transition field lives inside a storage row."""

    start: int
    stop: int
    item_shape: tuple[int, ...]


def _field_layout(
    obs_shape: tuple[int, ...], action_shape: tuple[int, ...], images: bool = False
) -> dict[str, _Field]:
    """Column ranges of the fields in a float row; the two flags come last, next to each other.

    With ``images`` the observations are left out of the row (they have their own storage).
    """
    shapes = dict(
        zip(_DATA_FIELDS, (obs_shape, action_shape, (), obs_shape, (), ()), strict=True)
    )
    layout: dict[str, _Field] = {}
    start = 0
    for name, shape in shapes.items():
        if images and name in _IMAGE_FIELDS:
            continue
        width = int(np.prod(shape, dtype=np.int64))  # 1 for scalar fields
        layout[name] = _Field(start, start + width, shape)
        start += width
    return layout


def _normalise_shape(shape: int | Sequence[int], name: str) -> tuple[int, ...]:
    """Turn an int or sequence of ints into a validated shape tuple."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        dims: tuple[object, ...] = (shape,)
    elif isinstance(shape, Sequence) and not isinstance(shape, str):
        dims = tuple(shape)
    else:
        raise ValueError(f"{name} must be an int or a sequence of ints, got {shape!r}")
    checked: list[int] = []
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
            raise ValueError(f"{name} must contain positive ints, got {shape!r}")
        checked.append(int(dim))
    return tuple(checked)


def _check_unit_interval(value: float, name: str) -> float:
    if not np.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return float(value)


class ReplayBuffer:
    """Fixed-capacity transition store with uniform or prioritised sampling.

    Storage is written as a ring: once ``capacity`` transitions are held, each
    new one overwrites the oldest. Rows ``0 .. len - 1`` are valid.

    :param obs_shape: Shape of one observation, e.g. ``(24,)``; an int means ``(n,)``.
    :param action_shape: Shape of one action, e.g. ``(4,)``; ``()`` for a scalar.
    :param capacity: Maximum number of stored transitions.
    :param prioritized: Sample proportionally to priority instead of uniformly.
    :param alpha: Priority exponent (0 = uniform, 1 = fully proportional). Only
        used when ``prioritized``.
    :param beta: Importance-sampling exponent in ``[0, 1]``; usually annealed to 1
        via ``set_beta`` during training.
    :param epsilon: Added to every priority so no transition gets probability 0.
    :param seed: Seed of the buffer's own ``np.random.Generator``.
    :param value_bound: Largest absolute value ``add`` accepts in the float fields, and the
        largest priority ``update_priorities`` sets (larger ones are clipped to it; None: any
        finite value).
    :param obs_dtype: ``np.float32`` (state vectors) or ``np.uint8`` (images, stored as they
        are, 4x smaller; ``add`` then requires ``uint8`` observations).
    :raises ValueError: If any argument is out of range, with the reason.
    """

    def __init__(
        self,
        obs_shape: int | Sequence[int],
        action_shape: int | Sequence[int],
        capacity: int,
        *,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        epsilon: float = 1e-6,
        seed: int | None = None,
        value_bound: float | None = None,
        obs_dtype: npt.DTypeLike = np.float32,
    ) -> None:
        #: Largest absolute value ``add`` accepts in obs, actions, rewards and next_obs
        #: (None: any finite value); checked in the same pass as finiteness.
        self.value_bound = value_bound
        self._obs_shape = _normalise_shape(obs_shape, "obs_shape")
        self._action_shape = _normalise_shape(action_shape, "action_shape")
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
            raise ValueError(f"capacity must be an int, got {type(capacity).__name__}")
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0, got {capacity}")
        if not isinstance(prioritized, (bool, np.bool_)):
            raise ValueError(f"prioritized must be a bool, got {prioritized!r}")
        if not np.isfinite(alpha) or alpha < 0.0:
            raise ValueError(f"alpha must be finite and >= 0, got {alpha}")
        if not np.isfinite(epsilon) or epsilon < 0.0:
            raise ValueError(f"epsilon must be finite and >= 0, got {epsilon}")
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0
        ):
            raise ValueError(f"seed must be None or a non-negative int, got {seed!r}")

        self._capacity = int(capacity)
        self._prioritized = bool(prioritized)
        self._alpha = float(alpha)
        self._beta = _check_unit_interval(beta, "beta")
        self._epsilon = float(epsilon)
        self._rng = np.random.default_rng(seed)
        try:
            self._obs_dtype = np.dtype(obs_dtype)
        except TypeError as exc:
            raise ValueError(f"obs_dtype must be float32 or uint8, got {obs_dtype!r}") from exc
        if self._obs_dtype not in _OBS_DTYPES:
            raise ValueError(f"obs_dtype must be float32 or uint8, got {self._obs_dtype}")
        images = self._obs_dtype == np.uint8

        self._fields = _field_layout(self._obs_shape, self._action_shape, images)
        self._flags_start = self._fields["terminated"].start
        self._row_width = self._fields["truncated"].stop
        self._storage = np.zeros((self._capacity, self._row_width), dtype=np.float32)
        #: uint8 rings of obs and next_obs, slot-aligned with ``_storage`` (images only).
        self._images: dict[str, npt.NDArray[np.uint8]] = {
            name: np.zeros((self._capacity, *self._obs_shape), dtype=np.uint8)
            for name in (_IMAGE_FIELDS if images else ())
        }

        self._position = 0  # next slot to write
        self._size = 0
        self._total_inserted = 0
        # Largest (priority + epsilon) seen, before the alpha exponent.
        self._max_priority = 1.0
        self._tree = SumTree(self._capacity) if self._prioritized else None

    # ------------------------------------------------------------------ properties

    def __len__(self) -> int:
        """Number of transitions currently stored."""
        return self._size

    @property
    def capacity(self) -> int:
        """Maximum number of stored transitions."""
        return self._capacity

    @property
    def is_full(self) -> bool:
        """Whether the next insert overwrites the oldest transition."""
        return self._size == self._capacity

    @property
    def total_inserted(self) -> int:
        """Count of all transitions ever passed to ``add`` (including overwritten ones)."""
        return self._total_inserted

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """Shape of one observation."""
        return self._obs_shape

    @property
    def obs_dtype(self) -> np.dtype:
        """``float32``, or ``uint8`` for a buffer of images."""
        return self._obs_dtype

    @property
    def row_width(self) -> int:
        """float32 values per stored row (every field but the image ones)."""
        return self._row_width

    @property
    def image_fields(self) -> tuple[str, ...]:
        """The fields stored as uint8 frames apart from the rows (pixel tasks), else none."""
        return tuple(self._images)

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of one action."""
        return self._action_shape

    @property
    def prioritized(self) -> bool:
        """Whether sampling is prioritised."""
        return self._prioritized

    @property
    def alpha(self) -> float:
        """Priority exponent (fixed at construction)."""
        return self._alpha

    @property
    def epsilon(self) -> float:
        """Constant added to every priority."""
        return self._epsilon

    @property
    def beta(self) -> float:
        """Importance-sampling exponent in ``[0, 1]``."""
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        self._beta = _check_unit_interval(value, "beta")

    def set_beta(self, beta: float) -> None:
        """Set the importance-sampling exponent (for annealing schedules).

        :param beta: New value in ``[0, 1]``.
        :raises ValueError: If ``beta`` is outside ``[0, 1]``.
        """
        self.beta = beta

    # ------------------------------------------------------------------ writing

    def add(
        self,
        obs: npt.ArrayLike,
        actions: npt.ArrayLike,
        rewards: npt.ArrayLike,
        next_obs: npt.ArrayLike,
        terminated: npt.ArrayLike,
        truncated: npt.ArrayLike | None = None,
    ) -> npt.NDArray[np.int64]:
        """Insert a batch of ``N`` transitions.

        Every field carries a leading batch dimension ``N`` (use ``x[None]`` for
        a single transition). Input is validated completely before anything is
        written, so a rejected call leaves the buffer unchanged. Integer, bool
        and float inputs are accepted; float64 is narrowed to float32.

        If ``N > capacity`` only the last ``capacity`` transitions are kept, in
        the same slots sequential inserts would have left them; ``total_inserted``
        still grows by ``N``. In prioritised mode new transitions get the largest
        priority seen so far, so it is likely replayed before its priority is
        first corrected.

        :param obs: ``(N, *obs_shape)`` observations.
        :param actions: ``(N, *action_shape)`` actions.
        :param rewards: ``(N,)`` rewards.
        :param next_obs: ``(N, *obs_shape)`` next observations.
        :param terminated: ``(N,)`` 0/1 or bool; episode ended in a terminal state.
        :param truncated: ``(N,)`` 0/1 or bool; episode cut off by a time limit.
            ``None`` means no truncation.
        :returns: ``int64`` storage slots of the kept transitions (length
            ``min(N, capacity)``, aligned with the last rows of the input).
        :raises ValueError: On a wrong shape or dtype, mismatched ``N``, non-finite
            values, or flags other than 0/1, naming the field.
        """
        block, images = self._pack(obs, actions, rewards, next_obs, terminated, truncated)
        # ---- validation done; nothing below can fail on user input.
        return self._write(block, images)

    def _pack(
        self,
        obs: npt.ArrayLike,
        actions: npt.ArrayLike,
        rewards: npt.ArrayLike,
        next_obs: npt.ArrayLike,
        terminated: npt.ArrayLike,
        truncated: npt.ArrayLike | None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The validated rows of one insert as a float32 block, and its image fields apart."""
        obs_array = self._as_field(obs, "obs")
        count = obs_array.shape[0]
        inputs = {
            "obs": obs_array,
            "actions": self._as_field(actions, "actions", count),
            "rewards": self._as_field(rewards, "rewards", count),
            "next_obs": self._as_field(next_obs, "next_obs", count),
            "terminated": self._as_field(terminated, "terminated", count),
            "truncated": (
                None if truncated is None else self._as_field(truncated, "truncated", count)
            ),
        }
        images = {name: cast(np.ndarray, inputs.pop(name)) for name in self._images}
        for name, values in images.items():
            if values.dtype != np.uint8:
                raise ValueError(f"{name} has dtype {values.dtype}; this buffer stores images "
                                 f"and takes uint8 only")
        # Assemble the rows in a scratch block first: validation then runs once
        # over contiguous memory, and storage is only touched once all is known good.
        block = np.empty((count, self._row_width), dtype=np.float32)
        # float64 beyond float32 range turns into inf here and is rejected below.
        with np.errstate(over="ignore"):
            for name, column in inputs.items():
                field = self._fields[name]
                columns = block[:, field.start : field.stop]
                if column is None:
                    columns.fill(0.0)
                else:
                    columns[...] = column.reshape(count, field.stop - field.start)
        self._check_block(block)
        return block, images

    def _write(self, block: np.ndarray, images: dict[str, np.ndarray]) -> npt.NDArray[np.int64]:
        """Store validated rows (the last ``capacity`` of them) and return their slots."""
        count = block.shape[0]
        self._total_inserted += count
        if count == 0:
            return np.empty(0, dtype=np.int64)
        kept = min(count, self._capacity)
        start = (self._position + count - kept) % self._capacity
        first = min(kept, self._capacity - start)
        rows = block[count - kept :]
        self._storage[start : start + first] = rows[:first]
        self._storage[: kept - first] = rows[first:]
        for name, values in images.items():
            frames = values[count - kept :]
            self._images[name][start : start + first] = frames[:first]
            self._images[name][: kept - first] = frames[first:]
        self._position = (start + kept) % self._capacity
        self._size = min(self._size + kept, self._capacity)
        if self._tree is not None:
            leaf_priority = self._max_priority**self._alpha
            self._tree.set_range(start, start + first, leaf_priority)
            self._tree.set_range(0, kept - first, leaf_priority)
        return (start + np.arange(kept, dtype=np.int64)) % self._capacity

    def rows_since(self, total_inserted: int) -> tuple[np.ndarray, int, int]:
        """A copy of the rows stored after the ``total_inserted``-th insert (what an insert log
        keeps): ``(block, first slot, inserted since)``. Rows overwritten since are gone, so the
        block holds at most ``len(self)`` rows; :meth:`frames` copies their image fields, and
        :meth:`restore_rows` puts them back.

        :raises ValueError: when ``total_inserted`` is ahead of this buffer.
        """
        inserted = self._total_inserted - total_inserted
        if inserted < 0:
            raise ValueError(f"{total_inserted} inserts asked for, only {self._total_inserted} made")
        kept = min(inserted, self._size)
        first = (self._position - kept) % self._capacity
        return self._ring_copy(self._storage, first, kept), first, inserted

    def frames(self, first: int, count: int) -> dict[str, np.ndarray]:
        """Copies of the image fields of ``count`` slots from ``first`` on (none for a state
        task). The newest rows are overwritten only after ``capacity - count`` more inserts, so
        a caller may copy them without the lock that guards inserts and check that afterwards."""
        return {name: self._ring_copy(frames, first, count) for name, frames in self._images.items()}

    def _ring_copy(self, ring: np.ndarray, first: int, count: int) -> np.ndarray:
        """``count`` rows of ``ring`` from slot ``first`` on, wrapping (at most two memcpys)."""
        head = min(count, self._capacity - first)
        if head == count:
            return ring[first:first + count].copy()
        return np.concatenate((ring[first:first + head], ring[:count - head]))

    def restore_rows(self, block: np.ndarray, images: Mapping[str, np.ndarray],
                     inserted: int) -> None:
        """Store rows taken by :meth:`rows_since` (from a file: checked like ``add``'s input),
        counting ``inserted`` inserts.

        :raises ValueError: on rows that do not fit this buffer or that ``add`` would refuse.
        """
        rows = block.shape[0] if block.ndim == 2 else -1
        if block.dtype != np.float32 or block.shape != (rows, self._row_width) or \
                not rows <= inserted:
            raise ValueError(f"rows of {block.dtype} {block.shape} for {inserted} inserts do not "
                             f"fit this buffer's rows of width {self._row_width}")
        if set(images) != set(self._images) or any(
                frames.dtype != np.uint8 or frames.shape != (rows, *self._obs_shape)
                for frames in images.values()):
            raise ValueError(f"image fields {sorted(images)} do not fit this buffer's "
                             f"{sorted(self._images)} of {self._obs_shape}")
        self._check_block(block)
        self._write(block, dict(images))
        self._total_inserted += inserted - rows

    def _as_field(self, value: npt.ArrayLike, name: str, count: int | None = None) -> np.ndarray:
        """Check one input field's dtype, shape and batch size (no copy)."""
        array = self._as_numeric(value, name)
        item_shape = self._obs_shape if name in self._images else self._fields[name].item_shape
        if array.shape[1:] != item_shape or array.ndim != len(item_shape) + 1:
            expected = ("N" if count is None else count, *item_shape)
            hint = ""
            if array.shape == item_shape:
                hint = f"; add() takes a batch, use {name}[None] for one transition"
            raise ValueError(
                f"{name} has shape {array.shape}, expected {_format_shape(expected)}{hint}"
            )
        if count is not None and array.shape[0] != count:
            raise ValueError(
                f"mismatched batch size: {name} has N={array.shape[0]} but obs has N={count}"
            )
        return array

    def _check_block(self, block: FloatArray) -> None:
        """Reject non-finite values and flags other than 0/1, naming the field."""
        count = block.shape[0]
        values = block[:, : self._flags_start]
        # NaN fails both comparisons; with a bound, inf fails it too.
        finite = np.isfinite(values) if self.value_bound is None else \
            np.abs(values) <= self.value_bound
        if not finite.all():
            beyond = "" if self.value_bound is None else f" or beyond +-{self.value_bound:g}"
            for name in ("obs", "actions", "rewards", "next_obs"):
                if name in self._images:
                    continue
                field = self._fields[name]
                bad_rows = int(np.count_nonzero(~finite[:, field.start : field.stop].all(axis=1)))
                if bad_rows:
                    raise OutOfBounds(
                        f"{name} contains non-finite values (NaN/inf, or beyond float32 "
                        f"range){beyond} in {bad_rows} of {count} rows"
                    )
        flags = block[:, self._flags_start :]
        not_binary = (flags != 0.0) & (flags != 1.0)  # also catches NaN
        if not_binary.any():
            for column, name in enumerate(("terminated", "truncated")):
                bad_rows = int(np.count_nonzero(not_binary[:, column]))
                if bad_rows:
                    raise ValueError(
                        f"{name} must be bool or 0/1, got other values in "
                        f"{bad_rows} of {count} rows"
                    )

    @staticmethod
    def _as_numeric(value: npt.ArrayLike, name: str) -> np.ndarray:
        try:
            array = np.asarray(value)
        except (ValueError, TypeError) as exc:  # ragged nested lists, odd objects
            raise ValueError(f"{name} cannot be converted to an array: {exc}") from exc
        if array.dtype.kind not in "biuf":
            raise ValueError(
                f"{name} has dtype {array.dtype}, which cannot be cast safely to float32"
            )
        return array

    # ------------------------------------------------------------------ sampling

    def sample(self, batch_size: int) -> Batch:
        """Draw ``batch_size`` transitions with replacement.

        :param batch_size: Number of transitions; may exceed ``len(self)``.
        :returns: A ``Batch`` of copies (safe to keep after further inserts).
        :raises ValueError: If ``batch_size`` is not a positive int.
        :raises RuntimeError: If the buffer is empty.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
            raise ValueError(f"batch_size must be an int, got {type(batch_size).__name__}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if self._size == 0:
            raise RuntimeError("replay buffer is empty; add experience before sampling")

        if self._tree is None:
            indices = self._rng.integers(0, self._size, size=batch_size, dtype=np.int64)
            weights = np.ones(batch_size, dtype=np.float32)
        else:
            total = self._tree.total
            indices = self._tree.find(self._rng.random(batch_size) * total)
            probabilities = self._tree.get(indices) / total
            raw_weights = (self._size * probabilities) ** (-self._beta)
            weights = (raw_weights / raw_weights.max()).astype(np.float32)

        rows = self._storage.take(indices, axis=0)
        return Batch(
            obs=self._column(rows, "obs", indices),
            actions=self._column(rows, "actions"),
            rewards=self._column(rows, "rewards"),
            next_obs=self._column(rows, "next_obs", indices),
            terminated=self._column(rows, "terminated"),
            indices=indices,
            weights=weights,
        )

    def next_obs_at(self, slots: npt.NDArray[np.int64]) -> np.ndarray:
        """Copies of the next observations stored in ``slots``."""
        return self._column(self._storage.take(slots, axis=0), "next_obs", slots)

    def _column(self, rows: FloatArray, name: str,
                slots: npt.NDArray[np.int64] | slice | None = None) -> np.ndarray:
        """Extract one field from gathered rows as a contiguous, shaped array.

        Images are not in the rows; they are gathered from their ring at ``slots`` (the
        slots ``rows`` came from).
        """
        if name in self._images:
            if slots is None:
                raise ValueError(f"{name} is stored apart from the rows; pass its slots")
            frames = self._images[name]
            return frames[slots].copy() if isinstance(slots, slice) else frames.take(slots, axis=0)
        field = self._fields[name]
        columns = np.ascontiguousarray(rows[:, field.start : field.stop])
        return columns.reshape(rows.shape[0], *field.item_shape)

    def update_priorities(
        self,
        indices: npt.ArrayLike,
        priorities: npt.ArrayLike,
        drawn_at: int | None = None,
    ) -> int:
        """Set new priorities (typically ``|TD error|``) for sampled transitions.

        Without ``drawn_at``, a slot overwritten since it was sampled gives its
        priority to the new transition (the usual ring-buffer PER behaviour,
        harmless when priorities come back at once, as in the bare loop). A
        learner that sends priorities back later (over ROS) passes ``drawn_at``:
        slots written since then are skipped.

        :param indices: 1-D ``int`` slots from ``Batch.indices``.
        :param priorities: Non-negative finite values, one per index, clipped to
            ``value_bound`` (issue 41: one ``3e38`` would take nearly every draw, and
            every later insert would inherit it as the largest priority seen). With
            duplicate indices the last value wins.
        :param drawn_at: ``total_inserted`` when the indices were sampled (the oldest
            such count, when they come from several draws).
        :returns: How many priorities were applied (the rest were stale).
        :raises RuntimeError: If the buffer is not prioritised.
        :raises InvalidPriorities: On mismatched lengths, non-integer or out-of-range
            indices, or priorities that are non-finite, negative, or not
            positive after adding ``epsilon``; nothing is changed.
        """
        if self._tree is None:
            raise RuntimeError("update_priorities() needs a buffer built with prioritized=True")
        index_array = np.asarray(indices)
        priority_array = np.asarray(priorities, dtype=np.float64)
        if index_array.ndim != 1 or priority_array.shape != index_array.shape:
            raise InvalidPriorities(
                "malformed",
                f"indices and priorities must be 1-D of equal length, got shapes "
                f"{index_array.shape} and {priority_array.shape}",
            )
        if index_array.size == 0:
            return 0
        if index_array.dtype.kind not in "iu":
            raise InvalidPriorities(
                "malformed", f"indices must be integers, got dtype {index_array.dtype}"
            )
        if not np.all(np.isfinite(priority_array)):
            bad = int(np.count_nonzero(~np.isfinite(priority_array)))
            raise InvalidPriorities(
                "not finite", f"priorities must be finite, got {bad} NaN/inf values"
            )
        if priority_array.min() < 0.0:
            raise InvalidPriorities(
                "negative", f"priorities must be >= 0, got min {priority_array.min()}"
            )
        if self.value_bound is not None:
            priority_array = np.minimum(priority_array, self.value_bound)
        shifted = priority_array + self._epsilon
        if shifted.min() <= 0.0:
            raise InvalidPriorities(
                "zero",
                f"priorities must be > 0 after adding epsilon ({self._epsilon}); got 0",
            )
        index_array = index_array.astype(np.int64, copy=False)
        if drawn_at is not None:
            # Stale slots may lie beyond the stored items (the buffer was reloaded since),
            # but never outside the ring.
            _check_slots(index_array, self._capacity, "slots")
            current = ~self._written_since(index_array, drawn_at)
            index_array, shifted = index_array[current], shifted[current]
            if index_array.size == 0:
                return 0
        _check_slots(index_array, self._size, "stored items")
        self._max_priority = max(self._max_priority, float(shifted.max()))
        self._tree.update(index_array, shifted**self._alpha)
        return int(index_array.size)

    def _written_since(self, slots: npt.NDArray[np.int64], drawn_at: int) -> npt.NDArray[np.bool_]:
        """Which ``slots`` were written after ``total_inserted`` was ``drawn_at``.

        The ring writes slot after slot, so the last ``total_inserted - drawn_at``
        writes are the slots just before ``_position``. A ``drawn_at`` beyond
        ``total_inserted`` (a respawned buffer restored fewer inserts) marks every slot.
        """
        written = self._total_inserted - int(drawn_at)
        if written < 0 or written >= self._capacity:
            return np.ones(slots.shape, dtype=bool)
        return (self._position - 1 - slots) % self._capacity < written

    # ------------------------------------------------------------------ persistence

    def state_dict(self) -> dict[str, np.ndarray]:
        """Return the full state as plain numpy arrays (no pickled objects).

        Only the ``len(self)`` stored rows are included. The RNG state travels as a
        JSON string so a restored buffer draws the same samples.

        :returns: Mapping of names to arrays, suitable for ``np.savez``.
        """
        size = self._size
        priorities = (
            self._tree.priorities[:size].copy()
            if self._tree is not None
            else np.empty(0, dtype=np.float64)
        )
        return {
            "format_version": np.array(_STATE_FORMAT_VERSION, dtype=np.int64),
            "capacity": np.array(self._capacity, dtype=np.int64),
            "obs_shape": np.array(self._obs_shape, dtype=np.int64),
            "action_shape": np.array(self._action_shape, dtype=np.int64),
            "prioritized": np.array(self._prioritized),
            "alpha": np.array(self._alpha),
            "beta": np.array(self._beta),
            "epsilon": np.array(self._epsilon),
            "position": np.array(self._position, dtype=np.int64),
            "size": np.array(size, dtype=np.int64),
            "total_inserted": np.array(self._total_inserted, dtype=np.int64),
            "max_priority": np.array(self._max_priority),
            "priorities": priorities,
            "rng_state": np.array(json.dumps(self._rng.bit_generator.state)),
            **({"obs_dtype": np.array(self._obs_dtype.str)} if self._images else {}),
            **{name: self._column(self._storage[:size], name, slice(0, size))
               for name in _DATA_FIELDS},
        }

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore a state produced by ``state_dict``.

        Capacity, shapes, observation dtype and the prioritised flag must match this buffer;
        ``alpha``, ``beta`` and ``epsilon`` are taken from the state so sampling
        continues exactly as before. Validation is complete before any change.

        :param state: Mapping as returned by ``state_dict`` (or read from ``save``).
        :raises ValueError: If keys are missing or any value is incompatible or
            inconsistent, naming the offending entry.
        """
        if "total_inserted" not in state and "total_added" in state:  # files of release 0.1
            state = {**state, "total_inserted": state["total_added"]}
        self._check_state_layout(state)
        alpha, beta, epsilon = self._state_sampling(state)
        size, position, total_inserted = self._state_counters(state)
        block = self._state_rows(state, size)
        priorities, max_priority = self._state_priorities(state, size)
        rng = _state_rng(state)

        # ---- all checks passed: commit.
        self._alpha, self._beta, self._epsilon = alpha, beta, epsilon
        self._storage[:size] = block
        self._storage[size:] = 0.0
        for name, frames in self._images.items():
            frames[:size] = state[name]
            frames[size:] = 0
        self._size, self._position, self._total_inserted = size, position, total_inserted
        self._max_priority = max_priority
        if self._tree is not None:
            self._tree.load_priorities(priorities, max_priority**alpha)
        self._rng = rng

    def _check_state_layout(self, state: Mapping[str, np.ndarray]) -> None:
        """Keys, format version, capacity, shapes, observation dtype and the prioritised flag."""
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise ValueError(f"state is missing key(s): {', '.join(missing)}")
        version = _scalar(state, "format_version", int)
        if version != _STATE_FORMAT_VERSION:
            raise ValueError(
                f"unsupported format_version {version}, expected {_STATE_FORMAT_VERSION}"
            )
        capacity = _scalar(state, "capacity", int)
        if capacity != self._capacity:
            raise ValueError(
                f"incompatible capacity: saved {capacity}, this buffer has {self._capacity}"
            )
        for key, own in (("obs_shape", self._obs_shape), ("action_shape", self._action_shape)):
            saved = _shape(state, key)
            if saved != own:
                raise ValueError(f"incompatible {key}: saved {saved}, this buffer has {own}")
        # States written before image support carry no obs_dtype: they hold float32.
        saved_dtype = str(np.asarray(state.get("obs_dtype", np.dtype(np.float32).str)))
        if np.dtype(saved_dtype) != self._obs_dtype:
            raise ValueError(f"incompatible obs_dtype: saved {np.dtype(saved_dtype)}, "
                             f"this buffer has {self._obs_dtype}")
        prioritized = _scalar(state, "prioritized", bool)
        if prioritized != self._prioritized:
            raise ValueError(
                f"incompatible prioritized flag: saved {prioritized}, "
                f"this buffer has {self._prioritized}"
            )

    @staticmethod
    def _state_sampling(state: Mapping[str, np.ndarray]) -> tuple[float, float, float]:
        """``(alpha, beta, epsilon)`` of a state, checked."""
        alpha = _scalar(state, "alpha", float)
        epsilon = _scalar(state, "epsilon", float)
        if not np.isfinite(alpha) or alpha < 0.0:
            raise ValueError(f"invalid alpha in state: {alpha}")
        if not np.isfinite(epsilon) or epsilon < 0.0:
            raise ValueError(f"invalid epsilon in state: {epsilon}")
        beta = _check_unit_interval(_scalar(state, "beta", float), "beta in state")
        return alpha, beta, epsilon

    def _state_counters(self, state: Mapping[str, np.ndarray]) -> tuple[int, int, int]:
        """``(size, position, total_inserted)`` of a state, checked against each other."""
        size = _scalar(state, "size", int)
        position = _scalar(state, "position", int)
        total_inserted = _scalar(state, "total_inserted", int)
        if not 0 <= size <= self._capacity:
            raise ValueError(f"size {size} in state is outside [0, {self._capacity}]")
        # Until the ring first wraps, writes fill slots 0 .. size - 1 in order.
        if not 0 <= position < self._capacity or (size < self._capacity and position != size):
            raise ValueError(f"position {position} in state is inconsistent with size {size}")
        if total_inserted < size:
            raise ValueError(f"total_inserted {total_inserted} in state is below size {size}")
        return size, position, total_inserted

    def _state_rows(self, state: Mapping[str, np.ndarray], size: int) -> np.ndarray:
        """The stored rows of a state as one float32 block (frames are checked, not copied)."""
        block = np.empty((size, self._row_width), dtype=np.float32)
        for name, field in self._fields.items():
            item_shape = field.item_shape
            array = np.asarray(state[name])
            if array.shape != (size, *item_shape):
                raise ValueError(
                    f"{name} in state has shape {array.shape}, expected "
                    f"{(size, *item_shape)}"
                )
            if array.dtype.kind not in "biuf":
                raise ValueError(f"{name} in state has non-numeric dtype {array.dtype}")
            array = array.astype(np.float32)
            if not np.all(np.isfinite(array)):
                raise ValueError(f"{name} in state contains non-finite values")
            block[:, field.start : field.stop] = array.reshape(size, field.stop - field.start)
        for name in self._images:
            array = np.asarray(state[name])
            if array.shape != (size, *self._obs_shape) or array.dtype != np.uint8:
                raise ValueError(f"{name} in state is {array.dtype} {array.shape}, expected "
                                 f"uint8 {(size, *self._obs_shape)}")
        flags = block[:, self._flags_start :]
        if np.any((flags != 0.0) & (flags != 1.0)):
            raise ValueError("terminated/truncated in state must be 0 or 1")
        return block

    def _state_priorities(self, state: Mapping[str, np.ndarray], size: int
                          ) -> tuple[np.ndarray, float]:
        """The priorities and the largest priority of a state, checked."""
        priorities = np.asarray(state["priorities"])
        max_priority = _scalar(state, "max_priority", float)
        if self._prioritized:
            if priorities.shape != (size,) or priorities.dtype.kind not in "iuf":
                raise ValueError(
                    f"priorities in state have shape {priorities.shape}, expected ({size},)"
                )
            if not np.all(np.isfinite(priorities)) or np.any(priorities <= 0.0):
                raise ValueError("priorities in state must be finite and > 0")
        if not np.isfinite(max_priority) or max_priority <= 0.0:
            raise ValueError(f"max_priority in state must be finite and > 0, got {max_priority}")
        return priorities, max_priority

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the state to an ``.npz`` file atomically.

        The data goes to a temporary file in the same directory, is flushed to
        disk, then renamed over ``path``; a crash mid-write never leaves a
        truncated file at ``path``. The name is used as given (no ``.npz`` is
        appended).

        The file is created owner-read/write only (``mkstemp`` mode 0600).

        :param path: Destination file; its directory must exist.
        :raises FileNotFoundError: If the destination directory does not exist.
        """
        self.write_state(self.state_dict(), path)

    @staticmethod
    def write_state(state: Mapping[str, np.ndarray], path: str | os.PathLike[str]) -> None:
        """Write a ``state_dict()`` to ``path`` atomically (what :meth:`save` does; lets a caller
        copy the state under a lock and write it elsewhere)."""
        destination = Path(path)
        directory = destination.parent
        if not directory.is_dir():
            raise FileNotFoundError(
                f"directory for replay buffer file does not exist: {directory}"
            )

        def save_arrays(handle: Any) -> None:
            np.savez(handle, **state)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle

        write_atomically(destination, save_arrays)

    def load(self, path: str | os.PathLike[str]) -> None:
        """Restore state from a file written by ``save``.

        :param path: File to read.
        :raises FileNotFoundError: If ``path`` does not exist.
        :raises ValueError: If the file is corrupt or incompatible with this buffer,
            naming the path and the problem.
        """
        state = _read_state_file(path)
        try:
            self.load_state_dict(state)
        except ValueError as exc:
            raise ValueError(f"incompatible replay buffer file {path}: {exc}") from exc

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], max_capacity: int | None = None
                  ) -> ReplayBuffer:
        """Build a buffer with the configuration stored in ``path`` and restore it.

        :param path: File written by ``save``.
        :param max_capacity: Refuse files whose capacity exceeds this, before allocating.
        :returns: A buffer that continues exactly where the saved one stopped.
        :raises FileNotFoundError: If ``path`` does not exist.
        :raises ValueError: If the file is corrupt or inconsistent.
        """
        return cls.from_state(_read_state_file(path), f"replay buffer file {path}", max_capacity)

    @classmethod
    def from_state(cls, state: Mapping[str, np.ndarray], source: str,
                   max_capacity: int | None = None) -> ReplayBuffer:
        """Build a buffer with the configuration in ``state`` (a ``state_dict()``) and restore
        it; ``source`` names it in errors (ValueError, as :meth:`from_file`)."""
        if max_capacity is not None and _scalar(state, "capacity", int) > max_capacity:
            raise ValueError(f"{source} has capacity "
                             f"{_scalar(state, 'capacity', int)}, more than the allowed "
                             f"{max_capacity}")
        try:
            buffer = cls(
                obs_shape=_shape(state, "obs_shape"),
                action_shape=_shape(state, "action_shape"),
                capacity=_scalar(state, "capacity", int),
                prioritized=_scalar(state, "prioritized", bool),
                alpha=_scalar(state, "alpha", float),
                beta=_scalar(state, "beta", float),
                epsilon=_scalar(state, "epsilon", float),
                obs_dtype=str(np.asarray(state.get("obs_dtype", np.dtype(np.float32).str))),
            )
            buffer.load_state_dict(state)
        except KeyError as exc:
            raise ValueError(f"invalid {source}: missing key {exc}") from exc
        except (ValueError, TypeError) as exc:
            raise ValueError(f"invalid {source}: {exc}") from exc
        return buffer


def _check_slots(indices: npt.NDArray[np.int64], limit: int, what: str) -> None:
    """Raise ``InvalidPriorities`` unless every index lies in ``[0, limit)``."""
    if indices.min() < 0 or indices.max() >= limit:
        raise InvalidPriorities(
            "index out of range",
            f"indices must lie in [0, {limit}) ({what}), got "
            f"[{indices.min()}, {indices.max()}]",
        )


def _format_shape(shape: tuple[object, ...]) -> str:
    return "(" + ", ".join(str(dim) for dim in shape) + ("," if len(shape) == 1 else "") + ")"


def _state_rng(state: Mapping[str, np.ndarray]) -> np.random.Generator:
    """The sampling generator of a state."""
    rng = np.random.default_rng()
    try:
        rng_state = json.loads(str(np.asarray(state["rng_state"]).item()))
        if rng_state.get("bit_generator") != type(rng.bit_generator).__name__:
            raise ValueError(f"unexpected bit generator {rng_state.get('bit_generator')!r}")
        rng.bit_generator.state = rng_state
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"rng_state in state is invalid: {exc}") from exc
    return rng


def _scalar(state: Mapping[str, np.ndarray], key: str, kind: Callable[[Any], _T]) -> _T:
    """Read a 0-d entry of ``state`` as ``kind`` with a clear error."""
    array = np.asarray(state[key])
    if array.size != 1 or array.dtype.kind not in "biuf":
        raise ValueError(
            f"{key} in state must be a numeric scalar, got {array.dtype} {array.shape}"
        )
    return kind(array.reshape(-1)[0])


def _shape(state: Mapping[str, np.ndarray], key: str) -> tuple[int, ...]:
    """Read a 1-D integer entry of ``state`` as a shape tuple."""
    array = np.asarray(state[key])
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise ValueError(
            f"{key} in state must be a 1-D int array, got {array.dtype} {array.shape}"
        )
    return tuple(int(v) for v in array)


def _read_state_file(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load every array of an ``.npz`` file, turning corruption into ValueError."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"replay buffer file not found: {path}")
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ValueError("not an .npz archive")
        with archive:
            return {key: archive[key] for key in archive.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise ValueError(f"cannot read replay buffer file {path}: {exc}") from exc
