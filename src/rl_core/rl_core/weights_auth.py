"""Authenticated policy weights: a per-run secret key and HMAC-SHA256 signatures.

A SHA-256 checksum only detects corruption: anyone on the DDS domain can publish weights with a
correct checksum. The trainer therefore signs every weights publication with HMAC-SHA256 under a
per-run key over everything a receiver acts on — run epoch, version, update step, architecture
and the tensor bytes — and policies load only weights whose signature verifies.

Where the key comes from (first match):

* ``RL_ROS2_WEIGHTS_KEY``: the key itself, as hex (multi-host runs: give every host the same);
* ``RL_ROS2_WEIGHTS_KEY_FILE``: a file holding the hex key (``rl-bringup`` creates one per run,
  mode 0600, in the run directory; docker/compose mount one as a secret).

Without either, weights are neither signed nor checked (a warning says so): a node started by
hand for development. This protects the robots' policy against forged or replayed weights; it
does not authenticate observations, actions or experience (use SROS2 for those, see
docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import struct
from collections.abc import Mapping
from pathlib import Path

from rl_core import variables

KEY_VARIABLE = variables.WEIGHTS_KEY
KEY_FILE_VARIABLE = variables.WEIGHTS_KEY_FILE
KEY_FILE_NAME = "weights.key"
KEY_BYTES = 32
MIN_KEY_BYTES = 16


class WeightsKeyError(ValueError):
    """The configured key is missing, unreadable or too short; the message says how to fix it."""


def _decode(text: str, where: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError as error:
        raise WeightsKeyError(f"{where} must hold the key as hex digits: {error}") from None
    if len(key) < MIN_KEY_BYTES:
        raise WeightsKeyError(f"{where} holds a {len(key)}-byte key; use at least {MIN_KEY_BYTES} "
                              f"bytes ({2 * MIN_KEY_BYTES} hex digits), e.g. "
                              "python -c 'import secrets; print(secrets.token_hex(32))'")
    return key


def load_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The run's key from the environment, or None when none is configured.

    :raises WeightsKeyError: when a configured key cannot be read or is malformed.
    """
    environ = os.environ if environ is None else environ
    if environ.get(KEY_VARIABLE):
        return _decode(environ[KEY_VARIABLE], KEY_VARIABLE)
    path = environ.get(KEY_FILE_VARIABLE)
    if path:
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise WeightsKeyError(f"{KEY_FILE_VARIABLE}={path} cannot be read: {error}") from None
        return _decode(text, f"{KEY_FILE_VARIABLE}={path}")
    return None


def create_key_file(directory: str | os.PathLike[str]) -> Path:
    """Write a fresh random key to ``directory/weights.key`` (mode 0600) and return the path.

    An existing key file is kept (a restarted run keeps its key).
    """
    path = Path(directory) / KEY_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file():
        return path
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_hex(KEY_BYTES) + "\n")
    return path


def signature(key: bytes, epoch: int, version: int, update_step: int, architecture: str,
              data: bytes) -> str:
    """Hex HMAC-SHA256 over the run epoch, version, update step, architecture and data."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    mac.update(struct.pack("<QQQ", epoch, version, update_step))
    encoded = architecture.encode()
    mac.update(struct.pack("<Q", len(encoded)))
    mac.update(encoded)
    mac.update(data)
    return mac.hexdigest()


def verify(key: bytes, signature_hex: str, epoch: int, version: int, update_step: int,
           architecture: str, data: bytes) -> bool:
    """Whether ``signature_hex`` is the key's signature of these fields (constant time)."""
    expected = signature(key, epoch, version, update_step, architecture, data)
    return hmac.compare_digest(expected, signature_hex)
