"""Elastic robots: when one more robot process pays, and when one stops paying.

The rule behind ``rl-bringup launch hybrid robots:=auto`` as pure code (no rclpy, no psutil, no
clock of its own), so it is unit-tested on recorded numbers. :mod:`rl_bringup.run.elastic` measures
the windows, asks :class:`Autoscaler` and starts or retires the robot processes.

A *window* is a few seconds at a fixed robot count: env steps/s, the achieved updates per
transition, the share of the window acting was blocked by the rate limiter, the machine's idle
CPUs and what one robot process used. The rule **adds** a robot while the last one paid, the
learner keeps up and CPU headroom remains; **retires** the robot just added when it did not pay,
or the newest once it stopped paying for ``patience`` windows (:func:`loss_without_one`); and
otherwise **holds**, adding nothing for ``hold_s`` after a retirement so the count does not
flap. The rule in full, and why blocked acting means the learner is the bottleneck:
docs/elastic.md, "The rule".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

ADD, RETIRE, HOLD = "add", "retire", "hold"


@dataclass(frozen=True)
class AutoscaleSettings:
    """The autoscaler's range and thresholds (``rl-bringup launch`` keys: ``min_robots``,
    ``max_robots`` and ``autoscale_<field>`` for the others)."""

    min_robots: int = 1
    """Robots started with the learner; never fewer run."""
    max_robots: int = 4
    """Robot processes in the plan; never more run."""
    window_s: float = 6.0
    """Seconds of /replay_status per measurement at one robot count."""
    warmup_s: float = 5.0
    """Seconds after learning started and caught up (:func:`learning_steady`) before the first
    window: the first updates and weights publications are not yet the steady state."""
    settle_s: float = 3.0
    """Seconds after a change took effect (the new robot publishes experience, the retired one
    exited) before the next window starts."""
    ready_timeout_s: float = 120.0
    """A started robot that publishes no experience within this is retired again."""
    min_gain: float = 0.10
    """Relative rise of env steps/s a new robot must bring (0.10: 10 %)."""
    max_paused_fraction: float = 0.10
    """Most of a window acting may be blocked by the rate limiter for another robot to be
    added."""
    min_update_ratio: float = 0.9
    """Least achieved updates per transition, as a fraction of the target, for the learner to
    count as keeping up."""
    cpu_headroom: float = 1.0
    """Idle CPUs needed to add a robot, in robots' worth of measured CPU use (0: no check)."""
    patience: int = 2
    """Windows in a row a robot must stop paying before it is retired while holding."""
    hold_s: float = 120.0
    """Seconds without adding after a retirement (0: never add again)."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_robots <= self.max_robots:
            raise ValueError(f"need 1 <= min_robots <= max_robots, got min_robots="
                             f"{self.min_robots}, max_robots={self.max_robots}")
        positive = ("window_s", "ready_timeout_s", "min_update_ratio")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"autoscale {name} must be > 0, got {getattr(self, name)!r}")
        for name in ("warmup_s", "settle_s", "min_gain", "cpu_headroom", "hold_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"autoscale {name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 <= self.max_paused_fraction < 1:
            raise ValueError(f"autoscale max_paused_fraction must be in [0, 1), got "
                             f"{self.max_paused_fraction!r}")
        if self.patience < 1:
            raise ValueError(f"autoscale patience must be >= 1, got {self.patience!r}")

    def describe(self) -> str:
        """One line for logs and plans."""
        headroom = f"{self.cpu_headroom:g} robot(s)" if self.cpu_headroom > 0 else "not checked"
        return (f"robots {self.min_robots}..{self.max_robots}, windows of {self.window_s:g} s, "
                f"a robot must add {self.min_gain:.0%} env steps/s, acting blocked <= "
                f"{self.max_paused_fraction:.0%}, updates >= {self.min_update_ratio:.0%} of the "
                f"target, CPU headroom {headroom}, hold {self.hold_s:g} s")


#: ``autoscale_<name>`` keys of the command line (min_robots and max_robots go without prefix).
TUNING_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(AutoscaleSettings) if f.name not in ("min_robots", "max_robots"))
KEY_PREFIX = "autoscale_"


def settings_from_text(values: Mapping[str, str], default_max_robots: int) -> AutoscaleSettings:
    """Settings from command-line text: ``min_robots``, ``max_robots`` and ``autoscale_*`` keys.

    :param values: text by key.
    :param default_max_robots: ``max_robots`` when not given.
    :raises ValueError: for unknown keys, text that is not a number of the field's type, or bad
        values.
    """
    types = {f.name: type(f.default) for f in fields(AutoscaleSettings)}
    given: dict[str, int | float] = {}
    for key, text in values.items():
        name = key[len(KEY_PREFIX):] if key.startswith(KEY_PREFIX) else key
        if name not in types or (name in TUNING_FIELDS) != key.startswith(KEY_PREFIX):
            valid = ", ".join(("min_robots", "max_robots",
                               *(KEY_PREFIX + field_name for field_name in TUNING_FIELDS)))
            raise ValueError(f"unknown autoscale setting {key!r}; valid: {valid}")
        try:
            given[name] = types[name](str(text).strip())
        except ValueError:
            kind = "an integer" if types[name] is int else "a number"
            raise ValueError(f"{key} must be {kind}, got {text!r}") from None
    given.setdefault("max_robots", max(default_max_robots, int(given.get("min_robots", 1))))
    return AutoscaleSettings(**given)  # type: ignore[arg-type]


@dataclass(frozen=True)
class StatusSample:
    """The /replay_status fields a window needs (counters since the replay buffer started).

    :param stamp_s: the report's time in seconds.
    """

    stamp_s: float
    total_inserted: int
    total_sampled: int
    insert_blocked_s: float
    target_updates_per_transition: float
    rate_limited: bool


@dataclass(frozen=True)
class Window:
    """What was measured over one window at a fixed robot count.

    :param robots: robot processes running throughout.
    :param duration_s: length of the window.
    :param env_steps_per_s: transitions stored per second.
    :param updates_per_transition: batches sampled per transition stored (NaN: none stored).
    :param target_updates_per_transition: the configured ratio (``updates_per_transition``).
    :param paused_fraction: share of the window the rate limiter blocked acting (it sat at its
        error buffer: the learner took all it could); the robots, pausing with hysteresis,
        slow down less than that.
    :param rate_limited: whether the rate limiter is on.
    :param idle_cpus: idle CPUs (cores' worth) of the run's CPUs.
    :param robot_cpus: CPUs one robot process used, averaged over the robots.
    """

    robots: int
    duration_s: float
    env_steps_per_s: float
    updates_per_transition: float
    target_updates_per_transition: float
    paused_fraction: float
    rate_limited: bool
    idle_cpus: float
    robot_cpus: float

    def describe(self) -> str:
        """The numbers, for the decision's log line."""
        return (f"{self.robots} robot(s): {self.env_steps_per_s:.1f} env steps/s, "
                f"{self.updates_per_transition:.2f} updates/transition (target "
                f"{self.target_updates_per_transition:.2f}), acting blocked "
                f"{self.paused_fraction:.0%}, {self.idle_cpus:.2f} idle CPUs, "
                f"{self.robot_cpus:.2f} CPUs per robot, over {self.duration_s:.1f} s")


def window_from_samples(samples: Sequence[StatusSample], robots: int, idle_cpus: float,
                        robot_cpus: float) -> Window:
    """The window between the first and the last of ``samples``.

    :raises ValueError: with fewer than two samples, no time between them, or counters that went
        backwards (a respawned replay buffer reloaded an older snapshot): not a window to judge.
    """
    if len(samples) < 2:
        raise ValueError("a window needs at least two status reports")
    first, last = samples[0], samples[-1]
    duration = last.stamp_s - first.stamp_s
    inserted = last.total_inserted - first.total_inserted
    sampled = last.total_sampled - first.total_sampled
    blocked = last.insert_blocked_s - first.insert_blocked_s
    if duration <= 0:
        raise ValueError(f"status reports span {duration:.3f} s")
    if inserted < 0 or sampled < 0 or blocked < -1e-6:
        raise ValueError("replay counters went backwards (the replay buffer restarted)")
    return Window(robots=robots, duration_s=duration, env_steps_per_s=inserted / duration,
                  updates_per_transition=sampled / inserted if inserted else math.nan,
                  target_updates_per_transition=last.target_updates_per_transition,
                  paused_fraction=min(1.0, max(0.0, blocked / duration)),
                  rate_limited=last.rate_limited, idle_cpus=idle_cpus, robot_cpus=robot_cpus)


#: Batches the learner may still owe when it counts as caught up (the replay buffer's default
#: error buffer: acting is let run that far ahead).
CATCH_UP_SLACK = 100


def learning_steady(total_inserted: int, total_sampled: int, learning_starts: int,
                    target_updates_per_transition: float, rate_limited: bool) -> bool:
    """Whether windows can begin: learning started and, with the rate limiter on, the learner
    owes at most :data:`CATCH_UP_SLACK` batches (or 2 %) of what the data pays for.

    Robots start faster than the learner (torch, the first weights), so the first transitions
    pile up; until the learner has caught up, acting waits on it and a window would measure the
    catching up. Without the rate limiter the learner need not catch up: the windows' update
    ratio shows whether it keeps up.
    """
    if total_inserted < max(1, learning_starts):
        return False
    owed = target_updates_per_transition * (total_inserted - learning_starts) - total_sampled
    return not rate_limited or owed <= max(CATCH_UP_SLACK, 0.02 * total_sampled)


def relative_gain(before: float, after: float) -> float:
    """``after / before - 1``; +inf from nothing to something, 0 from nothing to nothing."""
    if before > 0:
        return after / before - 1.0
    return math.inf if after > 0 else 0.0


def loss_without_one(window: Window, fewer_steps_per_s: float | None) -> float | None:
    """Expected relative loss of env steps/s with one robot fewer, while learning is the
    bottleneck.

    The learner caps the throughput at what it takes now (``window.env_steps_per_s``); one robot
    fewer delivers at most what that count delivered when it was measured
    (``fewer_steps_per_s``). So the loss is ``1 - fewer / now``, at least 0. (The blocked share
    of the window cannot tell it: the rate limiter counts the time it sits at its error buffer,
    and the robots, pausing with hysteresis, slow down far less than that.)

    :return: the loss as a fraction; 1 for a single robot; ``None`` when one robot fewer was
        never measured.
    """
    if window.robots <= 1:
        return 1.0
    if fewer_steps_per_s is None:
        return None
    if window.env_steps_per_s <= 0:
        return 0.0
    return max(0.0, 1.0 - fewer_steps_per_s / window.env_steps_per_s)


def learner_falls_behind(window: Window, settings: AutoscaleSettings) -> bool:
    """The achieved updates per transition stay under ``min_update_ratio`` of the target."""
    ratio = window.updates_per_transition
    target = window.target_updates_per_transition
    return target > 0 and not math.isnan(ratio) and ratio < settings.min_update_ratio * target


@dataclass(frozen=True)
class Decision:
    """What to do after a window.

    :param action: :data:`ADD`, :data:`RETIRE` or :data:`HOLD`.
    :param robots_before: robots running during the window.
    :param robots_after: robots wanted next.
    :param reason: why, with the numbers behind it.
    :param window: the window judged (``None``: a robot that never started working).
    :param gain: env steps/s gain of the robot added before this window (``None``: none added).
    :param cause: what decided, in one word (``max_robots``, ``holding``, ``learner_bound``,
        ``learner_behind``, ``cpu``, ``not_paid``, ``stopped_paying``, ``scaling``,
        ``not_started``): a log can tell a repeated hold from a new one.
    """

    action: str
    robots_before: int
    robots_after: int
    reason: str
    window: Window | None
    gain: float | None = None
    cause: str = ""

    def describe(self, robot: str = "a robot") -> str:
        """The log line: the action, why, and what was measured.

        :param robot: what to call the robot added or retired (its process name).
        """
        if self.action == HOLD:
            head = f"hold at {self.robots_before} robot(s)"
        else:
            head = f"{self.action} {robot} ({self.robots_before} -> {self.robots_after})"
        measured = f"; measured {self.window.describe()}" if self.window is not None else ""
        return f"{head}: {self.reason}{measured}"


@dataclass
class Autoscaler:
    """The decision rule with its memory (see the module docstring).

    :param settings: range and thresholds.
    """

    settings: AutoscaleSettings
    #: env steps/s of the latest window at each robot count.
    throughput: dict[int, float] = field(default_factory=dict)
    #: Every decision so far, oldest first.
    decisions: list[Decision] = field(default_factory=list)
    _added_from: int | None = None
    _no_add_until: float = -math.inf
    _strikes: int = 0

    def decide(self, window: Window, now: float) -> Decision:
        """Judge a window; ``now`` (seconds, any monotonic origin) times the hold after a
        retirement."""
        settings = self.settings
        n = window.robots
        before = self.throughput.get(n - 1)
        self.throughput[n] = window.env_steps_per_s
        gain: float | None = None
        if self._added_from is not None and self._added_from == n - 1 and before is not None:
            gain = relative_gain(before, window.env_steps_per_s)
            self._added_from = None
            if gain < settings.min_gain and n > settings.min_robots:
                return self._retire(n, now, "not_paid", (
                    f"the robot added last did not pay: env steps/s {before:.1f} -> "
                    f"{window.env_steps_per_s:.1f} ({gain:+.1%} < {settings.min_gain:.0%})"),
                    window, gain)
        self._added_from = None
        if n > settings.min_robots and self._stopped_paying(window):
            self._strikes += 1
            if self._strikes >= settings.patience:
                return self._retire(n, now, "stopped_paying", self._why_not_paying(window),
                                    window)
        else:
            self._strikes = 0
        paid = ""
        if gain is not None and before is not None:
            paid = (f"the robot added last paid: env steps/s {before:.1f} -> "
                    f"{window.env_steps_per_s:.1f} ({gain:+.1%}); ")
        blocker = self._add_blocker(window, now)
        if blocker is not None:
            cause, why = blocker
            return self._record(Decision(HOLD, n, n, paid + why, window, gain, cause))
        self._added_from = n
        return self._record(Decision(ADD, n, n + 1, paid + self._why_add(window), window, gain,
                                     "scaling"))

    # ------------------------------------------------------------------------------- reasons

    def _stopped_paying(self, window: Window) -> bool:
        settings = self.settings
        loss = loss_without_one(window, self.throughput.get(window.robots - 1))
        learner_bound = (window.rate_limited
                         and window.paused_fraction > settings.max_paused_fraction
                         and loss is not None and loss < settings.min_gain)
        return learner_bound or learner_falls_behind(window, settings)

    def _why_not_paying(self, window: Window) -> str:
        windows = f"for {self.settings.patience} window(s)"
        if learner_falls_behind(window, self.settings):
            return (f"the learner falls behind {windows}: {window.updates_per_transition:.2f} "
                    f"updates/transition < {self.settings.min_update_ratio:.0%} of "
                    f"{window.target_updates_per_transition:.2f}")
        fewer = self.throughput[window.robots - 1]
        loss = loss_without_one(window, fewer)
        return (f"the newest robot stopped paying {windows}: acting blocked "
                f"{window.paused_fraction:.0%} (learning is the bottleneck) and "
                f"{window.robots - 1} robot(s) delivered {fewer:.1f} env steps/s, so one fewer "
                f"loses about {loss:.0%} < {self.settings.min_gain:.0%}")

    def _add_blocker(self, window: Window, now: float) -> tuple[str, str] | None:
        """``(cause, why)`` no robot may be added now; ``None`` when one may."""
        settings = self.settings
        n = window.robots
        if n >= settings.max_robots:
            return "max_robots", f"at max_robots ({settings.max_robots})"
        if now < self._no_add_until:
            return "holding", (f"holding after a retirement for another "
                               f"{self._no_add_until - now:.0f} s")
        if window.rate_limited and window.paused_fraction > settings.max_paused_fraction:
            return "learner_bound", (
                f"the learner is the bottleneck: acting blocked {window.paused_fraction:.0%} > "
                f"{settings.max_paused_fraction:.0%} of the window by the rate limiter")
        if learner_falls_behind(window, settings):
            return "learner_behind", (
                f"the learner does not keep up: {window.updates_per_transition:.2f} "
                f"updates/transition < {settings.min_update_ratio:.0%} of "
                f"{window.target_updates_per_transition:.2f}")
        needed = settings.cpu_headroom * window.robot_cpus
        if window.idle_cpus < needed:
            return "cpu", (f"no CPU headroom: {window.idle_cpus:.2f} idle CPUs < "
                           f"{settings.cpu_headroom:g} x {window.robot_cpus:.2f} a robot uses")
        return None

    def _why_add(self, window: Window) -> str:
        headroom = (f"{window.idle_cpus:.2f} idle CPUs >= {self.settings.cpu_headroom:g} x "
                    f"{window.robot_cpus:.2f} a robot uses" if self.settings.cpu_headroom > 0
                    else "CPU headroom not checked")
        return (f"the learner keeps up (acting blocked {window.paused_fraction:.0%}, "
                f"{window.updates_per_transition:.2f} updates/transition) and {headroom}")

    # ------------------------------------------------------------------------------- actions

    def _retire(self, robots: int, now: float, cause: str, reason: str,
                window: Window | None = None, gain: float | None = None) -> Decision:
        self._strikes = 0
        self._no_add_until = (now + self.settings.hold_s if self.settings.hold_s > 0
                              else math.inf)
        return self._record(Decision(RETIRE, robots, robots - 1, reason, window, gain, cause))

    def _record(self, decision: Decision) -> Decision:
        self.decisions.append(decision)
        return decision

    def added_robot_failed(self, robots: int, now: float, reason: str) -> Decision:
        """The robot added to reach ``robots`` never started working: retire it and hold."""
        self._added_from = None
        return self._retire(robots, now, "not_started", reason)
