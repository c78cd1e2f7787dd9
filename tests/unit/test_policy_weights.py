"""Which received weights a policy loads (rl_core.acting.policy_model), and what it says of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from rl_core.acting import policy_model
from rl_core.acting.policy_model import (
    NO_WEIGHTS_WARNING_S,
    STALE_WEIGHTS_S,
    WeightsGate,
    encoded_size_bound,
)

pytestmark = pytest.mark.unit

KEY = bytes(range(32))
ARCHITECTURE = {"obs_dim": 4, "action_dim": 1, "hidden_sizes": [8]}


@dataclass
class FakeWeights:
    """The fields of rl_nodes.messages.Weights a gate reads; signed by ``signed_with``."""

    version: int
    epoch: int = 1
    signed_with: bytes | None = KEY
    architecture: dict[str, Any] = field(default_factory=lambda: dict(ARCHITECTURE))
    state: dict[str, torch.Tensor] = field(default_factory=lambda: {"w": torch.zeros(2)})
    size: int = 8
    verified: int = 0
    decoded: int = 0

    def tensors(self) -> dict[str, torch.Tensor]:
        self.decoded += 1
        return self.state


@pytest.fixture(autouse=True)
def fake_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate's signature check (rl_core.security.weights_auth.verify_weights) on FakeWeights:
    they verify under the key they were ``signed_with``, and count the checks."""
    def verify_weights(weights: FakeWeights, key: bytes) -> bool:
        weights.verified += 1
        return weights.signed_with == key

    monkeypatch.setattr(policy_model, "verify_weights", verify_weights)


def test_newer_signed_weights_of_the_architecture_are_loaded() -> None:
    gate = WeightsGate(KEY, now=0.0)
    weights = FakeWeights(3)
    assert not gate.is_current(weights) and gate.refusal(weights, ARCHITECTURE) is None
    assert gate.loaded(weights, now=5.0), "the run's first weights"
    assert (gate.epoch, gate.version, gate.arrived_at) == (1, 3, 5.0)
    assert gate.is_current(FakeWeights(3)), "the latched copy again"
    assert gate.refusal(FakeWeights(4), ARCHITECTURE) is None
    assert not gate.loaded(FakeWeights(4), now=6.0)
    assert gate.refusal(FakeWeights(1, epoch=2), ARCHITECTURE) is None, "a restarted trainer"


@pytest.mark.parametrize("weights, reason", [
    (FakeWeights(5, signed_with=None), "signature does not verify"),
    (FakeWeights(5, signed_with=bytes(32)), "signature does not verify"),
    (FakeWeights(2), "older than the current epoch 1 version 3 (a replay)"),
    (FakeWeights(4, epoch=0), "older than the current"),
    (FakeWeights(5, state={"w": torch.tensor([0.0, float("nan")])}), "NaN or infinite"),
    (FakeWeights(5, architecture={**ARCHITECTURE, "hidden_sizes": [9]}),
     "use the same env_id and hidden_sizes"),
])
def test_forged_replayed_broken_or_foreign_weights_are_refused(weights: FakeWeights,
                                                               reason: str) -> None:
    gate = WeightsGate(KEY, now=0.0)
    gate.loaded(FakeWeights(3), now=0.0)
    refusal = gate.refusal(weights, ARCHITECTURE)
    assert refusal is not None and reason in refusal


def test_oversized_weights_are_refused_before_hashing_and_forged_ones_before_decoding() -> None:
    """Issue 19: a forged 256 MiB blob costs a length comparison, not a hash and a parse."""
    actor = {"w": torch.zeros(4, 4), "b": torch.zeros(4)}
    bound = encoded_size_bound(actor)
    assert bound >= 20 * 4
    gate = WeightsGate(KEY, now=0.0, max_bytes=bound)
    oversized = FakeWeights(5, size=bound + 1)
    refusal = gate.refusal(oversized, ARCHITECTURE)
    assert refusal is not None and "more than the" in refusal and oversized.verified == 0
    forged = FakeWeights(5, signed_with=None, size=bound)
    assert gate.refusal(forged, ARCHITECTURE) is not None and forged.decoded == 0
    genuine = FakeWeights(5, size=bound)
    assert gate.refusal(genuine, ARCHITECTURE) is None and genuine.decoded == 1


def test_received_weights_decode_only_when_asked_and_refuse_bad_bytes() -> None:
    from rl_core.wire.messages import Weights, tensors_to_bytes

    blob, checksum = tensors_to_bytes({"w": torch.ones(3)})
    received = Weights(1, 0, {}, dict(ARCHITECTURE), _encoded=(blob, checksum), epoch=1)
    assert received.size == len(blob) and received.state == {}
    assert torch.equal(received.tensors()["w"], torch.ones(3))
    corrupt = Weights(2, 0, {}, dict(ARCHITECTURE), _encoded=(blob[:-1] + b"x", checksum), epoch=1)
    refusal = WeightsGate(None, now=0.0, allow_unsigned=True).refusal(corrupt, ARCHITECTURE)
    assert refusal is not None and "checksum" in refusal


def test_without_a_key_weights_are_refused_unless_unsigned_ones_are_allowed() -> None:
    refusal = WeightsGate(None, now=0.0).refusal(FakeWeights(1, signed_with=None), ARCHITECTURE)
    assert refusal is not None and "allow_unsigned" in refusal
    allowing = WeightsGate(None, now=0.0, allow_unsigned=True)
    assert allowing.refusal(FakeWeights(1, signed_with=None), ARCHITECTURE) is None


def test_the_gate_warns_of_missing_and_stale_weights() -> None:
    gate = WeightsGate(KEY, now=100.0)
    assert gate.warning(100.0 + NO_WEIGHTS_WARNING_S) is None
    assert "no weights received yet" in gate.warning(101.0 + NO_WEIGHTS_WARNING_S)
    gate.loaded(FakeWeights(2), now=200.0)
    assert gate.warning(200.0 + STALE_WEIGHTS_S) is None
    assert gate.warning(201.0 + STALE_WEIGHTS_S) == "weights are 61 s old (trainer stalled or gone?)"
    assert gate.figures(212.34) == {"weights version": 2, "weights age s": "12.3"}
