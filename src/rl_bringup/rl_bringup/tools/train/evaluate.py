"""``rl-bringup eval``: deterministic episodes of a trained policy, optionally as an animated GIF.

Usage::

    rl-bringup eval checkpoint:=DIR [episodes:=10] [gif:=out.gif] [seed:=0]
    rl-bringup eval onnx:=model.onnx [episodes:=10] [gif:=out.gif]
    rl-bringup eval checkpoint:=DIR onnx:=model.onnx ...   # the ONNX model acts; the checkpoint
                                                          # names the task and must match it
    ... [env_id:=ID | config:=NAME]                       # the task, when the policy lacks it

The episodes are those of :func:`rl_core.learning.evaluation.evaluate`, so the figures match a
training run's final evaluation; ``gif:=`` renders the first one. ``checkpoint:=`` also takes a
run's output directory, which stands for its best checkpoint (:mod:`rl_core.runs.run_checkpoints`).
Exit codes: 0 done; 2 bad input; 1 a checkpoint or model that cannot be loaded, or a GIF that
cannot be written (docs/tools.md, "eval").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

from rl_bringup.tools.common import choose_env_id, load_checkpoint_actor, silence_native_stdout, stored_env_id
from rl_bringup.tools.subcommand import (
    EXIT_FAILURE,
    EXIT_USAGE,
    SubparsersAction,
    ToolError,
    add_tool,
    int_value,
)

COMMAND = "eval"
KEYS: tuple[str, ...] = ("checkpoint", "onnx", "episodes", "gif", "env_id", "config", "seed")
DEFAULT_EPISODES = 10
#: GIF frame times are in hundredths of a second and most viewers slow frames under 20 ms.
MIN_FRAME_MS = 20


class ActingPolicy(Protocol):
    """What evaluation needs of a policy: the torch actor and :class:`OnnxPolicy` both fit."""

    def act(self, obs: np.ndarray, deterministic: bool = ...) -> np.ndarray: ...


class LoadedPolicy(NamedTuple):
    """A policy to evaluate, its sizes and the task recorded with it."""

    policy: ActingPolicy
    description: str
    obs_dim: int
    action_dim: int
    stored_env_id: str | None
    stored_where: str


def _load_onnx(path: str) -> Any:
    from rl_core.runs.onnx_policy import OnnxPolicy

    try:
        return OnnxPolicy(path)
    except FileNotFoundError as error:
        raise ToolError(str(error), EXIT_USAGE) from error
    except (ValueError, KeyError) as error:
        raise ToolError(f"ONNX model {path!r} cannot be used: {error}", EXIT_FAILURE) from error


def load_policy(checkpoint: str | None, onnx_path: str | None) -> LoadedPolicy:
    """Load the policy named by ``checkpoint:=`` and/or ``onnx:=``.

    With both, the ONNX model acts and must have the checkpoint actor's architecture.

    :raises ToolError: exit 2 for missing files or mismatched architectures, exit 1 for files
        that exist but cannot be loaded.
    """
    if checkpoint is None and onnx_path is None:
        raise ToolError("give the policy: checkpoint:=DIR (a training run's output directory, "
                        "its best or final checkpoint, or any checkpoint folder) or onnx:=MODEL "
                        "(written by `rl-bringup export`)")
    onnx_policy = _load_onnx(onnx_path) if onnx_path is not None else None
    if checkpoint is None:
        assert onnx_policy is not None
        architecture = onnx_policy.architecture
        return LoadedPolicy(onnx_policy, f"ONNX model {onnx_path} (hidden sizes "
                            f"{architecture.get('hidden_sizes')})", onnx_policy.obs_dim,
                            onnx_policy.action_dim, onnx_policy.env_id, "the ONNX model")
    actor, meta, directory = load_checkpoint_actor(checkpoint)
    counters = ", ".join(f"{key} {value}"
                         for key, value in sorted((meta.get("counters") or {}).items()))
    description = (f"checkpoint {directory} (hidden sizes {list(actor.hidden_sizes)}, "
                   f"{meta.get('update_step', '?')} updates{', ' + counters if counters else ''})")
    stored = stored_env_id(meta)
    if onnx_policy is None:
        return LoadedPolicy(actor, description, actor.obs_dim, actor.action_dim, stored,
                            "the checkpoint")
    if onnx_policy.architecture != actor.architecture():
        raise ToolError(f"the ONNX model {onnx_path} is a {onnx_policy.architecture}, the "
                        f"checkpoint's actor a {actor.architecture()}: export this checkpoint "
                        "again or evaluate them separately")
    return LoadedPolicy(onnx_policy, f"ONNX model {onnx_path} of {description}", actor.obs_dim,
                        actor.action_dim, stored or onnx_policy.env_id,
                        "the checkpoint" if stored else "the ONNX model")


class FirstEpisodeFrames:
    """Wraps a ``render_mode="rgb_array"`` env and keeps the frames of its first episode.

    A plain object rather than a gymnasium wrapper so evaluate() sees the same reset/step API
    while rendering costs nothing after the first episode ends.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.frames: list[np.ndarray] = []
        self._resets = 0
        self._recording = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._resets += 1
        self._recording = self._resets == 1
        self._capture()
        return obs, info

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._capture()
        if terminated or truncated:
            self._recording = False
        return obs, reward, terminated, truncated, info

    def _capture(self) -> None:
        if self._recording:
            frame = self.env.render()
            if frame is not None:
                self.frames.append(np.asarray(frame, dtype=np.uint8))

    def close(self) -> None:
        self.env.close()


def frame_duration_ms(env: Any) -> int:
    """Milliseconds per GIF frame so the animation plays at the simulated speed."""
    period = getattr(env.unwrapped, "control_period", None)
    if period is None:
        period = 1.0 / float(env.metadata.get("render_fps") or 50)
    return max(MIN_FRAME_MS, int(round(period * 1000)))


def write_gif(frames: Sequence[np.ndarray], path: str | os.PathLike[str],
              duration_ms: int) -> Path:
    """Write RGB frames ``(H, W, 3)`` uint8 as an endlessly looping animated GIF, atomically.

    :raises ValueError: when there are no frames.
    :raises OSError: when the file cannot be written.
    """
    from PIL import Image

    if not frames:
        raise ValueError("no frames to write (the environment rendered nothing)")
    path = Path(path)
    images = [Image.fromarray(np.ascontiguousarray(frame[..., :3])) for frame in frames]
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                       duration=duration_ms, loop=0)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _check_gif_path(text: str) -> Path:
    """Create the GIF's folder now, so a bad path fails before the episodes run."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise ToolError(f"gif:={text} is a folder; give a file name such as {path / 'eval.gif'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ToolError(f"cannot create the folder of gif:={text}: {error}",
                        EXIT_FAILURE) from error
    return path


def evaluate_policy(values: dict[str, str]) -> int:
    """``rl-bringup eval checkpoint:=DIR|onnx:=FILE [episodes:=N] [gif:=FILE] ...``.

    :param values: the parsed ``key:=value`` arguments.
    :return: the exit code.
    :raises ToolError: exit 2 for bad input or missing files, 1 for files that cannot be loaded
        or written.
    """
    episodes = int_value(values, "episodes", DEFAULT_EPISODES, 1, 1_000_000)
    seed = int_value(values, "seed", 0, 0, 2**31 - 1)
    gif_path = _check_gif_path(values["gif"]) if "gif" in values else None
    loaded = load_policy(values.get("checkpoint"), values.get("onnx"))
    choice = choose_env_id(obs_dim=loaded.obs_dim, action_dim=loaded.action_dim,
                           given=values.get("env_id"), config_value=values.get("config"),
                           stored=loaded.stored_env_id, stored_where=loaded.stored_where)
    assert choice is not None  # required=True raises instead

    from rl_core.envs import make_env
    from rl_core.learning.evaluation import EVAL_SEED_OFFSET, evaluate

    out = sys.stdout
    print(f"[rl-bringup {COMMAND}] policy: {loaded.description}", file=out)
    print(f"[rl-bringup {COMMAND}] task: {choice.env_id} (from {choice.source})", file=out)
    first_seed = seed + EVAL_SEED_OFFSET
    print(f"[rl-bringup {COMMAND}] {episodes} deterministic episode(s), seeds "
          f"{first_seed}..{first_seed + episodes - 1}", file=out)
    out.flush()
    recorder: FirstEpisodeFrames | None = None
    if gif_path is not None:
        with silence_native_stdout():
            recorder = FirstEpisodeFrames(make_env(choice.env_id, render_mode="rgb_array"))
    duration_ms = frame_duration_ms(recorder.env) if recorder is not None else 0
    try:
        # Silenced: pybullet prints "argv[0]=" when evaluate() creates its environment.
        with silence_native_stdout():
            # evaluate() only calls act() on the policy and reset/step on the env it is given,
            # which OnnxPolicy and FirstEpisodeFrames provide (its annotations are narrower).
            result = evaluate(loaded.policy, choice.env_id, episodes,  # type: ignore[arg-type]
                              seed=seed, env=recorder)  # type: ignore[arg-type]
    finally:
        if recorder is not None:
            recorder.close()
    print(f"mean return {result.mean:.2f} ± {result.std:.2f} over {episodes} episode(s) "
          f"(min {result.returns.min():.2f}, max {result.returns.max():.2f}, mean length "
          f"{result.lengths.mean():.1f})", file=out)
    if recorder is not None and gif_path is not None:
        try:
            write_gif(recorder.frames, gif_path, duration_ms)
        except (OSError, ValueError) as error:
            raise ToolError(f"cannot write {gif_path}: {error}", EXIT_FAILURE) from error
        height, width = recorder.frames[0].shape[:2]
        print(f"gif {gif_path} ({len(recorder.frames)} frames of the first episode, {width}x"
              f"{height}, {duration_ms} ms per frame)", file=out)
    return 0


def register(subparsers: SubparsersAction) -> None:
    """Add ``eval`` to the ``rl-bringup`` subcommands."""
    add_tool(
        subparsers, COMMAND, evaluate_policy, keys=KEYS,
        help="run deterministic episodes of a checkpoint or ONNX model; optionally write a GIF",
        description="Evaluate a trained policy with the mean action. key:=value arguments: "
        "checkpoint:=DIR and/or onnx:=FILE (with both, the ONNX model acts and the checkpoint "
        f"names the task), episodes:=N (default {DEFAULT_EPISODES}), gif:=FILE (animate the first "
        "episode), seed:=N (default 0), env_id:=ID or config:=NAME|PATH (the task, when the "
        "checkpoint does not record it). Exit code 2 for bad input or missing files, 1 for "
        "files that cannot be loaded or written.",
    )
