"""Replay status that only the learner can write: signed, ordered, checked by every robot.

``/replay_status`` pauses, resumes and stops acting on every robot, so a peer on the domain that
could publish it could stall or unleash the fleet. The replay buffer (a learner process, holding
the private key of :mod:`rl_core.weights_auth`) signs each status it publishes, counted within
its epoch; robots, the gym bridge and the autoscaler obey a status only when it verifies under
the learner's public key and is newer than the last one they obeyed (a recorded status replayed
later is refused). The node encodes every field but the signature canonically
(``rl_nodes.conversions``); those bytes are what is signed and checked.
"""

from __future__ import annotations

import time

from rl_core import weights_auth
from rl_core.weights_auth import SigningKey, VerifyKey

#: Why a status is refused by a receiver that has no public key and does not allow unsigned ones.
NO_PUBLIC_KEY = (f"no public key to check the learner's signature ({weights_auth.PUBLIC_KEY_VARIABLE}"
                 f" or {weights_auth.PUBLIC_KEY_FILE_VARIABLE}; rl-bringup and the launch files "
                 "give one), and allow_unsigned is false")


def _message(payload: bytes) -> bytes:
    return b"rl_ros2 replay status\0" + payload


class StatusSigner:
    """The replay buffer's side: the ``(epoch, sequence)`` of each status and its signature.

    :param key: the learner's private key (None: statuses go out unsigned, which robots refuse
        unless they allow unsigned ones).
    :param saved_epoch: the epoch of this run's buffer before a respawn (from its snapshot): the
        new epoch is later even if the clock went back.
    """

    def __init__(self, key: SigningKey | None, saved_epoch: int = 0) -> None:
        self.key = key
        self.epoch = max(time.time_ns(), saved_epoch + 1)
        self.sequence = 0

    def resume_after(self, saved_epoch: int) -> None:
        """A snapshot of epoch ``saved_epoch`` was restored: stay after it."""
        if saved_epoch >= self.epoch:
            self.epoch, self.sequence = saved_epoch + 1, 0

    def next(self) -> tuple[int, int]:
        """``(epoch, sequence)`` of the next status."""
        self.sequence += 1
        return self.epoch, self.sequence

    def sign(self, payload: bytes) -> str:
        """The signature of an encoded status (all fields but the signature); '' without a key."""
        return self.key.sign(_message(payload)) if self.key is not None else ""


class StatusCheck:
    """A receiver's side: whether a status comes from the learner and is newer than the last.

    :param key: the learner's public key.
    :param allow_unsigned: without a key, obey every status (development only).
    """

    def __init__(self, key: VerifyKey | None, allow_unsigned: bool = False) -> None:
        self.key = key
        self.allow_unsigned = allow_unsigned
        self.last = (0, 0)
        #: Statuses refused since start.
        self.refused = 0

    def refusal(self, epoch: int, sequence: int, signature: str, payload: bytes) -> str | None:
        """Why a status must not be obeyed; None (and it becomes the last) when it may be."""
        reason = None
        if self.key is None:
            if not self.allow_unsigned:
                reason = NO_PUBLIC_KEY
        elif not self.key.verify(signature, _message(payload)):
            reason = "not signed by the learner (a forged or foreign status)"
        if reason is None and (epoch, sequence) <= self.last:
            reason = (f"epoch {epoch} sequence {sequence} is not newer than the last obeyed "
                      f"{self.last[0]} {self.last[1]} (a replay)")
        if reason is not None:
            self.refused += 1
            return reason
        self.last = (epoch, sequence)
        return None
