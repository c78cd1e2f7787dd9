"""How the project's services map their Python objects onto rl_interfaces service types: the
replay buffer's ``sample`` and ``update_priorities`` (rl_core.replay.service) and its
``save``/``load``.

The zero-copy channel (rl_nodes.intra_process_services) hands the objects over inside one
process; these conversions run only across processes.
"""

from __future__ import annotations

import array
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from rl_core.replay import PriorityUpdate
from rl_core.replay.service import PriorityAnswer, SampleAnswer
from rl_core.wire import fields
from rl_core.wire.transport import Batch, SampleRequest
from rl_interfaces.msg import TransitionBatch
from rl_interfaces.srv import BufferFile, SampleBatch, UpdatePriorities


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
    msg.obs_shape = fields.uint32_array(batch.obs.shape[1:])
    msg.action_shape = fields.uint32_array(batch.actions.shape[1:])
    if batch.obs.dtype == np.uint8:  # image observations: compressed uint8 pixels
        msg.pixels = array.array("B", fields.deflate_pixels(batch.obs, batch.next_obs))
    else:
        msg.obs = fields.float32_array(batch.obs)
        msg.next_obs = fields.float32_array(batch.next_obs)
    msg.actions = fields.float32_array(batch.actions)
    msg.rewards = fields.float32_array(batch.rewards)
    msg.terminated = (np.asarray(batch.terminated) > 0.5).tolist()
    msg.indices = fields.int64_array(batch.indices)
    msg.weights = fields.float32_array(batch.weights)
    return msg


def transitions_from_msg(msg: TransitionBatch) -> Batch:
    """The batch of a ``TransitionBatch``, every field's size checked against ``batch_size``.

    :raises ValueError: naming the field that does not fit.
    """
    rows, obs_shape, action_shape = fields.transition_layout(msg)
    fields.check_length(msg.indices, rows, "indices")
    if len(msg.pixels):
        if len(msg.obs) or len(msg.next_obs):
            raise ValueError("field 'pixels' is set but 'obs'/'next_obs' are not empty; images "
                             "travel in 'pixels' only")
        size = 2 * rows * int(np.prod(obs_shape, dtype=np.int64))
        obs, next_obs = fields.inflate_pixels(msg.pixels, size).reshape((2, rows, *obs_shape))
    else:
        obs = fields.shaped(msg.obs, rows, obs_shape, "obs")
        next_obs = fields.shaped(msg.next_obs, rows, obs_shape, "next_obs")
    return Batch(obs, fields.shaped(msg.actions, rows, action_shape, "actions"),
                 fields.shaped(msg.rewards, rows, (), "rewards").reshape(rows), next_obs,
                 np.asarray(msg.terminated, dtype=np.float32),
                 np.frombuffer(msg.indices, dtype=np.int64),
                 fields.shaped(msg.weights, rows, (), "weights").reshape(rows))


def _sample_response_to_msg(result: SampleAnswer) -> Any:
    response = SampleBatch.Response(success=result.success, message=result.message,
                                    batches=len(result.batches), buffer_size=result.buffer_size,
                                    total_inserted=result.total_inserted,
                                    prioritized=result.prioritized,
                                    total_env_steps=result.total_env_steps, done=result.done)
    if result.batches:
        response.transitions = transitions_to_msg(fields.join_batches(result.batches))
    return response


def _sample_response_from_msg(msg: Any) -> SampleAnswer:
    batches: list[Batch] = []
    if msg.success and msg.batches > 0 and msg.transitions.batch_size > 0:
        batches = fields.split_batches(transitions_from_msg(msg.transitions), int(msg.batches))
    return SampleAnswer(msg.success, msg.message, batches, msg.buffer_size, msg.total_inserted,
                        msg.prioritized, msg.total_env_steps, msg.done)


#: ``sample``: request = :class:`SampleRequest`, response = :class:`SampleAnswer`.
SAMPLE_SERVICE = ServiceType(SampleBatch, _sample_request_to_msg, _sample_request_from_msg,
                             _sample_response_to_msg, _sample_response_from_msg)

# --- priorities -----------------------------------------------------------------------------

def _priorities_to_msg(update: PriorityUpdate) -> Any:
    return UpdatePriorities.Request(indices=fields.int64_array(update.indices),
                                    priorities=fields.float32_array(update.priorities),
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


