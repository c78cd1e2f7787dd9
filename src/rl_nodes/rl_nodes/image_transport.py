"""Image observations across DDS: one image message per batch beside the batch message.

A simulator whose task observes images (uint8 stacked frames) sends each observation or
experience batch as two messages over DDS with the batch's stamp: the batch message with its
image fields empty (rl_nodes.messages), and one image of the whole batch on the batch topic's
side topic, named as image_transport names them (``<topic>/image`` for ``observation_codec`` raw,
``<topic>/image/compressed`` for png and jpeg; rl_core.wire.image_codecs), with the robot's camera
frame ``robot_{k}/camera`` as ``frame_id``. Receivers join the halves by ``(frame_id, stamp)``
(:class:`ImageJoin` over rl_core.wire.image_join). Topics: docs/graph.md, "Image topics".

Inside one process nothing of this happens: the batch object is handed over whole (zero-copy),
and the image publisher sends only over DDS, so colocated runs never encode. ``latent`` sends no
images on the acting path: the simulator encodes its frames with the trainer's encoder and
publishes the features as a float32 observation batch (:class:`LatentEncoder`); its experience
still travels as png for the learner.
"""

from __future__ import annotations

import array
import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
from sensor_msgs.msg import CompressedImage, Image

from rl_core.security.action_auth import payload_digest
from rl_core.wire import encoding
from rl_core.wire.image_codecs import (
    Camera,
    compressed_format,
    decode_raw_tall,
    decode_tall,
    encode_batch,
    format_codec,
)
from rl_core.wire.image_join import Frames, HalfJoin, camera_frame
from rl_nodes import graph
from rl_nodes.messages import (
    AwaitingImages,
    Experience,
    Observations,
    TopicType,
    ns_to_stamp,
    stamp_to_ns,
)

T = TypeVar("T")


def side_topic(topic: str, codec: str) -> str:
    """The image side topic of batch topic ``topic`` for ``codec`` (rl_nodes.graph)."""
    suffix = graph.RAW_IMAGE_SUFFIX if codec == "raw" else graph.COMPRESSED_IMAGE_SUFFIX
    return f"{topic}/{suffix}"


def batch_frames(data: Observations | Experience) -> np.ndarray:
    """The uint8 frames of a batch in the order they are stacked in its image (experience:
    every ``obs`` row, then every ``next_obs`` row)."""
    if isinstance(data, Experience):
        return np.concatenate((data.obs, data.next_obs))
    return data.obs


# --- image messages -----------------------------------------------------------------------------

def image_topic_type(codec: str, quality: int = 90, camera: Camera | None = None
                     ) -> TopicType[Any]:
    """How a batch becomes its side-topic image message for ``codec`` (raw, png, jpeg), and how
    a received one is decoded into :class:`Frames` (on the executor thread), its size checked
    against ``camera`` first."""
    if codec == "raw":
        return TopicType(Image, _raw_to_msg, functools.partial(_raw_from_msg, camera=camera),
                         _image_bytes)

    def to_msg(data: Observations | Experience) -> CompressedImage:
        msg = CompressedImage()
        msg.header.stamp = ns_to_stamp(data.stamp_ns)
        msg.header.frame_id = camera_frame(data.robot_id)
        msg.format = compressed_format(codec)
        msg.data = array.array("B", encode_batch(batch_frames(data), codec, quality))
        return msg

    return TopicType(CompressedImage, to_msg,
                     functools.partial(_compressed_from_msg, camera=camera), _image_bytes)


def _image_bytes(msg: Image | CompressedImage) -> int:
    return encoding.FIXED_BYTES + len(msg.data)  # header, format or sizes, and the data


def _raw_to_msg(data: Observations | Experience) -> Image:
    frames = batch_frames(data)
    msg = Image()
    msg.header.stamp = ns_to_stamp(data.stamp_ns)
    msg.header.frame_id = camera_frame(data.robot_id)
    msg.width = frames.shape[3]
    msg.height = frames.size // (3 * msg.width)
    msg.encoding = "rgb8"
    msg.step = 3 * msg.width
    msg.data = array.array("B", np.ascontiguousarray(frames).tobytes())
    return msg


def _raw_from_msg(msg: Image, camera: Camera | None) -> Frames:
    return Frames(msg.header.frame_id, stamp_to_ns(msg.header.stamp),
                  decode_raw_tall(msg.data, msg.encoding, msg.height, msg.width, msg.step, camera))


def _compressed_from_msg(msg: CompressedImage, camera: Camera | None) -> Frames:
    data = bytes(msg.data)
    return Frames(msg.header.frame_id, stamp_to_ns(msg.header.stamp),
                  decode_tall(data, format_codec(msg.format), camera), payload_digest(data))


def image_receivers(topic: str, camera: Camera | None = None
                    ) -> tuple[tuple[str, TopicType[Any]], ...]:
    """``(side topic, its type)`` of both image side topics of batch topic ``topic``; a receiver
    subscribes to both, whichever codec the sender uses (the codec is read from the message),
    and decodes only images that fit ``camera``."""
    return ((side_topic(topic, "raw"), image_topic_type("raw", camera=camera)),
            (side_topic(topic, "png"), image_topic_type("png", camera=camera)))


# --- receiving: joining batches and images -----------------------------------------------------

class ImageJoin(HalfJoin[T]):
    """Takes what a batch topic and its image side topics decode and hands batches to
    ``deliver`` whole: local objects and batches without images at once, a batch from DDS once
    its image arrived (rl_core.wire.image_join.HalfJoin pairs the halves)."""

    def on_batch(self, item: T | AwaitingImages[T]) -> None:
        if not isinstance(item, AwaitingImages):
            self.deliver(item)  # a local hand-off or a batch without images
            return
        super().on_batch(item)

    def on_frames(self, frames: Frames | Any) -> None:
        if isinstance(frames, Frames):  # only over DDS (publish(local=False)); nothing local
            super().on_frames(frames)

    def _join(self, item: Any, frames: Frames) -> None:
        # Observations keep the digest of the encoded image they came in: an answer's MAC binds
        # it (rl_core.security.action_auth), and a lossy decoder need not give the sender's pixels back.
        if frames.payload_digest and isinstance(item.batch, Observations):
            item = replace(item, batch=replace(item.batch, payload_digest=frames.payload_digest))
        super()._join(item, frames)


def subscribe_with_images(node: Any, topic_type: TopicType[Any], topic: str, qos: Any,
                          callback: Callable[[Any], None], what: str,
                          obs_shape: tuple[int, ...]) -> ImageJoin[Any]:
    """Subscribe ``node`` (an RLNode) to batch topic ``topic`` and both its image side topics,
    handing joined batches to ``callback``.

    :param topic_type: the batch topic's type that lets batches await images
        (``OBSERVATIONS_WITH_IMAGES``, ``EXPERIENCE_WITH_IMAGES``).
    :param obs_shape: the task's image observations: images of another camera are refused
        before they are decoded.
    """
    join: ImageJoin[Any] = ImageJoin(callback, node.reject, what)
    node.subscription(topic, join.on_batch, topic_type, qos)
    for side_name, side_type in image_receivers(topic, Camera.of(obs_shape)):
        node.subscription(side_name, join.on_frames, side_type, qos)
    return join


def image_publisher(node: Any, topic: str, codec: str, quality: int, qos: Any) -> Any:
    """The side-topic publisher of batch topic ``topic`` for ``codec`` (raw, png, jpeg); publish
    with ``local=False`` (in-process receivers get the batch whole)."""
    return node.publisher(side_topic(topic, codec), image_topic_type(codec, quality), qos)


# --- latent: the trainer's encoder on the robot ---------------------------------------------

class LatentEncoder:
    """The image encoder of the trainer's latest actor, run where the frames are taken
    (``observation_codec`` latent), so that only its features cross to the policy.

    It follows ``/policy_weights`` like a policy node: the same signature, replay and NaN checks
    (rl_core.acting.policy_model.weights_refusal), then rl_core.acting.latent.LatentFeatures
    checks the architecture against the task's image shape and loads the encoder. Until the first
    weights arrive there is no encoder (:attr:`ready` is false): a random one would not match the
    policy's head.

    :param node: the simulator node (its ``reject`` counts refused weights).
    :param obs_shape: the task's image observation shape ``(stack, h, w, 3)``.
    :param key: the learner's public key (None: weights refused unless ``allow_unsigned``).
    :param allow_unsigned: without a key, load weights unchecked.
    """

    def __init__(self, node: Any, obs_shape: tuple[int, ...], key: Any,
                 allow_unsigned: bool = False) -> None:
        from rl_core.acting.latent import LatentFeatures  # a latent robot runs torch; other codecs don't

        self.node = node
        self.key = key
        self.allow_unsigned = allow_unsigned
        self.features = LatentFeatures(obs_shape)
        self.current = (0, 0)  # (epoch, version) of the loaded weights

    @property
    def ready(self) -> bool:
        return self.features.ready

    def on_weights(self, msg: Any) -> bool:
        """Load ``msg`` (rl_nodes.messages.Weights); whether the encoder changed."""
        from rl_core.acting.policy_model import weights_refusal

        if self.ready and (msg.epoch, msg.version) == self.current:
            return False
        refusal = weights_refusal(msg, self.key, self.current, allow_unsigned=self.allow_unsigned)
        if refusal is None:
            try:
                self.features.load(msg.architecture, msg.tensors())
            except ValueError as error:
                refusal = str(error)
        if refusal is not None:
            self.node.reject("policy weights", refusal)
            return False
        self.current = (msg.epoch, msg.version)
        return True

    def encode(self, frames: np.ndarray) -> np.ndarray:
        """``uint8 (N, stack, h, w, 3)`` frames -> ``float32 (N, feature_dim)`` features."""
        return self.features.encode(frames)
