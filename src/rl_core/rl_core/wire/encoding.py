"""How the nodes' objects (rl_core.wire.messages) travel as rl_interfaces messages, without ROS:
each message's fields as the keywords of its constructor, the decoding of a received message back
into the object, the array encodings, and the checks that decoding network input applies.

rl_nodes.messages wraps these in the ROS types (``ObservationBatch(**observation_fields(b))``);
the decoders read any object with the message's fields, so they are tested here without ROS.
Every check raises a ``ValueError`` that names the field and what is wrong, so a receiving node
can log and count a malformed message and go on.
"""

from __future__ import annotations

import array
import json
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from rl_core.wire.image_codecs import is_image_shape
from rl_core.wire.messages import (
    MAX_EXPERIENCE_ROWS,
    MAX_SHAPE_DIMS,
    MAX_WEIGHTS_BYTES,
    Actions,
    AwaitingImages,
    Batch,
    Episodes,
    Experience,
    Observations,
    Weights,
)

#: zlib level of a sample answer's image pixels (TransitionBatch.msg): the fastest.
PIXELS_ZLIB_LEVEL = 1
#: The only weights format that travels.
WEIGHTS_FORMAT = "safetensors"


# --- encodings ----------------------------------------------------------------------------------

def float32_array(values: np.ndarray) -> array.array:
    """float32 ``array.array`` sharing nothing with ``values``, built with one memcpy."""
    out = array.array("f")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float32).tobytes())
    return out


def uint32_array(values: np.ndarray | Sequence[int]) -> array.array:
    """uint32 ``array.array`` of ``values`` (shapes, environment ids)."""
    out = array.array("I")
    out.frombytes(np.ascontiguousarray(values, dtype=np.uint32).tobytes())
    return out


def int64_array(values: np.ndarray | Sequence[int]) -> array.array:
    """int64 ``array.array`` of ``values`` (replay slots)."""
    return array.array("q", np.ascontiguousarray(values, dtype=np.int64).tobytes())


def deflate_pixels(obs: np.ndarray, next_obs: np.ndarray) -> bytes:
    """A batch's uint8 observations then next observations, zlib-compressed (a sample answer's
    ``pixels``)."""
    return zlib.compress(np.concatenate((obs, next_obs)).tobytes(), PIXELS_ZLIB_LEVEL)


def inflate_pixels(data: Any, size: int) -> np.ndarray:
    """Zlib ``data`` -> ``size`` uint8 values; refuses data that do not inflate to exactly that
    (never inflating more than ``size`` bytes, whatever the data claim)."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(bytes(data), size)
    except zlib.error as error:
        raise ValueError(f"field 'pixels' is not zlib data: {error}") from error
    if len(raw) != size or inflater.unconsumed_tail or not inflater.eof:
        raise ValueError(f"field 'pixels' does not inflate to the {size} bytes of the batch's "
                         "images")
    return np.frombuffer(raw, dtype=np.uint8)


# --- payload bytes, for the publishers' counters (the fields of rl_interfaces messages) -------

#: Bytes of a message's header and scalar fields (stamp, frame_id, ids, counters), roughly.
FIXED_BYTES = 48


def observations_bytes(msg: Any) -> int:
    """Payload bytes of an ObservationBatch (array data plus its fixed fields; counted from the
    arrays' lengths, so counting costs well under a microsecond)."""
    return FIXED_BYTES + 4 * (len(msg.obs) + len(msg.env_ids) + len(msg.obs_shape))


def experience_bytes(msg: Any) -> int:
    """Payload bytes of an ExperienceBatch, as :func:`observations_bytes`."""
    return FIXED_BYTES + len(msg.terminated) + len(msg.truncated) + len(msg.intervened) + 4 * (
        len(msg.obs) + len(msg.next_obs) + len(msg.actions) + len(msg.rewards)
        + len(msg.env_ids) + len(msg.obs_shape) + len(msg.action_shape))


def episodes_bytes(msg: Any) -> int:
    """Payload bytes of an EpisodeStatistics, as :func:`observations_bytes`."""
    return FIXED_BYTES + len(msg.env_ids) * (4 + 4 + 4 + 1)


# --- checks of received fields ------------------------------------------------------------------

def shaped(flat: Any, rows: int, shape: tuple[int, ...], name: str,
           check_finite: bool = False) -> np.ndarray:
    """View a received float32[] as ``(rows, *shape)`` without copying; check its size first,
    and with ``check_finite`` that every value is finite (observations and actions, which a
    local zero-copy hand-off from the process' own node does not pay for)."""
    values = np.frombuffer(flat, dtype=np.float32) if isinstance(flat, array.array) else \
        np.asarray(flat, dtype=np.float32)
    expected = rows * int(np.prod(shape, dtype=np.int64))
    if values.size != expected:
        raise ValueError(f"field '{name}' has {values.size} values, but {rows} rows of shape "
                         f"{list(shape)} need {expected}")
    if check_finite and not np.all(np.isfinite(values)):
        raise ValueError(f"field '{name}' holds NaN or infinite values")
    return values.reshape((rows, *shape))


def positive_shape(values: Any, name: str) -> tuple[int, ...]:
    """A received shape field; every size must be positive."""
    if len(values) > MAX_SHAPE_DIMS:  # the type's bound, which receiving does not check
        raise ValueError(f"field '{name}' has {len(values)} dimensions; at most "
                         f"{MAX_SHAPE_DIMS} are allowed")
    shape = tuple(int(v) for v in values)
    if not shape or any(v <= 0 for v in shape):
        raise ValueError(f"field '{name}' must list positive sizes, got {list(shape)}")
    return shape


def check_length(values: Any, rows: int, name: str) -> None:
    """A per-row field must have one entry per row."""
    if len(values) != rows:
        raise ValueError(f"field '{name}' has {len(values)} entries, expected {rows}")


def check_rows(rows: int, what: str) -> None:
    """One message may carry at most MAX_EXPERIENCE_ROWS rows of ``what``."""
    if rows > MAX_EXPERIENCE_ROWS:
        raise ValueError(f"{rows} {what} in one message exceed the cap of "
                         f"{MAX_EXPERIENCE_ROWS}; split them into smaller messages")


def transition_layout(msg: Any) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """``(rows, obs_shape, action_shape)`` of a batch of transitions (``ExperienceBatch``,
    ``TransitionBatch``), checked: the row cap, positive shapes, one ``terminated`` per row."""
    rows = int(msg.batch_size)
    check_rows(rows, "transitions")
    obs_shape = positive_shape(msg.obs_shape, "obs_shape")
    action_shape = positive_shape(msg.action_shape, "action_shape")
    check_length(msg.terminated, rows, "terminated")
    return rows, obs_shape, action_shape


def experience_images_elsewhere(msg: Any, rows: int, obs_shape: tuple[int, ...],
                                joined: bool) -> bool:
    """Check an ``ExperienceBatch``'s per-row flags and where its images travel: True when they
    travel on the side topic, which only a receiver that ``joined`` them may accept.

    :raises ValueError: a flag field of another length, side-topic images where they are not
        joined, or ``obs`` and ``next_obs`` travelling apart.
    """
    check_length(msg.truncated, rows, "truncated")
    if len(msg.intervened):
        check_length(msg.intervened, rows, "intervened")
    awaiting = images_elsewhere(msg.obs, rows, obs_shape)
    if awaiting and not joined:
        raise side_topic_error("obs")
    if awaiting and len(msg.next_obs):
        raise ValueError("field 'obs' is empty but 'next_obs' is not; both travel inline or "
                         "both on the image side topic")
    return awaiting


def images_elsewhere(flat: Any, rows: int, shape: tuple[int, ...]) -> bool:
    """Whether ``flat`` was left empty because the batch's images travel on the side topic."""
    return len(flat) == 0 and rows > 0 and is_image_shape(shape)


def side_topic_error(name: str) -> ValueError:
    """The error for a batch whose images travel on the side topic, at a receiver that does not
    join them."""
    return ValueError(f"field '{name}' is empty: the batch's images travel on the topic's "
                      "image side topic (observation_codec); subscribe with "
                      "rl_nodes.image_transport to receive them")


def weights_architecture(weights_format: str, size: int, architecture: str) -> dict[str, Any]:
    """The architecture of received weights, after the checks that come before decoding them:
    the format, the size cap, the architecture's JSON."""
    if weights_format != WEIGHTS_FORMAT:
        raise ValueError(f"weights format {weights_format!r} is not supported; only "
                         f"{WEIGHTS_FORMAT!r}")
    if size > MAX_WEIGHTS_BYTES:
        raise ValueError(f"weights of {size} bytes exceed the {MAX_WEIGHTS_BYTES}-byte cap")
    try:
        parsed: dict[str, Any] = json.loads(architecture)
    except json.JSONDecodeError as error:
        raise ValueError(f"weights architecture is not JSON: {error}") from error
    return parsed


# --- a sample answer's batches, which travel as one ----------------------------------------------

def join_batches(batches: Sequence[Batch]) -> Batch:
    """The rows of ``batches`` (at least one), in order, as one batch."""
    return Batch._make(np.concatenate(column) for column in zip(*batches))


def split_batches(whole: Batch, count: int) -> list[Batch]:
    """``whole`` cut into ``count`` equal batches (what :func:`join_batches` joined)."""
    rows = len(whole.rewards)
    if count <= 0 or rows % count:
        raise ValueError(f"sample answer holds {rows} rows, not a multiple of its {count} "
                         "batches")
    size = rows // count
    return [Batch._make(column[k * size:(k + 1) * size] for column in whole) for k in range(count)]


# --- each message's fields (header aside) and the object decoded from them -----------------------

def observation_fields(data: Observations) -> dict[str, Any]:
    """An ``ObservationBatch``'s fields; uint8 image observations are left out (``obs`` empty):
    they travel as one image message on the side topic (rl_nodes.image_transport)."""
    rows = data.obs.shape[0]
    fields: dict[str, Any] = dict(robot_id=data.robot_id, step=data.step, num_envs=rows,
                                  obs_shape=uint32_array(data.obs.shape[1:]),
                                  env_ids=uint32_array(np.arange(rows)))
    if data.obs.dtype != np.uint8:
        fields["obs"] = float32_array(data.obs)
    return fields


def decode_observations(msg: Any, stamp_ns: int, images: bool = False
                        ) -> Observations | AwaitingImages[Observations]:
    """The observations; with ``images``, a batch whose images travel on the side topic comes
    back as :class:`AwaitingImages` (without, it is refused)."""
    shape = positive_shape(msg.obs_shape, "obs_shape")
    if images_elsewhere(msg.obs, msg.num_envs, shape):
        if not images:
            raise side_topic_error("obs")
        empty = np.empty((0, *shape), dtype=np.uint8)
        return AwaitingImages(Observations(msg.robot_id, msg.step, empty, stamp_ns), ("obs",),
                              int(msg.num_envs), shape)
    obs = shaped(msg.obs, msg.num_envs, shape, "obs", check_finite=True)
    return Observations(msg.robot_id, msg.step, obs, stamp_ns)


def action_fields(data: Actions) -> dict[str, Any]:
    """An ``ActionBatch``'s fields."""
    return dict(robot_id=data.robot_id, step=data.step, num_envs=data.actions.shape[0],
                action_shape=uint32_array(data.actions.shape[1:]),
                actions=float32_array(data.actions), policy_version=data.policy_version,
                mac=array.array("B", data.mac))


def decode_actions(msg: Any, stamp_ns: int) -> Actions:
    shape = positive_shape(msg.action_shape, "action_shape")
    actions = shaped(msg.actions, msg.num_envs, shape, "actions", check_finite=True)
    return Actions(msg.robot_id, msg.step, actions, msg.policy_version, stamp_ns, bytes(msg.mac))


def experience_fields(data: Experience) -> dict[str, Any]:
    """An ``ExperienceBatch``'s fields; uint8 image observations are left out (``obs``,
    ``next_obs`` empty): they travel on the side topic, or in a sample answer's ``pixels``."""
    rows = len(data)
    fields: dict[str, Any] = dict(
        robot_id=data.robot_id, stream=data.stream, sequence=data.sequence, batch_size=rows,
        obs_shape=uint32_array(data.obs.shape[1:]),
        action_shape=uint32_array(data.actions.shape[1:]),
        actions=float32_array(data.actions), rewards=float32_array(data.rewards),
        terminated=np.asarray(data.terminated, dtype=bool).tolist(),
        truncated=np.asarray(data.truncated, dtype=bool).tolist(),
        env_ids=uint32_array(np.arange(rows) if data.env_ids is None else data.env_ids),
        policy_version=data.policy_version)
    if data.obs.dtype != np.uint8:
        fields.update(obs=float32_array(data.obs), next_obs=float32_array(data.next_obs))
    if data.intervened is not None and data.intervened.any():
        fields["intervened"] = np.asarray(data.intervened, dtype=bool).tolist()
    return fields


def decode_experience(msg: Any, stamp_ns: int, images: bool = False
                      ) -> Experience | AwaitingImages[Experience]:
    """The experience; with ``images``, a batch whose images travel on the side topic comes
    back as :class:`AwaitingImages` (without, it is refused)."""
    rows, obs_shape, action_shape = transition_layout(msg)
    awaiting = experience_images_elsewhere(msg, rows, obs_shape, images)
    empty = np.empty((0, *obs_shape), dtype=np.uint8)
    experience = Experience(
        robot_id=msg.robot_id,
        obs=empty if awaiting else shaped(msg.obs, rows, obs_shape, "obs"),
        actions=shaped(msg.actions, rows, action_shape, "actions"),
        rewards=shaped(msg.rewards, rows, (), "rewards").reshape(rows),
        next_obs=empty if awaiting else shaped(msg.next_obs, rows, obs_shape, "next_obs"),
        terminated=np.asarray(msg.terminated, dtype=bool),
        truncated=np.asarray(msg.truncated, dtype=bool),
        policy_version=msg.policy_version,
        stamp_ns=stamp_ns,
        env_ids=np.asarray(msg.env_ids, dtype=np.uint32) if len(msg.env_ids) == rows else None,
        stream=msg.stream,
        sequence=msg.sequence,
        intervened=np.asarray(msg.intervened, dtype=bool) if len(msg.intervened) else None,
    )
    return AwaitingImages(experience, ("obs", "next_obs"), rows, obs_shape) if awaiting \
        else experience


def weights_fields(data: Weights) -> dict[str, Any]:
    """A ``PolicyWeights``' fields: the safetensors bytes, their checksum and signature."""
    blob, digest = data.encoded()
    return dict(version=data.version, update_step=data.update_step, format=WEIGHTS_FORMAT,
                data=array.array("B", blob), checksum=digest,
                architecture=data.architecture_json(), epoch=data.epoch,
                signature=data.signature)


def decode_weights(msg: Any, stamp_ns: int) -> Weights:
    """Received weights, still encoded: the receiver checks their size and signature before it
    decodes them (:meth:`Weights.tensors`)."""
    architecture = weights_architecture(msg.format, len(msg.data), msg.architecture)
    return Weights(msg.version, msg.update_step, {}, architecture, stamp_ns,
                   (bytes(msg.data), msg.checksum), msg.epoch, msg.signature)


def episode_fields(data: Episodes) -> dict[str, Any]:
    """An ``EpisodeStatistics``' fields."""
    return dict(robot_id=data.robot_id, env_ids=data.env_ids,
                returns=[float(r) for r in data.returns], lengths=data.lengths,
                successes=data.successes, total_episodes=data.total_episodes,
                total_env_steps=data.total_env_steps, policy_version=data.policy_version)


def decode_episodes(msg: Any, stamp_ns: int) -> Episodes:
    rows = len(msg.env_ids)
    check_rows(rows, "episodes")
    for name in ("returns", "lengths", "successes"):
        check_length(getattr(msg, name), rows, name)
    return Episodes(msg.robot_id, list(msg.env_ids), list(msg.returns), list(msg.lengths),
                    list(msg.successes), msg.total_episodes, msg.total_env_steps,
                    msg.policy_version, stamp_ns)


def transition_fields(batch: Batch) -> dict[str, Any]:
    """A sampled batch as a ``TransitionBatch``'s fields (image observations as compressed
    ``pixels``)."""
    fields: dict[str, Any] = dict(
        batch_size=len(batch.rewards), obs_shape=uint32_array(batch.obs.shape[1:]),
        action_shape=uint32_array(batch.actions.shape[1:]),
        actions=float32_array(batch.actions), rewards=float32_array(batch.rewards),
        terminated=(np.asarray(batch.terminated) > 0.5).tolist(),
        indices=int64_array(batch.indices), weights=float32_array(batch.weights))
    if batch.obs.dtype == np.uint8:
        fields["pixels"] = array.array("B", deflate_pixels(batch.obs, batch.next_obs))
    else:
        fields.update(obs=float32_array(batch.obs), next_obs=float32_array(batch.next_obs))
    return fields


def decode_transitions(msg: Any) -> Batch:
    """The batch of a ``TransitionBatch``, every field's size checked against ``batch_size``.

    :raises ValueError: naming the field that does not fit.
    """
    rows, obs_shape, action_shape = transition_layout(msg)
    check_length(msg.indices, rows, "indices")
    if len(msg.pixels):
        if len(msg.obs) or len(msg.next_obs):
            raise ValueError("field 'pixels' is set but 'obs'/'next_obs' are not empty; images "
                             "travel in 'pixels' only")
        size = 2 * rows * int(np.prod(obs_shape, dtype=np.int64))
        obs, next_obs = inflate_pixels(msg.pixels, size).reshape((2, rows, *obs_shape))
    else:
        obs = shaped(msg.obs, rows, obs_shape, "obs")
        next_obs = shaped(msg.next_obs, rows, obs_shape, "next_obs")
    return Batch(obs, shaped(msg.actions, rows, action_shape, "actions"),
                 shaped(msg.rewards, rows, (), "rewards").reshape(rows), next_obs,
                 np.asarray(msg.terminated, dtype=np.float32),
                 np.frombuffer(msg.indices, dtype=np.int64),
                 shaped(msg.weights, rows, (), "weights").reshape(rows))


def sampled_batches(msg: Any) -> list[Batch]:
    """The batches of a ``SampleBatch`` answer, which travel joined in ``transitions``."""
    if msg.success and msg.batches > 0 and msg.transitions.batch_size > 0:
        return split_batches(decode_transitions(msg.transitions), int(msg.batches))
    return []


# --- one wire version per deployment --------------------------------------------------------------

def peer_version_refusal(topic: str, own: tuple[str, str], peer: tuple[str, str, str]) -> str | None:
    """Why a publisher on ``topic`` cannot reach a subscription of type and type hash ``own``:
    ``peer`` = (node, type, hash) publishes another type, or the same type defined otherwise (a
    peer of another rl_interfaces): DDS connects neither, without a word. None when it can."""
    node, kind, digest = peer
    if (kind, digest) == own or (kind == own[0] and not (digest and own[1])):
        return None
    return (f"{node} publishes {kind} ({digest[:18]}...) on {topic}, where this node takes "
            f"{own[0]} ({own[1][:18]}...): one deployment runs one wire version; install the "
            "same rl_interfaces everywhere (scripts/setup.sh, or one image) and restart it")
