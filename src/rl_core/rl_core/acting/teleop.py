"""Interventions: an operator takes over a robot, in plain Python.

Two inputs drive a robot instead of its policy (HIL-SERL's interventions): a gamepad or
spacemouse (``sensor_msgs/Joy``) through a :class:`JoyMapping` read from a YAML file, with a
*deadman* button that must be held for the operator's command to count; and a plain command
topic carrying actions in the task's units, for programs and teleop nodes of their own.

:class:`Intervention` keeps the newest input of either kind and answers, at every step, whether
an operator drives and with what action. An input counts for ``timeout_s`` after it arrived, so
a gamepad that stops publishing hands the robot back to the policy instead of holding its last
command. It also counts the steps an operator drove. :class:`ScriptedIntervention` is the
stand-in operator of tests and benchmarks: the task's scripted expert
(:mod:`rl_core.acting.experts`) takes over a share of the early episodes. The mapping file's
format: docs/human_in_the_loop.md, "3. Take over when it goes wrong".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rl_core.config import ConfigError
from rl_core.robot.gripper import CLOSE, GRIPPER_CHOICES, OPEN, STAY

__all__ = ["Intervention", "JoyMapping", "ScriptedIntervention"]


@dataclass(frozen=True)
class JoyMapping:
    """How a ``sensor_msgs/Joy`` device drives a task's actions.

    :param axes: per action dimension, the Joy axis that drives it (-1: none).
    :param scale: per action dimension, the factor on its axis.
    :param deadman_button: the button that must be held.
    :param deadzone: axis values within +-deadzone read as 0.
    :param gripper_buttons: for a task with a gripper, the buttons that close and open it
        (neither held: stay); the action then ends with that choice (0, 1, 2).
    """

    axes: tuple[int, ...]
    scale: tuple[float, ...]
    deadman_button: int
    deadzone: float = 0.05
    gripper_buttons: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if len(self.scale) != len(self.axes):
            raise ValueError(f"scale has {len(self.scale)} values for {len(self.axes)} axes")
        if any(axis < -1 for axis in self.axes) or self.deadman_button < 0:
            raise ValueError("axes must be Joy axis indices or -1 (none), deadman_button a "
                             f"button index; got axes {list(self.axes)}, deadman_button "
                             f"{self.deadman_button}")
        if self.gripper_buttons and (len(self.gripper_buttons) != 2
                                     or min(self.gripper_buttons) < 0):
            raise ValueError(f"gripper_buttons must be two button indices, close and open; got "
                             f"{list(self.gripper_buttons)}")
        if not all(math.isfinite(value) for value in self.scale) or \
                not 0.0 <= self.deadzone < 1.0:
            raise ValueError(f"scale must be finite and deadzone in [0, 1), got "
                             f"{list(self.scale)} and {self.deadzone}")

    @classmethod
    def from_file(cls, path: str | Path, action_size: int, choices: int = 0) -> JoyMapping:
        """Read a mapping file (module docstring) for a task of ``action_size`` actions, the
        last of them a gripper's choice when the task has ``choices``.

        :raises ConfigError: when the file is missing or malformed, or maps another number
            of action dimensions, or has no gripper buttons for a gripper, saying what to fix.
        """
        where = f"teleop mapping {str(path)!r}"
        try:
            document: Any = yaml.safe_load(Path(path).read_text())
        except OSError as error:
            raise ConfigError(f"{where}: {error.strerror}") from None
        except yaml.YAMLError as error:
            raise ConfigError(f"{where} is not YAML: {error}") from None
        if not isinstance(document, dict) or "axes" not in document \
                or "deadman_button" not in document:
            raise ConfigError(f"{where} needs 'axes' (one Joy axis per action dimension, -1 for "
                              "none) and 'deadman_button' (rl_core/acting/teleop.py shows a file)")
        keys = {"axes", "scale", "deadman_button", "deadzone", "gripper_buttons"}
        unknown = sorted(set(document) - keys)
        if unknown:
            raise ConfigError(f"{where}: unknown keys {unknown}; valid: {', '.join(sorted(keys))}")
        try:
            axes = tuple(int(axis) for axis in document["axes"])
            scale = tuple(float(value) for value in document.get("scale", [1.0] * len(axes)))
            mapping = cls(axes, scale, int(document["deadman_button"]),
                          float(document.get("deadzone", 0.05)),
                          tuple(int(b) for b in document.get("gripper_buttons", ())))
        except (TypeError, ValueError) as error:
            raise ConfigError(f"{where}: {error}") from None
        arm = action_size - (1 if choices else 0)
        if len(axes) != arm:
            raise ConfigError(f"{where} maps {len(axes)} action dimensions, the task has "
                              f"{arm}; give one axis (or -1) per dimension")
        if choices not in (0, len(GRIPPER_CHOICES)):
            raise ConfigError(f"{where}: a gamepad drives a gripper's close, stay and open; this "
                              f"task's discrete part has {choices} choices: unset teleop")
        if bool(choices) != bool(mapping.gripper_buttons):
            raise ConfigError(f"{where}: " + ("the task has a gripper: give gripper_buttons: "
                                              "[close, open]" if choices else
                                              "gripper_buttons, but the task has no gripper"))
        return mapping

    def action(self, axes: Any, buttons: Any) -> np.ndarray | None:
        """The action a Joy reading commands, or None while the deadman button is not held
        (or the device has no such button).

        :raises ValueError: when the reading has fewer axes than the mapping uses, or values
            that are not finite.
        """
        if self.deadman_button >= len(buttons) or not buttons[self.deadman_button]:
            return None
        values = np.asarray(axes, dtype=np.float64)
        needed = max(self.axes, default=-1)
        if values.ndim != 1 or values.size <= needed or not np.all(np.isfinite(values)):
            raise ValueError(f"a Joy reading needs {needed + 1} finite axes for this mapping, "
                             f"got {values.size}")
        picked = np.array([values[axis] if axis >= 0 else 0.0 for axis in self.axes])
        picked[np.abs(picked) <= self.deadzone] = 0.0
        arm = np.clip(picked * np.asarray(self.scale), -1.0, 1.0)
        if not self.gripper_buttons:
            return arm
        close, open_ = (bool(buttons[b]) if b < len(buttons) else False
                        for b in self.gripper_buttons)
        return np.append(arm, CLOSE if close else OPEN if open_ else STAY)


class Intervention:
    """The operator's newest input and whether it drives the robot now.

    :param action_size: size of one action.
    :param timeout_s: how long an input counts after it arrived.
    :param mapping: the Joy mapping (None: the robot takes no Joy input).
    :param choices: of a gripper whose choice ends an action (0: none).
    """

    def __init__(self, action_size: int, timeout_s: float, mapping: JoyMapping | None = None,
                 choices: int = 0) -> None:
        if timeout_s <= 0.0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.action_size = action_size
        self.choices = choices
        self.timeout_s = timeout_s
        self.mapping = mapping
        self._action: np.ndarray | None = None
        self._until = -math.inf
        #: Steps taken, and steps an operator drove.
        self.steps = self.intervened_steps = 0

    def on_joy(self, axes: Any, buttons: Any, now: float) -> None:
        """A Joy reading: the operator drives while the deadman button is held, and lets go
        at once when it is released.

        :raises ValueError: as :meth:`JoyMapping.action`, or when no mapping is configured.
        """
        if self.mapping is None:
            raise ValueError("Joy input needs a teleop mapping file (teleop_mapping)")
        self._hold(self.mapping.action(axes, buttons), now)

    def on_command(self, values: Any, now: float) -> None:
        """A command in the task's action units (clipped to [-1, 1]; a gripper's choice last).

        :raises ValueError: for another size, values that are not finite, or no choice.
        """
        action = np.asarray(values, dtype=np.float64).reshape(-1)
        if action.size != self.action_size or not np.all(np.isfinite(action)):
            raise ValueError(f"a teleop command needs {self.action_size} finite values in "
                             f"[-1, 1], got {action.size}")
        clipped = np.clip(action, -1.0, 1.0)
        if self.choices:
            if action[-1] not in range(self.choices):
                raise ValueError(f"a teleop command's last value is a choice's index in [0, "
                                 f"{self.choices}) (a gripper: 0 close, 1 stay, 2 open); got "
                                 f"{action[-1]}")
            clipped[-1] = action[-1]
        self._hold(clipped, now)

    def _hold(self, action: np.ndarray | None, now: float) -> None:
        self._action = action
        self._until = now + self.timeout_s if action is not None else -math.inf

    def command(self, now: float) -> np.ndarray | None:
        """The operator's action now (float32), or None when the policy drives."""
        if self._action is None or now > self._until:
            return None
        return self._action.astype(np.float32)

    def apply(self, actions: np.ndarray, now: float, obs: np.ndarray | None = None,
              env_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One step's actions ``(envs, action_size)`` with the operator's in place of the
        policy's where one drives, and a flag per env: whether the operator drove it.

        Counts the step for :attr:`rate`. ``obs`` (the observations the actions answer) and
        ``env_ids`` (the simulator's index of each row) are for operators that look at the
        robot; a person's input does not need them.
        """
        command = self.command(now)
        rows = actions.shape[0]
        self.steps += rows
        if command is None:
            return actions, np.zeros(rows, dtype=bool)
        self.intervened_steps += rows
        return np.broadcast_to(command, actions.shape).astype(actions.dtype), \
            np.ones(rows, dtype=bool)

    def episodes_ended(self, env_ids: np.ndarray) -> None:
        """The episodes of these environments ended (a person need not be told)."""

    @property
    def rate(self) -> float:
        """The share of steps an operator drove (0 before any step)."""
        return self.intervened_steps / self.steps if self.steps else 0.0


class ScriptedIntervention(Intervention):
    """A scripted expert as the operator: it drives a share of the episodes that start in the
    first ``until_steps`` steps (every episode's draw is independent), from the episode's
    first step to its end; afterwards the policy drives alone.

    :param expert: acts on a batch of observations (:class:`rl_core.acting.experts.Expert`).
    :param envs: environments of the simulator (episodes are tracked per environment).
    :param share: the probability that the expert takes an episode.
    :param until_steps: steps (summed over environments) in which episodes may be taken
        (0: all of the run).
    :param rng: draws which episodes.
    """

    def __init__(self, expert: Any, action_size: int, envs: int, share: float,
                 until_steps: int, rng: np.random.Generator) -> None:
        super().__init__(action_size, math.inf)
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"share must be in [0, 1], got {share}")
        self.expert = expert
        self.share = share
        self.until_steps = until_steps
        self.rng = rng
        self.driving = np.zeros(envs, dtype=bool)
        self.episodes_ended(np.arange(envs))  # the first episodes start

    @classmethod
    def for_task(cls, env_id: str, action_size: int, envs: int, share: float,
                 until_steps: int, seed: int) -> ScriptedIntervention:
        """The scripted expert of ``env_id`` as the operator of ``envs`` environments.

        :raises ConfigError: when the task has no scripted expert.
        """
        from rl_core.acting.experts import make_expert

        try:
            expert = make_expert(env_id)
        except ValueError as error:
            raise ConfigError(f"expert_interventions: {error}") from None
        return cls(expert, action_size, envs, share, until_steps, np.random.default_rng(seed))

    def describe(self, env_id: str) -> str:
        """One line saying who takes over which episodes."""
        first = f" that start in the first {self.until_steps} steps" if self.until_steps else ""
        return (f"expert interventions: the scripted expert of {env_id} takes {self.share:.0%} "
                f"of the episodes{first}")

    def episodes_ended(self, env_ids: np.ndarray) -> None:
        """Draw whether the expert takes each of the next episodes of ``env_ids``."""
        early = not self.until_steps or self.steps < self.until_steps
        for env in np.asarray(env_ids, dtype=np.int64):
            self.driving[env] = early and self.rng.random() < self.share

    def apply(self, actions: np.ndarray, now: float, obs: np.ndarray | None = None,
              env_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        rows = actions.shape[0]
        self.steps += rows
        envs = np.arange(rows) if env_ids is None else np.asarray(env_ids, dtype=np.int64)
        driven = self.driving[envs]
        if not driven.any():
            return actions, driven
        if obs is None:
            raise ValueError("a scripted operator needs the observations the actions answer")
        actions = np.array(actions, copy=True)
        taken = np.asarray(obs)[driven].reshape(int(driven.sum()), -1)
        actions[driven] = self.expert.act(taken).reshape(actions[driven].shape)
        self.intervened_steps += int(driven.sum())
        return actions, driven
