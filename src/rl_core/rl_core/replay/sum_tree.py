"""Array-backed sum-tree for proportional prioritised sampling.

The tree is ``branching``-ary rather than binary: with the default of 16 a tree
over one million leaves is 5 levels deep instead of 20. Every batched operation
costs a handful of numpy calls *per level*, so fewer, wider levels make
``find`` and ``update`` several times faster from Python, while each step still
reads ``branching`` contiguous child sums (two cache lines at 16 x float64).

Layout: ``self._levels[0]`` holds the leaves, ``self._levels[-1][0]`` the root.
Node ``j`` of level ``l + 1`` owns nodes ``j * k .. j * k + k - 1`` of level
``l``. Each level array is padded with zeros to a multiple of ``k`` so its
children can be viewed as a ``(parents, k)`` matrix; zero leaves (padding, or
slots never written) are never returned by ``find``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["SumTree"]


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


class SumTree:
    """Sum-tree over ``capacity`` non-negative leaf values.

    Internal sums are always recomputed from their children (never adjusted by
    deltas), so floating-point error does not accumulate over millions of
    updates. Values are stored as float64.

    :param capacity: Number of leaves. Must be a positive integer.
    :param branching: Children per internal node (>= 2). The default suits
        batches of tens to hundreds of indices; 2 gives a classic binary tree.
    :raises ValueError: If ``capacity`` or ``branching`` is invalid.
    """

    def __init__(self, capacity: int, *, branching: int = 16) -> None:
        if not _is_int(capacity):
            raise ValueError(f"capacity must be an int, got {type(capacity).__name__}")
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0, got {capacity}")
        if not _is_int(branching) or branching < 2:
            raise ValueError(f"branching must be an int >= 2, got {branching!r}")
        self._capacity = int(capacity)
        self._branching = int(branching)
        # Real node counts per level, bottom-up; at least one level above the leaves.
        counts = [self._capacity]
        while True:
            counts.append(-(-counts[-1] // self._branching))
            if counts[-1] == 1:
                break
        self._counts = counts
        self._levels = [
            np.zeros(-(-count // self._branching) * self._branching, dtype=np.float64)
            for count in counts
        ]
        # Row b of ``children @ _edges`` is [0, c0, c0+c1, ..., total]: the mass left
        # of each child plus the total, computed by one BLAS call for a whole batch.
        # numpy's cumsum/count along a short axis is several times slower here.
        # The products are exact (x * 1 or x * 0) and every column adds the same
        # terms in the same order, so the edges are non-decreasing like a cumsum.
        self._edges = np.triu(np.ones((self._branching, self._branching + 1)), 1)
        self._ones = np.ones(self._branching)
        self._max_priority = 0.0

    @property
    def capacity(self) -> int:
        """Number of usable leaves."""
        return self._capacity

    @property
    def depth(self) -> int:
        """Number of levels above the leaves."""
        return len(self._levels) - 1

    @property
    def total(self) -> float:
        """Sum of all leaf values."""
        return float(self._levels[-1][0])

    @property
    def max_priority(self) -> float:
        """Largest leaf value ever written (running maximum; never decreases).

        Prioritised replay gives new transitions the largest priority seen so
        far, which is what this tracks; it is not lowered when that leaf is later
        overwritten with a smaller value.
        """
        return self._max_priority

    @property
    def priorities(self) -> npt.NDArray[np.float64]:
        """Read-only view of the ``capacity`` leaf values."""
        view = self._levels[0][: self._capacity]
        view.flags.writeable = False
        return view

    def get(self, indices: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Return the leaf values at ``indices``.

        :param indices: Leaf indices in ``[0, capacity)``.
        :returns: Leaf values, same shape as ``indices``.
        """
        return self._levels[0][self._check_indices(indices)]

    def update(self, indices: npt.ArrayLike, priorities: npt.ArrayLike) -> None:
        """Set leaf values and refresh every ancestor sum.

        :param indices: Leaf indices in ``[0, capacity)``. With duplicates the last
            occurrence wins.
        :param priorities: Non-negative finite values, one per index (a scalar is
            broadcast).
        :raises ValueError: On out-of-range indices or negative/non-finite values,
            before anything is changed.
        """
        index_array = self._check_indices(indices)
        value_array = np.asarray(priorities, dtype=np.float64)
        if value_array.ndim and value_array.shape != index_array.shape:
            raise ValueError(
                f"priorities shape {value_array.shape} does not match indices shape "
                f"{index_array.shape}"
            )
        index_array = index_array.reshape(-1)
        value_array = np.broadcast_to(value_array, index_array.shape)
        self._check_values(value_array)
        if index_array.size == 0:
            return
        self._levels[0][index_array] = value_array
        self._max_priority = max(self._max_priority, float(value_array.max()))
        # Walk up with the sorted, de-duplicated set of touched nodes; integer
        # division keeps it sorted, so duplicates are adjacent and one compare drops them.
        nodes = np.sort(index_array)
        branching = self._branching
        for child_level, parent_level in zip(self._levels[:-1], self._levels[1:]):
            nodes //= branching
            if nodes.size > 1:
                distinct = np.empty(nodes.size, dtype=bool)
                distinct[0] = True
                np.not_equal(nodes[1:], nodes[:-1], out=distinct[1:])
                nodes = nodes[distinct]
            parent_level[nodes] = child_level.reshape(-1, branching)[nodes] @ self._ones

    def set_range(self, start: int, stop: int, priority: float) -> None:
        """Set leaves ``start .. stop - 1`` to one value using slices only.

        The common insert case (a contiguous run of new transitions) needs no
        fancy indexing: each level's touched parents form a contiguous range too.

        :param start: First leaf, ``0 <= start <= stop``.
        :param stop: One past the last leaf, ``<= capacity``.
        :param priority: Non-negative finite value for every leaf in the range.
        :raises ValueError: On a bad range or value, before anything is changed.
        """
        if not (_is_int(start) and _is_int(stop) and 0 <= start <= stop <= self._capacity):
            raise ValueError(f"range [{start}, {stop}) is not within [0, {self._capacity}]")
        self._check_values(np.asarray([priority], dtype=np.float64))
        if start == stop:
            return
        self._levels[0][start:stop] = priority
        self._max_priority = max(self._max_priority, float(priority))
        branching = self._branching
        low, high = int(start), int(stop)
        for child_level, parent_level in zip(self._levels[:-1], self._levels[1:]):
            low, high = low // branching, (high - 1) // branching + 1
            children = child_level[low * branching : high * branching]
            parent_level[low:high] = children.reshape(-1, branching) @ self._ones

    def find(self, prefix_sums: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Map prefix sums to leaf indices (inverse cumulative distribution).

        For each ``s`` returns the smallest leaf ``i`` with
        ``cumsum(leaves)[i] > s``. A zero-valued leaf is never returned: when
        rounding (or ``s == total``) pushes ``s`` past the last positive child,
        that child is taken instead.

        :param prefix_sums: Values in ``[0, total]``, any shape.
        :returns: ``int64`` leaf indices with the shape of ``prefix_sums``.
        :raises ValueError: If the tree is empty (total is 0) or a prefix sum is out
            of range or non-finite.
        """
        targets = np.asarray(prefix_sums, dtype=np.float64)
        total = self.total
        if total <= 0.0:
            raise ValueError("cannot search a sum-tree whose total is 0")
        if not np.all(np.isfinite(targets)):
            raise ValueError("prefix_sums must be finite")
        if targets.size and (targets.min() < 0.0 or targets.max() > total):
            raise ValueError(
                f"prefix_sums must lie in [0, {total}], got [{targets.min()}, {targets.max()}]"
            )
        leaves = self._descend(targets.reshape(-1), exact=False)
        stranded = self._levels[0][leaves] <= 0.0
        if stranded.any():
            # BLAS may sum the edge columns in different orders, so in rare
            # rounding cases the fast walk can end on an empty leaf; redo those
            # targets with sequential cumsums, which cannot.
            leaves[stranded] = self._descend(targets.reshape(-1)[stranded], exact=True)
        return leaves.reshape(targets.shape)

    def _descend(
        self, remaining: npt.NDArray[np.float64], *, exact: bool
    ) -> npt.NDArray[np.int64]:
        """Walk from the root to the leaves for every target at once."""
        rows = np.arange(remaining.size)
        branching = self._branching
        nodes = np.zeros(remaining.size, dtype=np.int64)
        for level in reversed(self._levels[:-1]):
            children = level.reshape(-1, branching)[nodes]  # (B, k), contiguous rows
            if exact:
                edges = np.zeros((remaining.size, branching + 1))
                np.cumsum(children, axis=1, out=edges[:, 1:])
            else:
                edges = children @ self._edges  # (B, k + 1)
            # edges[:, 0] == 0 <= s, so the first edge past s is at column >= 1.
            past = edges > remaining[:, None]
            choice = np.argmax(past, axis=1) - 1
            overflow = ~past[:, -1]
            if overflow.any():
                # s at or beyond this node's total (s == total, or rounding between
                # levels): take the last child with positive mass.
                positive = children[overflow, ::-1] > 0.0
                choice[overflow] = branching - 1 - np.argmax(positive, axis=1)
            remaining = np.maximum(remaining - edges[rows, choice], 0.0)
            nodes = nodes * branching + choice
        return nodes

    def load_priorities(self, priorities: npt.ArrayLike, max_priority: float) -> None:
        """Replace all leaves at once and rebuild the tree (used when restoring).

        :param priorities: Values for leaves ``0 .. len(priorities) - 1``; later
            leaves are set to zero. Length must not exceed ``capacity``.
        :param max_priority: Running maximum to restore.
        :raises ValueError: On a length above ``capacity`` or bad values.
        """
        value_array = np.asarray(priorities, dtype=np.float64)
        if value_array.ndim != 1 or value_array.shape[0] > self._capacity:
            raise ValueError(
                f"priorities must be 1-D with at most {self._capacity} entries, "
                f"got shape {value_array.shape}"
            )
        self._check_values(value_array)
        if not np.isfinite(max_priority) or max_priority < 0.0:
            raise ValueError(f"max_priority must be finite and >= 0, got {max_priority}")
        leaves = self._levels[0]
        leaves[:] = 0.0
        leaves[: value_array.shape[0]] = value_array
        for child_level, parent_level, count in zip(
            self._levels[:-1], self._levels[1:], self._counts[1:]
        ):
            parent_level[:count] = child_level.reshape(-1, self._branching) @ self._ones
        self._max_priority = float(max_priority)

    @staticmethod
    def _check_values(values: npt.NDArray[np.float64]) -> None:
        if not np.all(np.isfinite(values)):
            raise ValueError("priorities must be finite")
        if values.size and values.min() < 0.0:
            raise ValueError(f"priorities must be >= 0, got min {values.min()}")

    def _check_indices(self, indices: npt.ArrayLike) -> npt.NDArray[np.int64]:
        index_array = np.asarray(indices)
        if index_array.size and index_array.dtype.kind not in "iu":
            raise ValueError(f"indices must be integers, got dtype {index_array.dtype}")
        index_array = index_array.astype(np.int64, copy=False)
        if index_array.size and (index_array.min() < 0 or index_array.max() >= self._capacity):
            raise ValueError(
                f"indices must lie in [0, {self._capacity}), got "
                f"[{index_array.min()}, {index_array.max()}]"
            )
        return index_array
