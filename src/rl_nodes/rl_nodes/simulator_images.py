"""A simulator's image observations on the wire: the image side-topic publishers and the latent
encoder of a task that observes images (rl_nodes.image_transport); none for state vectors,
whose path stays as it is.

``observation_codec`` raw, png or jpeg sends one image message per batch beside the batch
message; latent runs the trainer's encoder here and sends only its features to a policy in
another process, and its experience as png (the learner trains its encoder on the frames).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from rl_core.config import SimulatorConfig
from rl_core.security.action_auth import payload_digest
from rl_core.wire.image_codecs import is_image_shape
from rl_nodes import graph
from rl_nodes.base import EXPERIENCE_QOS, STREAM_QOS
from rl_nodes.image_transport import LatentEncoder, image_publisher, image_topic_type, side_topic
from rl_nodes.intra_process_endpoints import IntraProcessPublisher
from rl_nodes.messages import Experience, Observations, TopicType, Weights


class SimulatorImages:
    """The image endpoints of a simulator ``node`` whose environments observe ``obs_shape``.

    :param node: the simulator node (an RLNode).
    :param obs_shape: one environment's observation shape; None: no environments (a robot
        driven through ros2_control), nothing to send.
    :param config: the simulator's configuration (``observation_codec``, ``jpeg_quality``).
    :param on_encoder: called once the first encoder weights are loaded (latent): observations
        held for want of an encoder may go.
    """

    def __init__(self, node: Any, obs_shape: tuple[int, ...] | None, config: SimulatorConfig,
                 on_encoder: Callable[[], None]) -> None:
        self.node, self.on_encoder = node, on_encoder
        self.pixels = obs_shape is not None and is_image_shape(obs_shape)
        self.codec = config.observation_codec
        self.observations_pub: IntraProcessPublisher[Any] | None = None
        self.experience_pub: IntraProcessPublisher[Any] | None = None
        self.latent: LatentEncoder | None = None
        self._sent_digest = b""  # of the encoded image last sent (rl_core.security.action_auth)
        if obs_shape is None:
            return
        if not self.pixels:
            if self.codec != "raw":
                node.get_logger().warn(f"observation_codec {self.codec!r} ignored: "
                                       f"{config.env_id} observes state vectors")
            return
        quality = config.jpeg_quality
        if self.codec == "latent":
            self.latent = LatentEncoder(node, obs_shape, node.public_key, config.allow_unsigned)
            node.subscription(graph.WEIGHTS, self._on_weights)
        else:
            self.observations_pub = node.publisher(
                side_topic(graph.OBSERVATIONS.name, self.codec),
                self._digesting(image_topic_type(self.codec, quality)), STREAM_QOS)
        self.experience_pub = image_publisher(
            node, graph.EXPERIENCE.name, "png" if self.codec == "latent" else self.codec,
            quality, EXPERIENCE_QOS)

    @property
    def waiting_for_encoder(self) -> bool:
        """Latent observations without the trainer's encoder weights yet."""
        return self.latent is not None and not self.latent.ready

    def observations(self, obs: np.ndarray, remote: bool) -> np.ndarray | None:
        """What to send for observations ``obs``: the encoder's features when latent and a
        policy in another process listens (``remote``), else ``obs``; None (hold them) while
        the encoder waits for its first weights."""
        if self.latent is None or not remote:
            return obs
        return self.latent.encode(obs) if self.latent.ready else None

    def publish_observations(self, data: Observations) -> bytes:
        """Send the images of ``data`` over DDS if a receiver outside listens; the digest of the
        encoded image sent (rl_core.security.action_auth.payload_digest), b"" when none (or raw) was."""
        self._sent_digest = b""
        if self.observations_pub is not None:
            self.observations_pub.publish(data, local=False)
        return self._sent_digest

    def _digesting(self, topic_type: TopicType[Any]) -> TopicType[Any]:
        """``topic_type`` whose encoded images leave their digest for
        :meth:`publish_observations`: a receiver's answer binds it, not its decoded pixels."""
        if self.codec == "raw":
            return topic_type  # the pixels cross as they are: receivers digest them

        def to_msg(data: Observations) -> Any:
            msg = topic_type.to_msg(data)
            self._sent_digest = payload_digest(msg.data)
            return msg

        return replace(topic_type, to_msg=to_msg)

    def publish_experience(self, data: Experience) -> None:
        if self.experience_pub is not None:
            self.experience_pub.publish(data, local=False)

    def _on_weights(self, msg: Weights) -> None:
        assert self.latent is not None
        first = not self.latent.ready
        if self.latent.on_weights(msg) and first:
            self.node.get_logger().info(f"latent observations: encoder of weights version "
                                        f"{msg.version} loaded")
            self.on_encoder()
