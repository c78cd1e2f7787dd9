"""Helpers shared by the tool subcommands that load configs and policies: which task a policy is
for, checkpoints, quiet native output. Errors, exit codes and argument parsing are in
:mod:`rl_bringup.tools.subcommand`.

torch, gymnasium and pybullet are imported inside the functions that need them, so that
``rl-bringup plan`` (which imports every subcommand module) stays quick to start.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rl_bringup.plan.paths import resolve_config
from rl_bringup.tools.subcommand import EXIT_FAILURE, EXIT_USAGE, ToolError
from rl_core.config import ConfigError, RunConfig, load_run_config


def load_config(value: str) -> tuple[Path, RunConfig]:
    """Resolve ``config:=`` (a name in config/ or a path) and load it as a RunConfig.

    :raises ToolError: (exit 2) when the file does not exist or holds invalid values.
    """
    try:
        path = resolve_config(value)
        return path, load_run_config(path)
    except (FileNotFoundError, ConfigError) as error:
        raise ToolError(str(error)) from error


class EnvChoice(NamedTuple):
    """The task a policy runs on and where that came from (printed so the user can check)."""

    env_id: str
    source: str


def choose_env_id(*, obs_dim: int, action_dim: int, given: str | None = None,
                  config_value: str | None = None, stored: str | None = None,
                  stored_where: str = "the checkpoint", required: bool = True
                  ) -> EnvChoice | None:
    """Decide which environment a policy of the given sizes is for.

    Order: ``env_id:=``, then ``config:=`` (its env_id), then the id stored with the policy, then
    the single ``rl_ros2/`` environment whose spaces have these sizes. The choice is checked
    against the policy's sizes.

    :param stored_where: where ``stored`` came from, for the printed source.
    :param required: raise when nothing decides; otherwise return ``None``.
    :raises ToolError: (exit 2) when the choice is unknown, does not fit the sizes, or (when
        ``required``) nothing decides.
    """
    import gymnasium

    from rl_core.envs import register_envs
    from rl_core.robot.tasks import space_shapes

    choice: EnvChoice | None = None
    if given:
        choice = EnvChoice(given, "env_id:=")
    elif config_value:
        path, run_config = load_config(config_value)
        choice = EnvChoice(run_config.trainer.env_id, f"config {path}")
    elif stored:
        choice = EnvChoice(stored, stored_where)
    else:
        register_envs()
        with silence_native_stdout():
            fitting = [env_id for env_id in sorted(gymnasium.registry)
                       if env_id.startswith("rl_ros2/")
                       and space_shapes(env_id) == ((obs_dim,), (action_dim,))]
        if len(fitting) == 1:
            choice = EnvChoice(fitting[0], f"inferred: the only rl_ros2 task with obs {obs_dim}, "
                                           f"action {action_dim}; pass env_id:= to choose")
        elif required:
            found = f"several fit: {', '.join(fitting)}" if fitting else "no rl_ros2 task fits"
            raise ToolError(f"{stored_where} does not name its task and {found} (obs {obs_dim}, "
                            f"action {action_dim}); pass env_id:=ID or config:=NAME")
        else:
            return None
    try:
        with silence_native_stdout():
            shapes = space_shapes(choice.env_id)
    except ValueError as error:
        raise ToolError(str(error)) from error
    if shapes != ((obs_dim,), (action_dim,)):
        raise ToolError(f"{choice.env_id} ({choice.source}) has observations {shapes[0]} and "
                        f"actions {shapes[1]}, the policy takes ({obs_dim},) -> ({action_dim},); "
                        "pass the env_id it was trained on")
    return choice


def load_checkpoint_actor(checkpoint: str) -> tuple[Any, dict[str, Any], Path]:
    """``rl_core.runs.checkpoint.load_actor`` of what ``checkpoint:=`` names
    (:func:`rl_core.runs.run_checkpoints.resolve_checkpoint`: a checkpoint directory, a run's
    ``<output_dir>/best`` or ``<output_dir>/final``, or a run's output directory, which stands
    for its best checkpoint where it has one), with tool errors; returns the actor, the
    checkpoint's metadata and the directory loaded.

    :raises ToolError: exit 2 when ``checkpoint`` names no checkpoint, exit 1 when it names a
        broken one (bad JSON or checksum, missing tensor file, tensors that do not fit the
        recorded sizes).
    """
    from rl_core.runs.checkpoint import load_actor
    from rl_core.runs.run_checkpoints import resolve_checkpoint

    try:
        directory = resolve_checkpoint(Path(checkpoint).expanduser())
    except FileNotFoundError as error:
        raise ToolError(str(error), EXIT_USAGE) from error
    try:
        return (*load_actor(directory), directory)
    except (OSError, ValueError) as error:
        raise ToolError(f"checkpoint {str(directory)!r} cannot be loaded: {error}",
                        EXIT_FAILURE) from error
    except (KeyError, TypeError) as error:
        # checkpoint.json parsed but lacks or mistypes a field.
        raise ToolError(f"checkpoint {str(directory)!r} is incomplete: checkpoint.json lacks or "
                        f"mistypes {error}", EXIT_FAILURE) from error


def stored_env_id(meta: Mapping[str, Any]) -> str | None:
    """The env_id a checkpoint's ``checkpoint.json`` records, if any."""
    env_id = meta.get("env_id")
    return env_id if isinstance(env_id, str) and env_id else None


def format_duration(seconds: float) -> str:
    """``12.3 µs`` / ``4.56 ms`` / ``1.23 s``: three significant figures in a readable unit."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


@contextlib.contextmanager
def silence_native_stdout() -> Iterator[None]:
    """Send what C code writes to file descriptor 1 to /dev/null for the duration.

    pybullet's DIRECT client prints ``argv[0]=`` with printf whenever it connects, which would mix
    into the tool's report. Python-level ``sys.stdout`` is flushed first and left alone.
    """
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (an embedding without stdout): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
