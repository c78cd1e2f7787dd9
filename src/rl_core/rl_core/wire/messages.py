"""What the nodes hand each other, without ROS: observation, action, experience, weights and
episode batches, the replay buffer's requests and answers, and the caps, checks and array
encodings that decoding network input applies.

Inside one process these objects travel as they are; ``rl_nodes.messages`` turns them into
rl_interfaces messages (with the checks and encodings here) only where a subscriber outside the
process exists. Every check raises a ``ValueError`` that names the field and what is wrong, so
a receiving node can log and count a malformed message and go on.
"""

from __future__ import annotations

import array
import hashlib
import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt

from rl_core.wire.image_codecs import is_image_shape

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
    on the wire, converted by ``rl_nodes.conversions``)."""

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
    """The most transitions one sample answer of a task may carry: :data:`MAX_REQUEST_ROWS`,
    fewer where :data:`MAX_ANSWER_BYTES` allows fewer (two observations, the action, reward,
    flags and priority data per row)."""
    row_bytes = 2 * math.prod(obs_shape) * obs_itemsize + 4 * math.prod(action_shape) + 32
    return max(1, min(MAX_REQUEST_ROWS, MAX_ANSWER_BYTES // row_bytes))
#: Most dimensions of one observation or action (``uint32[<=16] obs_shape`` and the other shape
#: fields of rl_interfaces, which spell it out). The data sequences stay unbounded: rclpy on Fast
#: DDS does not check a bound when it receives (only when it sends), and every endpoint of a type
#: with a large bound reserves address space for its largest message (docs/architecture.md).
MAX_SHAPE_DIMS = 16
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


def shaped(flat: Any, rows: int, shape: tuple[int, ...], name: str) -> np.ndarray:
    """View a received float32[] as ``(rows, *shape)`` without copying; check its size first."""
    values = np.frombuffer(flat, dtype=np.float32) if isinstance(flat, array.array) else \
        np.asarray(flat, dtype=np.float32)
    expected = rows * int(np.prod(shape, dtype=np.int64))
    if values.size != expected:
        raise ValueError(f"field '{name}' has {values.size} values, but {rows} rows of shape "
                         f"{list(shape)} need {expected}")
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


def finite(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` when all are finite. Decoders of network input check this, so that a local
    (zero-copy) hand-off from the process' own node pays nothing."""
    if not np.all(np.isfinite(values)):
        raise ValueError(f"field '{name}' holds NaN or infinite values")
    return values


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
