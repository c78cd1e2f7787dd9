"""The learner's signing key: Ed25519 signatures on policy weights and on ``/replay_status``.

A SHA-256 checksum only detects corruption: anyone on the DDS domain can publish weights with a
correct checksum. The learner therefore signs what robots act on (every weights publication and
every replay status, which pauses, resumes and stops acting) with an Ed25519 private key that only
the learner's processes (trainer, replay buffer) hold. Robots hold the public key alone, so a
robot that is taken over cannot make the other robots load weights or pause.

The private key comes from ``weights_key:=FILE``, ``RL_ROS2_WEIGHTS_KEY`` or
``RL_ROS2_WEIGHTS_KEY_FILE`` (``python -m rl_core.security.weights_auth new DIR`` makes a pair),
the public key from ``RL_ROS2_WEIGHTS_PUBLIC_KEY(_FILE)`` or the private one; without one a
receiver refuses everything unless ``allow_unsigned:=true``. Every signature also binds the run
identity (``RL_ROS2_RUN_ID``, :mod:`rl_bringup.plan.run_key`), so runs that share a key cannot
replay each other's. This does not authenticate observations, actions or experience (use SROS2 for
those). Precedence and keys across hosts: docs/reliability.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from rl_core.names import variables

if TYPE_CHECKING:
    from rl_core.wire.messages import Weights

KEY_VARIABLE = variables.WEIGHTS_KEY
KEY_FILE_VARIABLE = variables.WEIGHTS_KEY_FILE
PUBLIC_KEY_VARIABLE = variables.WEIGHTS_PUBLIC_KEY
PUBLIC_KEY_FILE_VARIABLE = variables.WEIGHTS_PUBLIC_KEY_FILE
RUN_ID_VARIABLE = variables.RUN_ID
KEY_FILE_NAME = "weights.key"
PUBLIC_KEY_FILE_NAME = "weights.pub"
#: Bytes of an Ed25519 private key (its seed) and of a public key.
KEY_BYTES = 32
#: Hex digits of a signature (64 bytes).
SIGNATURE_HEX_DIGITS = 128


class WeightsKeyError(ValueError):
    """The configured key is missing, unreadable or malformed; the message says how to fix it."""


class VerifyKey:
    """An Ed25519 public key: checks the learner's signatures made for run ``run_id``.

    :param run_id: the run identity the signatures it checks must bind ('' for the unnamed run).
    """

    def __init__(self, raw: bytes, run_id: str = "") -> None:
        self._key = Ed25519PublicKey.from_public_bytes(raw)
        self.raw = raw
        self.run_id = run_id

    def hex(self) -> str:
        return self.raw.hex()

    def verify(self, signature_hex: str, message: bytes) -> bool:
        """Whether ``signature_hex`` is the private key's signature of ``message``."""
        if len(signature_hex) != SIGNATURE_HEX_DIGITS:
            return False
        try:
            self._key.verify(bytes.fromhex(signature_hex), message)
        except (InvalidSignature, ValueError):
            return False
        return True


class SigningKey:
    """An Ed25519 private key: the learner signs weights and status of run ``run_id`` with it.

    :param run_id: the run identity its weights and status signatures bind ('' for the unnamed
        run); its :attr:`public` half checks for the same run.
    """

    def __init__(self, raw: bytes, run_id: str = "") -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(raw)
        self.raw = raw
        self.run_id = run_id
        self.public = VerifyKey(self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw),
                                run_id)

    def sign(self, message: bytes) -> str:
        """The hex signature of ``message``."""
        return self._key.sign(message).hex()


def _decode(text: str, where: str) -> bytes:
    try:
        raw = bytes.fromhex(text.strip())
    except ValueError as error:
        raise WeightsKeyError(f"{where} must hold the key as hex digits: {error}") from None
    if len(raw) != KEY_BYTES:
        raise WeightsKeyError(f"{where} holds {len(raw)} bytes; an Ed25519 key has {KEY_BYTES} "
                              f"({2 * KEY_BYTES} hex digits). Make a key pair with "
                              "'python -m rl_core.security.weights_auth new DIR'")
    return raw


def _read(environ: Mapping[str, str], variable: str, file_variable: str) -> bytes | None:
    if environ.get(variable):
        return _decode(environ[variable], variable)
    path = environ.get(file_variable)
    if not path:
        return None
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise WeightsKeyError(f"{file_variable}={path} cannot be read: {error}") from None
    return _decode(text, f"{file_variable}={path}")


def run_identity(environ: Mapping[str, str] | None = None) -> str:
    """The run identity of the environment (``RL_ROS2_RUN_ID``); '' for the unnamed run."""
    return (os.environ if environ is None else environ).get(RUN_ID_VARIABLE, "").strip()


def load_key(environ: Mapping[str, str] | None = None) -> SigningKey | None:
    """The learner's private key from the environment, for the environment's run identity, or
    None when none is configured.

    :raises WeightsKeyError: when a configured key cannot be read or is malformed.
    """
    environ = os.environ if environ is None else environ
    raw = _read(environ, KEY_VARIABLE, KEY_FILE_VARIABLE)
    return SigningKey(raw, run_identity(environ)) if raw is not None else None


def load_public_key(environ: Mapping[str, str] | None = None) -> VerifyKey | None:
    """The public key that checks the learner's signatures for the environment's run identity:
    configured, or the private key's where this process holds that; None when neither is
    configured.

    :raises WeightsKeyError: when a configured key cannot be read or is malformed.
    """
    environ = os.environ if environ is None else environ
    raw = _read(environ, PUBLIC_KEY_VARIABLE, PUBLIC_KEY_FILE_VARIABLE)
    if raw is not None:
        try:
            return VerifyKey(raw, run_identity(environ))
        except ValueError as error:
            raise WeightsKeyError(f"the public key is not an Ed25519 key: {error}") from None
    private = load_key(environ)
    return private.public if private is not None else None


def _write_private(path: Path, text: str, mode: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


def create_key_file(directory: str | os.PathLike[str]) -> Path:
    """Write a fresh private key to ``directory/weights.key`` (mode 0600) and its public key to
    ``directory/weights.pub`` (0644); return the private key's path. An existing key is kept
    (a restarted run keeps its key) and its public key written where it is missing."""
    path = Path(directory) / KEY_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file():
        _write_private(path, os.urandom(KEY_BYTES).hex() + "\n", 0o600)
    public = path.parent / PUBLIC_KEY_FILE_NAME
    if not public.is_file():
        key = load_key({KEY_FILE_VARIABLE: str(path)})
        assert key is not None
        _write_private(public, key.public.hex() + "\n", 0o644)
    return path


def message_head(kind: bytes, run_id: str) -> bytes:
    """The start of a signed message of ``kind`` (``b"rl_ros2 weights"``) for run ``run_id``.

    The unnamed run's head is ``kind`` and a NUL, as before run identities; a named run's is
    ``kind``, `` of run``, a NUL and the length-prefixed identity. The two differ in the byte
    after ``kind``, so no message of one run is a message of another."""
    if not run_id:
        return kind + b"\0"
    encoded = run_id.encode()
    return kind + b" of run\0" + struct.pack("<Q", len(encoded)) + encoded


def weights_message(epoch: int, version: int, update_step: int, architecture: str,
                    data: bytes, run_id: str = "") -> bytes:
    """What a weights signature covers: the run identity, the run epoch, version, update step,
    architecture and the SHA-256 of the tensor bytes (hashed once, however large)."""
    encoded = architecture.encode()
    return message_head(b"rl_ros2 weights", run_id) + struct.pack(
        "<QQQQ", epoch, version, update_step, len(encoded)) + encoded + hashlib.sha256(data).digest()


def signature(key: SigningKey, epoch: int, version: int, update_step: int, architecture: str,
              data: bytes) -> str:
    """The hex Ed25519 signature of one weights publication of the key's run."""
    return key.sign(weights_message(epoch, version, update_step, architecture, data, key.run_id))


def verify(key: VerifyKey, signature_hex: str, epoch: int, version: int, update_step: int,
           architecture: str, data: bytes) -> bool:
    """Whether ``signature_hex`` is the learner's signature of these weights for the key's run."""
    return key.verify(signature_hex, weights_message(epoch, version, update_step, architecture,
                                                     data, key.run_id))


def sign_weights(weights: Weights, key: SigningKey) -> None:
    """Set ``weights.signature``: the learner's Ed25519 signature of that publication (its epoch,
    version, update step, architecture and encoded tensors) for the key's run."""
    weights.signature = signature(key, weights.epoch, weights.version, weights.update_step,
                                  weights.architecture_json(), weights.encoded()[0])


def verify_weights(weights: Weights, key: VerifyKey) -> bool:
    """Whether ``weights.signature`` is the learner's signature of these weights."""
    return bool(weights.signature) and verify(key, weights.signature, weights.epoch,
                                              weights.version, weights.update_step,
                                              weights.architecture_json(), weights.encoded()[0])

def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rl_core.security.weights_auth new DIR | public KEY_FILE``."""
    parser = argparse.ArgumentParser(prog="python -m rl_core.security.weights_auth",
                                     description="The learner's Ed25519 signing key.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("new", help="write DIR/weights.key (0600) and DIR/weights.pub "
                        "(kept where they exist)").add_argument("directory")
    commands.add_parser("public", help="print the public key of a private key file "
                        "(for RL_ROS2_WEIGHTS_PUBLIC_KEY on robots)").add_argument("key_file")
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "new":
            path = create_key_file(arguments.directory)
            print(f"private key (learner hosts only): {path}\n"
                  f"public key (robots): {path.parent / PUBLIC_KEY_FILE_NAME}")
        else:
            key = load_key({KEY_FILE_VARIABLE: arguments.key_file})
            assert key is not None
            print(key.public.hex())
    except (WeightsKeyError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
