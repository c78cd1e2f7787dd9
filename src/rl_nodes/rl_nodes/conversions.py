"""Conversions between rl_interfaces messages and the numpy/torch objects the nodes work with.

Inside one process the zero-copy channel hands these plain objects from publisher to subscriber;
only when a subscriber outside the process exists are they turned into ROS messages. Decoding
checks every shape field against the array sizes, so a malformed message from the wire raises a
``ValueError`` that says what is wrong (the receiving node logs it, counts it and keeps going).

torch is imported only where policy weights are encoded or decoded: a robot that acts with an
ONNX model (requirements-edge.txt) has no torch and never receives weights.
"""

from __future__ import annotations

import array
import functools
import importlib
import json
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

import numpy as np
from builtin_interfaces.msg import Time

from rl_core.image_codecs import is_image_shape
from rl_core.replay import Batch, PriorityUpdate
from rl_core.replay.service import SampleAnswer
from rl_core.transport import (
    Actions,
    AwaitingImages,
    Episodes,
    Experience,
    Observations,
    SampleRequest,
    Weights,
)
from rl_interfaces.msg import ActionBatch, EpisodeStatistics, ExperienceBatch, ObservationBatch, PolicyWeights
from rl_interfaces.srv import BufferFile, SampleBatch

if TYPE_CHECKING:
    pass

T = TypeVar("T")
#: Largest PolicyWeights payload accepted from the wire (checked before it is decoded).
MAX_WEIGHTS_BYTES = 256 * 1024 * 1024
#: Most transitions one ExperienceBatch may carry (a simulator sends num_envs <= 1024 per step).
MAX_EXPERIENCE_ROWS = 65536
#: Most rows a sample request or a get_action request may ask for.
MAX_REQUEST_ROWS = 1 << 20
#: zlib level of a sample answer's image pixels (SampleBatch.srv): the fastest.
PIXELS_ZLIB_LEVEL = 1


@dataclass(frozen=True)
class TopicType(Generic[T]):
    """How a topic's Python object maps onto its ROS message type.

    :param msg_type: the ROS message class on the wire.
    :param to_msg: object -> message (used only when an outside subscriber exists).
    :param from_msg: message -> object (raises ValueError on malformed messages).
    :param wire_bytes: message -> its payload bytes, for the publishers' byte counters.
    """

    msg_type: type
    to_msg: Callable[[T], Any]
    from_msg: Callable[[Any], T]
    #: Payload bytes of a message of this type, counted per DDS publication (None: not counted).
    wire_bytes: Callable[[Any], int] | None = None


@dataclass(frozen=True)
class ServiceType(Generic[T]):
    """How a service's request/response objects map onto a ROS service type."""

    srv_type: type
    request_to_msg: Callable[[Any], Any]
    request_from_msg: Callable[[Any], Any]
    response_to_msg: Callable[[Any], Any]
    response_from_msg: Callable[[Any], Any]


def plain(msg_type: type) -> TopicType[Any]:
    """A topic whose Python object is the ROS message itself (low-rate status topics)."""
    return TopicType(msg_type, lambda msg: msg, lambda msg: msg)


# --- array helpers ------------------------------------------------------------------------------

def _float_array(values: np.ndarray) -> array.array:
    """float32 array.array sharing nothing with ``values``, built with one memcpy."""
    out = array.array("f")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float32).tobytes())
    return out


def _uint_array(values: np.ndarray | list[int], typecode: str = "I") -> array.array:
    out = array.array(typecode)
    dtype = np.uint32 if typecode == "I" else np.uint64
    out.frombytes(np.ascontiguousarray(values, dtype=dtype).tobytes())
    return out


def _shaped(flat: Any, rows: int, shape: tuple[int, ...], name: str) -> np.ndarray:
    """View a received float32[] as ``(rows, *shape)`` without copying; check its size first."""
    values = np.frombuffer(flat, dtype=np.float32) if isinstance(flat, array.array) else \
        np.asarray(flat, dtype=np.float32)
    expected = rows * int(np.prod(shape, dtype=np.int64))
    if values.size != expected:
        raise ValueError(f"field '{name}' has {values.size} values, but {rows} rows of shape "
                         f"{list(shape)} need {expected}")
    return values.reshape((rows, *shape))


#: Bytes of a message's header and scalar fields (stamp, frame_id, ids, counters), roughly.
FIXED_BYTES = 48


def _observations_bytes(msg: ObservationBatch) -> int:
    """Payload bytes of an observation batch (array data plus its fixed fields; counted from
    the arrays' lengths, so counting costs well under a microsecond)."""
    return FIXED_BYTES + 4 * (len(msg.obs) + len(msg.env_ids) + len(msg.obs_shape))


def _experience_bytes(msg: ExperienceBatch) -> int:
    """Payload bytes of an experience batch, as :func:`_observations_bytes`."""
    return FIXED_BYTES + len(msg.terminated) + len(msg.truncated) + 4 * (
        len(msg.obs) + len(msg.next_obs) + len(msg.actions) + len(msg.rewards)
        + len(msg.env_ids) + len(msg.obs_shape) + len(msg.action_shape))


def _episodes_bytes(msg: EpisodeStatistics) -> int:
    """Payload bytes of episode statistics, as :func:`_observations_bytes`."""
    return FIXED_BYTES + len(msg.env_ids) * (4 + 4 + 4 + 1)


def _shape(values: Any, name: str) -> tuple[int, ...]:
    shape = tuple(int(v) for v in values)
    if not shape or any(v <= 0 for v in shape):
        raise ValueError(f"field '{name}' must list positive sizes, got {list(shape)}")
    return shape


def ns_to_stamp(stamp_ns: int) -> Time:
    """Nanoseconds -> a header stamp (exact both ways with :func:`stamp_to_ns`)."""
    return Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)


def stamp_to_ns(stamp: Time) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def _length(values: Any, rows: int, name: str) -> None:
    if len(values) != rows:
        raise ValueError(f"field '{name}' has {len(values)} entries, expected {rows}")


# --- observation batches ------------------------------------------------------------------------

def _image_rows(flat: Any, rows: int, shape: tuple[int, ...]) -> bool:
    """Whether ``flat`` was left empty because the batch's images travel on the side topic."""
    return len(flat) == 0 and rows > 0 and is_image_shape(shape)


def _side_topic_error(name: str) -> ValueError:
    return ValueError(f"field '{name}' is empty: the batch's images travel on the topic's "
                      "image side topic (observation_codec); subscribe with "
                      "rl_nodes.image_transport to receive them")


def observations_to_msg(data: Observations) -> ObservationBatch:
    """The message; uint8 image observations are left out (``obs`` empty), they travel as one
    image message on the side topic (rl_nodes.image_transport)."""
    msg = ObservationBatch()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.robot_id = data.robot_id
    msg.step = data.step
    msg.num_envs = data.obs.shape[0]
    msg.obs_shape = _uint_array(data.obs.shape[1:])
    if data.obs.dtype != np.uint8:
        msg.obs = _float_array(data.obs)
    msg.env_ids = _uint_array(np.arange(data.obs.shape[0]))
    return msg


def _finite(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` when all are finite. Decoders of network input check this, so that a local
    (zero-copy) hand-off from the process' own node pays nothing."""
    if not np.all(np.isfinite(values)):
        raise ValueError(f"field '{name}' holds NaN or infinite values")
    return values


def observations_from_msg(msg: ObservationBatch, images: bool = False
                          ) -> Observations | AwaitingImages[Observations]:
    """The observations; with ``images``, a batch whose images travel on the side topic comes
    back as :class:`AwaitingImages` (without, it is refused)."""
    shape = _shape(msg.obs_shape, "obs_shape")
    stamp = stamp_to_ns(msg.header.stamp)
    if _image_rows(msg.obs, msg.num_envs, shape):
        if not images:
            raise _side_topic_error("obs")
        empty = np.empty((0, *shape), dtype=np.uint8)
        return AwaitingImages(Observations(msg.robot_id, msg.step, empty, stamp), ("obs",),
                              int(msg.num_envs), shape)
    obs = _finite(_shaped(msg.obs, msg.num_envs, shape, "obs"), "obs")
    return Observations(msg.robot_id, msg.step, obs, stamp)


OBSERVATIONS = TopicType(ObservationBatch, observations_to_msg, observations_from_msg,
                         _observations_bytes)
#: Observations whose images may travel on the side topic (receivers that join them).
OBSERVATIONS_WITH_IMAGES = TopicType(ObservationBatch, observations_to_msg,
                                     functools.partial(observations_from_msg, images=True),
                                     _observations_bytes)


# --- action batches -----------------------------------------------------------------------------

def actions_to_msg(data: Actions) -> ActionBatch:
    msg = ActionBatch()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.robot_id = data.robot_id
    msg.step = data.step
    msg.num_envs = data.actions.shape[0]
    msg.action_shape = _uint_array(data.actions.shape[1:])
    msg.actions = _float_array(data.actions)
    msg.policy_version = data.policy_version
    return msg


def actions_from_msg(msg: ActionBatch) -> Actions:
    shape = _shape(msg.action_shape, "action_shape")
    actions = _finite(_shaped(msg.actions, msg.num_envs, shape, "actions"), "actions")
    return Actions(msg.robot_id, msg.step, actions, msg.policy_version, stamp_to_ns(msg.header.stamp))


ACTIONS = TopicType(ActionBatch, actions_to_msg, actions_from_msg)


# --- experience batches -------------------------------------------------------------------------

def experience_to_msg(data: Experience) -> ExperienceBatch:
    """The message; uint8 image observations are left out (``obs``, ``next_obs`` empty): they
    travel on the side topic, or in a sample answer's ``pixels``."""
    msg = ExperienceBatch()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.robot_id = data.robot_id
    msg.stream = data.stream
    msg.sequence = data.sequence
    rows = len(data)
    msg.batch_size = rows
    msg.obs_shape = _uint_array(data.obs.shape[1:])
    msg.action_shape = _uint_array(data.actions.shape[1:])
    if data.obs.dtype != np.uint8:
        msg.obs = _float_array(data.obs)
        msg.next_obs = _float_array(data.next_obs)
    msg.actions = _float_array(data.actions)
    msg.rewards = _float_array(data.rewards)
    msg.terminated = np.asarray(data.terminated, dtype=bool).tolist()
    msg.truncated = np.asarray(data.truncated, dtype=bool).tolist()
    msg.env_ids = _uint_array(np.arange(rows) if data.env_ids is None else data.env_ids)
    msg.policy_version = data.policy_version
    return msg


def experience_from_msg(msg: ExperienceBatch, images: bool = False
                        ) -> Experience | AwaitingImages[Experience]:
    """The experience; with ``images``, a batch whose images travel on the side topic comes
    back as :class:`AwaitingImages` (without, it is refused)."""
    rows = int(msg.batch_size)
    if rows > MAX_EXPERIENCE_ROWS:
        raise ValueError(f"an experience batch of {rows} rows exceeds the cap of "
                         f"{MAX_EXPERIENCE_ROWS}; split it into smaller messages")
    obs_shape = _shape(msg.obs_shape, "obs_shape")
    action_shape = _shape(msg.action_shape, "action_shape")
    _length(msg.terminated, rows, "terminated")
    _length(msg.truncated, rows, "truncated")
    awaiting = _image_rows(msg.obs, rows, obs_shape)
    if awaiting and not images:
        raise _side_topic_error("obs")
    if awaiting and len(msg.next_obs):
        raise ValueError("field 'obs' is empty but 'next_obs' is not; both travel inline or "
                         "both on the image side topic")
    empty = np.empty((0, *obs_shape), dtype=np.uint8)
    experience = Experience(
        robot_id=msg.robot_id,
        obs=empty if awaiting else _shaped(msg.obs, rows, obs_shape, "obs"),
        actions=_shaped(msg.actions, rows, action_shape, "actions"),
        rewards=_shaped(msg.rewards, rows, (), "rewards").reshape(rows),
        next_obs=empty if awaiting else _shaped(msg.next_obs, rows, obs_shape, "next_obs"),
        terminated=np.asarray(msg.terminated, dtype=bool),
        truncated=np.asarray(msg.truncated, dtype=bool),
        policy_version=msg.policy_version,
        stamp_ns=stamp_to_ns(msg.header.stamp),
        env_ids=np.frombuffer(msg.env_ids, dtype=np.uint32) if len(msg.env_ids) == rows else None,
        stream=msg.stream,
        sequence=msg.sequence,
    )
    return AwaitingImages(experience, ("obs", "next_obs"), rows, obs_shape) if awaiting \
        else experience


EXPERIENCE = TopicType(ExperienceBatch, experience_to_msg, experience_from_msg,
                       _experience_bytes)
#: Experience whose images may travel on the side topic (receivers that join them).
EXPERIENCE_WITH_IMAGES = TopicType(ExperienceBatch, experience_to_msg,
                                   functools.partial(experience_from_msg, images=True),
                                   _experience_bytes)


# --- policy weights -----------------------------------------------------------------------------

def weights_to_msg(data: Weights) -> PolicyWeights:
    blob, digest = data.encoded()
    msg = PolicyWeights()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.version = data.version
    msg.update_step = data.update_step
    msg.format = "safetensors"
    msg.data = array.array("B", blob)
    msg.checksum = digest
    msg.architecture = data.architecture_json()
    msg.epoch = data.epoch
    msg.signature = data.signature
    return msg


def weights_from_msg(msg: PolicyWeights) -> Weights:
    if msg.format != "safetensors":
        raise ValueError(f"weights format {msg.format!r} is not supported; only 'safetensors'")
    if len(msg.data) > MAX_WEIGHTS_BYTES:
        raise ValueError(f"weights of {len(msg.data)} bytes exceed the {MAX_WEIGHTS_BYTES}-byte cap")
    try:
        architecture = json.loads(msg.architecture)
    except json.JSONDecodeError as error:
        raise ValueError(f"weights architecture is not JSON: {error}") from error
    from rl_core.checkpoint import tensors_from_bytes

    blob = bytes(msg.data)
    state = tensors_from_bytes(blob, msg.checksum)
    return Weights(msg.version, msg.update_step, state, architecture, stamp_to_ns(msg.header.stamp),
                   (blob, msg.checksum), msg.epoch, msg.signature)


WEIGHTS = TopicType(PolicyWeights, weights_to_msg, weights_from_msg)


# --- episode statistics -------------------------------------------------------------------------

def episodes_to_msg(data: Episodes) -> EpisodeStatistics:
    msg = EpisodeStatistics()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.robot_id = data.robot_id
    msg.env_ids = data.env_ids
    msg.returns = [float(r) for r in data.returns]
    msg.lengths = data.lengths
    msg.successes = data.successes
    msg.total_episodes = data.total_episodes
    msg.total_env_steps = data.total_env_steps
    msg.policy_version = data.policy_version
    return msg


def episodes_from_msg(msg: EpisodeStatistics) -> Episodes:
    rows = len(msg.env_ids)
    if rows > MAX_EXPERIENCE_ROWS:
        raise ValueError(f"{rows} episodes in one message exceed the cap of "
                         f"{MAX_EXPERIENCE_ROWS}")
    for name in ("returns", "lengths", "successes"):
        _length(getattr(msg, name), rows, name)
    return Episodes(msg.robot_id, list(msg.env_ids), list(msg.returns), list(msg.lengths),
                    list(msg.successes), msg.total_episodes, msg.total_env_steps,
                    msg.policy_version, stamp_to_ns(msg.header.stamp))


EPISODES = TopicType(EpisodeStatistics, episodes_to_msg, episodes_from_msg, _episodes_bytes)


# --- replay sampling service --------------------------------------------------------------------

def _sample_request_to_msg(request: SampleRequest) -> Any:
    msg = SampleBatch.Request(batch_size=request.batch_size, max_batches=request.max_batches,
                              weights_version=request.weights_version,
                              insert_budget=request.insert_budget)
    if request.priorities is not None:
        msg.priority_indices = array.array(
            "q", np.ascontiguousarray(request.priorities.indices, np.int64).tobytes())
        msg.priorities = _float_array(request.priorities.priorities)
        msg.priorities_drawn_at = request.priorities.drawn_at
    return msg


def _sample_request_from_msg(msg: Any) -> SampleRequest:
    """The request; its priorities are passed on unchecked (the replay buffer validates them,
    so that a bad priority update is rejected on its own while the batches are still served)."""
    priorities = None
    if len(msg.priority_indices) or len(msg.priorities):
        priorities = PriorityUpdate(np.frombuffer(msg.priority_indices, dtype=np.int64),
                                    np.frombuffer(msg.priorities, dtype=np.float32),
                                    int(msg.priorities_drawn_at))
    return SampleRequest(int(msg.batch_size), int(msg.max_batches), int(msg.weights_version),
                         int(msg.insert_budget), priorities)


def _sample_response_to_msg(result: SampleAnswer) -> Any:
    response = SampleBatch.Response(success=result.success, message=result.message,
                                    batches=len(result.batches), buffer_size=result.buffer_size,
                                    total_inserted=result.total_inserted,
                                    prioritized=result.prioritized)
    if result.batches:
        batch = Batch(*(np.concatenate(column) for column in zip(*result.batches)))
        response.batch = experience_to_msg(Experience(
            0, batch.obs, batch.actions, batch.rewards, batch.next_obs,
            np.asarray(batch.terminated) > 0.5, np.zeros(len(batch.rewards), dtype=bool)))
        if batch.obs.dtype == np.uint8:  # image observations: compressed uint8 pixels
            response.pixels = array.array("B", zlib.compress(
                np.concatenate((batch.obs, batch.next_obs)).tobytes(), PIXELS_ZLIB_LEVEL))
        response.indices = array.array("q", np.ascontiguousarray(batch.indices, np.int64).tobytes())
        response.weights = _float_array(batch.weights)
    return response


def _sample_response_from_msg(msg: Any) -> SampleAnswer:
    batches: list[Batch] = []
    if msg.success and msg.batches > 0 and msg.batch.batch_size > 0:
        experience = experience_from_msg(msg.batch, images=True)
        if isinstance(experience, AwaitingImages):
            experience = experience.complete(_inflate(msg.pixels, experience.size))
        rows = len(experience)
        if rows % msg.batches:
            raise ValueError(f"sample answer holds {rows} rows, not a multiple of its "
                             f"{msg.batches} batches")
        if len(msg.indices) != rows:
            raise ValueError(f"sample answer holds {len(msg.indices)} indices for {rows} rows")
        indices = np.frombuffer(msg.indices, dtype=np.int64)
        whole = Batch(experience.obs, experience.actions, experience.rewards, experience.next_obs,
                      experience.terminated.astype(np.float32), indices,
                      _shaped(msg.weights, rows, (), "weights").reshape(rows))
        size = rows // msg.batches
        batches = [Batch(*(column[k * size:(k + 1) * size] for column in whole))
                   for k in range(msg.batches)]
    return SampleAnswer(msg.success, msg.message, batches, msg.buffer_size, msg.total_inserted,
                        msg.prioritized)


def _inflate(data: Any, size: int) -> np.ndarray:
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


#: ``sample``: request = :class:`SampleRequest`, response = :class:`SampleAnswer`.
SAMPLE_SERVICE = ServiceType(SampleBatch, _sample_request_to_msg, _sample_request_from_msg,
                             _sample_response_to_msg, _sample_response_from_msg)

#: ``save``/``load``: request = path (str), response = (success, message, size, path).
BUFFER_FILE_SERVICE = ServiceType(
    BufferFile,
    lambda path: BufferFile.Request(path=path),
    lambda msg: msg.path,
    lambda r: BufferFile.Response(success=r[0], message=r[1], size=r[2], path=r[3]),
    lambda msg: (msg.success, msg.message, msg.size, msg.path))


#: The conversion of each rl_interfaces topic type; every other type (std_msgs, sensor_msgs,
#: ...) travels as the ROS message itself (:func:`plain`).
CONVERSIONS: dict[str, TopicType[Any]] = {
    "rl_interfaces/msg/ObservationBatch": OBSERVATIONS,
    "rl_interfaces/msg/ActionBatch": ACTIONS,
    "rl_interfaces/msg/ExperienceBatch": EXPERIENCE,
    "rl_interfaces/msg/PolicyWeights": WEIGHTS,
    "rl_interfaces/msg/EpisodeStatistics": EPISODES,
}


@functools.cache
def topic_type(ros_type: str) -> TopicType[Any]:
    """The conversion of messages of ``ros_type`` (``pkg/msg/Type``, as ``graph.Topic.type``).

    :raises ValueError: when the type is not ``pkg/msg/Type`` or cannot be imported.
    """
    if ros_type in CONVERSIONS:
        return CONVERSIONS[ros_type]
    package, kind, name = (ros_type.split("/") + ["", "", ""])[:3]
    if kind != "msg" or not package or not name:
        raise ValueError(f"message type {ros_type!r} is not of the form pkg/msg/Type")
    try:
        return plain(getattr(importlib.import_module(f"{package}.msg"), name))
    except (ImportError, AttributeError) as error:
        raise ValueError(f"message type {ros_type!r} cannot be imported: {error}") from error
