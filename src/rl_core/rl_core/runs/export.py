"""Export a trained actor to ONNX (torch); :mod:`rl_core.runs.onnx_policy` runs it without torch.

The exported graph is the *deterministic* policy ``obs -> tanh(mean(obs))``, the action a trained
SAC agent takes when exploration is off; the log-std head and the sampling are left out. For a
``Discrete`` action (SAC for discrete actions' categorical actor) it is the most probable
choice's index, as a float (the action row the simulators take). The batch
dimension is dynamic, so one model serves ``(N, obs_dim)`` batches of any ``N``. The actor's
:meth:`~rl_core.algorithms.networks.SquashedGaussianActor.architecture` is stored as JSON in the model's
``metadata_props`` (key :data:`ARCHITECTURE_KEY`), together with the task's ``env_id`` when known,
so a receiver can check what it loads before acting.

The export uses torch's ``torch.export``-based exporter (``dynamo=True``, needs onnxscript): the
TorchScript exporter (``dynamo=False``) still works in torch 2.13 but warns that it is deprecated
and will be removed. The dynamo exporter logs harmless notes (torchvision operators it skips) and
a FutureWarning from torch's own pytree code; both are silenced for the duration of the export.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from rl_core.algorithms.discrete_sac import CategoricalActor
from rl_core.algorithms.hybrid_sac import HybridActor
from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.runs.atomic_files import write_atomically
from rl_core.runs.onnx_policy import (
    ARCHITECTURE_KEY,
    ARM_AND_CHOICE_KIND,
    CHOICE_KIND,
    ENV_ID_KEY,
    INPUT_NAME,
    OUTPUT_NAME,
    POLICY_KEY,
    POLICY_KIND,
)

#: Batch size of the example input; 2 rather than 1 so torch.export does not specialise the
#: batch dimension to a constant (it treats sizes 0 and 1 specially).
_EXAMPLE_BATCH = 2


class _DeterministicPolicy(nn.Module):
    """The actor's mean action, squashed: the part of the forward pass an exported policy needs."""

    def __init__(self, actor: SquashedGaussianActor) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # Mirrors SquashedGaussianActor.forward(deterministic=True); the parity test in
        # tests/unit/test_export.py fails if the two drift apart.
        features = torch.relu(self.actor.body(obs))
        return torch.tanh(self.actor.mean(features))


class _MostProbableChoice(nn.Module):
    """The index of a categorical actor's most probable choice, as a float ``(N, 1)``."""

    def __init__(self, actor: CategoricalActor) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # As CategoricalActor.act(deterministic=True): the largest logit is the most probable.
        logits = self.actor.logits(torch.relu(self.actor.body(obs)))
        return logits.argmax(-1, keepdim=True).to(torch.float32)


class _ArmAndBestChoice(nn.Module):
    """An arm-and-choice actor's deterministic arm values, then its best valued choice's index."""

    def __init__(self, actor: HybridActor) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        arm, choice = self.actor(obs)  # HybridActor.forward: what act(deterministic=True) gives
        return torch.cat([arm, choice.unsqueeze(-1).to(torch.float32)], dim=-1)


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's informational logging and torch-internal FutureWarnings."""
    logger = logging.getLogger("torch.onnx")
    previous_level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        logger.setLevel(previous_level)


def export_onnx(actor: SquashedGaussianActor | CategoricalActor | HybridActor,
                path: str | os.PathLike[str],
                env_id: str | None = None) -> Path:
    """Write the deterministic policy of ``actor`` as an ONNX model.

    The file is written atomically (a temporary file in the same folder, then a rename), so a
    reader never sees a half-written model.

    :param actor: the actor to export; it is not modified (its training flag is restored). An
        actor on a GPU is exported from a CPU copy: the ONNX model runs on the CPU.
    :param path: the ``.onnx`` file to write; missing parent folders are created.
    :param env_id: the task the actor was trained on, stored in the metadata when given.
    :return: the path written.
    :raises ValueError: when ``actor`` is not a :class:`SquashedGaussianActor`, a
        :class:`CategoricalActor` or a :class:`HybridActor`.
    """
    if not isinstance(actor, SquashedGaussianActor | CategoricalActor | HybridActor):
        raise ValueError("export_onnx needs a SquashedGaussianActor, a CategoricalActor or a "
                         f"HybridActor, got {type(actor).__name__}")
    import onnx  # deferred: only exporting needs onnx/onnxscript, acting needs onnxruntime only

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if next(actor.parameters()).device.type != "cpu":
        actor = copy.deepcopy(actor).cpu()
    example = torch.zeros(_EXAMPLE_BATCH, actor.obs_dim, dtype=torch.float32)
    was_training = actor.training
    discrete = isinstance(actor, CategoricalActor)
    # .eval() also puts the actor in eval mode
    policy = (_MostProbableChoice(actor) if isinstance(actor, CategoricalActor)
              else _ArmAndBestChoice(actor) if isinstance(actor, HybridActor)
              else _DeterministicPolicy(actor)).eval()
    try:
        with _quiet_exporter(), torch.no_grad():
            program = torch.onnx.export(
                policy, (example,), dynamo=True, verbose=False,
                input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
            )
    finally:
        actor.train(was_training)
    if program is None:
        raise RuntimeError("torch.onnx.export returned no program")
    model = program.model_proto
    kind = (CHOICE_KIND if discrete else ARM_AND_CHOICE_KIND if isinstance(actor, HybridActor)
            else POLICY_KIND)
    metadata = {ARCHITECTURE_KEY: json.dumps(actor.architecture(), sort_keys=True),
                POLICY_KEY: kind}
    if env_id:
        metadata[ENV_ID_KEY] = env_id
    onnx.helper.set_model_props(model, metadata)
    model.doc_string = (f"rl_ros2 SAC actor, {kind}: obs (N, {actor.obs_dim}) -> action (N, "
                        f"{actor.action_dim}) " + ("a choice's index" if discrete else
                                                   "in [-1, 1]" if kind == POLICY_KIND else
                                                   "the arm in [-1, 1], then a choice's index"))
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    write_atomically(path, lambda handle: handle.write(data))
    return path


