"""What the nodes hand each other, without ROS: observation, action, experience, weights and
episode batches, the replay buffer's requests and answers, the caps on what is accepted from the
wire, and the safetensors bytes that weights travel and checkpoints are stored as.

Inside one process these objects travel as they are; only where a subscriber outside the process
exists are they encoded (rl_core.wire.encoding) into rl_interfaces messages (rl_nodes.messages).
"""

from __future__ import annotations

import hashlib
import json
import math
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


class PriorityUpdate(NamedTuple):
    """New priorities for sampled buffer slots.

    :ivar indices: ``int64 (N,)`` buffer slots (``Batch.indices``).
    :ivar priorities: ``float32 (N,)`` new priorities, typically ``|TD error|``.
    :ivar drawn_at: The buffer's ``total_inserted`` when the oldest of these slots was sampled.
    """

    indices: npt.NDArray[np.int64]
    priorities: npt.NDArray[np.float32]
    drawn_at: int

    def __len__(self) -> int:  # rows, not the tuple's 3 fields
        return int(self.indices.shape[0])


class SampleAnswer(NamedTuple):
    """The answer to a sample request: the batches the rate limiter granted (``SampleBatch.srv``
    on the wire, converted by ``rl_nodes.messages``)."""

    success: bool
    message: str
    batches: list[Batch]
    buffer_size: int
    total_inserted: int
    prioritized: bool = False  # send the batches' priorities back with a later request
    #: The run's budget in transitions, and whether the run is done (the budget is in and
    #: every batch it pays for was granted: learn on these, then finish).
    total_env_steps: int = 0
    done: bool = False


#: What ``save`` and ``load`` answer: success, message, transitions, the file's path.
FileAnswer = tuple[bool, str, int, str]


class PriorityAnswer(NamedTuple):
    """The answer to a priority update (``UpdatePriorities.srv``)."""

    success: bool
    message: str
    #: Priorities applied, and those skipped because their slot was overwritten since.
    applied: int
    skipped: int


# --- caps on what is accepted from the wire --------------------------------------------------

#: Largest PolicyWeights payload accepted from the wire (checked before it is decoded).
MAX_WEIGHTS_BYTES = 256 * 1024 * 1024
#: Most transitions one ExperienceBatch may carry (a simulator sends num_envs <= 1024 per step).
MAX_EXPERIENCE_ROWS = 65536
#: Most rows a sample request or a get_action request may ask for.
MAX_REQUEST_ROWS = 1 << 20
#: Most bytes of transitions one sample answer may hold: with image observations the row cap
#: above would allow tens of gigabytes (:func:`max_answer_rows`).
MAX_ANSWER_BYTES = 256 * 1024 * 1024


def max_answer_rows(obs_shape: tuple[int, ...], obs_itemsize: int,
                    action_shape: tuple[int, ...]) -> int:
    """The most transitions one sample answer of a task may carry: what one TransitionBatch may
    (:data:`MAX_EXPERIENCE_ROWS`, which every receiver checks), fewer where
    :data:`MAX_ANSWER_BYTES` allows fewer (two observations, the action, reward, flags and
    priority data per row). A 1,048,576-row answer (55 MB of cart-pole) was refused by every
    receiver, and took a loaded DDS past a caller's 30 s."""
    row_bytes = 2 * math.prod(obs_shape) * obs_itemsize + 4 * math.prod(action_shape) + 32
    return max(1, min(MAX_EXPERIENCE_ROWS, MAX_ANSWER_BYTES // row_bytes))
#: Most dimensions of one observation or action (``uint32[<=16] obs_shape`` and the other shape
#: fields of rl_interfaces, which spell it out). The data sequences stay unbounded: rclpy on Fast
#: DDS does not check a bound when it receives (only when it sends), and every endpoint of a type
#: with a large bound reserves address space for its largest message (docs/architecture.md).
MAX_SHAPE_DIMS = 16

# --- values of received actions ---------------------------------------------------------------

def choice_indices(actions: np.ndarray, choices: int) -> np.ndarray:
    """The ``(N,)`` int64 indices of one of ``choices`` that action rows ``(N, width)`` end
    with (a ``Discrete`` action's rows hold only that; an arm-and-choice one's the arm first).

    :raises ValueError: for a value that is not the index of a choice.
    """
    rows = np.asarray(actions, dtype=np.float64)
    hybrid = rows.ndim >= 2 and rows.shape[-1] > 1
    values = rows[..., -1].reshape(-1) if hybrid else rows.reshape(-1)
    indices = np.rint(values)
    if not (np.all(np.abs(values - indices) < 1e-3) and np.all(indices >= 0)
            and np.all(indices < choices)):
        what = ("the choice (the last value) of an arm-and-choice action must be an index"
                if hybrid else f"actions of a Discrete({choices}) action must be indices")
        raise ValueError(f"{what} in [0, {choices}), got {values.tolist()[:8]}")
    return indices.astype(np.int64)


# --- tensors as safetensors bytes (never pickle), how weights travel and checkpoints store them ---
# torch and safetensors are imported on use: an ONNX policy on the robot-side install
# (requirements-edge.txt) has neither and never encodes or decodes weights.

def checksum(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def tensors_to_bytes(tensors: dict[str, torch.Tensor]) -> tuple[bytes, str]:
    """Serialise tensors to safetensors bytes; returns ``(data, sha256 hex)``."""
    from safetensors.torch import save

    data = save({k: v.detach().contiguous().cpu() for k, v in tensors.items()})
    return data, checksum(data)


def tensors_from_bytes(data: bytes, expected_checksum: str) -> dict[str, torch.Tensor]:
    """Parse safetensors bytes after verifying their checksum.

    :raises ValueError: when the checksum does not match or the bytes are not safetensors.
    """
    from safetensors.torch import load

    actual = checksum(bytes(data))
    if actual != expected_checksum:
        raise ValueError(f"weights checksum mismatch (expected {expected_checksum[:12]}..., got "
                         f"{actual[:12]}...): the data was corrupted or truncated in transit")
    try:
        return load(bytes(data))
    except Exception as error:  # safetensors raises its own SafetensorError type
        raise ValueError(f"weights are not a valid safetensors blob: {error}") from error
