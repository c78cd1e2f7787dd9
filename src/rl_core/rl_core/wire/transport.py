"""The objects the nodes hand each other: observation, action, experience, weights, episode
and sample-request batches, and the sampled minibatches that answer a request, as numpy arrays
and torch tensors.

Inside one process they travel as they are; ``rl_nodes.conversions`` turns them into
rl_interfaces messages only where a subscriber outside the process exists. Plain Python, no ROS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import torch

T = TypeVar("T")
FloatArray = npt.NDArray[np.float32]


@dataclass
class Observations:
    """Observations of all environments of one robot at one step (``obs``: (N, *obs_shape))."""

    robot_id: int
    step: int
    obs: np.ndarray
    stamp_ns: int = 0
    #: SHA-256 of the encoded image ``obs`` were decoded from, b"" for values that came as they
    #: are: what an answer's MAC binds (rl_core.security.action_auth.batch_digest).
    payload_digest: bytes = b""
    #: rl_core.security.action_auth.observation_digest of ``obs``, set by a publisher in this process
    #: for the subscribers it hands this very object to (zero-copy), so that they need not
    #: hash it again; never on the wire, so never set on a batch decoded from DDS.
    values_digest: bytes = field(default=b"", compare=False, repr=False)


@dataclass
class AwaitingImages(Generic[T]):
    """A batch decoded from DDS without its images, which travel as one image message on the
    batch topic's ``image`` side topic (rl_nodes.image_transport joins the two).

    :param batch: the batch with empty placeholders in ``fields``.
    :param fields: the image fields, in the order they are stacked in the image.
    :param rows: rows of the batch.
    :param shape: shape of one row's image observation ``(stack, h, w, 3)``.
    """

    batch: T
    fields: tuple[str, ...]
    rows: int
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        """Pixel values the batch's images hold (every image field of every row)."""
        return len(self.fields) * self.rows * int(np.prod(self.shape))

    def complete(self, pixels: np.ndarray) -> T:
        """The batch with its image fields filled from ``pixels`` (the decoded image).

        :raises ValueError: when the pixels do not hold exactly the batch's images.
        """
        count = len(self.fields)
        if pixels.size != self.size:
            raise ValueError(f"the image holds {pixels.size} values, but {count} x {self.rows} "
                             f"observations of shape {list(self.shape)} need {self.size}")
        parts = pixels.reshape((count, self.rows, *self.shape))
        batch: Any = self.batch  # a dataclass of this module
        return cast(T, replace(batch, **{name: parts[k] for k, name in enumerate(self.fields)}))


@dataclass
class Actions:
    """Actions answering one observation batch (``actions``: (N, *action_shape))."""

    robot_id: int
    step: int
    actions: np.ndarray
    policy_version: int = 0
    stamp_ns: int = 0
    #: HMAC-SHA256 of the batch under the robot's action key (rl_core.security.action_auth); b"": none.
    mac: bytes = b""


@dataclass
class Experience:
    """A batch of transitions; row i of every array is one transition."""

    robot_id: int
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    policy_version: int = 0
    stamp_ns: int = 0
    env_ids: np.ndarray | None = None
    stream: int = 0  # one run of the robot's simulator (its start time in ns)
    sequence: int = 0  # message counter within the stream
    #: Per row, whether an operator's command replaced the policy's action (None: no row).
    intervened: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.rewards.shape[0])


@dataclass
class Weights:
    """Actor weights of one version; ``state`` tensors are private copies (read-only for
    receivers). Received weights arrive encoded, with ``state`` empty: a receiver checks
    :attr:`size` and the signature first, and only then decodes them (:meth:`tensors`)."""

    version: int
    update_step: int
    state: dict[str, torch.Tensor]
    architecture: dict[str, Any]
    stamp_ns: int = 0
    _encoded: tuple[bytes, str] | None = field(default=None, repr=False)
    epoch: int = 0
    #: The learner's signature (rl_core.security.weights_auth.sign_weights, verify_weights).
    signature: str = ""

    def encoded(self) -> tuple[bytes, str]:
        """``(safetensors bytes, sha256)``, computed once per version."""
        if self._encoded is None:
            from rl_core.wire.tensors import tensors_to_bytes

            self._encoded = tensors_to_bytes(self.state)
        return self._encoded

    @property
    def size(self) -> int:
        """Bytes of the encoded tensors."""
        return len(self.encoded()[0])

    def tensors(self) -> dict[str, torch.Tensor]:
        """The tensors, decoded (and their checksum checked) on the first call for received
        weights; ValueError when the bytes are not what the checksum says."""
        if not self.state and self._encoded is not None:
            from rl_core.wire.tensors import tensors_from_bytes

            self.state = tensors_from_bytes(*self._encoded)
        return self.state

    def architecture_json(self) -> str:
        """The architecture as the canonical JSON text that travels and is signed."""
        return json.dumps(self.architecture, sort_keys=True)

@dataclass
class Episodes:
    """Episodes that ended at one simulator step."""

    robot_id: int
    env_ids: list[int]
    returns: list[float]
    lengths: list[int]
    successes: list[bool]
    total_episodes: int
    total_env_steps: int
    policy_version: int
    stamp_ns: int = 0


@dataclass
class SampleRequest:
    """Request of the replay buffer's ``sample`` service."""

    batch_size: int
    max_batches: int  # 0 = only report the sizes


#: The slot index of a demonstration row in a batch (it has no slot in the online buffer).
DEMO_SLOT = -1


class Batch(NamedTuple):
    """A sampled minibatch; every array has leading dimension ``B``.

    :ivar obs: ``float32 (B, *obs_shape)`` observations (``uint8`` in a buffer of images).
    :ivar actions: ``float32 (B, *action_shape)`` actions.
    :ivar rewards: ``float32 (B,)`` rewards.
    :ivar next_obs: ``float32 (B, *obs_shape)`` next observations (``uint8`` in a buffer of
        images).
    :ivar terminated: ``float32 (B,)`` 1.0 where the episode terminated (no
        bootstrapping), else 0.0. Float rather than bool so it enters TD
        targets directly: ``target = r + gamma * (1 - terminated) * q_next``.
        Truncation is stored by the buffer but not returned, because a
        truncated transition still bootstraps.
    :ivar indices: ``int64 (B,)`` storage slots, to pass to ``update_priorities``.
    :ivar weights: ``float32 (B,)`` importance-sampling weights, max-normalised
        within the batch; all ones for uniform sampling.
    """

    obs: FloatArray
    actions: FloatArray
    rewards: FloatArray
    next_obs: FloatArray
    terminated: FloatArray
    indices: npt.NDArray[np.int64]
    weights: FloatArray
