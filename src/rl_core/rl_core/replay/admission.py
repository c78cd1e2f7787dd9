"""Which experience batches a replay buffer stores: robots of the deployment, each batch of each
stream once; gaps inside a stream are counted as lost messages.

A stream is one run of a robot's simulator (a respawn starts another). Streams are tracked apart,
so nothing one stream carries changes what another may store (issue 19), and their order does
not matter, so a simulator respawned on a host whose clock is behind is stored like any other.

Inside a stream no single message can lock the robot out either (issue 41, item 4): a batch is a
duplicate only when its own sequence was stored (each stream remembers at most
:data:`RUNS_PER_STREAM` runs of stored sequences, the shortest forgotten first); a sequence more
than :data:`MAX_SEQUENCE_JUMP` past the highest stored is refused until
:data:`JUMP_CONFIRMATIONS` consecutive ones confirm it; and new streams live in a pool of
:data:`NEW_STREAMS` of their own until they stored :data:`PROVEN_BATCHES` batches, so a flood of
them cannot push out real robots' state. Snapshots and the insert log restore by the same rules.
The rules in full: docs/replay.md, "What is stored, saved and loaded".
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from typing import NamedTuple

#: The largest sequence number the wire carries (``uint64``).
MAX_SEQUENCE = 2**64 - 1
#: The furthest one batch may move a stream past its highest stored sequence. A robot's
#: sequence counts its messages (one per step); 65,536 covers a buffer down or a link cut for
#: over a minute at 1,000 messages per second, so a genuine stream meets it only after a long
#: outage (then :data:`JUMP_CONFIRMATIONS`), and one forged message moves nothing further.
MAX_SEQUENCE_JUMP = 1 << 16
#: Consecutive sequences past :data:`MAX_SEQUENCE_JUMP` that are taken as a genuine jump (the
#: first ``JUMP_CONFIRMATIONS - 1`` of them are refused).
JUMP_CONFIRMATIONS = 4
#: Runs of stored sequences remembered per stream: a genuine stream has one more per loss.
RUNS_PER_STREAM = 16
#: Batches a stream has stored before it counts as a robot's (a simulator at 50 Hz: 0.6 s).
PROVEN_BATCHES = 32
#: Proven streams remembered per deployment robot (at least :data:`MIN_STREAMS` in all), and
#: new streams remembered; the least recently stored is forgotten first in each pool.
STREAMS_PER_ROBOT = 4
MIN_STREAMS = 1024
NEW_STREAMS = 256


class Refusal(NamedTuple):
    """Why a batch is not stored: a kind (counted apart on /diagnostics) and the reason."""

    kind: str
    reason: str


def _first(run: list[int]) -> int:
    return run[0]


class StreamState:
    """What one stream stored: its highest sequence, the runs of stored sequences (sorted,
    disjoint, at most :data:`RUNS_PER_STREAM`) and how many batches.

    :param frontier: the highest sequence stored.
    :param runs: ``[first, last]`` runs of stored sequences, sorted.
    :param batches: batches stored.
    """

    __slots__ = ("frontier", "runs", "batches", "pending")

    def __init__(self, frontier: int, runs: list[list[int]], batches: int) -> None:
        self.frontier = frontier
        self.runs = runs
        self.batches = batches
        #: Consecutive sequences refused as a jump so far, ``(first, last)``.
        self.pending: tuple[int, int] | None = None

    def _run_at_or_below(self, sequence: int) -> int:
        return bisect_right(self.runs, sequence, key=_first) - 1

    def holds(self, sequence: int) -> bool:
        """Whether ``sequence`` was stored (as far as the remembered runs tell)."""
        if not self.runs or sequence > self.runs[-1][1]:  # the usual case: the next one
            return False
        index = self._run_at_or_below(sequence)
        return index >= 0 and self.runs[index][1] >= sequence

    def in_gap(self, sequence: int) -> bool:
        """Whether ``sequence`` lies between stored runs (a gap counted as lost)."""
        return bool(self.runs) and self.runs[0][0] < sequence < self.frontier \
            and not self.holds(sequence)

    def confirms_jump(self, sequence: int) -> bool:
        """Note a sequence beyond the jump bound; whether it completes
        :data:`JUMP_CONFIRMATIONS` consecutive ones."""
        first = self.pending[0] if self.pending and sequence == self.pending[1] + 1 else sequence
        self.pending = (first, sequence)
        if sequence - first + 1 < JUMP_CONFIRMATIONS:
            return False
        self.pending = None
        return True

    def add(self, sequence: int) -> None:
        """Remember ``sequence`` as stored; beyond :data:`RUNS_PER_STREAM` runs the shortest
        (the highest of equals) is forgotten."""
        runs = self.runs
        if runs and runs[-1][1] == sequence - 1:  # the usual case: the next one
            runs[-1][1] = sequence
            return
        index = self._run_at_or_below(sequence)
        if index >= 0 and runs[index][1] >= sequence:
            return
        joins_below = index >= 0 and runs[index][1] == sequence - 1
        joins_above = index + 1 < len(runs) and runs[index + 1][0] == sequence + 1
        if joins_below and joins_above:
            runs[index][1] = runs.pop(index + 1)[1]
        elif joins_below:
            runs[index][1] = sequence
        elif joins_above:
            runs[index + 1][0] = sequence
        else:
            runs.insert(index + 1, [sequence, sequence])
        if len(runs) > RUNS_PER_STREAM:
            del runs[min(range(len(runs)), key=lambda k: (runs[k][1] - runs[k][0], -k))]


class ExperienceAdmission:
    """The sequences stored from each robot's recent streams.

    :param robots: robots of the deployment (ids ``0..robots-1``; 0: any id).
    """

    def __init__(self, robots: int = 0) -> None:
        self.resize(robots)
        #: (robot, stream) -> state: streams that stored :data:`PROVEN_BATCHES` batches, and
        #: newer ones; least recently stored first in each.
        self._proven: OrderedDict[tuple[int, int], StreamState] = OrderedDict()
        self._new: OrderedDict[tuple[int, int], StreamState] = OrderedDict()
        #: Experience messages missing from the streams' sequences (lost on the way): gaps
        #: below each stream's highest stored sequence, less the batches that filled them late.
        self.lost_messages = 0
        #: Jumps past :data:`MAX_SEQUENCE_JUMP` adopted after :data:`JUMP_CONFIRMATIONS`.
        self.jumps_adopted = 0

    def resize(self, robots: int) -> None:
        """Follow a changed robot count (a robot loaded into a running container); what was
        stored per stream stays."""
        self.robots = robots
        self.max_streams = max(MIN_STREAMS, STREAMS_PER_ROBOT * robots)

    @property
    def streams(self) -> tuple[int, int]:
        """Streams remembered: proven, and new."""
        return len(self._proven), len(self._new)

    def _state(self, key: tuple[int, int]) -> StreamState | None:
        return self._proven.get(key) or self._new.get(key)

    def refusal(self, robot_id: int, stream: int, sequence: int) -> Refusal | None:
        """Why a batch must not be stored, or None to store it (then call :meth:`stored`).
        A refused jump is noted towards :data:`JUMP_CONFIRMATIONS`."""
        if self.robots and robot_id >= self.robots:
            return Refusal("experience (foreign robot)", f"robot id {robot_id} is not one of "
                           f"this deployment's robots 0..{self.robots - 1}")
        state = self._state((robot_id, stream))
        if state is None:
            return None
        if state.holds(sequence):
            return Refusal("experience (duplicate)", f"robot {robot_id}: sequence {sequence} "
                           f"of stream {stream} was already stored")
        if sequence - state.frontier > MAX_SEQUENCE_JUMP and not state.confirms_jump(sequence):
            return Refusal("experience (sequence jump)", f"robot {robot_id}: sequence "
                           f"{sequence} of stream {stream} is {sequence - state.frontier} past "
                           f"the highest stored ({state.frontier}), more than "
                           f"{MAX_SEQUENCE_JUMP}")
        return None

    def stored(self, robot_id: int, stream: int, sequence: int) -> None:
        """A batch was stored (or restored from the insert log): remember its sequence and
        count a gap before it as lost."""
        key = (robot_id, stream)
        state = self._state(key)
        if state is None:
            state = self._new[key] = StreamState(sequence, [], 0)
        elif sequence - state.frontier > MAX_SEQUENCE_JUMP:
            self.jumps_adopted += 1  # the gap cannot be told from a forgery: not counted
            state.frontier = sequence
        elif sequence > state.frontier:
            self.lost_messages += sequence - state.frontier - 1
            state.frontier = sequence
        elif state.in_gap(sequence):
            self.lost_messages = max(0, self.lost_messages - 1)  # it came late
        state.add(sequence)
        state.batches += 1
        self._keep(key, state)

    def _keep(self, key: tuple[int, int], state: StreamState) -> None:
        """``state`` was stored to last: promote it once proven, forget the least recent."""
        if key in self._new and state.batches >= PROVEN_BATCHES:
            del self._new[key]
            self._proven[key] = state
        pool, limit = (self._proven, self.max_streams) if key in self._proven \
            else (self._new, NEW_STREAMS)
        pool.move_to_end(key)
        while len(pool) > limit:
            pool.popitem(last=False)

    def state_dict(self) -> dict[str, object]:
        """What a snapshot keeps: each stream's ``[robot, stream, highest sequence, batches,
        runs]`` (new streams, then proven ones, least recent first) and the counts."""
        return {"streams": [[robot, stream, state.frontier, state.batches,
                             [list(run) for run in state.runs]]
                            for pool in (self._new, self._proven)
                            for (robot, stream), state in pool.items()],
                "lost_messages": self.lost_messages, "jumps_adopted": self.jumps_adopted}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Continue from :meth:`state_dict` (ValueError when it is not one). A stream saved
        before issue 41 (``[robot, stream, last sequence]``) comes back as that one sequence
        stored by a new stream: nothing below it is refused."""
        try:
            streams = [_stream_entry(entry) for entry in state["streams"]]  # type: ignore[attr-defined]
            lost = int(state["lost_messages"])  # type: ignore[call-overload]
            jumps = int(state.get("jumps_adopted", 0))  # type: ignore[call-overload]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"admission state is malformed: {error}") from None
        self._proven.clear()
        self._new.clear()
        for key, stream in streams:
            (self._proven if stream.batches >= PROVEN_BATCHES else self._new)[key] = stream
            self._keep(key, stream)
        self.lost_messages, self.jumps_adopted = max(0, lost), max(0, jumps)


def _stream_entry(entry: list[object]) -> tuple[tuple[int, int], StreamState]:
    """One stream of a saved state, checked (ValueError, TypeError when it is not one)."""
    if len(entry) == 3:  # before issue 41: the last stored sequence alone
        robot, stream, last = (int(value) for value in entry)  # type: ignore[call-overload]
        frontier, batches, runs = last, 1, [[last, last]]
    else:
        robot, stream, frontier, batches = (int(value) for value in entry[:4])  # type: ignore[call-overload]
        runs = [[int(first), int(last)] for first, last in entry[4]]  # type: ignore[attr-defined]
    bounds = [value for run in runs for value in run]
    if len(entry) not in (3, 5) or not 0 <= frontier <= MAX_SEQUENCE or batches < 0 \
            or len(runs) > RUNS_PER_STREAM or bounds != sorted(bounds) \
            or any(not 0 <= value <= MAX_SEQUENCE for value in bounds):
        raise ValueError(f"stream entry {entry!r} is not [robot, stream, highest sequence, "
                         "batches, sorted runs]")
    return (robot, stream), StreamState(frontier, runs, batches)
