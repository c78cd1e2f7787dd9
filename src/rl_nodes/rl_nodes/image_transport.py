"""Image observations across DDS: one image message per batch beside the batch message.

A simulator whose task observes images (uint8 stacked frames) sends each observation or
experience batch as two messages over DDS, both stamped with the batch's stamp:

* the batch message (``ObservationBatch``/``ExperienceBatch``) with its image fields empty
  (rl_nodes.conversions leaves uint8 observations out), carrying rewards, flags and shapes;
* one image of the whole batch on the batch topic's side topic, following image_transport's
  naming: ``<topic>/image`` (``sensor_msgs/Image``, ``rgb8``) for ``observation_codec`` raw,
  ``<topic>/image/compressed`` (``sensor_msgs/CompressedImage``) for png and jpeg. The frames are
  stacked into one tall image (rl_core.image_codecs), so a hop encodes once per batch; the
  header's ``frame_id`` is the robot's camera frame ``robot_{k}/camera``.

Receivers join the two halves by ``(frame_id, stamp)`` (:class:`ImageJoin`). Inside one process
nothing of this happens: the batch object is handed over whole (zero-copy), and the image
publisher sends only over DDS (``publish(..., local=False)``), so colocated runs never encode.

``latent`` sends no images on the acting path: the simulator encodes its frames with the
trainer's encoder and publishes the features as a plain float32 observation batch
(:class:`LatentEncoder`); its experience still travels as png for the learner.
"""

from __future__ import annotations

import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from sensor_msgs.msg import CompressedImage, Image

from rl_core.image_codecs import decode_tall, encode_batch
from rl_nodes import graph
from rl_nodes.conversions import (
    FIXED_BYTES,
    AwaitingImages,
    Experience,
    Observations,
    TopicType,
    ns_to_stamp,
    stamp_to_ns,
)

T = TypeVar("T")

#: Halves a join keeps waiting for their other half before it gives up on the oldest: the
#: experience topics' queue depth, since a reliable image topic may lag its small batch topic by
#: that much while the receiver is busy.
JOIN_CAPACITY = 1000


def camera_frame(robot_id: int) -> str:
    """``robot_{k}/camera``: the frame_id of robot k's image messages (their join key)."""
    return f"robot_{robot_id}/camera"


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

@dataclass
class Frames:
    """An image message as received: the decoded tall image and its join key."""

    frame_id: str
    stamp_ns: int
    pixels: np.ndarray  # uint8 (rows, width, 3)


def _compressed_format(codec: str) -> str:
    # image_transport's form: the raw encoding, then what was compressed (OpenCV decodes to bgr8).
    return f"rgb8; {codec} compressed bgr8"


def image_topic_type(codec: str, quality: int = 90) -> TopicType[Any]:
    """How a batch becomes its side-topic image message for ``codec`` (raw, png, jpeg), and how
    a received one is decoded into :class:`Frames` (on the executor thread)."""
    if codec == "raw":
        return TopicType(Image, _raw_to_msg, _raw_from_msg, _image_bytes)

    def to_msg(data: Observations | Experience) -> CompressedImage:
        msg = CompressedImage()
        msg.header.stamp = ns_to_stamp(data.stamp_ns)
        msg.header.frame_id = camera_frame(data.robot_id)
        msg.format = _compressed_format(codec)
        msg.data = array.array("B", encode_batch(batch_frames(data), codec, quality))
        return msg

    return TopicType(CompressedImage, to_msg, _compressed_from_msg, _image_bytes)


def _image_bytes(msg: Image | CompressedImage) -> int:
    return FIXED_BYTES + len(msg.data)  # header, format or sizes, and the data


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


def _raw_from_msg(msg: Image) -> Frames:
    if msg.encoding != "rgb8" or msg.step != 3 * msg.width:
        raise ValueError(f"expected an rgb8 image with step {3 * msg.width}, got encoding "
                         f"{msg.encoding!r} and step {msg.step}")
    pixels = np.frombuffer(msg.data, dtype=np.uint8)
    if pixels.size != msg.height * msg.step:
        raise ValueError(f"image of {msg.height} x {msg.width} holds {pixels.size} bytes, "
                         f"expected {msg.height * msg.step}")
    return Frames(msg.header.frame_id, stamp_to_ns(msg.header.stamp),
                  pixels.reshape(msg.height, msg.width, 3))


def _compressed_from_msg(msg: CompressedImage) -> Frames:
    codecs = [codec for codec in ("png", "jpeg") if codec in msg.format.lower()]
    if len(codecs) != 1:
        raise ValueError(f"compressed image format {msg.format!r} names neither png nor jpeg")
    return Frames(msg.header.frame_id, stamp_to_ns(msg.header.stamp),
                  decode_tall(bytes(msg.data), codecs[0]))


#: Decoding side of both side topics (the codec is read from the message).
RAW_IMAGES = image_topic_type("raw")
COMPRESSED_IMAGES = image_topic_type("png")


def image_receivers(topic: str) -> tuple[tuple[str, TopicType[Any]], ...]:
    """``(side topic, its type)`` of both image side topics of batch topic ``topic``; a receiver
    subscribes to both, whichever codec the sender uses."""
    return ((side_topic(topic, "raw"), RAW_IMAGES), (side_topic(topic, "png"), COMPRESSED_IMAGES))


# --- receiving: joining batches and images -----------------------------------------------------

class ImageJoin(Generic[T]):
    """Hands batches to ``deliver`` whole: local objects at once, a batch from DDS once its image
    arrived (in either order).

    Halves wait in two bounded queues; when :data:`JOIN_CAPACITY` newer ones arrived first, the
    oldest is given up and reported to ``reject`` (a lost message or a peer sending only half).

    :param deliver: called with the complete batch.
    :param reject: called with ``(what, reason)`` for an image that does not fit its batch or a
        half given up.
    :param what: the batches' name in reports (``observations``, ``experience``).
    """

    def __init__(self, deliver: Callable[[T], None], reject: Callable[[str, str], None],
                 what: str) -> None:
        self.deliver = deliver
        self.reject = reject
        self.what = what
        self._batches: OrderedDict[tuple[str, int], AwaitingImages[T]] = OrderedDict()
        self._frames: OrderedDict[tuple[str, int], Frames] = OrderedDict()
        #: Batches completed from DDS.
        self.joined = 0

    def on_batch(self, item: T | AwaitingImages[T]) -> None:
        if not isinstance(item, AwaitingImages):
            self.deliver(item)  # a local hand-off or a batch without images
            return
        batch: Any = item.batch
        key = (camera_frame(batch.robot_id), batch.stamp_ns)
        frames = self._frames.pop(key, None)
        if frames is None:
            self._wait(self._batches, key, item, "its image")
        else:
            self._join(item, frames)

    def on_frames(self, frames: Frames | Any) -> None:
        if not isinstance(frames, Frames):
            return  # only over DDS (publish(local=False)); nothing local to join
        key = (frames.frame_id, frames.stamp_ns)
        item = self._batches.pop(key, None)
        if item is None:
            self._wait(self._frames, key, frames, "its batch message")
        else:
            self._join(item, frames)

    def _wait(self, queue: OrderedDict[tuple[str, int], Any], key: tuple[str, int], half: Any,
              missing: str) -> None:
        queue[key] = half
        if len(queue) > JOIN_CAPACITY:
            (frame, stamp), _ = queue.popitem(last=False)
            self.reject(f"{self.what} (unmatched)", f"{frame} at {stamp}: {missing} did not "
                        f"arrive before {JOIN_CAPACITY} later ones; dropped")

    def _join(self, item: AwaitingImages[T], frames: Frames) -> None:
        try:
            batch = item.complete(frames.pixels)
        except ValueError as error:
            self.reject(f"{self.what} image", str(error))
            return
        self.joined += 1
        self.deliver(batch)


def subscribe_with_images(node: Any, topic_type: TopicType[Any], topic: str, qos: Any,
                          callback: Callable[[Any], None], what: str) -> ImageJoin[Any]:
    """Subscribe ``node`` (an RLNode) to batch topic ``topic`` and both its image side topics,
    handing joined batches to ``callback``.

    :param topic_type: the batch topic's type that lets batches await images
        (``OBSERVATIONS_WITH_IMAGES``, ``EXPERIENCE_WITH_IMAGES``).
    """
    join: ImageJoin[Any] = ImageJoin(callback, node.reject, what)
    node.zc_subscription(topic_type, topic, join.on_batch, qos)
    for side_name, side_type in image_receivers(topic):
        node.zc_subscription(side_type, side_name, join.on_frames, qos)
    return join


def image_publisher(node: Any, topic: str, codec: str, quality: int, qos: Any) -> Any:
    """The side-topic publisher of batch topic ``topic`` for ``codec`` (raw, png, jpeg); publish
    with ``local=False`` (in-process receivers get the batch whole)."""
    return node.zc_publisher(image_topic_type(codec, quality), side_topic(topic, codec), qos)


# --- latent: the trainer's encoder on the robot ---------------------------------------------

class LatentEncoder:
    """The image encoder of the trainer's latest actor, run where the frames are taken
    (``observation_codec`` latent), so that only its features cross to the policy.

    It follows ``/policy_weights`` like a policy node: the same signature, replay and NaN checks
    (rl_nodes.base.weights_refusal) and an architecture check against the task's image shape.
    Until the first weights arrive there is no encoder (:attr:`ready` is false): a random one
    would not match the policy's head.

    :param node: the simulator node (its ``reject`` counts refused weights).
    :param obs_shape: the task's image observation shape ``(stack, h, w, 3)``.
    :param key: the run's weights key (None: weights are not checked).
    """

    def __init__(self, node: Any, obs_shape: tuple[int, ...], key: bytes | None) -> None:
        import torch  # a latent robot runs torch; other codecs never load it

        torch.set_num_threads(1)  # one small forward pass per step, beside the physics
        self.node = node
        self.obs_shape = tuple(obs_shape)
        self.key = key
        self.encoder: Any = None
        self._actor: Any = None  # the encoded actor the encoder belongs to, reused per version
        self.current = (0, 0)  # (epoch, version) of the loaded weights

    @property
    def ready(self) -> bool:
        return self.encoder is not None

    def on_weights(self, msg: Any) -> bool:
        """Load ``msg`` (rl_nodes.conversions.Weights); whether the encoder changed."""
        from rl_core.encoders import actor_from_architecture
        from rl_nodes.base import weights_refusal

        if self.ready and (msg.epoch, msg.version) == self.current:
            return False
        refusal = weights_refusal(msg, self.key, self.current)
        if refusal is None and tuple(msg.architecture.get("obs_shape", ())) != self.obs_shape:
            refusal = (f"weights are for observations {msg.architecture.get('obs_shape')}, this "
                       f"robot's camera gives {list(self.obs_shape)}; use the same env_id")
        if refusal is None:
            actor = self._actor
            try:
                if actor is None or actor.architecture() != msg.architecture:
                    actor = actor_from_architecture(msg.architecture)
                actor.load_state_dict(msg.state)
            except (ValueError, RuntimeError) as error:
                refusal = f"the weights hold no usable encoder: {error}"
        if refusal is not None:
            self.node.reject("policy weights", refusal)
            return False
        self._actor = actor
        self.encoder = actor.encoder.eval()
        self.current = (msg.epoch, msg.version)
        return True

    def encode(self, frames: np.ndarray) -> np.ndarray:
        """``uint8 (N, stack, h, w, 3)`` frames -> ``float32 (N, feature_dim)`` features."""
        import torch

        from rl_core.encoders import image_to_tensor

        with torch.no_grad():
            return self.encoder(image_to_tensor(frames)).numpy()
