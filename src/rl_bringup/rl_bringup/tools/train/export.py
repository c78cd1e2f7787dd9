"""``rl-bringup export``: write a checkpoint's policy as an ONNX model for robot-side inference.

Usage::

    rl-bringup export checkpoint:=DIR [onnx:=DIR/policy.onnx] [env_id:=ID | config:=NAME]

The model is the deterministic policy ``obs (N, obs_dim) -> tanh(mean) (N, action_dim)`` (see
:mod:`rl_core.runs.export`), with the actor's architecture and, when known, the task's env_id in its
metadata. After writing, the model is loaded with onnxruntime and compared with the torch actor
on random observations; a difference above :data:`PARITY_TOLERANCE` fails the export.
``checkpoint:=`` names the checkpoint as for ``rl-bringup eval`` (a run's output directory stands
for its best checkpoint); the model goes into that checkpoint's folder unless ``onnx:=`` says.

Exit codes: 0 written and checked; 2 bad input (no checkpoint at the path, a task that does not
fit); 1 a checkpoint that cannot be loaded, or a model that cannot be written or does not match.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rl_bringup.tools.common import choose_env_id, load_checkpoint_actor, stored_env_id
from rl_bringup.tools.subcommand import EXIT_FAILURE, SubparsersAction, ToolError, add_tool

COMMAND = "export"
KEYS: tuple[str, ...] = ("checkpoint", "onnx", "env_id", "config")
DEFAULT_MODEL_NAME = "policy.onnx"
PARITY_TOLERANCE = 1e-4
PARITY_SAMPLES = 64


def export(values: dict[str, str]) -> int:
    """``rl-bringup export checkpoint:=DIR [onnx:=FILE] [env_id:=ID | config:=NAME]``.

    :param values: the parsed ``key:=value`` arguments.
    :return: the exit code.
    :raises ToolError: exit 2 for bad input, 1 when loading, writing or the check fails.
    """
    if "checkpoint" not in values:
        raise ToolError("missing checkpoint:=DIR (a training run's output directory, its best "
                        "or final checkpoint, or any checkpoint folder)")
    actor, meta, checkpoint = load_checkpoint_actor(values["checkpoint"])
    target = Path(values.get("onnx") or checkpoint / DEFAULT_MODEL_NAME).expanduser()
    if target.is_dir():
        raise ToolError(f"onnx:={target} is a folder; give a file name such as "
                        f"{target / DEFAULT_MODEL_NAME}")
    # The task is optional metadata here: without one the model is written without an env_id.
    choice = choose_env_id(obs_dim=actor.obs_dim, action_dim=actor.action_dim,
                           given=values.get("env_id"), config_value=values.get("config"),
                           stored=stored_env_id(meta), required=False)

    from rl_core.runs.export import export_onnx
    from rl_core.runs.onnx_policy import OnnxPolicy

    try:
        export_onnx(actor, target, env_id=choice.env_id if choice else None)
        exported = OnnxPolicy(target)
    except (OSError, ValueError) as error:
        raise ToolError(f"cannot export to {target}: {error}", EXIT_FAILURE) from error
    obs = np.random.default_rng(0).standard_normal((PARITY_SAMPLES, actor.obs_dim))
    obs = obs.astype(np.float32)
    difference = float(np.max(np.abs(exported.act(obs) - actor.act(obs, deterministic=True))))
    if not difference <= PARITY_TOLERANCE:
        raise ToolError(f"{target} was written but its actions differ from the checkpoint's by "
                        f"{difference:.3g} (> {PARITY_TOLERANCE:g}); do not deploy it",
                        EXIT_FAILURE)
    task = (f"env_id {choice.env_id} (from {choice.source})" if choice
            else "no env_id stored (pass env_id:= or config:= to record it)")
    print(f"wrote {target} ({target.stat().st_size / 1024:.1f} KiB) from {checkpoint}: "
          f"obs (N, {actor.obs_dim}) -> action (N, {actor.action_dim}), hidden sizes "
          f"{list(actor.hidden_sizes)}, {task}",
          file=sys.stdout)
    print(f"checked with onnxruntime: max |onnx - torch| = {difference:.2g} on {PARITY_SAMPLES} "
          "random observations", file=sys.stdout)
    return 0


def register(subparsers: SubparsersAction) -> None:
    """Add ``export`` to the ``rl-bringup`` subcommands."""
    add_tool(
        subparsers, COMMAND, export, keys=KEYS,
        help="write a checkpoint's deterministic policy as an ONNX model (onnxruntime, no torch)",
        description="Export the mean-action policy of a checkpoint to ONNX with a dynamic batch "
        "dimension and the architecture (and env_id) in its metadata, then check it against the "
        f"torch actor. key:=value arguments: checkpoint:=DIR (required), onnx:=FILE (default "
        f"DIR/{DEFAULT_MODEL_NAME}), env_id:=ID or config:=NAME|PATH (the task to record when "
        "the checkpoint does not). Exit code 2 for bad input, 1 when loading, writing or the "
        "check fails.",
    )
