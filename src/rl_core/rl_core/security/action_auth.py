"""Authenticated actions: an HMAC-SHA256 per action batch under a key per robot.

Whoever can publish on ``/robot_k/actions`` drives robot k, so the batches carry a MAC
(``ActionBatch.mac``) that only the robot's own policy (or a central policy serving it) can make,
and the simulator steps only with a batch whose MAC verifies. The key is a shared secret per
robot, not an asymmetric one: a signature would cost more than the acting step it guards.

The MAC covers :func:`action_message`, including the digest of the observation batch the actions
answer (:func:`batch_digest`, :func:`observation_digest`: of the bytes that crossed the wire), and
the simulator steps only with an answer to observations it published (:meth:`ActionCheck.expect`),
so answers harvested with forged observations cannot drive it. Robot k's key comes from
``RL_ROS2_ROBOT_ACTION_KEYS``, else the run's key (``RL_ROS2_ACTION_KEY(_FILE)``, from which each
robot's derives, :func:`robot_key`), else a key of this process alone. Why, what it costs and
where keys come from: docs/reliability.md, "What is protected".
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rl_core.names import variables
from rl_core.wire.messages import Actions, Observations

KEY_VARIABLE = variables.ACTION_KEY
KEY_FILE_VARIABLE = variables.ACTION_KEY_FILE
ROBOT_KEYS_VARIABLE = variables.ROBOT_ACTION_KEYS
#: Bytes of a key (the run's and each robot's), of a MAC and of an observation digest (SHA-256).
KEY_BYTES = 32
MAC_BYTES = 32
DIGEST_BYTES = 32
#: Observation batches per simulator whose digests an :class:`ActionCheck` remembers: a few
#: rounds of two lanes, so that a late second answer to a step already taken (a republished
#: batch answered twice) is dropped as before rather than refused.
REMEMBERED_BATCHES = 32
#: The file a deployment generated without rl-bringup's supervisor (``rl-bringup compose``,
#: ``rl-bringup k8s``) keeps its run key in, beside ``weights.key``.
KEY_FILE_NAME = "action.key"
# (v2: the observation digest joined the message; a MAC of the earlier layout never verifies)
_MESSAGE_TAG = b"rl_ros2 actions v2\0"
_OBSERVATION_TAG = b"rl_ros2 observations\0"
#: What an observation digest was computed from (its first byte after the tag).
_FLOAT32, _PIXELS, _ENCODED = 0, 1, 2
_UINT8, _FLOAT32_LE = np.dtype(np.uint8), np.dtype("<f4")
#: The digest's header layout per rank of the observation batch.
_LAYOUTS: dict[int, struct.Struct] = {}
_ROBOT_KEY_TAG = b"rl_ros2 robot action key\0"
#: The key of this process alone: what a process without a configured key derives its robots'
#: keys from, so that policies and simulators in one process still authenticate each other.
_PROCESS_KEY = os.urandom(KEY_BYTES)


class ActionKeyError(ValueError):
    """A configured action key is unreadable or malformed; the message says how to fix it."""


def robot_key(run_key: bytes, robot_id: int) -> bytes:
    """Robot ``robot_id``'s key, derived from the run's key (HMAC-SHA256 as a PRF)."""
    return hmac.digest(run_key, _ROBOT_KEY_TAG + struct.pack("<I", robot_id), "sha256")


class ObservedBatch(Protocol):
    """What a digest reads of an observation batch (rl_core.wire.messages.Observations)."""

    obs: np.ndarray


def payload_digest(payload: Any) -> bytes:
    """The SHA-256 of an encoded image's bytes (``bytes``, ``array.array`` or a memoryview), as
    it crossed the wire: what :func:`observation_digest` binds for frames that came encoded."""
    return hashlib.sha256(payload).digest()


def observation_digest(obs: np.ndarray, payload: bytes = b"") -> bytes:
    """The digest of an observation batch ``obs`` (``(num_envs, *obs_shape)``) that an answer's
    MAC binds: of its shape and values as the wire carries them (little-endian float32, or uint8
    frames), or with ``payload`` (:func:`payload_digest` of the encoded image the frames came
    in) of its shape and that payload instead of the values."""
    pixels = obs.dtype == _UINT8
    kind = _ENCODED if payload else _PIXELS if pixels else _FLOAT32
    layout = _LAYOUTS.get(obs.ndim)
    if layout is None:  # (a compiled layout per rank: packing costs a quarter as much)
        layout = _LAYOUTS[obs.ndim] = struct.Struct(f"<{len(_OBSERVATION_TAG)}sBI{obs.ndim}Q")
    digest = hashlib.sha256(layout.pack(_OBSERVATION_TAG, kind, obs.ndim, *obs.shape))
    if payload:
        digest.update(payload)
    else:
        digest.update(np.ascontiguousarray(obs, dtype=_UINT8 if pixels else _FLOAT32_LE).data)
    return digest.digest()


def published_digests(batch: Any, payload: bytes, values_received: bool) -> list[bytes]:
    """The digests a receiver of ``batch`` may compute (what :meth:`ActionCheck.expect` takes):
    of the encoded image ``payload`` it went out in, and of its values where someone receives
    them (``values_received``: a subscriber in this process, or across DDS). The values' digest
    is left on the batch (``values_digest``), which a subscriber in this process is handed as
    it is: one hash per batch there, not two."""
    digests = [observation_digest(batch.obs, payload)] if payload else []
    if not payload or values_received:
        batch.values_digest = observation_digest(batch.obs)
        digests.append(batch.values_digest)
    return digests


def batch_digest(batch: ObservedBatch) -> bytes:
    """:func:`observation_digest` of a received batch, with the payload digest it came with
    (``payload_digest``, set where its frames were decoded from an encoded image); a batch
    handed over in this process carries the one its publisher computed (``values_digest``)."""
    payload = getattr(batch, "payload_digest", b"")
    known = getattr(batch, "values_digest", b"")
    return known if known and not payload else observation_digest(batch.obs, payload)


def action_header(robot_id: int, step: int, actions: np.ndarray, policy_version: int,
                  observations: bytes) -> bytes:
    """The fields a MAC covers besides the action values, in a fixed binary layout:
    ``observations`` is the digest of the batch answered (:func:`observation_digest`)."""
    if len(observations) != DIGEST_BYTES:
        raise ValueError(f"an observation digest has {DIGEST_BYTES} bytes, got "
                         f"{len(observations)}")
    shape = actions.shape[1:]
    return _MESSAGE_TAG + struct.pack(f"<IQQII{len(shape)}I", robot_id, step, policy_version,
                                      actions.shape[0], len(shape), *shape) + observations


def action_values(actions: np.ndarray) -> np.ndarray:
    """The action values as the wire carries them: C-ordered little-endian float32 (no copy
    when they are already)."""
    return np.ascontiguousarray(actions, dtype="<f4")


def action_message(robot_id: int, step: int, actions: np.ndarray, policy_version: int,
                   observations: bytes) -> bytes:
    """What a MAC covers: :func:`action_header`, then the float32 action values."""
    return action_header(robot_id, step, actions, policy_version, observations) + \
        action_values(actions).tobytes()


def _decode(text: str, where: str) -> bytes:
    try:
        raw = bytes.fromhex(text.strip())
    except ValueError as error:
        raise ActionKeyError(f"{where} must hold the key as hex digits: {error}") from None
    if len(raw) != KEY_BYTES:
        raise ActionKeyError(f"{where} holds {len(raw)} bytes; an action key has {KEY_BYTES} "
                             f"({2 * KEY_BYTES} hex digits), e.g. from "
                             "python3 -c 'import secrets; print(secrets.token_hex(32))'")
    return raw


def create_key_file(directory: str | os.PathLike[str]) -> Path:
    """Write a fresh run key to ``directory/action.key`` (mode 0600, hex) unless one is there;
    return its path. An existing key is kept, so regenerating a deployment keeps its key (as
    rl_core.security.weights_auth.create_key_file does for the weights key)."""
    path = Path(directory) / KEY_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(os.urandom(KEY_BYTES).hex() + "\n")
    return path


def parse_robot_keys(text: str) -> dict[int, bytes]:
    """``k=HEX[,k=HEX...]`` -> {robot id: key}.

    :raises ActionKeyError: when an entry is not ``k=HEX`` with a 32-byte key.
    """
    keys: dict[int, bytes] = {}
    entries = [part.strip() for part in text.split(",") if part.strip()]
    for number, entry in enumerate(entries, 1):
        robot, separator, key = entry.partition("=")
        if not separator or not robot.strip().isdigit():  # (never print a key)
            raise ActionKeyError(f"{ROBOT_KEYS_VARIABLE}: entry {number} is not ROBOT=HEX")
        keys[int(robot)] = _decode(key, f"{ROBOT_KEYS_VARIABLE} (robot {int(robot)})")
    return keys


def format_robot_keys(keys: Mapping[int, bytes]) -> str:
    """{robot id: key} -> ``k=HEX[,k=HEX...]`` (:func:`parse_robot_keys` reads it back)."""
    return ",".join(f"{robot}={key.hex()}" for robot, key in sorted(keys.items()))


class ActionKeys:
    """The action keys a process holds: MACs of action batches, and their verification.

    :param run_key: the run's key (every robot's key derives from it), or None.
    :param robot_keys: keys of single robots; they win over the run's key.
    """

    def __init__(self, run_key: bytes | None = None,
                 robot_keys: Mapping[int, bytes] | None = None) -> None:
        self.run_key = run_key
        self.robot_keys = dict(robot_keys or {})
        # A keyed HMAC per robot, copied for each batch: the key schedule is paid once.
        self._macs: dict[int, hmac.HMAC] = {}

    def configured(self, robot_id: int) -> bool:
        """Whether robot ``robot_id``'s key was configured (not only this process' own)."""
        return robot_id in self.robot_keys or self.run_key is not None

    @property
    def any_configured(self) -> bool:
        """Whether any key was configured."""
        return bool(self.robot_keys) or self.run_key is not None

    def key(self, robot_id: int) -> bytes:
        """Robot ``robot_id``'s key: configured, else derived from this process' own key."""
        if robot_id in self.robot_keys:
            return self.robot_keys[robot_id]
        return robot_key(_PROCESS_KEY if self.run_key is None else self.run_key, robot_id)

    def mac(self, robot_id: int, step: int, actions: np.ndarray, policy_version: int,
            observations: bytes) -> bytes:
        """The MAC of one action batch (``actions``: (num_envs, *action_shape)) answering the
        observations of digest ``observations`` (:func:`observation_digest`)."""
        keyed = self._macs.get(robot_id)
        if keyed is None:
            keyed = self._macs[robot_id] = hmac.new(self.key(robot_id), digestmod=hashlib.sha256)
        digest = keyed.copy()
        digest.update(action_header(robot_id, step, actions, policy_version, observations))
        digest.update(action_values(actions).data)
        return digest.digest()

    def verify(self, robot_id: int, step: int, actions: np.ndarray, policy_version: int,
               observations: bytes, mac: bytes) -> bool:
        """Whether ``mac`` is robot ``robot_id``'s MAC of this batch answering the observations
        of digest ``observations`` (in constant time)."""
        return len(mac) == MAC_BYTES and hmac.compare_digest(
            self.mac(robot_id, step, actions, policy_version, observations), mac)


def _read_run_key(environ: Mapping[str, str]) -> bytes | None:
    if environ.get(KEY_VARIABLE):
        return _decode(environ[KEY_VARIABLE], KEY_VARIABLE)
    path = environ.get(KEY_FILE_VARIABLE)
    if not path:
        return None
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ActionKeyError(f"{KEY_FILE_VARIABLE}={path} cannot be read: {error}") from None
    return _decode(text, f"{KEY_FILE_VARIABLE}={path}")


def load_keys(environ: Mapping[str, str] | None = None) -> ActionKeys:
    """This process' action keys from the environment (see the module docstring).

    :raises ActionKeyError: when a configured key cannot be read or is malformed.
    """
    environ = os.environ if environ is None else environ
    return ActionKeys(_read_run_key(environ),
                      parse_robot_keys(environ.get(ROBOT_KEYS_VARIABLE, "")))


class ActionCheck:
    """What a simulator steps with: only action batches whose MAC verifies under its robot's key
    for observations it published (:meth:`expect`).

    :param keys: the simulator process' action keys.
    :param allow_unsigned: without a configured key for the robot, step with any batch
        (development only: anyone on the domain can then drive the robot).
    """

    def __init__(self, keys: ActionKeys, allow_unsigned: bool = False) -> None:
        self.keys = keys
        self.allow_unsigned = allow_unsigned
        #: Digests of the batches published per (robot, step), oldest first (a republished
        #: batch may add one).
        self._published: OrderedDict[tuple[int, int], tuple[bytes, ...]] = OrderedDict()

    def expect(self, robot_id: int, step: int, digests: Iterable[bytes]) -> None:
        """The simulator published observations of ``digests`` (:func:`observation_digest`, one
        per form a receiver may hash: the values, the encoded image) for ``step``."""
        key = (robot_id, step)
        known = self._published.pop(key, ())
        self._published[key] = known + tuple(d for d in digests if d not in known)
        while len(self._published) > REMEMBERED_BATCHES:
            self._published.popitem(last=False)

    def refusal(self, robot_id: int, step: int, actions: np.ndarray, policy_version: int,
                mac: bytes) -> str | None:
        """Why this batch must not drive the robot; None to step with it."""
        configured = self.keys.configured(robot_id)
        if not configured and self.allow_unsigned:
            return None
        published = self._published.get((robot_id, step), ())
        if any(self.keys.verify(robot_id, step, actions, policy_version, digest, mac)
               for digest in published):
            return None
        what = "no MAC" if not mac else "a MAC that does not verify"
        if not configured:
            return (f"step {step} arrived with {what}, and this simulator has no action key "
                    f"({ROBOT_KEYS_VARIABLE}, {KEY_VARIABLE} or {KEY_FILE_VARIABLE}): only a "
                    "policy in its own process can drive it; allow_unsigned:=true accepts any "
                    "actions (development only)")
        if not published and mac:
            return (f"step {step} answers observations this simulator did not publish (or "
                    f"published more than {REMEMBERED_BATCHES} batches ago): harvested from a "
                    "policy that was sent a peer's observations, or forged")
        return (f"step {step} arrived with {what} under robot {robot_id}'s action key for the "
                "observations this simulator published: an answer to other observations (a "
                "peer's), forged, or from a policy with another run's key")


def answer(keys: ActionKeys, robot: int, msg: Observations, actions: np.ndarray, version: int
           ) -> Actions:
    """The action batch answering ``msg``, with the MAC of robot ``robot`` (the robot the policy
    serves, not the one the observations name) over the digest of the observations as received
    (:func:`batch_digest`)."""
    return Actions(msg.robot_id, msg.step, actions, version, msg.stamp_ns,
                   keys.mac(robot, msg.step, actions, version, batch_digest(msg)))
