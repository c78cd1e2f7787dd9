"""Which experience batches a replay buffer stores: robots of the deployment, their newest run,
each batch once; gaps in a robot's sequence are counted as lost messages."""

from __future__ import annotations

from typing import NamedTuple


class Refusal(NamedTuple):
    """Why a batch is not stored: a kind (counted apart on /diagnostics) and the reason."""

    kind: str
    reason: str


class ExperienceAdmission:
    """Each robot's stream (one run of its simulator; a respawn starts a newer one) and the
    last sequence number stored from it.

    :param robots: robots of the deployment (ids ``0..robots-1``; 0: any id).
    """

    def __init__(self, robots: int = 0) -> None:
        self.robots = robots
        self._streams: dict[int, tuple[int, int]] = {}  # robot -> (stream, last sequence)
        #: Experience messages missing from the robots' sequences (lost on the way).
        self.lost_messages = 0

    def refusal(self, robot_id: int, stream: int, sequence: int) -> Refusal | None:
        """Why a batch must not be stored, or None to store it (then call :meth:`stored`)."""
        if self.robots and robot_id >= self.robots:
            return Refusal("experience (foreign robot)", f"robot id {robot_id} is not one of "
                           f"this deployment's robots 0..{self.robots - 1}")
        current, _ = self._streams.get(robot_id, (0, -1))
        if stream < current:
            return Refusal("experience (stale stream)", f"robot {robot_id}: stream {stream} is "
                           f"older than its current stream {current} (an earlier run of the "
                           "simulator)")
        last = self._last_sequence(robot_id, stream)
        if sequence <= last:
            return Refusal("experience (duplicate)", f"robot {robot_id}: sequence {sequence} "
                           f"was already stored (last {last})")
        return None

    def stored(self, robot_id: int, stream: int, sequence: int) -> None:
        """A batch was stored: advance its robot's sequence and count the gap as lost."""
        self.lost_messages += sequence - self._last_sequence(robot_id, stream) - 1
        self._streams[robot_id] = (stream, sequence)

    def _last_sequence(self, robot_id: int, stream: int) -> int:
        """The last stored sequence of the stream (-1: a new, (re)started stream)."""
        current, last = self._streams.get(robot_id, (0, -1))
        return last if stream == current else -1
