"""Conversions between rl_interfaces messages and the objects the nodes work with
(rl_core.wire.messages): the topics' batches and weights, the replay buffer's services (``sample``,
``update_priorities``, ``save``/``load``) and a robot's commands.

Inside one process the zero-copy channel (rl_nodes.intra_process*) hands the plain objects from
publisher to subscriber (and from client to service); only when a peer outside the process exists
are they turned into ROS messages. Decoding checks every shape field against the array sizes, so a
malformed message from the wire raises a ``ValueError`` that says what is wrong (the receiving
node logs it, counts it and keeps going).

torch is imported only where policy weights are encoded or decoded: a robot that acts with an
ONNX model (requirements-edge.txt) has no torch and never receives weights.
"""

from __future__ import annotations

import array
import functools
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

import numpy as np
from builtin_interfaces.msg import Duration, Time
from std_msgs.msg import Float64MultiArray

from rl_core.wire import messages as wire
from rl_core.wire.messages import (
    Actions,
    AwaitingImages,
    Batch,
    Episodes,
    Experience,
    Observations,
    PriorityAnswer,
    PriorityUpdate,
    SampleAnswer,
    SampleRequest,
    Weights,
)
from rl_interfaces.msg import (
    ActionBatch,
    EpisodeStatistics,
    ExperienceBatch,
    ObservationBatch,
    PolicyWeights,
    TransitionBatch,
)
from rl_interfaces.srv import BufferFile, SampleBatch, UpdatePriorities

T = TypeVar("T")


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


def plain(msg_type: type) -> TopicType[Any]:
    """A topic whose Python object is the ROS message itself (low-rate status topics)."""
    return TopicType(msg_type, lambda msg: msg, lambda msg: msg)


def ns_to_stamp(stamp_ns: int) -> Time:
    """Nanoseconds -> a header stamp (exact both ways with :func:`stamp_to_ns`)."""
    return Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)


def stamp_to_ns(stamp: Time) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


# --- observation batches ------------------------------------------------------------------------

def observations_to_msg(data: Observations) -> ObservationBatch:
    """The message; uint8 image observations are left out (``obs`` empty), they travel as one
    image message on the side topic (rl_nodes.image_transport)."""
    msg = ObservationBatch()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.robot_id = data.robot_id
    msg.step = data.step
    msg.num_envs = data.obs.shape[0]
    msg.obs_shape = wire.uint32_array(data.obs.shape[1:])
    if data.obs.dtype != np.uint8:
        msg.obs = wire.float32_array(data.obs)
    msg.env_ids = wire.uint32_array(np.arange(data.obs.shape[0]))
    return msg


def observations_from_msg(msg: ObservationBatch, images: bool = False
                          ) -> Observations | AwaitingImages[Observations]:
    """The observations; with ``images``, a batch whose images travel on the side topic comes
    back as :class:`AwaitingImages` (without, it is refused)."""
    shape = wire.positive_shape(msg.obs_shape, "obs_shape")
    stamp = stamp_to_ns(msg.header.stamp)
    if wire.images_elsewhere(msg.obs, msg.num_envs, shape):
        if not images:
            raise wire.side_topic_error("obs")
        empty = np.empty((0, *shape), dtype=np.uint8)
        return AwaitingImages(Observations(msg.robot_id, msg.step, empty, stamp), ("obs",),
                              int(msg.num_envs), shape)
    obs = wire.finite(wire.shaped(msg.obs, msg.num_envs, shape, "obs"), "obs")
    return Observations(msg.robot_id, msg.step, obs, stamp)


def _batch_topic_types(msg_type: Any, to_msg: Any, from_msg: Any, size: Any
                       ) -> tuple[TopicType[Any], TopicType[Any]]:
    """A batch topic's type, and the one whose images may travel on the side topic (for
    receivers that join them, rl_nodes.image_transport)."""
    return (TopicType(msg_type, to_msg, from_msg, size),
            TopicType(msg_type, to_msg, functools.partial(from_msg, images=True), size))


OBSERVATIONS, OBSERVATIONS_WITH_IMAGES = _batch_topic_types(
    ObservationBatch, observations_to_msg, observations_from_msg, wire.observations_bytes)


# --- action batches -----------------------------------------------------------------------------

def actions_to_msg(data: Actions) -> ActionBatch:
    msg = ActionBatch()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.robot_id = data.robot_id
    msg.step = data.step
    msg.num_envs = data.actions.shape[0]
    msg.action_shape = wire.uint32_array(data.actions.shape[1:])
    msg.actions = wire.float32_array(data.actions)
    msg.policy_version = data.policy_version
    msg.mac = array.array("B", data.mac)
    return msg


def actions_from_msg(msg: ActionBatch) -> Actions:
    shape = wire.positive_shape(msg.action_shape, "action_shape")
    actions = wire.finite(wire.shaped(msg.actions, msg.num_envs, shape, "actions"), "actions")
    return Actions(msg.robot_id, msg.step, actions, msg.policy_version,
                   stamp_to_ns(msg.header.stamp), bytes(msg.mac))


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
    msg.obs_shape = wire.uint32_array(data.obs.shape[1:])
    msg.action_shape = wire.uint32_array(data.actions.shape[1:])
    if data.obs.dtype != np.uint8:
        msg.obs = wire.float32_array(data.obs)
        msg.next_obs = wire.float32_array(data.next_obs)
    msg.actions = wire.float32_array(data.actions)
    msg.rewards = wire.float32_array(data.rewards)
    msg.terminated = np.asarray(data.terminated, dtype=bool).tolist()
    msg.truncated = np.asarray(data.truncated, dtype=bool).tolist()
    msg.env_ids = wire.uint32_array(np.arange(rows) if data.env_ids is None else data.env_ids)
    msg.policy_version = data.policy_version
    if data.intervened is not None and data.intervened.any():
        msg.intervened = np.asarray(data.intervened, dtype=bool).tolist()
    return msg


def experience_from_msg(msg: ExperienceBatch, images: bool = False
                        ) -> Experience | AwaitingImages[Experience]:
    """The experience; with ``images``, a batch whose images travel on the side topic comes
    back as :class:`AwaitingImages` (without, it is refused)."""
    rows, obs_shape, action_shape = wire.transition_layout(msg)
    awaiting = wire.experience_images_elsewhere(msg, rows, obs_shape, images)
    empty = np.empty((0, *obs_shape), dtype=np.uint8)
    experience = Experience(
        robot_id=msg.robot_id,
        obs=empty if awaiting else wire.shaped(msg.obs, rows, obs_shape, "obs"),
        actions=wire.shaped(msg.actions, rows, action_shape, "actions"),
        rewards=wire.shaped(msg.rewards, rows, (), "rewards").reshape(rows),
        next_obs=empty if awaiting else wire.shaped(msg.next_obs, rows, obs_shape, "next_obs"),
        terminated=np.asarray(msg.terminated, dtype=bool),
        truncated=np.asarray(msg.truncated, dtype=bool),
        policy_version=msg.policy_version,
        stamp_ns=stamp_to_ns(msg.header.stamp),
        env_ids=np.frombuffer(msg.env_ids, dtype=np.uint32) if len(msg.env_ids) == rows else None,
        stream=msg.stream,
        sequence=msg.sequence,
        intervened=np.asarray(msg.intervened, dtype=bool) if len(msg.intervened) else None,
    )
    return AwaitingImages(experience, ("obs", "next_obs"), rows, obs_shape) if awaiting \
        else experience


EXPERIENCE, EXPERIENCE_WITH_IMAGES = _batch_topic_types(
    ExperienceBatch, experience_to_msg, experience_from_msg, wire.experience_bytes)


# --- policy weights -----------------------------------------------------------------------------

def weights_to_msg(data: Weights) -> PolicyWeights:
    blob, digest = data.encoded()
    msg = PolicyWeights()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.version = data.version
    msg.update_step = data.update_step
    msg.format = wire.WEIGHTS_FORMAT
    msg.data = array.array("B", blob)
    msg.checksum = digest
    msg.architecture = data.architecture_json()
    msg.epoch = data.epoch
    msg.signature = data.signature
    return msg


def weights_from_msg(msg: PolicyWeights) -> Weights:
    """Received weights, still encoded: the receiver checks their size and signature before it
    decodes them (:meth:`Weights.tensors`)."""
    architecture = wire.weights_architecture(msg.format, len(msg.data), msg.architecture)
    return Weights(msg.version, msg.update_step, {}, architecture, stamp_to_ns(msg.header.stamp),
                   (bytes(msg.data), msg.checksum), msg.epoch, msg.signature)


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
    wire.check_rows(rows, "episodes")
    for name in ("returns", "lengths", "successes"):
        wire.check_length(getattr(msg, name), rows, name)
    return Episodes(msg.robot_id, list(msg.env_ids), list(msg.returns), list(msg.lengths),
                    list(msg.successes), msg.total_episodes, msg.total_env_steps,
                    msg.policy_version, stamp_to_ns(msg.header.stamp))


EPISODES = TopicType(EpisodeStatistics, episodes_to_msg, episodes_from_msg, wire.episodes_bytes)


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


def command_message(command: Any, kind: str, joints: Sequence[str], interface: str,
                    period: float, stamp: Any) -> Any:
    """A robot command as its controller takes it: ``std_msgs/Float64MultiArray`` (``kind``
    ``commands``), or a ``trajectory_msgs/JointTrajectory`` of one point one control period
    ahead (rl_core.robot.sim_robot_config.trajectory_point)."""
    if kind == "commands":
        return Float64MultiArray(data=[float(v) for v in command])
    # Not at the top: the edge install (requirements-edge.txt) has neither of these.
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from rl_core.robot.sim_robot_config import trajectory_point

    field, values, (sec, nanosec) = trajectory_point(command, interface, period)
    point = JointTrajectoryPoint(time_from_start=Duration(sec=sec, nanosec=nanosec))
    setattr(point, field, values)
    msg = JointTrajectory(joint_names=list(joints), points=[point])
    msg.header.stamp = stamp
    return msg

# --- services ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ServiceType:
    """How a service's request/response objects map onto a ROS service type."""

    srv_type: type
    request_to_msg: Callable[[Any], Any]
    request_from_msg: Callable[[Any], Any]
    response_to_msg: Callable[[Any], Any]
    response_from_msg: Callable[[Any], Any]


# --- replay sampling service --------------------------------------------------------------------

def _sample_request_to_msg(request: SampleRequest) -> Any:
    return SampleBatch.Request(batch_size=request.batch_size, max_batches=request.max_batches)


def _sample_request_from_msg(msg: Any) -> SampleRequest:
    return SampleRequest(int(msg.batch_size), int(msg.max_batches))


def transitions_to_msg(batch: Batch) -> TransitionBatch:
    """A sampled batch as a ``TransitionBatch`` (image observations as compressed pixels)."""
    rows = len(batch.rewards)
    msg = TransitionBatch(batch_size=rows)
    msg.obs_shape = wire.uint32_array(batch.obs.shape[1:])
    msg.action_shape = wire.uint32_array(batch.actions.shape[1:])
    if batch.obs.dtype == np.uint8:  # image observations: compressed uint8 pixels
        msg.pixels = array.array("B", wire.deflate_pixels(batch.obs, batch.next_obs))
    else:
        msg.obs = wire.float32_array(batch.obs)
        msg.next_obs = wire.float32_array(batch.next_obs)
    msg.actions = wire.float32_array(batch.actions)
    msg.rewards = wire.float32_array(batch.rewards)
    msg.terminated = (np.asarray(batch.terminated) > 0.5).tolist()
    msg.indices = wire.int64_array(batch.indices)
    msg.weights = wire.float32_array(batch.weights)
    return msg


def transitions_from_msg(msg: TransitionBatch) -> Batch:
    """The batch of a ``TransitionBatch``, every field's size checked against ``batch_size``.

    :raises ValueError: naming the field that does not fit.
    """
    rows, obs_shape, action_shape = wire.transition_layout(msg)
    wire.check_length(msg.indices, rows, "indices")
    if len(msg.pixels):
        if len(msg.obs) or len(msg.next_obs):
            raise ValueError("field 'pixels' is set but 'obs'/'next_obs' are not empty; images "
                             "travel in 'pixels' only")
        size = 2 * rows * int(np.prod(obs_shape, dtype=np.int64))
        obs, next_obs = wire.inflate_pixels(msg.pixels, size).reshape((2, rows, *obs_shape))
    else:
        obs = wire.shaped(msg.obs, rows, obs_shape, "obs")
        next_obs = wire.shaped(msg.next_obs, rows, obs_shape, "next_obs")
    return Batch(obs, wire.shaped(msg.actions, rows, action_shape, "actions"),
                 wire.shaped(msg.rewards, rows, (), "rewards").reshape(rows), next_obs,
                 np.asarray(msg.terminated, dtype=np.float32),
                 np.frombuffer(msg.indices, dtype=np.int64),
                 wire.shaped(msg.weights, rows, (), "weights").reshape(rows))


def _sample_response_to_msg(result: SampleAnswer) -> Any:
    response = SampleBatch.Response(success=result.success, message=result.message,
                                    batches=len(result.batches), buffer_size=result.buffer_size,
                                    total_inserted=result.total_inserted,
                                    prioritized=result.prioritized,
                                    total_env_steps=result.total_env_steps, done=result.done)
    if result.batches:
        response.transitions = transitions_to_msg(wire.join_batches(result.batches))
    return response


def _sample_response_from_msg(msg: Any) -> SampleAnswer:
    batches: list[Batch] = []
    if msg.success and msg.batches > 0 and msg.transitions.batch_size > 0:
        batches = wire.split_batches(transitions_from_msg(msg.transitions), int(msg.batches))
    return SampleAnswer(msg.success, msg.message, batches, msg.buffer_size, msg.total_inserted,
                        msg.prioritized, msg.total_env_steps, msg.done)


#: ``sample``: request = :class:`SampleRequest`, response = :class:`SampleAnswer`.
SAMPLE_SERVICE = ServiceType(SampleBatch, _sample_request_to_msg, _sample_request_from_msg,
                             _sample_response_to_msg, _sample_response_from_msg)

# --- priorities -----------------------------------------------------------------------------

def _priorities_to_msg(update: PriorityUpdate) -> Any:
    return UpdatePriorities.Request(indices=wire.int64_array(update.indices),
                                    priorities=wire.float32_array(update.priorities),
                                    drawn_at=update.drawn_at)


def _priorities_from_msg(msg: Any) -> PriorityUpdate:
    """The update, unchecked: the replay buffer validates it and says why it refuses one."""
    return PriorityUpdate(np.frombuffer(msg.indices, dtype=np.int64),
                          np.frombuffer(msg.priorities, dtype=np.float32), int(msg.drawn_at))


#: ``update_priorities``: request = :class:`PriorityUpdate`, response = :class:`PriorityAnswer`.
PRIORITIES_SERVICE = ServiceType(
    UpdatePriorities, _priorities_to_msg, _priorities_from_msg,
    lambda a: UpdatePriorities.Response(success=a.success, message=a.message, applied=a.applied,
                                        skipped=a.skipped),
    lambda msg: PriorityAnswer(msg.success, msg.message, msg.applied, msg.skipped))

#: ``save``/``load``: request = path (str), response = (success, message, size, path).
BUFFER_FILE_SERVICE = ServiceType(
    BufferFile,
    lambda path: BufferFile.Request(path=path),
    lambda msg: msg.path,
    lambda r: BufferFile.Response(success=r[0], message=r[1], size=r[2], path=r[3]),
    lambda msg: (msg.success, msg.message, msg.size, msg.path))


