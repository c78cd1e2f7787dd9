"""Joining the two halves of an image batch that crossed DDS: the batch message and its image.

Over DDS a batch of image observations travels as two messages with the same stamp: the batch
without its frames, and one image of all of them on a side topic (rl_nodes.image_transport).
A receiver pairs them by ``(frame_id, stamp)``, in whichever order they arrive, and completes the
batch from the image. This module holds that pairing: bounded queues of halves waiting for
their partner, giving up on the oldest when too many newer ones came first (a lost message or a
peer sending only one half). It knows neither ROS messages nor codecs: the caller hands it a
batch that awaits its pixels and the decoded image.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

__all__ = ["JOIN_CAPACITY", "AwaitsImage", "Frames", "HalfJoin", "camera_frame"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: Halves a join keeps waiting for their other half before it gives up on the oldest: the
#: experience topics' queue depth, since a reliable image topic may lag its small batch topic by
#: that much while the receiver is busy.
JOIN_CAPACITY = 1000
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


class AwaitsImage(Protocol[T_co]):
    """A batch decoded without its images (rl_nodes.conversions.AwaitingImages)."""

    @property
    def batch(self) -> Any:
        """The batch with empty image fields; its ``robot_id`` and ``stamp_ns`` are the key."""

    def complete(self, pixels: np.ndarray) -> T_co:
        """The batch with its image fields filled from ``pixels``; ValueError if they do not fit."""


class HalfJoin(Generic[T]):
    """Hands a batch to ``deliver`` once both its halves arrived, in either order.

    Halves wait in two bounded queues; when :data:`JOIN_CAPACITY` newer ones arrived first, the
    oldest is given up and reported to ``reject``.

    :param deliver: called with the complete batch.
    :param reject: called with ``(what, reason)`` for an image that does not fit its batch or a
        half given up.
    :param what: the batches' name in reports (``observations``, ``experience``).
    """

    def __init__(self, deliver: Callable[[T], None], reject: Callable[[str, str], None],
                 what: str) -> None:
        self.deliver = deliver
        self.reject = reject
        self.what = what
        self._batches: OrderedDict[tuple[str, int], AwaitsImage[T]] = OrderedDict()
        self._frames: OrderedDict[tuple[str, int], Frames] = OrderedDict()
        #: Batches completed from their two halves.
        self.joined = 0
        #: Bytes of the images waiting for their batch.
        self.waiting_bytes = 0

    def on_batch(self, item: AwaitsImage[T]) -> None:
        """A batch message without its images arrived."""
        batch = item.batch
        key = (camera_frame(batch.robot_id), batch.stamp_ns)
        frames = self._frames.pop(key, None)
        self.waiting_bytes -= _pixel_bytes(frames)
        if frames is None:
            self._wait(self._batches, key, item, "its image")
        else:
            self._join(item, frames)

    def on_frames(self, frames: Frames) -> None:
        """An image message arrived (decoded)."""
        key = (frames.frame_id, frames.stamp_ns)
        item = self._batches.pop(key, None)
        if item is None:
            self._wait(self._frames, key, frames, "its batch message")
        else:
            self._join(item, frames)

    def _wait(self, queue: OrderedDict[tuple[str, int], Any], key: tuple[str, int], half: Any,
              missing: str) -> None:
        old = queue.pop(key, None)
        self.waiting_bytes += _pixel_bytes(half) - _pixel_bytes(old)
        queue[key] = half
        while len(queue) > JOIN_CAPACITY or (queue is self._frames and len(queue) > 1 and
                                             self.waiting_bytes > MAX_WAITING_BYTES):
            (frame, stamp), dropped = queue.popitem(last=False)
            self.waiting_bytes -= _pixel_bytes(dropped)
            self.reject(f"{self.what} (unmatched)", f"{frame} at {stamp}: {missing} did not "
                        f"arrive before {len(queue)} later ones; dropped")

    def _join(self, item: AwaitsImage[T], frames: Frames) -> None:
        try:
            batch = item.complete(frames.pixels)
        except ValueError as error:
            self.reject(f"{self.what} image", str(error))
            return
        self.joined += 1
        self.deliver(batch)


def _pixel_bytes(half: Any) -> int:
    """Bytes a waiting half holds in pixels (0 for a batch message, or none)."""
    return int(half.pixels.nbytes) if isinstance(half, Frames) else 0
