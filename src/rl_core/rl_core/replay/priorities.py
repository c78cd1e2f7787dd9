"""TD-error priorities on their way from a learner back to a prioritised buffer.

In the bare loop the learner updates priorities right after each gradient step. A learner that
samples a buffer in another node cannot: it collects the priorities in a
:class:`PriorityFeedback` and its next sample request carries them (:class:`PriorityUpdate`), so
they cost no extra message. Meanwhile the buffer may have overwritten some of the sampled slots;
``drawn_at`` lets it skip those (:meth:`rl_core.replay.ReplayBuffer.update_priorities`).
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from rl_core.wire.messages import PriorityUpdate

__all__ = ["PriorityFeedback"]


class PriorityFeedback:
    """Collects a learner's priorities until the next sample request takes them; thread-safe.

    :param max_rows: most rows held; beyond it the oldest are dropped (counted in
        :attr:`dropped`) — a buffer that has been unreachable for long has overwritten many of
        those slots anyway.
    """

    def __init__(self, max_rows: int) -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        self.max_rows = max_rows
        self.dropped = 0
        self._chunks: list[PriorityUpdate] = []
        self._rows = 0
        self._lock = threading.Lock()

    def add(self, indices: npt.ArrayLike, priorities: npt.ArrayLike, drawn_at: int) -> None:
        """Hold the priorities of one sampled batch (``drawn_at``: the draw's ``total_inserted``)."""
        chunk = PriorityUpdate(np.asarray(indices, dtype=np.int64),
                               np.asarray(priorities, dtype=np.float32), int(drawn_at))
        if chunk.indices.shape != chunk.priorities.shape or chunk.indices.ndim != 1:
            raise ValueError(f"indices and priorities must be 1-D of equal length, got shapes "
                             f"{chunk.indices.shape} and {chunk.priorities.shape}")
        with self._lock:
            self._chunks.append(chunk)
            self._rows += len(chunk)
            while self._rows > self.max_rows:
                oldest = self._chunks.pop(0)
                self._rows -= len(oldest)
                self.dropped += len(oldest)

    def take(self) -> PriorityUpdate | None:
        """Everything held, as one update (None when nothing is held)."""
        with self._lock:
            chunks, self._chunks, self._rows = self._chunks, [], 0
        if not chunks:
            return None
        return PriorityUpdate(np.concatenate([chunk.indices for chunk in chunks]),
                              np.concatenate([chunk.priorities for chunk in chunks]),
                              min(chunk.drawn_at for chunk in chunks))
