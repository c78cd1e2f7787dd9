"""The e-stop's state and its release: anyone may stop a robot, only the operator may release it.

Engaging fails safe, so anyone on the domain may do it (``estop``, ``std_msgs/Bool`` true). A
release must be proven: the pip install's Fast DDS has no DDS Security plugins, so SROS2
permissions cannot restrict who publishes (docs/reliability.md); a release is therefore signed.
Each engagement draws a fresh random **challenge**, published on ``estop/state`` (latched); a
release is the run's Ed25519 signature of (robot namespace, challenge) on ``estop/release``
(rl_core.security.weights_auth), so a recorded release releases nothing later.

The engaged state **latches on disk** (:class:`EStopLatch`, a JSON file per robot in the run
directory), written before the boundary acts on anything else and read before its first
command: a simulator killed while stopped comes back stopped, and one that comes back after a
fault (its last run did not close cleanly) starts engaged too and waits for a release.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from rl_core.runs.atomic_files import write_atomically
from rl_core.security import weights_auth

#: Bytes of a challenge.
CHALLENGE_BYTES = 16
_RELEASE_TAG = b"rl_ros2 e-stop release\0"
#: Why an e-stop is engaged, as reported.
BY_OPERATOR = "engaged by an operator"
AFTER_FAULT = "the simulator restarted after a fault"
BY_ENVELOPE = "joint velocity beyond the envelope"


def release_message(namespace: str, challenge: str) -> bytes:
    """What an operator signs to release ``namespace``'s e-stop engaged with ``challenge``."""
    return _RELEASE_TAG + namespace.encode() + b"\0" + challenge.encode()


def release_text(key: weights_auth.SigningKey, namespace: str, challenge: str) -> str:
    """The ``estop/release`` message's text for a challenge."""
    return json.dumps({"challenge": challenge,
                       "signature": key.sign(release_message(namespace, challenge))})


def state_text(engaged: bool, challenge: str, reason: str) -> str:
    """The ``estop/state`` message's text."""
    return json.dumps({"engaged": engaged, "challenge": challenge, "reason": reason})


def parse_state(text: str) -> tuple[bool, str, str]:
    """``(engaged, challenge, reason)`` of an ``estop/state`` text.

    :raises ValueError: not such a text."""
    data = json.loads(text)
    return bool(data["engaged"]), str(data["challenge"]), str(data.get("reason", ""))


class ReleaseCheck:
    """Checks releases of one robot's e-stop against the current challenge.

    :param namespace: the robot's namespace (what a release names).
    :param key: the run's public key; ``None`` with ``allow_unsigned``: any release counts
        (development only), ``None`` without it: nothing releases.
    """

    def __init__(self, namespace: str, key: weights_auth.VerifyKey | None,
                 allow_unsigned: bool = False) -> None:
        self.namespace = namespace
        self.key = key
        self.allow_unsigned = allow_unsigned and key is None
        self.challenge = ""

    def new_challenge(self) -> str:
        """A fresh challenge for a new engagement; releases of older ones no longer count."""
        self.challenge = secrets.token_hex(CHALLENGE_BYTES)
        return self.challenge

    def refusal(self, text: str | None) -> str | None:
        """Why a release (the ``estop/release`` text; ``None``: a plain ``false`` on
        ``estop``) is refused, or ``None`` when it releases."""
        if self.allow_unsigned:
            return None
        if text is None:
            return ("a plain false on estop releases nothing: release with the run's key "
                    "(rl-bringup estop release)")
        if self.key is None:
            return "no public key to check releases with (allow_unsigned is false)"
        try:
            data = json.loads(text)
            challenge, signature = str(data["challenge"]), str(data["signature"])
        except (ValueError, KeyError, TypeError):
            return "not a release (JSON with challenge and signature)"
        if not self.challenge or challenge != self.challenge:
            return "a release of another engagement (stale or replayed challenge)"
        if not self.key.verify(signature, release_message(self.namespace, challenge)):
            return "signature does not verify with the run's public key"
        return None


@dataclass(frozen=True)
class Latched:
    """What a robot's latch file said at start."""

    engaged: bool
    reason: str


class EStopLatch:
    """One robot's e-stop state on disk (``None`` path: kept in memory only).

    The file says whether the e-stop is engaged and whether the simulator closed cleanly; it is
    replaced atomically and synced, so a crash leaves the old or the new state.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path

    @classmethod
    def for_robot(cls, directory: str, namespace: str) -> EStopLatch:
        """The latch of ``namespace`` in ``directory`` ('' = none)."""
        if not directory:
            return cls(None)
        name = namespace.strip("/").replace("/", "_") or "robot"
        return cls(Path(directory) / f"{name}.json")

    def start(self) -> Latched:
        """Read the state a previous run of this simulator left, and mark this one running:
        engaged when it was engaged or did not close cleanly."""
        previous = self._read()
        if previous is None:
            latched = Latched(False, "")
        elif previous.get("engaged"):
            latched = Latched(True, str(previous.get("reason") or BY_OPERATOR))
        elif not previous.get("clean", False):
            latched = Latched(True, AFTER_FAULT)
        else:
            latched = Latched(False, "")
        self._write(latched.engaged, latched.reason, clean=False)
        return latched

    def engaged(self, reason: str) -> None:
        self._write(True, reason, clean=False)

    def released(self) -> None:
        self._write(False, "", clean=False)

    def close(self, engaged: bool, reason: str) -> None:
        """The simulator closes cleanly: an engaged e-stop stays engaged."""
        self._write(engaged, reason, clean=True)

    def _read(self) -> dict[str, object] | None:
        if self.path is None:
            return None
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            # Unreadable: fail safe.
            return {"engaged": True, "reason": f"e-stop state {self.path} unreadable"}
        return data if isinstance(data, dict) else {"engaged": True}

    def _write(self, engaged: bool, reason: str, clean: bool) -> None:
        if self.path is None:
            return
        os.makedirs(self.path.parent, exist_ok=True)
        text = json.dumps({"engaged": engaged, "reason": reason, "clean": clean}).encode()
        write_atomically(self.path, lambda file: file.write(text))


__all__ = ["AFTER_FAULT", "BY_ENVELOPE", "BY_OPERATOR", "EStopLatch", "Latched",
           "ReleaseCheck", "parse_state", "release_message", "release_text",
           "state_text"]
