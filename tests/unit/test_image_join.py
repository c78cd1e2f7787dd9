"""The join of a batch and its image (rl_core.wire.image_join): either order, refusals, halves whose
partner was lost given up once a later pair of their camera joins, and halves given up once too
many newer ones arrived."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from rl_core.wire import image_join
from rl_core.wire.image_join import Frames, HalfJoin, camera_frame

pytestmark = pytest.mark.unit


@dataclass
class Batch:
    robot_id: int
    stamp_ns: int
    obs: np.ndarray | None = None


@dataclass
class Awaiting:
    """A batch of ``rows`` 2 x 2 images that awaits its pixels."""

    batch: Batch
    rows: int = 2

    def complete(self, pixels: np.ndarray) -> Batch:
        if pixels.size != self.rows * 12:
            raise ValueError(f"the image holds {pixels.size} values, {self.rows * 12} needed")
        return replace(self.batch, obs=pixels.reshape(self.rows, 2, 2, 3))


def image(robot: int, stamp: int, rows: int = 2) -> Frames:
    pixels = np.arange(rows * 12, dtype=np.uint8).reshape(rows * 2, 2, 3)
    return Frames(camera_frame(robot), stamp, pixels)


class Collected:
    def __init__(self) -> None:
        self.delivered: list[Batch] = []
        self.rejected: list[tuple[str, str]] = []
        self.join: HalfJoin[Batch] = HalfJoin(
            self.delivered.append, lambda *reason: self.rejected.append(reason), "experience")


@pytest.mark.parametrize("image_first", [False, True])
def test_halves_join_in_either_order_by_robot_and_stamp(image_first: bool) -> None:
    out = Collected()
    halves = [lambda: out.join.on_batch(Awaiting(Batch(3, 7))), lambda: out.join.on_frames(image(3, 7))]
    out.join.on_frames(image(3, 8))  # another stamp
    out.join.on_batch(Awaiting(Batch(2, 7)))  # another robot
    for half in reversed(halves) if image_first else halves:
        half()
    (joined,) = out.delivered
    assert (joined.robot_id, joined.stamp_ns) == (3, 7)
    np.testing.assert_array_equal(joined.obs.reshape(-1), np.arange(24))
    assert out.join.joined == 1 and out.rejected == []


def test_an_image_that_does_not_fit_is_reported_and_nothing_is_delivered() -> None:
    out = Collected()
    out.join.on_batch(Awaiting(Batch(0, 1)))
    out.join.on_frames(image(0, 1, rows=3))
    assert out.delivered == [] and out.join.joined == 0
    (what, reason), = out.rejected
    assert what == "experience image" and "36 values" in reason


def test_halves_without_a_partner_are_given_up_after_the_capacity(monkeypatch) -> None:
    monkeypatch.setattr(image_join, "JOIN_CAPACITY", 2)
    out = Collected()
    for stamp in (1, 2, 3):
        out.join.on_batch(Awaiting(Batch(0, stamp)))
    for stamp in (4, 5, 6):
        out.join.on_frames(image(0, stamp))
    assert [what for what, _ in out.rejected] == ["experience (unmatched)"] * 2
    assert out.rejected[0][1] == ("robot_0/camera at 1: its image did not arrive before 2 later "
                                  "ones of its camera; dropped")
    assert "robot_0/camera at 4: its batch message did not arrive" in out.rejected[1][1]
    out.join.on_frames(image(0, 3))
    assert [batch.stamp_ns for batch in out.delivered] == [3], "the newest halves still join"
    out.join.on_batch(Awaiting(Batch(0, 1)))
    assert len(out.delivered) == 1, "a half given up does not join later"


@pytest.mark.parametrize("join_by_image", [False, True])
def test_halves_whose_partner_was_lost_are_given_up_when_a_later_pair_joins(
        join_by_image: bool) -> None:
    """Each topic delivers in order, so once pair 3 of a camera joins, the earlier halves of that
    camera can never join (their partners were lost); later ones and other cameras wait on."""
    out = Collected()
    out.join.on_frames(image(0, 1))  # its batch message was lost
    out.join.on_batch(Awaiting(Batch(0, 2)))  # its image was lost
    out.join.on_frames(image(1, 1))  # another camera
    if join_by_image:
        out.join.on_batch(Awaiting(Batch(0, 3)))
        out.join.on_batch(Awaiting(Batch(0, 4)))  # its image is on the way
        out.join.on_frames(image(0, 3))
    else:
        out.join.on_frames(image(0, 3))
        out.join.on_frames(image(0, 4))  # its batch message is on the way
        out.join.on_batch(Awaiting(Batch(0, 3)))
    assert [batch.stamp_ns for batch in out.delivered] == [3]
    assert out.join.lost == 2 and out.rejected == []
    assert out.join.waiting_bytes == (image(1, 1).pixels.nbytes
                                      + (0 if join_by_image else image(0, 4).pixels.nbytes))
    out.join.on_frames(image(0, 4)) if join_by_image else out.join.on_batch(Awaiting(Batch(0, 4)))
    out.join.on_batch(Awaiting(Batch(1, 1)))
    assert [(batch.robot_id, batch.stamp_ns) for batch in out.delivered] == [(0, 3), (0, 4), (1, 1)]
    assert out.join.lost == 2 and out.join.waiting_bytes == 0
    out.join.on_batch(Awaiting(Batch(0, 1)))  # a half given up does not join later
    assert len(out.delivered) == 3


def test_cameras_lagging_together_do_not_refuse_each_other(monkeypatch) -> None:
    """The capacity is per camera: one topic of each robot may lag the other at the same time (a
    busy receiver, repaired samples); a peer inventing cameras meets the bound over all of
    them."""
    monkeypatch.setattr(image_join, "JOIN_CAPACITY", 3)
    monkeypatch.setattr(image_join, "MAX_WAITING_HALVES", 8)
    out = Collected()
    for stamp in (1, 2, 3):
        for robot in (0, 1):
            out.join.on_batch(Awaiting(Batch(robot, stamp)))
    assert out.rejected == []
    for stamp in (1, 2, 3):
        for robot in (0, 1):
            out.join.on_frames(image(robot, stamp))
    assert len(out.delivered) == 6 and out.join.lost == 0 and out.rejected == []
    for robot in range(10):  # ten cameras, one half each: beyond the bound over all cameras
        out.join.on_batch(Awaiting(Batch(robot, 9)))
    assert [reason.split(":")[0] for _, reason in out.rejected] == [
        "robot_0/camera at 9", "robot_1/camera at 9"]
    assert "before 8 later ones; dropped" in out.rejected[0][1]
