"""Joining the two halves of an image batch that crossed DDS: the batch message and its image.

Over DDS a batch of image observations travels as two messages with the same stamp: the batch
without its frames, and one image of all of them on a side topic (rl_nodes.image_transport).
A receiver pairs them by ``(frame_id, stamp)``, in whichever order they arrive; this module
holds that pairing, bounded queues of halves waiting for their partner, and knows neither ROS
messages nor codecs.

A half whose partner was lost in transport is given up as soon as a later pair of the same camera
joins (each topic delivers in order, so the partner can no longer come) and counted
(:attr:`HalfJoin.lost`), not refused: the receiver already counts the lost message. A half whose
camera never joins again is given up, and refused, once :data:`JOIN_CAPACITY` newer ones of its
camera wait, or :data:`MAX_WAITING_HALVES` of all cameras.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

__all__ = [
    "JOIN_CAPACITY", "MAX_WAITING_HALVES", "AwaitsImage", "Frames", "HalfJoin", "camera_frame",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
H = TypeVar("H")

#: Halves of one camera a join keeps waiting for their other half before it gives up on the
#: oldest. One topic of a robot may lag the other by seconds on a busy machine (measured: a
#: robot's batch messages 600 behind its images, 4 s, with two robots on a loaded 2-core
#: machine): a reliable reader holds the later samples of a topic until a missing one is
#: repaired, or given up once the writer's history (depth 1,000, the experience topics') has
#: overwritten it. Twice that depth, per camera: robots lagging together do not refuse each
#: other.
JOIN_CAPACITY = 2000
#: Halves of all cameras a join keeps waiting (64 robots, a deployment's largest fleet, each
#: lagging by a history depth): a peer inventing cameras cannot fill the memory either.
MAX_WAITING_HALVES = 64_000
#: Bytes of decoded pixels the waiting images may hold together; beyond it the oldest is given
#: up like one beyond :data:`JOIN_CAPACITY` (a peer sending images without batches cannot fill
#: the memory).
MAX_WAITING_BYTES = 512 * 1024 * 1024


def camera_frame(robot_id: int) -> str:
    """``robot_{k}/camera``: the frame_id of robot k's image messages (their join key)."""
    return f"robot_{robot_id}/camera"


@dataclass
class Frames:
    """An image message as received: the decoded tall image and its join key."""

    frame_id: str
    stamp_ns: int
    pixels: np.ndarray  # uint8 (rows, width, 3)
    #: SHA-256 of the encoded image (b"": raw pixels), for rl_core.security.action_auth.
    payload_digest: bytes = b""


class AwaitsImage(Protocol[T_co]):
    """A batch decoded without its images (rl_nodes.messages.AwaitingImages)."""

    @property
    def batch(self) -> Any:
        """The batch with empty image fields; its ``robot_id`` and ``stamp_ns`` are the key."""

    def complete(self, pixels: np.ndarray) -> T_co:
        """The batch with its image fields filled from ``pixels``; ValueError if they do not fit."""


class HalfJoin(Generic[T]):
    """Hands a batch to ``deliver`` once both its halves arrived, in either order.

    Halves wait in two bounded queues. When a pair joins, the halves of its camera that arrived
    before it are given up as lost (their partners were lost in transport; counted in
    :attr:`lost`); when :data:`JOIN_CAPACITY` newer halves of its camera wait (or
    :data:`MAX_WAITING_HALVES` of all), the oldest is given up and reported to ``reject``.

    :param deliver: called with the complete batch.
    :param reject: called with ``(what, reason)`` for an image that does not fit its batch or a
        half given up for the capacity.
    :param what: the batches' name in reports (``observations``, ``experience``).
    """

    def __init__(self, deliver: Callable[[T], None], reject: Callable[[str, str], None],
                 what: str) -> None:
        self.deliver = deliver
        self.reject = reject
        self.what = what
        self._batches: _Waiting[AwaitsImage[T]] = _Waiting()
        self._frames: _Waiting[Frames] = _Waiting()
        #: Batches completed from their two halves.
        self.joined = 0
        #: Halves given up because a later pair of their camera joined first: their partner
        #: was lost in transport.
        self.lost = 0
        #: Bytes of the images waiting for their batch.
        self.waiting_bytes = 0

    def on_batch(self, item: AwaitsImage[T]) -> None:
        """A batch message without its images arrived."""
        batch = item.batch
        key = (camera_frame(batch.robot_id), batch.stamp_ns)
        frames, older = self._frames.take(key)
        if frames is None:
            self._wait(self._batches, key, item, "its image")
            return
        self.waiting_bytes -= _pixel_bytes(frames)
        self._give_up(older + self._batches.take_camera(key[0]))
        self._join(item, frames)

    def on_frames(self, frames: Frames) -> None:
        """An image message arrived (decoded)."""
        key = (frames.frame_id, frames.stamp_ns)
        item, older = self._batches.take(key)
        if item is None:
            self._wait(self._frames, key, frames, "its batch message")
            return
        self._give_up(older + self._frames.take_camera(key[0]))
        self._join(item, frames)

    def _wait(self, queue: _Waiting[Any], key: tuple[str, int], half: Any, missing: str) -> None:
        old = queue.put(key, half)
        self.waiting_bytes += _pixel_bytes(half) - _pixel_bytes(old)
        while queue.of_camera(key[0]) > JOIN_CAPACITY:
            self._refuse(queue, key[0], missing)
        while len(queue) > MAX_WAITING_HALVES or (queue is self._frames and len(queue) > 1 and
                                                  self.waiting_bytes > MAX_WAITING_BYTES):
            self._refuse(queue, None, missing)

    def _refuse(self, queue: _Waiting[Any], camera: str | None, missing: str) -> None:
        """Give up the oldest half waiting in ``queue`` (of ``camera``, or of all) and report it."""
        (frame, stamp), dropped = queue.pop_oldest(camera)
        self.waiting_bytes -= _pixel_bytes(dropped)
        later = f"{queue.of_camera(frame)} later ones of its camera" if camera else \
            f"{len(queue)} later ones"
        self.reject(f"{self.what} (unmatched)",
                    f"{frame} at {stamp}: {missing} did not arrive before {later}; dropped")

    def _give_up(self, halves: list[Any]) -> None:
        """Forget halves whose partner was lost (a later pair of their camera joined)."""
        self.lost += len(halves)
        self.waiting_bytes -= sum(_pixel_bytes(half) for half in halves)

    def _join(self, item: AwaitsImage[T], frames: Frames) -> None:
        try:
            batch = item.complete(frames.pixels)
        except ValueError as error:
            self.reject(f"{self.what} image", str(error))
            return
        self.joined += 1
        self.deliver(batch)


class _Waiting(Generic[H]):
    """Halves waiting for their partner, keyed ``(frame_id, stamp_ns)``: in arrival order over
    all cameras (the oldest is given up first) and per camera (a join gives up the earlier ones
    of its camera)."""

    def __init__(self) -> None:
        self._halves: OrderedDict[tuple[str, int], H] = OrderedDict()
        self._cameras: dict[str, OrderedDict[int, None]] = {}

    def __len__(self) -> int:
        return len(self._halves)

    def put(self, key: tuple[str, int], half: H) -> H | None:
        """Queue ``half`` as the newest; the half it replaces (same key), or None."""
        old = self._halves.pop(key, None)
        self._halves[key] = half
        stamps = self._cameras.setdefault(key[0], OrderedDict())
        stamps.pop(key[1], None)
        stamps[key[1]] = None
        return old

    def take(self, key: tuple[str, int]) -> tuple[H | None, list[H]]:
        """The half waiting under ``key`` and those of its camera that arrived before it, taken
        out; ``(None, [])`` when none waits under ``key``."""
        if key not in self._halves:
            return None, []
        frame, stamp = key
        stamps = self._cameras[frame]
        older: list[H] = []
        while True:
            earliest, _ = stamps.popitem(last=False)
            half = self._halves.pop((frame, earliest))
            if earliest == stamp:
                break
            older.append(half)
        if not stamps:
            del self._cameras[frame]
        return half, older

    def take_camera(self, frame: str) -> list[H]:
        """Every half of camera ``frame``, taken out."""
        return [self._halves.pop((frame, stamp)) for stamp in self._cameras.pop(frame, ())]

    def of_camera(self, frame: str) -> int:
        """Halves of camera ``frame`` waiting."""
        return len(self._cameras.get(frame, ()))

    def pop_oldest(self, frame: str | None = None) -> tuple[tuple[str, int], H]:
        """The half that arrived first (of camera ``frame``, or of all), taken out."""
        if frame is None:
            key, half = self._halves.popitem(last=False)
        else:
            key = (frame, next(iter(self._cameras[frame])))
            half = self._halves.pop(key)
        stamps = self._cameras[key[0]]
        del stamps[key[1]]
        if not stamps:
            del self._cameras[key[0]]
        return key, half


def _pixel_bytes(half: Any) -> int:
    """Bytes a waiting half holds in pixels (0 for a batch message, or none)."""
    return int(half.pixels.nbytes) if isinstance(half, Frames) else 0
