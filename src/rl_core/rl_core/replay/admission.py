"""Which experience batches a replay buffer stores: robots of the deployment, each batch of each
stream once; gaps inside a stream are counted as lost messages.

A stream is one run of a robot's simulator (a respawn starts another). Streams are tracked apart,
so nothing one stream carries changes what another may store: a forged batch with a huge stream
or sequence number is one batch of its own stream, never a reason to refuse the robot's genuine
one (issue 19). The order of streams does not matter either, so a simulator respawned on a host
whose clock is behind is stored like any other.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

#: Streams remembered per deployment robot (at least :data:`MIN_STREAMS` in all); the least
#: recently stored is forgotten first. A forgotten stream that sends again starts afresh: its
#: next batch is stored (duplicates of it would be too), and no gap is counted.
STREAMS_PER_ROBOT = 4
MIN_STREAMS = 1024


class Refusal(NamedTuple):
    """Why a batch is not stored: a kind (counted apart on /diagnostics) and the reason."""

    kind: str
    reason: str


class ExperienceAdmission:
    """The last sequence number stored from each robot's recent streams.

    :param robots: robots of the deployment (ids ``0..robots-1``; 0: any id).
    """

    def __init__(self, robots: int = 0) -> None:
        self.resize(robots)
        #: (robot, stream) -> last stored sequence, least recently stored first.
        self._last: OrderedDict[tuple[int, int], int] = OrderedDict()
        #: Experience messages missing from the robots' sequences (lost on the way).
        self.lost_messages = 0

    def resize(self, robots: int) -> None:
        """Follow a changed robot count (a robot loaded into a running container); what was
        stored per stream stays."""
        self.robots = robots
        self.max_streams = max(MIN_STREAMS, STREAMS_PER_ROBOT * robots)

    def refusal(self, robot_id: int, stream: int, sequence: int) -> Refusal | None:
        """Why a batch must not be stored, or None to store it (then call :meth:`stored`)."""
        if self.robots and robot_id >= self.robots:
            return Refusal("experience (foreign robot)", f"robot id {robot_id} is not one of "
                           f"this deployment's robots 0..{self.robots - 1}")
        last = self._last.get((robot_id, stream))
        if last is not None and sequence <= last:
            return Refusal("experience (duplicate)", f"robot {robot_id}: sequence {sequence} "
                           f"of stream {stream} was already stored (last {last})")
        return None

    def stored(self, robot_id: int, stream: int, sequence: int) -> None:
        """A batch was stored: advance its stream and count a gap inside it as lost."""
        key = (robot_id, stream)
        last = self._last.pop(key, None)
        if last is not None:
            self.lost_messages += sequence - last - 1
        self._last[key] = sequence
        while len(self._last) > self.max_streams:
            self._last.popitem(last=False)

    def state_dict(self) -> dict[str, object]:
        """What a snapshot keeps: each stream's last sequence (oldest first) and the gap count."""
        return {"streams": [[robot, stream, sequence]
                            for (robot, stream), sequence in self._last.items()],
                "lost_messages": self.lost_messages}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Continue from :meth:`state_dict` (ValueError when it is not one)."""
        try:
            streams = [(int(robot), int(stream), int(sequence))
                       for robot, stream, sequence in state["streams"]]  # type: ignore[attr-defined]
            lost = int(state["lost_messages"])  # type: ignore[call-overload]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"admission state is malformed: {error}") from None
        self._last = OrderedDict(((robot, stream), sequence)
                                 for robot, stream, sequence in streams[-self.max_streams:])
        self.lost_messages = lost
