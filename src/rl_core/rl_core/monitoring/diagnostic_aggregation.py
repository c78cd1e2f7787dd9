"""The tree ``rqt_robot_monitor`` shows: ``/diagnostics`` statuses grouped by analyzers, as ROS's
``diagnostic_aggregator`` groups them (plain Python, no rclpy).

Why our own: ``diagnostic_aggregator`` (the ``aggregator_node``) is C++ on rclcpp and pluginlib
and has no pip wheel, so the pip install cannot run it. The docker image (apt ROS) runs the real
one; both read the same analyzer file (``config/robots/diagnostic_analyzers.yaml``), so there is
one source. This module follows the upstream analyzers' documented behaviour
(``GenericAnalyzer``, ``AnalyzerGroup``, ``DiscardAnalyzer``, ``IgnoreAnalyzer``, the ``Other``
branch, header levels); the rules it implements: docs/graph.md, "Nodes". Times are the caller's
seconds of a monotonic clock, so staleness does not jump with wall-clock changes.

Bounded, unlike upstream, since anyone on the domain can publish ``/diagnostics`` (issue 41):
an analyzer holds at most :data:`MAX_ITEMS` statuses, evicting the one heard least recently that
is not ``expected``, and a status carries at most :data:`MAX_VALUES` values and
:data:`MAX_TEXT_CHARS` characters per text (:attr:`Aggregator.dropped`, :attr:`Aggregator.clipped`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from rl_core.config import ConfigError

#: Levels of diagnostic_msgs/DiagnosticStatus.
OK, WARN, ERROR, STALE = 0, 1, 2, 3
#: The word a header carries for its level (upstream's wording, which rqt_robot_monitor shows).
LEVEL_WORDS = {OK: "OK", WARN: "Warning", ERROR: "Error", STALE: "Stale"}
#: GenericAnalyzer's default ``timeout`` and the Other analyzer's, in seconds.
DEFAULT_TIMEOUT_S = 5.0
#: The node name aggregator_node runs under, hence the parameter file's top-level key.
AGGREGATOR_NODE = "analyzers"
#: Where statuses no analyzer matched go, under the root path.
OTHER = "Other"
#: Message of an ``expected`` status not heard yet.
MISSING = "Missing"
GENERIC, GROUP = "diagnostic_aggregator/GenericAnalyzer", "diagnostic_aggregator/AnalyzerGroup"
DISCARD, IGNORE = "diagnostic_aggregator/DiscardAnalyzer", "diagnostic_aggregator/IgnoreAnalyzer"
#: Statuses one analyzer holds: a 64-robot fleet sends about 200.
MAX_ITEMS = 512
#: Values a status keeps (rl_ros2's nodes send about 20), and characters per text.
MAX_VALUES, MAX_TEXT_CHARS = 64, 512
#: The ways a GenericAnalyzer picks statuses (upstream reads no ``name`` list, so neither do we).
_NAME_LISTS = ("startswith", "contains", "expected", "regex", "find_and_remove_prefix")
_GENERIC_KEYS = {"type", "path", "timeout", "num_items", "discard_stale", "remove_prefix",
                 *_NAME_LISTS}
#: Root parameters besides the analyzers (``history_depth`` and ``critical`` shape upstream's
#: subscription queue and early error publishing; accepted here so that the file stays shared).
_ROOT_KEYS = {"path", "pub_rate", "other_as_errors", "history_depth", "critical"}


class AnalyzerConfigError(ConfigError):
    """An analyzer file that cannot be used, with the reason."""


@dataclass(frozen=True)
class Status:
    """One diagnostic_msgs/DiagnosticStatus, as plain values.

    :param name: status name; on ``/diagnostics`` a node's fully qualified name, in the tree a
        path such as ``/rl_ros2/Robots/robot_0/simulator``.
    :param level: :data:`OK`, :data:`WARN`, :data:`ERROR` or :data:`STALE`.
    :param values: ``(key, value)`` pairs.
    """

    name: str
    level: int
    message: str = ""
    hardware_id: str = ""
    values: tuple[tuple[str, str], ...] = ()


def level_of(value: int) -> int:
    """A received level as one of the four; anything else counts as ERROR (as upstream)."""
    return value if value in LEVEL_WORDS else ERROR


def oversized(status: Status) -> bool:
    """Whether :func:`clipped` cuts anything of ``status``."""
    texts = (status.name, status.message, status.hardware_id,
             *(text for pair in status.values for text in pair))
    return len(status.values) > MAX_VALUES or any(len(text) > MAX_TEXT_CHARS for text in texts)


def clipped(status: Status) -> Status:
    """``status`` with its level one of the four, at most :data:`MAX_VALUES` values and
    :data:`MAX_TEXT_CHARS` characters per text."""
    def cut(text: str) -> str:
        return text[:MAX_TEXT_CHARS]

    return Status(cut(status.name), level_of(status.level), cut(status.message),
                  cut(status.hardware_id),
                  tuple((cut(key), cut(value)) for key, value in status.values[:MAX_VALUES]))


def output_name(status_name: str) -> str:
    """A status name as one tree segment: its slashes become blanks (upstream's rule, so that a
    node name such as ``/robot_0/simulator`` does not open levels of its own)."""
    return status_name.replace("/", " ")


def _without_prefix(segment: str, prefixes: Sequence[str]) -> str:
    """``segment`` less the first of ``prefixes`` it starts with, then a ':' and blanks."""
    for prefix in prefixes:
        if prefix and segment.startswith(prefix):
            segment = segment[len(prefix):]
            break
    return segment.removeprefix(":").lstrip(" ") if prefixes else segment


def _rollup(levels: Sequence[int]) -> int:
    """A header's level: the worst child's, but ERROR where STALE sits beside live children
    (OK without children)."""
    level = max(levels, default=OK)
    return ERROR if level == STALE and min(levels) < STALE else level


class Analyzer(Protocol):
    """What a group needs of its analyzers."""

    path: str
    title: str

    def matches(self, name: str) -> bool: ...

    def analyze(self, status: Status, now: float) -> None: ...

    def report(self, now: float) -> list[Status]: ...

    @property
    def dropped(self) -> int:
        """Statuses left out for room (:data:`MAX_ITEMS`)."""
        ...


@dataclass
class _Heard:
    status: Status
    #: When it arrived; ``None`` for an ``expected`` name never heard.
    at: float | None


@dataclass
class GenericAnalyzer:
    """Statuses picked by name, shown under ``path`` with a header (see the module docstring).

    :param path: this analyzer's full path, e.g. ``/rl_ros2/Learner``.
    :param title: its ``path`` parameter, the key of its line in the parent's header.
    :param report_items: False for DiscardAnalyzer (matches, shows nothing).
    """

    path: str
    title: str
    startswith: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()
    regexes: tuple[re.Pattern[str], ...] = ()
    remove_prefixes: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    num_items: int = -1
    discard_stale: bool = False
    report_items: bool = True
    expected: tuple[str, ...] = ()
    max_items: int = MAX_ITEMS
    #: By name, heard least recently first (:meth:`analyze` moves a name to the end).
    heard: dict[str, _Heard] = field(default_factory=dict)
    #: Statuses evicted, or refused where only ``expected`` ones were left to evict.
    dropped: int = 0

    def __post_init__(self) -> None:
        for name in self.expected:
            self.heard[name] = _Heard(Status(name, STALE, MISSING), None)

    def matches(self, name: str) -> bool:
        return (name in self.expected
                or any(name.startswith(prefix) for prefix in self.startswith)
                or any(part in name for part in self.contains)
                or any(regex.fullmatch(name) for regex in self.regexes))

    def analyze(self, status: Status, now: float) -> None:
        if self.heard.pop(status.name, None) is None and len(self.heard) >= self.max_items:
            self.dropped += 1
            victim = next((name for name in self.heard if name not in self.expected), None)
            if victim is None:  # only expected names: they stay
                return
            del self.heard[victim]
        self.heard[status.name] = _Heard(status, now)

    def _stale(self, heard: _Heard, now: float) -> bool:
        if heard.at is None:
            return True
        return self.timeout_s > 0 and now - heard.at > self.timeout_s

    def report(self, now: float) -> list[Status]:
        """The header (``path``) followed by one status per item, sorted by name."""
        if not self.report_items:
            return []
        items: list[Status] = []
        for name in sorted(self.heard):
            heard = self.heard[name]
            stale = self._stale(heard, now)
            if stale and self.discard_stale and heard.at is not None:
                del self.heard[name]
                continue
            segment = _without_prefix(output_name(name), self.remove_prefixes)
            items.append(Status(f"{self.path}/{segment}", STALE if stale else heard.status.level,
                                heard.status.message, heard.status.hardware_id,
                                heard.status.values))
        level = _rollup([item.level for item in items])
        if all(item.level == STALE for item in items):  # none heard, or none heard of late
            # absence is fine where stale items are dropped
            level = OK if self.discard_stale else STALE
        message = LEVEL_WORDS[level]
        if self.num_items == 0 and not items:
            level, message = OK, LEVEL_WORDS[OK]
        elif self.num_items > 0 and len(items) != self.num_items:
            level = max(level, ERROR)
            message = (f"Expected {self.num_items}, found {len(items)}" if items
                       else f"No items found, expected {self.num_items}")
        values = tuple((name, self.heard[name].status.message) for name in sorted(self.heard))
        return [Status(self.path, level, message, values=values), *items]


@dataclass
class OtherAnalyzer(GenericAnalyzer):
    """Whatever no analyzer matched; reports nothing while empty."""

    other_as_errors: bool = False

    def matches(self, name: str) -> bool:
        return True

    def report(self, now: float) -> list[Status]:
        statuses = super().report(now)
        if len(statuses) == 1:
            return []
        if self.other_as_errors:
            statuses[0] = Status(self.path, ERROR, 'Unanalyzed items found in "Other"',
                                 values=statuses[0].values)
        return statuses


@dataclass
class IgnoreAnalyzer:
    """Matches nothing (its statuses still reach Other)."""

    path: str
    title: str

    def matches(self, name: str) -> bool:
        return False

    def analyze(self, status: Status, now: float) -> None:
        """Never called: it matches nothing."""

    def report(self, now: float) -> list[Status]:
        return []

    @property
    def dropped(self) -> int:
        return 0


@dataclass
class AnalyzerGroup:
    """Analyzers under one path, with a header rolling them up (none for the empty root path)."""

    path: str
    title: str
    analyzers: list[Analyzer]

    def matches(self, name: str) -> bool:
        return any(analyzer.matches(name) for analyzer in self.analyzers)

    def analyze(self, status: Status, now: float) -> None:
        for analyzer in self.analyzers:
            if analyzer.matches(status.name):
                analyzer.analyze(status, now)

    @property
    def dropped(self) -> int:
        return sum(analyzer.dropped for analyzer in self.analyzers)

    def report(self, now: float) -> list[Status]:
        output: list[Status] = []
        headers: list[tuple[str, Status]] = []
        for analyzer in self.analyzers:
            statuses = analyzer.report(now)
            output += statuses
            headers += [(analyzer.title, status) for status in statuses
                        if status.name == analyzer.path]
        level = _rollup([header.level for _, header in headers])
        if self.path not in ("", "/"):
            output.append(Status(self.path, level, LEVEL_WORDS[level],
                                 values=tuple((title, header.message)
                                              for title, header in headers)))
        return output


class Aggregator:
    """``/diagnostics`` in, the analyzers' tree out.

    :param parameters: the ``ros__parameters`` of the analyzer file's ``analyzers`` block.
    :raises AnalyzerConfigError: with the reason, for an unknown type, parameter or a value of
        the wrong kind.
    """

    def __init__(self, parameters: Mapping[str, Any]) -> None:
        if not isinstance(parameters, Mapping):
            raise AnalyzerConfigError("the ros__parameters of 'analyzers' must be a mapping")
        unknown = {key for key, value in parameters.items()
                   if key not in _ROOT_KEYS and not isinstance(value, Mapping)}
        if unknown:
            raise AnalyzerConfigError(f"unknown aggregator parameter(s) {sorted(unknown)}; "
                                      f"known: {sorted(_ROOT_KEYS)} and one mapping per analyzer")
        root = str(parameters.get("path", "") or "")
        self.base_path = f"/{root}" if root else ""
        self.pub_rate_hz = _number(parameters.get("pub_rate", 1.0), "pub_rate")
        if self.pub_rate_hz <= 0:
            raise AnalyzerConfigError(f"pub_rate must be > 0, got {self.pub_rate_hz}")
        analyzers = {key: value for key, value in parameters.items() if key not in _ROOT_KEYS}
        self.root = AnalyzerGroup(self.base_path, root, _analyzers(analyzers, self.base_path,
                                                                   "analyzers"))
        self.other = OtherAnalyzer(f"{self.base_path}/{OTHER}", OTHER, discard_stale=True,
                                   other_as_errors=_flag(parameters.get("other_as_errors", False),
                                                         "other_as_errors"))
        #: Statuses whose values or texts were cut (:func:`clipped`).
        self.clipped = 0

    @classmethod
    def from_document(cls, document: Any) -> Aggregator:
        """From a parsed parameter file: its ``analyzers`` (or ``/analyzers``) block."""
        if isinstance(document, Mapping):
            for key in (AGGREGATOR_NODE, f"/{AGGREGATOR_NODE}"):
                block = document.get(key)
                if isinstance(block, Mapping) and "ros__parameters" in block:
                    return cls(block["ros__parameters"])
        raise AnalyzerConfigError(f"no '{AGGREGATOR_NODE}: ros__parameters:' block (the node "
                                  f"name diagnostic_aggregator's aggregator_node runs under)")

    @classmethod
    def from_file(cls, path: str | Path) -> Aggregator:
        """From an analyzer file such as ``config/robots/diagnostic_analyzers.yaml``."""
        try:
            document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise AnalyzerConfigError(f"cannot read analyzer file {path}: {error}") from error
        except yaml.YAMLError as error:
            raise AnalyzerConfigError(f"analyzer file {path} is not valid YAML: {error}") from error
        try:
            return cls.from_document(document)
        except AnalyzerConfigError as error:
            raise AnalyzerConfigError(f"{path}: {error}") from error

    @property
    def dropped(self) -> int:
        """Statuses left out for room, over every analyzer (:data:`MAX_ITEMS` each)."""
        return self.root.dropped + self.other.dropped

    def update(self, statuses: Iterable[Status], now: float) -> None:
        """Take statuses that arrived at ``now``: to every analyzer that matches, else Other."""
        for status in statuses:
            self.clipped += oversized(status)
            status = clipped(status)
            if self.root.matches(status.name):
                self.root.analyze(status, now)
            else:
                self.other.analyze(status, now)

    def report(self, now: float) -> list[Status]:
        """The tree at ``now``: what ``/diagnostics_agg`` carries."""
        return [*self.root.report(now), *self.other.report(now)]


def toplevel_level(tree: Sequence[Status]) -> int:
    """The level of ``/diagnostics_toplevel_state`` for a reported tree."""
    levels = [status.level for status in tree]
    if not levels or (max(levels) == STALE and min(levels) <= ERROR):
        return ERROR
    return max(levels)


# --- parsing --------------------------------------------------------------------------------


def _analyzers(blocks: Mapping[str, Any], parent: str, where: str) -> list[Analyzer]:
    if not blocks:
        raise AnalyzerConfigError(f"{where}: no analyzers")
    analyzers: list[Analyzer] = []
    for key in sorted(blocks):  # upstream reads them as sorted parameter names
        block = blocks[key]
        here = f"{where}.{key}"
        if not isinstance(block, Mapping):
            raise AnalyzerConfigError(f"{here} must be a mapping with 'type' and 'path'")
        kind, title = block.get("type"), block.get("path")
        if not isinstance(title, str) or not title:
            raise AnalyzerConfigError(f"{here}: 'path' must be a non-empty string")
        if kind == GROUP:
            extra = set(block) - {"type", "path", "analyzers"}
            if extra or not isinstance(block.get("analyzers"), Mapping):
                raise AnalyzerConfigError(f"{here}: an AnalyzerGroup takes 'type', 'path' and "
                                          f"an 'analyzers' mapping (got {sorted(block)})")
            path = f"{parent}/{title}"
            analyzers.append(AnalyzerGroup(path, title, _analyzers(block["analyzers"], path,
                                                                   f"{here}.analyzers")))
        elif kind == IGNORE:
            analyzers.append(IgnoreAnalyzer(f"{parent}/{title}", title))
        elif kind in (GENERIC, DISCARD):
            analyzers.append(_generic(block, parent, title, here, report_items=kind == GENERIC))
        else:
            raise AnalyzerConfigError(f"{here}: unknown type {kind!r}; known: "
                                      f"{', '.join((GENERIC, GROUP, DISCARD, IGNORE))}")
    return analyzers


def _generic(block: Mapping[str, Any], parent: str, title: str, where: str,
             report_items: bool) -> GenericAnalyzer:
    unknown = set(block) - _GENERIC_KEYS
    if unknown:
        raise AnalyzerConfigError(f"{where}: unknown parameter(s) {sorted(unknown)}; known: "
                                  f"{sorted(_GENERIC_KEYS)}")
    lists = {key: _strings(block.get(key, []), f"{where}.{key}") for key in
             (*_NAME_LISTS, "remove_prefix")}
    if not any(lists[key] for key in _NAME_LISTS):
        raise AnalyzerConfigError(f"{where}: no way to pick statuses (give one of "
                                  f"{', '.join(_NAME_LISTS)})")
    try:
        regexes = tuple(re.compile(text) for text in lists["regex"])
    except re.error as error:
        raise AnalyzerConfigError(f"{where}.regex: {error}") from error
    num_items = block.get("num_items", -1)
    if isinstance(num_items, bool) or not isinstance(num_items, int):
        raise AnalyzerConfigError(f"{where}.num_items must be an integer, got {num_items!r}")
    timeout_s = _number(block.get("timeout", DEFAULT_TIMEOUT_S), f"{where}.timeout")
    discard_stale = _flag(block.get("discard_stale", False), f"{where}.discard_stale")
    prefixes = lists["find_and_remove_prefix"]
    return GenericAnalyzer(
        f"{parent}/{title}", title, startswith=lists["startswith"] + prefixes,
        contains=lists["contains"], regexes=regexes,
        remove_prefixes=tuple(output_name(p) for p in lists["remove_prefix"] + prefixes),
        timeout_s=timeout_s, num_items=num_items,
        discard_stale=discard_stale and timeout_s > 0,  # nothing goes stale without a timeout
        report_items=report_items, expected=lists["expected"])


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AnalyzerConfigError(f"{where} must be a list of strings, got {value!r}")
    return tuple(value)


def _number(value: Any, where: str) -> float:
    # aggregator_node reads these as doubles, and a ROS parameter written 5 is an integer.
    if not isinstance(value, float):
        raise AnalyzerConfigError(f"{where} must be a floating-point number (write 5.0, not 5: "
                                  f"aggregator_node reads a double), got {value!r}")
    return value


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise AnalyzerConfigError(f"{where} must be true or false, got {value!r}")
    return value


#: The shipped analyzer file, in ``config/robots`` (installed to share/rl_bringup/config/robots).
ANALYZER_FILE = "diagnostic_analyzers.yaml"


def shipped_analyzer_file() -> Path:
    """The shipped analyzer file: of the source checkout, else of rl_bringup's share folder.

    :raises FileNotFoundError: when neither holds it.
    """
    from rl_core.robot.description import robots_config_directory  # the same search

    return robots_config_directory() / ANALYZER_FILE
