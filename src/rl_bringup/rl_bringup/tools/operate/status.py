"""``rl-bringup status``: a live table of a running deployment.

Usage::

    rl-bringup status [domain_id:=N] [once:=true] [period:=1.0] [wait:=S]
                      [discovery:=localhost|subnet|server:HOST:PORT]

Shows per robot whether its simulator and policy run, its steps per second and episodes (from
``/episodes``), the replay buffer's fill and rates (``/replay_status``), the trainer's weights
version (``/policy_weights``), the latest value of every scalar topic and non-OK
``/diagnostics`` entries; ``-`` marks what is not known (yet). Columns and sources:
docs/tools.md, "status". Only low-rate topics are subscribed: in the colocated mode an outside
subscriber makes the container publish a topic over DDS, and ``/episodes`` costs far less than
the per-step observations would.
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rl_bringup.run.ros_session import (
    ATTACH_KEYS,
    RosSession,
    attach_settings,
    graph_node_names,
    graph_topics,
)
from rl_bringup.tools.operate.message_types import message_class
from rl_bringup.tools.subcommand import SubparsersAction, add_tool, bool_value, parse_seconds, standalone_main
from rl_nodes import graph

KEYS: tuple[str, ...] = ("once", "period", "wait", *ATTACH_KEYS)
DEFAULT_PERIOD_S = 1.0
DEFAULT_ONCE_WAIT_S = 3.0
#: Steps/s is averaged over the /episodes samples of this many seconds.
RATE_WINDOW_S = 10.0
#: Seconds between looks at the graph for new nodes and scalar topics.
GRAPH_POLL_S = 2.0
#: Scalar message types shown in the metrics section (their field is ``data``).
SCALAR_TYPES = frozenset({
    "std_msgs/msg/Float64", "std_msgs/msg/Float32", "std_msgs/msg/Int64", "std_msgs/msg/Int32",
    "std_msgs/msg/UInt64", "std_msgs/msg/UInt32",
})
_ROBOT_NODE = re.compile(r"^/robot_(\d+)/(simulator|policy)$")
#: diagnostic_msgs/DiagnosticStatus levels.
_DIAGNOSTIC_LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}
CLEAR_SCREEN = "\x1b[H\x1b[2J"
UNKNOWN = "-"


def stamp_seconds(header: Any) -> float:
    """A message header's stamp in seconds (0.0 when unset)."""
    return float(header.stamp.sec) + float(header.stamp.nanosec) * 1e-9


@dataclass
class RobotStatus:
    """What is known about one robot."""

    robot_id: int
    simulator_up: bool = False
    policy_up: bool = False
    total_env_steps: int | None = None
    total_episodes: int | None = None
    last_return: float | None = None
    policy_version: int | None = None
    #: (time received [monotonic s], time stamped [s], total_env_steps) of recent /episodes.
    samples: deque[tuple[float, float, int]] = field(default_factory=deque)

    def steps_per_second(self, now: float) -> float | None:
        """Env steps per second over the samples of the last :data:`RATE_WINDOW_S`."""
        while self.samples and now - self.samples[0][0] > RATE_WINDOW_S:
            self.samples.popleft()
        if len(self.samples) < 2:
            return None
        _, first_time, first_steps = self.samples[0]
        _, last_time, last_steps = self.samples[-1]
        if last_time <= first_time:
            return None
        return (last_steps - first_steps) / (last_time - first_time)


@dataclass
class StatusModel:
    """The state behind the table, fed by the message callbacks; no rclpy inside, so it is
    unit-testable with plain message objects."""

    nodes: list[str] = field(default_factory=list)
    robots: dict[int, RobotStatus] = field(default_factory=dict)
    replay: Any = None
    weights_version: int | None = None
    weights_update_step: int | None = None
    weights_received: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    diagnostics: dict[str, tuple[int, str]] = field(default_factory=dict)

    def robot(self, robot_id: int) -> RobotStatus:
        if robot_id not in self.robots:
            self.robots[robot_id] = RobotStatus(robot_id)
        return self.robots[robot_id]

    def set_nodes(self, names: Sequence[str]) -> None:
        """The nodes now in the graph; robots are recognised by ``/robot_k/simulator|policy``."""
        self.nodes = list(names)
        for robot in self.robots.values():
            robot.simulator_up = robot.policy_up = False
        for name in names:
            match = _ROBOT_NODE.match(name)
            if match:
                robot = self.robot(int(match.group(1)))
                if match.group(2) == "simulator":
                    robot.simulator_up = True
                else:
                    robot.policy_up = True

    def on_episodes(self, msg: Any, now: float) -> None:
        """An ``EpisodeStatistics`` message: totals, last return, acting policy version."""
        robot = self.robot(int(msg.robot_id))
        steps = int(msg.total_env_steps)
        if robot.samples and steps < robot.samples[-1][2]:
            robot.samples.clear()  # the simulator restarted (respawn): its counter began anew
        stamp = stamp_seconds(msg.header) or time.time()
        robot.samples.append((now, stamp, steps))
        robot.total_env_steps = steps
        robot.total_episodes = int(msg.total_episodes)
        robot.policy_version = int(msg.policy_version)
        if len(msg.returns):
            robot.last_return = float(msg.returns[-1])

    def on_replay_status(self, msg: Any) -> None:
        self.replay = msg

    def on_weights(self, msg: Any, now: float) -> None:
        self.weights_version = int(msg.version)
        self.weights_update_step = int(msg.update_step)
        self.weights_received = now

    def on_scalar(self, topic: str, msg: Any) -> None:
        self.metrics[topic] = float(msg.data)

    def on_diagnostics(self, msg: Any) -> None:
        for entry in msg.status:
            level = int.from_bytes(entry.level, "little") if isinstance(entry.level, bytes) \
                else int(entry.level)
            self.diagnostics[str(entry.name)] = (level, str(entry.message))

    def complete(self, now: float) -> bool:
        """Whether everything the table can show is known (``once`` stops waiting then)."""
        # A stepping robot has its nodes running: wait until discovery shows them too (a
        # central policy, /policy, serves every robot).
        central = "/policy" in self.nodes
        robots_known = bool(self.robots) and all(
            robot.steps_per_second(now) is not None and robot.simulator_up
            and (robot.policy_up or central) for robot in self.robots.values())
        return robots_known and self.replay is not None and self.weights_version is not None

    def render(self, domain_id: int, now: float, wall_time: float | None = None) -> str:
        """The table as text."""
        clock = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall_time))
        lines = [f"rl-bringup status  domain {domain_id}  {clock}"]
        lines.append(f"nodes ({len(self.nodes)}): " + (" ".join(self.nodes) or
                     "none found (is a deployment running in this domain?)"))
        lines.append("")
        header = ("ROBOT", "SIMULATOR", "POLICY", "STEPS/S", "ENV STEPS", "EPISODES",
                  "LAST RETURN", "POLICY VERSION")
        rows = [header]
        for robot_id in sorted(self.robots):
            robot = self.robots[robot_id]
            rows.append((
                str(robot_id), "up" if robot.simulator_up else "down",
                "up" if robot.policy_up else "down",
                _number(robot.steps_per_second(now), ".1f"), _number(robot.total_env_steps),
                _number(robot.total_episodes), _number(robot.last_return, ".2f"),
                _number(robot.policy_version)))
        if len(rows) == 1:
            rows.append(("-",) * len(header))
        lines.extend(_table(rows))
        lines.append("")
        lines.append("replay buffer  " + self._replay_text())
        lines.append("trainer        " + self._trainer_text(now))
        if self.metrics:
            lines.append("")
            lines.append("metrics")
            width = max(len(topic) for topic in self.metrics)
            lines.extend(f"  {topic:<{width}}  {value:.6g}"
                         for topic, value in sorted(self.metrics.items()))
        if self.diagnostics:
            lines.append("")
            problems = {name: entry for name, entry in self.diagnostics.items() if entry[0] != 0}
            lines.append(f"diagnostics    {len(self.diagnostics) - len(problems)} OK"
                         + (f", {len(problems)} not OK:" if problems else ""))
            lines.extend(f"  {_DIAGNOSTIC_LEVELS.get(level, str(level)):<5}  {name}: {message}"
                         for name, (level, message) in sorted(problems.items()))
        return "\n".join(lines)

    def _replay_text(self) -> str:
        replay = self.replay
        if replay is None:
            return f"fill {UNKNOWN}  insert {UNKNOWN}  sample {UNKNOWN}"
        capacity = int(replay.capacity)
        percent = f" ({100.0 * int(replay.size) / capacity:.1f}%)" if capacity else ""
        return (f"fill {int(replay.size)}/{capacity}{percent}  "
                f"insert {float(replay.insert_rate):.1f}/s  sample {float(replay.sample_rate):.1f}/s  "
                f"inserted {int(replay.total_inserted)}  rejected {int(replay.rejected_messages)}")

    def _trainer_text(self, now: float) -> str:
        if self.weights_version is None:
            return f"weights version {UNKNOWN}"
        age = "" if self.weights_received is None else \
            f"  received {now - self.weights_received:.1f} s ago"
        return (f"weights version {self.weights_version}  update {self.weights_update_step}"
                f"{age}")


def _number(value: float | int | None, spec: str = "d") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return UNKNOWN
    return format(value, spec)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in rows]


class StatusMonitor:
    """Subscribes the status topics of a session and feeds a :class:`StatusModel`."""

    def __init__(self, session: RosSession) -> None:
        self.session = session
        self.model = StatusModel()
        self._subscribed: set[str] = set()
        self._subscribe_known_topics()

    def _subscribe(self, topic: graph.Topic | str, msg_class: Any, callback: Any) -> None:
        """Subscribe with the publishers' profile (a topic of the graph), or the stream one."""
        name, qos = (topic.name, topic.qos) if isinstance(topic, graph.Topic) else \
            (topic, graph.STREAM)
        self.session.node.create_subscription(msg_class, name, callback, qos.profile())
        self._subscribed.add(name)

    def _subscribe_known_topics(self) -> None:
        from rl_interfaces.msg import (  # noqa: PLC0415
            EpisodeStatistics,
            PolicyWeights,
            ReplayStatus,  # noqa: PLC0415
        )

        model = self.model
        self._subscribe(graph.EPISODES, EpisodeStatistics,
                        lambda msg: model.on_episodes(msg, time.monotonic()))
        self._subscribe(graph.REPLAY_STATUS, ReplayStatus, model.on_replay_status)
        self._subscribe(graph.WEIGHTS, PolicyWeights,
                        lambda msg: model.on_weights(msg, time.monotonic()))

    def refresh_graph(self) -> None:
        """Update the node list; subscribe scalar and diagnostics topics that appeared."""
        node = self.session.node
        self.model.set_nodes(graph_node_names(node))
        for topic, types in graph_topics(node).items():
            if topic in self._subscribed or len(types) != 1:
                continue
            if types[0] in SCALAR_TYPES:
                self._subscribe(topic, message_class(types[0]),
                                lambda msg, topic=topic: self.model.on_scalar(topic, msg))
            elif topic == graph.DIAGNOSTICS.name and types[0] == graph.DIAGNOSTICS.type:
                from diagnostic_msgs.msg import DiagnosticArray  # noqa: PLC0415

                self._subscribe(graph.DIAGNOSTICS, DiagnosticArray, self.model.on_diagnostics)


def status(values: dict[str, str], out: TextIO = sys.stdout) -> int:
    """Run ``rl-bringup status`` with parsed ``key:=value`` arguments; returns the exit code.

    :raises rl_bringup.tools.subcommand.ToolError: for bad arguments (exit code 2).
    """
    once = bool_value(values, "once", False)
    period = parse_seconds("period", values.get("period", str(DEFAULT_PERIOD_S)))
    wait_s = parse_seconds("wait", values.get("wait", str(DEFAULT_ONCE_WAIT_S)))
    settings = attach_settings(values)
    in_place = not once and out.isatty()

    with RosSession("status", settings.domain_id) as session:
        monitor = StatusMonitor(session)
        monitor.refresh_graph()
        if once:
            # At least a second for discovery; then until every robot seen in the graph has a
            # step rate and replay and weights are known, or wait_s.
            started = time.monotonic()
            while not session.stop_requested.is_set():
                elapsed = time.monotonic() - started
                if elapsed >= wait_s or (elapsed >= 1.0 and
                                         monitor.model.complete(time.monotonic())):
                    break
                session.spin_for(min(0.5, wait_s - elapsed))
                monitor.refresh_graph()
            print(monitor.model.render(settings.domain_id, time.monotonic()), file=out, flush=True)
            return 0
        last_graph = time.monotonic()
        while True:
            text = monitor.model.render(settings.domain_id, time.monotonic())
            if in_place:
                out.write(CLEAR_SCREEN + text + "\n")
            else:
                out.write(text + "\n\n")
            out.flush()
            if not session.spin_for(period):
                return 0  # Ctrl-C
            if time.monotonic() - last_graph >= GRAPH_POLL_S:
                monitor.refresh_graph()
                last_graph = time.monotonic()


def register(subparsers: SubparsersAction) -> None:
    """Add ``status`` to the ``rl-bringup`` subcommands."""
    add_tool(
        subparsers, "status", status, keys=KEYS,
        help="live table of a running deployment: nodes, robot step rates, policy versions, "
        "replay fill, trainer weights",
        description="Show a live status table of the deployment in a ROS domain. key:=value "
        f"arguments: once:=true (print one table and exit), period:=S (refresh, default "
        f"{DEFAULT_PERIOD_S:g}), wait:=S (how long once:=true listens, default "
        f"{DEFAULT_ONCE_WAIT_S:g}), domain_id:=N (default $ROS_DOMAIN_ID), "
        "discovery:=localhost|subnet|server:HOST:PORT (default: your ROS environment, else "
        "localhost).",
    )


def robots_in(names: Iterable[str]) -> list[int]:
    """Robot indices of ``/robot_k/simulator|policy`` node names."""
    return sorted({int(match.group(1)) for name in names if (match := _ROBOT_NODE.match(name))})


if __name__ == "__main__":
    sys.exit(standalone_main(register))
