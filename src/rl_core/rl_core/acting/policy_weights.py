"""Which received actor weights a policy loads, and how fresh the ones it acts with are.

A policy node (``rl_nodes.policy``) offers every ``/policy_weights`` message to a
:class:`WeightsGate`. The latched copy of the current weights is skipped without a word; weights
whose signature does not verify under the learner's public key for this policy's run
(:mod:`rl_core.security.weights_auth`: weights another run signed with the same key do not), or that
come to a policy without a public key unless it allows unsigned weights, that are older
than the current ones (a replay), hold NaN, or were built for another architecture are refused
with the reason, which the node logs and counts. torch is imported only when weights are
checked, so an ONNX policy that follows no weights runs without it.
"""

from __future__ import annotations

from typing import Any

from rl_core.security import weights_auth
from rl_core.security.weights_auth import VerifyKey, verify_weights

#: A policy still acting with its own initial actor after this long says so.
NO_WEIGHTS_WARNING_S = 30.0
#: Bytes allowed for the safetensors header of received weights beyond 256 per tensor.
HEADER_ALLOWANCE_BYTES = 64 * 1024
#: Weights older than this are reported as stale (the trainer stalled or is gone).
STALE_WEIGHTS_S = 60.0


#: Why weights are refused by a receiver that has no public key and does not allow unsigned ones.
NO_PUBLIC_KEY = (f"no public key to check the learner's signature ({weights_auth.PUBLIC_KEY_VARIABLE}"
                 f" or {weights_auth.PUBLIC_KEY_FILE_VARIABLE}; rl-bringup and the launch files "
                 "give one), and allow_unsigned is false")


def weights_refusal(msg: Any, key: VerifyKey | None, current: tuple[int, int],
                    max_bytes: int | None = None, allow_unsigned: bool = False) -> str | None:
    """Why received weights ``msg`` (``rl_nodes.conversions.Weights``) must not replace the
    weights of ``current`` ``(epoch, version)``: more bytes than ``max_bytes`` (what the
    receiver's architecture takes), a signature that does not verify under the learner's public
    ``key`` for its run, no ``key`` at all unless ``allow_unsigned``, an
    older version (a replay), bytes that do not decode, or NaN; None when they may be loaded
    (architecture not checked). The checks run cheapest first: nothing is hashed before the
    size is known to fit, nothing decoded before the signature verifies."""
    import torch  # only nodes that follow weights call this

    if max_bytes is not None and msg.size > max_bytes:
        return (f"version {msg.version}: {msg.size} bytes, more than the {max_bytes} that this "
                "policy's architecture takes; ignored")
    if key is None and not allow_unsigned:
        return f"version {msg.version}: {NO_PUBLIC_KEY}; ignored"
    if key is not None and not verify_weights(msg, key):
        return (f"version {msg.version}: the signature does not verify (unsigned, or signed with "
                "another key or for another run); ignored")
    if (msg.epoch, msg.version) < current:
        return (f"epoch {msg.epoch} version {msg.version} is older than the current epoch "
                f"{current[0]} version {current[1]} (a replay); ignored")
    try:
        tensors = msg.tensors()
    except ValueError as error:
        return f"version {msg.version}: {error}; ignored"
    if not all(bool(torch.isfinite(tensor).all()) for tensor in tensors.values()):
        return f"version {msg.version} holds NaN or infinite values; ignored"
    return None


def encoded_size_bound(state: dict[str, Any]) -> int:
    """The most bytes weights of the architecture of ``state`` (an actor's ``state_dict``) may
    take encoded: the tensors' bytes and room for the safetensors header."""
    return sum(tensor.numel() * tensor.element_size() for tensor in state.values()) + \
        HEADER_ALLOWANCE_BYTES + 256 * len(state)


class WeightsGate:
    """The run epoch and version of the weights a policy acts with, and when they came.

    Version 0 is the policy's own randomly initialised actor.

    :param key: the learner's public key (None: every weights refused, unless ``allow_unsigned``).
    :param now: ``time.monotonic()`` when the policy started.
    :param max_bytes: the most bytes weights for this policy may take
        (:func:`encoded_size_bound`); None: only the wire's cap.
    :param allow_unsigned: without a key, load weights without checking a signature.
    """

    def __init__(self, key: VerifyKey | None, now: float, max_bytes: int | None = None,
                 allow_unsigned: bool = False) -> None:
        self.key = key
        self.allow_unsigned = allow_unsigned
        self.max_bytes = max_bytes
        self.epoch = 0  # run epoch of the trainer whose weights are loaded
        self.version = 0
        self.arrived_at = now  # when the current weights arrived (start: the initial actor)
        self.started_at = now

    def is_current(self, msg: Any) -> bool:
        """Whether ``msg`` is the latched copy of the current weights again."""
        return (msg.epoch, msg.version) == (self.epoch, self.version)

    def refusal(self, msg: Any, architecture: dict[str, Any]) -> str | None:
        """Why ``msg`` must not be loaded into an actor of ``architecture``; None to load it."""
        refusal = weights_refusal(msg, self.key, (self.epoch, self.version), self.max_bytes,
                                  self.allow_unsigned)
        if refusal is None and msg.architecture != architecture:
            refusal = (f"weights are for {msg.architecture}, this policy is {architecture}; use "
                       "the same env_id and hidden_sizes")
        return refusal

    def loaded(self, msg: Any, now: float) -> bool:
        """``msg`` was loaded into the actor at ``now``; whether they are the run's first."""
        first = self.version == 0
        self.epoch, self.version = msg.epoch, msg.version
        self.arrived_at = now
        return first

    def figures(self, now: float) -> dict[str, object]:
        """The diagnostics values of the weights: their version and age."""
        return {"weights version": self.version, "weights age s": f"{now - self.arrived_at:.1f}"}

    def warning(self, now: float) -> str | None:
        """What is wrong with the weights at ``now`` (none came, or they are stale), or None."""
        age = now - self.arrived_at
        if self.version == 0 and now - self.started_at > NO_WEIGHTS_WARNING_S:
            return "no weights received yet (is the trainer running?)"
        if self.version and age > STALE_WEIGHTS_S:
            return f"weights are {age:.0f} s old (trainer stalled or gone?)"
        return None
