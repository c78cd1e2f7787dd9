"""Replay status that only the learner can write: signed, ordered, checked by every robot.

``/replay_status`` pauses, resumes and stops acting on every robot, so a peer on the domain that
could publish it could stall or unleash the fleet. The replay buffer (a learner process, holding
the private key of :mod:`rl_core.security.weights_auth`) signs each status it publishes, counted within
its epoch; robots, the gym bridge and the autoscaler obey a status only when it verifies under
the learner's public key and is newer than the last one they obeyed (a recorded status replayed
later is refused). Every field but the signature is encoded canonically
(:func:`status_payload`, duck-typed on the generated message: no rclpy here); those bytes, after
the run identity of the key (:func:`rl_core.security.weights_auth.message_head`), are what is signed and
checked: a status that another run's replay buffer signed with the same key is refused too (a
robot of run A does not pause for run B). The identity is not sent; both sides know it.
"""

from __future__ import annotations

import json
import struct
import time
from typing import Any

from rl_core.security import weights_auth
from rl_core.security.weights_auth import SigningKey, VerifyKey

#: Why a status is refused by a receiver that has no public key and does not allow unsigned ones.
NO_PUBLIC_KEY = (f"no public key to check the learner's signature ({weights_auth.PUBLIC_KEY_VARIABLE}"
                 f" or {weights_auth.PUBLIC_KEY_FILE_VARIABLE}; rl-bringup and the launch files "
                 "give one), and allow_unsigned is false")


def _message(payload: bytes, run_id: str) -> bytes:
    return weights_auth.message_head(b"rl_ros2 replay status", run_id) + payload


class StatusSigner:
    """The replay buffer's side: the ``(epoch, sequence)`` of each status and its signature.

    :param key: the learner's private key, for this run (:attr:`SigningKey.run_id`; None:
        statuses go out unsigned, which robots refuse unless they allow unsigned ones).
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
        return self.key.sign(_message(payload, self.key.run_id)) if self.key is not None else ""


class StatusCheck:
    """A receiver's side: whether a status comes from the learner and is newer than the last.

    :param key: the learner's public key, for this receiver's run (:attr:`VerifyKey.run_id`).
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
        elif not self.key.verify(signature, _message(payload, self.key.run_id)):
            reason = ("not signed by the learner of this run (a forged status, or one of another "
                      f"run: this is run {self.key.run_id!r})")
        if reason is None and (epoch, sequence) <= self.last:
            reason = (f"epoch {epoch} sequence {sequence} is not newer than the last obeyed "
                      f"{self.last[0]} {self.last[1]} (a replay)")
        if reason is not None:
            self.refused += 1
            return reason
        self.last = (epoch, sequence)
        return None


def canonical_fields(msg: Any, skip: str = "") -> dict[str, Any]:
    """A message's fields as plain values, float32 ones as their 4 bytes (a sender holds the
    Python float it assigned, a receiver the float32 it decoded)."""
    fields: dict[str, Any] = {}
    for name, kind in msg.get_fields_and_field_types().items():
        if name == skip:
            continue
        value = getattr(msg, name)
        if hasattr(value, "get_fields_and_field_types"):
            value = canonical_fields(value)
        elif kind == "float":
            value = struct.pack("<f", value).hex()
        fields[name] = value
    return fields


def status_payload(msg: Any) -> bytes:
    """What a ReplayStatus's signature covers: every field but the signature, canonically
    encoded (CDR bytes are no canonical form: their padding is not defined)."""
    return json.dumps(canonical_fields(msg, skip="signature"), sort_keys=True).encode()


def sign_status(msg: Any, signer: StatusSigner) -> None:
    """Give a ReplayStatus its epoch, sequence and the learner's signature."""
    msg.epoch, msg.sequence = signer.next()
    msg.signature = ""
    msg.signature = signer.sign(status_payload(msg))


def status_refusal(msg: Any, check: StatusCheck) -> str | None:
    """Why a received ReplayStatus must not be obeyed; None to obey."""
    return check.refusal(msg.epoch, msg.sequence, msg.signature, status_payload(msg))
