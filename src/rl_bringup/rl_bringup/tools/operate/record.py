"""``rl-bringup record``: record topics of a running deployment into an MCAP file.

Usage::

    rl-bringup record [topics:=/a,/b|all] [output:=FILE.mcap] [duration:=S] [domain_id:=N]
                      [discovery:=localhost|subnet|server:HOST:PORT] [wait:=S]

What ``ros2 bag record -s mcap`` does, for installs without rosbag2 (it is not on PyPI): every
chosen topic is subscribed with ``raw=True``, so messages are stored as the CDR bytes that came
off the wire, and the file follows the MCAP ``ros2`` profile as rosbag2 writes it, so
``ros2 bag info/play``, Foxglove and ``mcap_ros2.reader`` read it. Subscriptions adapt to the
publishers' QoS like rosbag2's. In the colocated mode the recorder is a subscriber outside the
process, so the container publishes the recorded topics over DDS and runs a little slower while
it records. The file's layout and the QoS rule: docs/tools.md, "record".
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rl_bringup.run.ros_session import (
    ATTACH_KEYS,
    RosSession,
    attach_settings,
    graph_topics,
    qos_policy_name,
)
from rl_bringup.tools.operate.message_types import DefinitionError, full_message_definition, message_class
from rl_bringup.tools.subcommand import SubparsersAction, ToolError, add_tool, parse_seconds, standalone_main

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcap.writer import Writer as McapWriter
    from rclpy.node import Node
    from rclpy.qos import QoSProfile

KEYS: tuple[str, ...] = ("topics", "output", "duration", "wait", *ATTACH_KEYS)
ALL_TOPICS = "all"
#: Seconds to wait for the requested topics to appear in the graph (discovery takes a moment).
DEFAULT_WAIT_S = 5.0
#: Subscription queue depth: deep enough that a burst of batches is not dropped while the
#: writer compresses a chunk.
RECORD_DEPTH = 100


def parse_topics(text: str) -> list[str] | None:
    """``/a,/b`` -> fully qualified names; ``all`` -> ``None``.

    Names without a leading ``/`` are taken from the root namespace (``experience`` ->
    ``/experience``).

    :raises ToolError: (exit 2) for empty or invalid names.
    """
    from rclpy.exceptions import InvalidTopicNameException  # noqa: PLC0415
    from rclpy.validate_full_topic_name import validate_full_topic_name  # noqa: PLC0415

    if text.strip().lower() == ALL_TOPICS:
        return None
    topics: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if not name:
            raise ToolError(f"empty topic name in topics:={text!r}; "
                              f"give topics:=/a,/b or topics:=all")
        if not name.startswith("/"):
            name = "/" + name
        try:
            validate_full_topic_name(name)
        except InvalidTopicNameException as error:
            raise ToolError(f"invalid topic name {part.strip()!r}: {error}") from None
        if name not in topics:
            topics.append(name)
    return topics


def default_output_path(now: float | None = None) -> Path:
    """``rl_record_YYYYmmdd_HHMMSS.mcap`` in the working folder."""
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(now))
    return Path(f"rl_record_{stamp}.mcap")


def resolve_output(text: str | None) -> Path:
    """The file to write; an existing folder gets a default file name inside it.

    :raises ToolError: (exit 2) when the file exists (never overwritten) or its folder
        does not.
    """
    path = default_output_path() if not text else Path(text).expanduser()
    if path.is_dir():
        path = path / default_output_path().name
    if path.exists():
        raise ToolError(f"{path} exists; recordings are never overwritten: "
                          f"choose another output:=FILE.mcap")
    if not path.parent.is_dir():
        raise ToolError(f"folder {path.parent} does not exist; create it or choose another "
                          f"output:=FILE.mcap")
    return path


def _duration_yaml(duration: Any) -> str:
    """rmw_time_t as rosbag2 writes it; 0 is "unspecified" and 2**63-1 ns is rmw's infinity
    ({sec: 9223372036, nsec: 854775807}), both written as they are."""
    nanoseconds = max(0, int(getattr(duration, "nanoseconds", 0)))
    return f"{{sec: {nanoseconds // 10**9}, nsec: {nanoseconds % 10**9}}}"


def offered_qos_yaml(profiles: Iterable[QoSProfile]) -> str:
    """The publishers' QoS as rosbag2 (bag format 9+, policy names as strings) stores it in
    channel metadata, so ``ros2 bag play`` offers the same QoS again (latched topics stay
    latched)."""
    entries = []
    for profile in profiles:
        entries.append(
            f"- history: {qos_policy_name(profile.history)}\n"
            f"  depth: {int(profile.depth)}\n"
            f"  reliability: {qos_policy_name(profile.reliability)}\n"
            f"  durability: {qos_policy_name(profile.durability)}\n"
            f"  deadline: {_duration_yaml(profile.deadline)}\n"
            f"  lifespan: {_duration_yaml(profile.lifespan)}\n"
            f"  liveliness: {qos_policy_name(profile.liveliness)}\n"
            f"  liveliness_lease_duration: {_duration_yaml(profile.liveliness_lease_duration)}\n"
            f"  avoid_ros_namespace_conventions: "
            f"{'true' if profile.avoid_ros_namespace_conventions else 'false'}\n")
    return "".join(entries)


def adapted_qos(offered: Sequence[QoSProfile]) -> QoSProfile:
    """A subscription QoS that matches every offered profile (rosbag2's rule): reliable only when
    every publisher is reliable, transient local only when every publisher is."""
    from rclpy.qos import (  # noqa: PLC0415
        DurabilityPolicy,
        HistoryPolicy,
        QoSProfile,
        ReliabilityPolicy,  # noqa: PLC0415
    )

    reliable = bool(offered) and all(p.reliability == ReliabilityPolicy.RELIABLE for p in offered)
    latched = bool(offered) and all(
        p.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in offered)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=RECORD_DEPTH,
        reliability=ReliabilityPolicy.RELIABLE if reliable or not offered
        else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


@dataclass
class RecordedTopic:
    """Bookkeeping of one recorded topic."""

    name: str
    type_name: str
    channel_id: int
    count: int = 0
    subscription: Any = None


class Recorder:
    """Subscribes topics raw and writes every message to an MCAP ``ros2``-profile file.

    The writer is used from the executor thread only (callbacks run in :meth:`RosSession.spin_once`
    on the tool's main thread), so no lock is needed.

    :param node: the node that subscribes.
    :param writer: an MCAP writer whose ``start`` has been called.
    :param log: where progress and skipped topics are reported.
    """

    def __init__(self, node: Node, writer: McapWriter, log: TextIO) -> None:
        self.node = node
        self.writer = writer
        self.log = log
        self.topics: dict[str, RecordedTopic] = {}
        self.skipped: dict[str, str] = {}
        self._schemas: dict[str, int] = {}

    def _schema_id(self, type_name: str) -> int:
        from mcap.well_known import SchemaEncoding  # noqa: PLC0415

        if type_name not in self._schemas:
            definition = full_message_definition(type_name)
            self._schemas[type_name] = self.writer.register_schema(
                type_name, SchemaEncoding.ROS2, definition.encode())
        return self._schemas[type_name]

    def add(self, topic: str, types: Sequence[str]) -> None:
        """Start recording ``topic``.

        :raises DefinitionError: when the type is ambiguous, not importable or has no ``.msg``.
        """
        from mcap.well_known import MessageEncoding  # noqa: PLC0415

        if len(types) != 1:
            raise DefinitionError(f"{topic} has {len(types)} types ({', '.join(types)}); "
                                  f"its publishers disagree, fix them first")
        type_name = types[0]
        msg_class = message_class(type_name)
        schema_id = self._schema_id(type_name)
        offered = [info.qos_profile for info in self.node.get_publishers_info_by_topic(topic)]
        channel_id = self.writer.register_channel(
            topic=topic, message_encoding=MessageEncoding.CDR, schema_id=schema_id,
            metadata={"offered_qos_profiles": offered_qos_yaml(offered)})
        recorded = RecordedTopic(topic, type_name, channel_id)

        def on_message(data: bytes, info: dict[str, Any]) -> None:
            received = time.time_ns()
            published = int(info.get("source_timestamp") or 0) or received
            self.writer.add_message(channel_id=recorded.channel_id, log_time=received,
                                    publish_time=published, sequence=recorded.count, data=data)
            recorded.count += 1

        recorded.subscription = self.node.create_subscription(
            msg_class, topic, on_message, adapted_qos(offered), raw=True)
        self.topics[topic] = recorded

    def add_new_topics(self, wanted: Iterable[str] | None) -> None:
        """Subscribe every topic of the graph not yet recorded (``wanted=None``: all of them);
        topics that cannot be recorded are reported once and skipped."""
        available = graph_topics(self.node)
        names = sorted(available) if wanted is None else [t for t in wanted if t in available]
        for topic in names:
            if topic in self.topics or topic in self.skipped:
                continue
            try:
                self.add(topic, available[topic])
            except DefinitionError as error:
                self.skipped[topic] = str(error)
                print(f"record: skipping {topic}: {error}", file=self.log, flush=True)
                continue
            print(f"record: recording {topic} ({self.topics[topic].type_name})",
                  file=self.log, flush=True)

    def summary(self, path: Path, seconds: float) -> str:
        """Counts per topic, as printed when recording ends."""
        total = sum(topic.count for topic in self.topics.values())
        lines = [f"record: wrote {total} messages from {len(self.topics)} topics in "
                 f"{seconds:.1f} s to {path}"]
        width = max([len("TOPIC"), *(len(name) for name in self.topics)])
        type_width = max([len("TYPE"), *(len(t.type_name) for t in self.topics.values())])
        lines.append(f"  {'TOPIC':<{width}}  {'TYPE':<{type_width}}  MESSAGES")
        for name in sorted(self.topics):
            topic = self.topics[name]
            lines.append(f"  {name:<{width}}  {topic.type_name:<{type_width}}  {topic.count}")
        return "\n".join(lines)


def _unrecordable(wanted: Sequence[str], available: dict[str, list[str]]) -> dict[str, str]:
    """``topic -> reason`` for requested topics whose type is ambiguous, not importable or has
    no installed definition (checked before the file is created)."""
    problems: dict[str, str] = {}
    for topic in wanted:
        types = available[topic]
        try:
            if len(types) != 1:
                raise DefinitionError(f"{len(types)} types ({', '.join(types)}); its publishers "
                                      f"disagree, fix them first")
            message_class(types[0])
            full_message_definition(types[0])
        except DefinitionError as error:
            problems[topic] = str(error)
    return problems


def _available_topics_text(node: Node) -> str:
    topics = graph_topics(node)
    if not topics:
        return "  (none: is a deployment running in this domain with the same discovery settings?)"
    width = max(len(name) for name in topics)
    return "\n".join(f"  {name:<{width}}  {', '.join(types)}"
                     for name, types in sorted(topics.items()))


def record(values: dict[str, str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run ``rl-bringup record`` with parsed ``key:=value`` arguments; returns the exit code.

    :raises ToolError: for bad arguments (exit code 2).
    """
    from mcap.writer import CompressionType  # noqa: PLC0415
    from mcap.writer import Writer as McapWriter  # noqa: PLC0415

    wanted = parse_topics(values.get("topics", ALL_TOPICS))
    duration = (parse_seconds("duration", values["duration"]) if "duration" in values else None)
    wait_s = parse_seconds("wait", values.get("wait", str(DEFAULT_WAIT_S)), allow_equal=True)
    output = resolve_output(values.get("output"))
    settings = attach_settings(values)

    with RosSession("record", settings.domain_id) as session:
        node = session.node
        if wanted is None:
            # Give discovery a moment so the first pass already sees the deployment's topics.
            session.spin_until(lambda: len(graph_topics(node)) > 2, wait_s)
        else:
            # Said once this process is on the domain: a run started from here on is seen.
            print(f"record: waiting up to {wait_s:g} s for {', '.join(wanted)} in domain "
                  f"{settings.domain_id}", file=out, flush=True)
            found = session.spin_until(lambda: set(wanted) <= set(graph_topics(node)), wait_s)
            if not found:
                missing = sorted(set(wanted) - set(graph_topics(node)))
                print(f"record: error: topic(s) not found in domain {settings.domain_id} after "
                      f"{wait_s:g} s: {', '.join(missing)}\navailable topics:\n"
                      f"{_available_topics_text(node)}", file=err)
                return 1
            problems = _unrecordable(wanted, graph_topics(node))
            if problems:
                print("record: error: cannot record:\n" + "\n".join(
                    f"  {topic}: {reason}" for topic, reason in problems.items()), file=err)
                return 1
        if session.stop_requested.is_set():
            return 130
        writer = McapWriter(str(output), compression=CompressionType.ZSTD)
        # No "rosbag2" metadata record: rosbag2's MCAP plugin reads one without
        # serialized_metadata as a bag of format version 8, whose QoS metadata holds integers;
        # without the record it assumes the current format, whose strings offered_qos_yaml writes.
        writer.start(profile="ros2", library="rl_ros2 rl-bringup record")
        recorder = Recorder(node, writer, out)
        started = time.monotonic()
        try:
            recorder.add_new_topics(wanted)
            limit = f" for {duration:g} s" if duration is not None else ""
            print(f"record: recording {len(recorder.topics)} topics to {output}{limit} "
                  f"(Ctrl-C to stop)", file=out, flush=True)
            poll = (lambda: recorder.add_new_topics(None)) if wanted is None else None
            session.spin_for(float("inf") if duration is None else duration, every=poll)
        finally:
            writer.finish()
            print(recorder.summary(output, time.monotonic() - started), file=out, flush=True)
    return 0


def register(subparsers: SubparsersAction) -> None:
    """Add ``record`` to the ``rl-bringup`` subcommands."""
    add_tool(
        subparsers, "record", record, keys=KEYS,
        help="record topics of a running deployment into an MCAP file (like ros2 bag record)",
        description="Record topics into an MCAP file that ros2 bag, Foxglove and mcap_ros2 read. "
        "key:=value arguments: topics:=/a,/b|all (default all, including topics that appear "
        "later), output:=FILE.mcap (default rl_record_<time>.mcap; never overwritten), "
        "duration:=S (default: until Ctrl-C), wait:=S (how long to wait for the topics to "
        f"appear, default {DEFAULT_WAIT_S:g}), domain_id:=N (default $ROS_DOMAIN_ID), "
        "discovery:=localhost|subnet|server:HOST:PORT (default: your ROS environment, else "
        "localhost).",
    )


if __name__ == "__main__":
    sys.exit(standalone_main(register))
