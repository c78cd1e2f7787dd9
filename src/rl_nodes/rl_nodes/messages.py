"""Conversions between rl_interfaces messages and the objects the nodes work with
(rl_core.wire.messages): the topics' batches and weights, the replay buffer's services (``sample``,
``update_priorities``, ``save``/``load``) and a robot's commands.

Inside one process the zero-copy channel (rl_nodes.intra_process*) hands the plain objects from
publisher to subscriber (and from client to service); only when a peer outside the process exists
are they turned into ROS messages. The fields and their checks are ROS-free
(rl_core.wire.encoding); this module puts them into the ROS types. A malformed message from the
wire raises a ``ValueError`` that says what is wrong (the receiving node logs it, counts it and
keeps going).

torch is imported only where policy weights are encoded or decoded: a robot that acts with an
ONNX model (requirements-edge.txt) has no torch and never receives weights.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

import numpy as np
from builtin_interfaces.msg import Duration, Time
from std_msgs.msg import Float64MultiArray, Header

from rl_core.wire import encoding
from rl_core.wire.messages import (
    Actions,
    AwaitingImages,
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

#: The conversions, and the batch objects they convert (re-exported: a node imports its
#: message side from here).
__all__ = ["ACTIONS", "BUFFER_FILE_SERVICE", "CONVERSIONS", "EPISODES", "EXPERIENCE",
           "EXPERIENCE_WITH_IMAGES", "OBSERVATIONS", "OBSERVATIONS_WITH_IMAGES",
           "PRIORITIES_SERVICE", "SAMPLE_SERVICE", "Actions", "AwaitingImages", "Episodes",
           "Experience", "Observations", "ServiceType", "TopicType", "Weights", "command_message",
           "experience_from_msg", "experience_to_msg", "ns_to_stamp", "plain", "stamp_to_ns",
           "topic_type", "weights_from_msg", "weights_to_msg"]

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


def _header(stamp_ns: int) -> Header:
    return Header(stamp=ns_to_stamp(stamp_ns))


def _batch_topic_types(msg_type: Any, fields: Any, decode: Any, size: Any
                       ) -> tuple[TopicType[Any], TopicType[Any]]:
    """A batch topic's type, and the one whose images may travel on the side topic (for
    receivers that join them, rl_nodes.image_transport)."""
    def to_msg(data: Any) -> Any:
        return msg_type(header=_header(data.stamp_ns), **fields(data))

    def from_msg(msg: Any, images: bool = False) -> Any:
        return decode(msg, stamp_to_ns(msg.header.stamp), images)

    return (TopicType(msg_type, to_msg, from_msg, size),
            TopicType(msg_type, to_msg, functools.partial(from_msg, images=True), size))


OBSERVATIONS, OBSERVATIONS_WITH_IMAGES = _batch_topic_types(
    ObservationBatch, encoding.observation_fields, encoding.decode_observations,
    encoding.observations_bytes)
EXPERIENCE, EXPERIENCE_WITH_IMAGES = _batch_topic_types(
    ExperienceBatch, encoding.experience_fields, encoding.decode_experience,
    encoding.experience_bytes)
experience_to_msg, experience_from_msg = EXPERIENCE.to_msg, EXPERIENCE.from_msg

ACTIONS = TopicType(
    ActionBatch,
    lambda data: ActionBatch(header=_header(data.stamp_ns), **encoding.action_fields(data)),
    lambda msg: encoding.decode_actions(msg, stamp_to_ns(msg.header.stamp)))


def weights_to_msg(data: Weights) -> PolicyWeights:
    return PolicyWeights(header=_header(data.stamp_ns), **encoding.weights_fields(data))


def weights_from_msg(msg: PolicyWeights) -> Weights:
    """Received weights, still encoded: the receiver checks their size and signature before it
    decodes them (:meth:`Weights.tensors`)."""
    return encoding.decode_weights(msg, stamp_to_ns(msg.header.stamp))


WEIGHTS = TopicType(PolicyWeights, weights_to_msg, weights_from_msg)

EPISODES = TopicType(
    EpisodeStatistics,
    lambda data: EpisodeStatistics(header=_header(data.stamp_ns),
                                   **encoding.episode_fields(data)),
    lambda msg: encoding.decode_episodes(msg, stamp_to_ns(msg.header.stamp)),
    encoding.episodes_bytes)


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


def _sample_response_to_msg(result: SampleAnswer) -> Any:
    response = SampleBatch.Response(success=result.success, message=result.message,
                                    batches=len(result.batches), buffer_size=result.buffer_size,
                                    total_inserted=result.total_inserted,
                                    prioritized=result.prioritized,
                                    total_env_steps=result.total_env_steps, done=result.done)
    if result.batches:
        response.transitions = TransitionBatch(
            **encoding.transition_fields(encoding.join_batches(result.batches)))
    return response


def _sample_response_from_msg(msg: Any) -> SampleAnswer:
    return SampleAnswer(msg.success, msg.message, encoding.sampled_batches(msg), msg.buffer_size,
                        msg.total_inserted, msg.prioritized, msg.total_env_steps, msg.done)


#: ``sample``: request = :class:`SampleRequest`, response = :class:`SampleAnswer`.
SAMPLE_SERVICE = ServiceType(SampleBatch, _sample_request_to_msg, _sample_request_from_msg,
                             _sample_response_to_msg, _sample_response_from_msg)

# --- priorities -----------------------------------------------------------------------------

def _priorities_to_msg(update: PriorityUpdate) -> Any:
    return UpdatePriorities.Request(indices=encoding.int64_array(update.indices),
                                    priorities=encoding.float32_array(update.priorities),
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


