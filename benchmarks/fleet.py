#!/usr/bin/env python3
r"""A fleet by simulation: what each robot costs on one host, and the replay buffer's ceiling.

Two parts (``--part``, both by default):

* ``fleet``: ``rl-bringup launch hybrid robots:=N`` for each N of ``--robots`` (8, 16, 32): N
  robot processes (simulator + policy each, cart-pole) paced at a real robot's control rate
  (``max_rate_hz:=`` ``--rate-hz``, 10), one learner process (replay buffer + trainer) with
  ``rate_limit:=false`` (real robots cannot pause: the learner takes what it can). Discovery goes
  through a Fast DDS discovery server this script starts on 127.0.0.1 (``--discovery server``)
  or the loopback's own discovery (``localhost``). Per N: the time until every robot's
  experience reaches an observer (from the launch, and from the robot's node coming up: discovery
  and the latched weights), the fleet's transitions per second against N x rate, the learner's
  achieved updates per transition, CPU per robot process and of the learner, idle CPUs, and
  memory per robot process (RSS, and USS: what it alone holds).
* ``ingest``: one ``replay_buffer`` process fed by light robots (no physics, no policy:
  prebuilt experience messages of ``--light-rows`` transitions, each robot id at ``--robot-hz``)
  in ``--light-processes`` processes, for each count of ``--light-robots``. Per count: the
  messages and transitions per second the buffer stored against those offered, its CPU and the
  senders', and how many messages it refused. Where stored falls behind offered is the
  buffer's ceiling on this host.

Every ROS process runs with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a ``ROS_DOMAIN_ID``
of this benchmark's own; the discovery server listens on 127.0.0.1 only. Processes are stopped by
PID (SIGINT, grace, SIGKILL). ``--plot`` draws the scaling curve.

Usage::

    .venv/bin/python benchmarks/fleet.py                                 # both parts, ~12 min
    .venv/bin/python benchmarks/fleet.py --part fleet --robots 8,16,32 --json fleet.json \\
        --plot docs/fleet_scaling.png
    .venv/bin/python benchmarks/fleet.py --part ingest --light-robots 100,800 --light-rows 16

A benchmark, not a test: it prints figures and exits 0 unless a measurement fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.elastic import deployment_pids  # noqa: E402
from benchmarks.tables import RIGHT, markdown_table, number  # noqa: E402
from benchmarks.throughput import csv_ints  # noqa: E402
from tests.processes import Child  # noqa: E402  (the repository's process helper)

BIN = Path(sys.executable).parent
RL_BRINGUP = str(BIN / "rl-bringup")
ENV_ID = "rl_ros2/CartPoleBalance-v0"
STARTUP_TIMEOUT_S = 300.0  # 32 robot processes importing torch and pybullet on 2 cores
STOP_GRACE_S = 30.0
RESULT_PREFIX = "LIGHT_ROBOTS "
MB = 1024.0 * 1024.0
#: The simulator's line when its node is up: ``[<ROS time>] [robot_K.simulator]: robot K: ...``.
NODE_UP = re.compile(r"\[(\d+\.\d+)\] \[robot_(\d+)\.simulator\]: robot \d+: ")


# --- the environment of every ROS process ------------------------------------------------------

def free_udp_port() -> int:
    """A UDP port of 127.0.0.1 nothing listens on now (for the discovery server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ros_environment(domain_id: int, server_port: int | None) -> dict[str, str]:
    """Loopback discovery and this benchmark's domain, a discovery server client if a port, set
    in this process (for the observer's participant) and returned for the children."""
    os.environ.update(ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", ROS_DOMAIN_ID=str(domain_id),
                      PYTHONUNBUFFERED="1")
    os.environ.pop("ROS_DISCOVERY_SERVER", None)
    if server_port is not None:
        os.environ["ROS_DISCOVERY_SERVER"] = f"127.0.0.1:{server_port}"
    return dict(os.environ)


def start_discovery_server(port: int, env: dict[str, str]) -> Child:
    """Fast DDS's discovery server (the venv's ``fastdds`` tool) on 127.0.0.1:``port``."""
    from rl_bringup.plan.discovery import discovery_server_argv

    argv = discovery_server_argv("127.0.0.1", port)
    tool = BIN.parent / "tools" / "fastdds" / "fastdds.py"
    server = Child([sys.executable, str(tool), *argv[1:]], env=env)
    if server.wait_for_line(lambda line: "Server started" in line, 30.0) is None:
        server.stop(grace_s=5.0)
        raise RuntimeError(f"the discovery server did not start:\n{server.output()[-2000:]}")
    return server


class Observer:
    """A participant in this process: ``/replay_status`` always, ``/experience`` until every
    robot of ``0 .. robots - 1`` was seen once (then the subscription goes, so measuring adds
    no load to the window)."""

    def __init__(self, domain_id: int, robots: int) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from rl_interfaces.msg import ExperienceBatch, ReplayStatus
        from rl_nodes import graph

        self._rclpy = rclpy
        self.robots = robots
        self.first_experience: dict[int, float] = {}  # robot id -> time.time() of its first
        self.statuses: list[Any] = []
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("_fleet_observer", context=self.context)
        self.node.create_subscription(ReplayStatus, graph.REPLAY_STATUS.name, self.statuses.append,
                                      graph.REPLAY_STATUS.qos.profile())
        self._experience = self.node.create_subscription(
            ExperienceBatch, graph.EXPERIENCE.name, self._on_experience,
            graph.EXPERIENCE.qos.profile()) if robots > 0 else None
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def _on_experience(self, msg: Any) -> None:
        self.first_experience.setdefault(int(msg.robot_id), time.time())

    def spin_until(self, condition: Callable[[], bool], timeout_s: float, what: str,
                   alive: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self._experience is not None and len(self.first_experience) >= self.robots:
                self.node.destroy_subscription(self._experience)
                self._experience = None
            if not alive():
                raise RuntimeError(f"the deployment ended while waiting for {what}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} within {timeout_s:.0f} s")
            self.executor.spin_once(timeout_sec=0.1)

    def warm_up(self, seconds: float, alive: Callable[[], bool]) -> None:
        until = time.monotonic() + seconds
        self.spin_until(lambda: time.monotonic() >= until, seconds + 5, "the end of the warm-up",
                        alive)

    def window(self, seconds: float, alive: Callable[[], bool]) -> list[Any]:
        """The status reports from the next one until they span ``seconds``."""
        from rl_bringup.run.elastic import status_sample

        first = len(self.statuses)
        self.spin_until(
            lambda: len(self.statuses) > first + 1 and status_sample(self.statuses[-1]).stamp_s
            - status_sample(self.statuses[first]).stamp_s >= seconds,
            seconds + 10, "the window's status reports", alive)
        return self.statuses[first:]

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self._rclpy.try_shutdown(context=self.context)


# --- part 1: a fleet of paced robots -----------------------------------------------------------

@dataclass
class FleetRow:
    """One hybrid deployment of ``robots`` robot processes."""

    robots: int
    discovery: str
    rate_hz: float
    all_flowing_s: float  # launch -> every robot's experience seen
    up_median_s: float  # launch -> robot node up (median over robots)
    up_to_flow_median_s: float  # node up -> its first experience seen (discovery, weights)
    up_to_flow_max_s: float
    env_steps_per_s: float
    target_env_steps_per_s: float
    updates_per_transition: float
    robot_cpus: float  # mean CPU of one robot process (cores)
    learner_cpus: float
    other_cpus: float  # supervisor, discovery server, everything else on the machine
    idle_cpus: float
    robot_rss_mb: float
    robot_uss_mb: float
    learner_rss_mb: float
    cpus: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))

    @property
    def achieved(self) -> float:
        return self.env_steps_per_s / self.target_env_steps_per_s


def classify(pids: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(robot processes, learner processes)`` among ``pids`` by their command lines."""
    robots, learner = [], []
    for pid in pids:
        try:
            command = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
        if "simulator@/robot_" in command:
            robots.append(pid)
        elif "replay_buffer@/" in command or "trainer@/" in command:
            learner.append(pid)
    return robots, learner


def node_up_times(lines: Sequence[str]) -> dict[int, float]:
    """Robot id -> ROS time of its simulator's 'robot K: ...' line (first occurrence)."""
    times: dict[int, float] = {}
    for line in lines:
        match = NODE_UP.search(line)
        if match:
            times.setdefault(int(match.group(2)), float(match.group(1)))
    return times


def cpus_used(first: Any, last: Any) -> dict[int, float]:
    """CPUs (cores' worth) each process used between two rl_bringup.run.elastic.CpuMeter
    readings."""
    elapsed = last.at - first.at
    return {pid: (last.busy_s[pid] - first.busy_s[pid]) / elapsed
            for pid in first.busy_s.keys() & last.busy_s.keys()}


def memory_mb(pids: Sequence[int]) -> tuple[float, float]:
    """Mean RSS and USS of ``pids`` in MiB (USS: pages only that process holds)."""
    rss, uss = [], []
    for pid in pids:
        try:
            info = psutil.Process(pid).memory_full_info()
        except psutil.Error:
            continue
        rss.append(info.rss / MB)
        uss.append(info.uss / MB)
    return (statistics.fmean(rss) if rss else 0.0, statistics.fmean(uss) if uss else 0.0)


def measure_fleet(robots: int, discovery: str, args: argparse.Namespace, domain_id: int,
                  workdir: Path) -> FleetRow:
    """One fresh ``hybrid robots:=N`` deployment, measured from an observer in this process."""
    from rl_bringup.plan.autoscale import window_from_samples
    from rl_bringup.run.elastic import CpuMeter, status_sample

    port = free_udp_port() if discovery == "server" else None
    env = ros_environment(domain_id, port)  # the observer is a client of the server too
    server = start_discovery_server(port, env) if port is not None else None
    launched = time.time()
    run = Child([RL_BRINGUP, "launch", "hybrid", f"robots:={robots}",
                 f"output_dir:={workdir / f'fleet-{robots}-{discovery}'}",
                 f"domain_id:={domain_id}", f"max_rate_hz:={args.rate_hz:g}", "rate_limit:=false",
                 "learning_starts:=100", "total_env_steps:=1000000000"], env=env)
    observer = Observer(domain_id, robots)
    alive = lambda: run.process.poll() is None  # noqa: E731
    try:
        observer.spin_until(lambda: len(observer.first_experience) >= robots, STARTUP_TIMEOUT_S,
                            f"experience from all {robots} robots", alive)
        all_flowing = max(observer.first_experience.values()) - launched
        observer.warm_up(args.warmup_s, alive)
        pids = deployment_pids(run.pid)
        robot_pids, learner_pids = classify(pids)
        meter = CpuMeter(os.sched_getaffinity(0))
        first_cpu = meter.read(pids)
        statuses = observer.window(args.window_s, alive)
        last_cpu = meter.read(pids)
        robot_rss, robot_uss = memory_mb(robot_pids)
        learner_rss, _ = memory_mb(learner_pids)
    finally:
        observer.close()
        run.stop(grace_s=STOP_GRACE_S)
        if server is not None:
            server.stop(grace_s=5.0)
    idle, _ = CpuMeter.between(first_cpu, last_cpu)
    used = cpus_used(first_cpu, last_cpu)
    robot_use = [used[pid] for pid in robot_pids if pid in used]
    learner_use = sum(used.get(pid, 0.0) for pid in learner_pids)
    window = window_from_samples([status_sample(msg) for msg in statuses], robots, idle, 0.0)
    up = node_up_times(run.lines)
    up_to_flow = [observer.first_experience[robot] - up[robot] for robot in up
                  if robot in observer.first_experience]
    return FleetRow(
        robots=robots, discovery=discovery, rate_hz=args.rate_hz, all_flowing_s=all_flowing,
        up_median_s=statistics.median(t - launched for t in up.values()) if up else float("nan"),
        up_to_flow_median_s=statistics.median(up_to_flow) if up_to_flow else float("nan"),
        up_to_flow_max_s=max(up_to_flow) if up_to_flow else float("nan"),
        env_steps_per_s=window.env_steps_per_s, target_env_steps_per_s=robots * args.rate_hz,
        updates_per_transition=window.updates_per_transition,
        robot_cpus=statistics.fmean(robot_use) if robot_use else 0.0, learner_cpus=learner_use,
        other_cpus=max(0.0, len(meter.cpus) - idle - sum(robot_use) - learner_use),
        idle_cpus=idle, robot_rss_mb=robot_rss, robot_uss_mb=robot_uss,
        learner_rss_mb=learner_rss)


def print_fleet(rows: Sequence[FleetRow]) -> None:
    print("\nrobots  discovery  all flowing s  node up s  up->flow s (median/max)  "
          "transitions/s (target)  achieved  updates/transition  CPU/robot  learner CPU  "
          "other CPU  idle CPU  robot RSS/USS MiB  learner RSS MiB")
    for row in rows:
        print(f"{row.robots:>6}  {row.discovery:<9}  {row.all_flowing_s:>13.1f}  "
              f"{row.up_median_s:>9.1f}  {row.up_to_flow_median_s:>10.1f} / "
              f"{row.up_to_flow_max_s:<10.1f}  {row.env_steps_per_s:>10.1f} "
              f"({row.target_env_steps_per_s:>6.0f})  {row.achieved:>8.0%}  "
              f"{row.updates_per_transition:>18.2f}  {row.robot_cpus:>9.3f}  "
              f"{row.learner_cpus:>11.2f}  {row.other_cpus:>9.2f}  {row.idle_cpus:>8.2f}  "
              f"{row.robot_rss_mb:>8.0f} / {row.robot_uss_mb:<6.0f}  {row.learner_rss_mb:>15.0f}")


#: docs/results.md's "Fleet and ingest" table.
RESULTS_COLUMNS = tuple((header, RIGHT) for header in (
    "robots", "all flowing", "node up (median)", "up -> flowing (median / max)",
    "transitions/s (target)", "updates/transition", "CPU per robot", "learner CPU", "idle CPU",
    "robot RSS / USS", "learner RSS"))


def results_table(rows: Sequence[FleetRow]) -> str:
    """docs/results.md's "Fleet and ingest" table: a row per deployment measured (the discovery
    named after the robot count where the rows used more than one)."""
    several = len({row.discovery for row in rows}) > 1
    cells = [[f"{row.robots} ({row.discovery} discovery)" if several else str(row.robots),
              f"{row.all_flowing_s:.1f} s", f"{row.up_median_s:.1f} s",
              f"{row.up_to_flow_median_s:.1f} / {row.up_to_flow_max_s:.1f} s",
              f"{number(row.env_steps_per_s, 1)} ({number(row.target_env_steps_per_s)})",
              f"{row.updates_per_transition:.2f}", f"{row.robot_cpus:.3f}",
              f"{row.learner_cpus:.2f}", f"{row.idle_cpus:.2f}",
              f"{number(row.robot_rss_mb)} / {number(row.robot_uss_mb)} MiB",
              f"{number(row.learner_rss_mb)} MiB"]
             for row in rows]
    return markdown_table(RESULTS_COLUMNS, cells)


# --- part 2: the replay buffer's ingest ceiling ------------------------------------------------

@dataclass
class IngestRow:
    """The replay buffer fed by ``light_robots`` light robots at ``robot_hz`` each."""

    light_robots: int
    robot_hz: float
    rows: int  # rows (transitions) per message
    light_processes: int
    offered_messages_per_s: float  # light robots x robot_hz
    published_messages_per_s: float  # what the senders managed to publish
    messages_per_s: float  # what the buffer stored
    transitions_per_s: float
    stored_share: float  # stored / offered messages in the window
    buffer_cpus: float
    senders_cpus: float
    rejected: int  # messages the buffer refused (0: the light robots send valid experience)
    writer_refused: int  # publishes the senders' DDS writers refused (queue full: backpressure)


def light_robots_main(args: argparse.Namespace) -> int:
    """Worker: robot ids ``args.robot_ids`` each publishing prebuilt cart-pole experience at
    ``args.robot_hz`` (in turn, paced in 1 ms slices) for ``args.seconds``; prints how many
    messages went out."""
    import numpy as np
    import rclpy

    from rl_core.wire.messages import Experience
    from rl_interfaces.msg import ExperienceBatch
    from rl_nodes import graph
    from rl_nodes.messages import experience_to_msg

    first, last = (int(part) for part in args.robot_ids.split("-"))
    rows = args.light_rows
    rng = np.random.default_rng(first)
    stream = time.time_ns()
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = rclpy.create_node(f"light_robots_{first}", context=context)
    publisher = node.create_publisher(ExperienceBatch, graph.EXPERIENCE.name,
                                      graph.EXPERIENCE.qos.profile())
    messages = []
    for robot in range(first, last + 1):
        obs = rng.uniform(-0.05, 0.05, (rows, 4)).astype(np.float32)
        messages.append(experience_to_msg(Experience(
            robot_id=robot, obs=obs, actions=rng.uniform(-1, 1, (rows, 1)).astype(np.float32),
            rewards=np.ones(rows, np.float32), next_obs=obs + np.float32(0.01),
            terminated=np.zeros(rows, bool), truncated=np.zeros(rows, bool), stream=stream)))
    deadline = time.monotonic() + 60.0
    while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    print("ready", flush=True)
    rate = len(messages) * args.robot_hz
    published = refused = 0
    began = time.monotonic()
    end = began + args.seconds
    while (now := time.monotonic()) < end:
        for _ in range(int((now - began) * rate) - published - refused):
            index = published + refused
            msg = messages[index % len(messages)]
            msg.sequence = index // len(messages)  # each robot's own message counter
            try:
                publisher.publish(msg)
                published += 1
            except RuntimeError:  # rclpy's RCLError: the writer's queue is full
                refused += 1
        time.sleep(0.001)
    print(RESULT_PREFIX + json.dumps({"published": published, "refused": refused}), flush=True)
    node.destroy_node()
    rclpy.try_shutdown(context=context)
    return 0


def replay_params(path: Path) -> Path:
    """The replay buffer of the ingest part: no learner, no limiter, no snapshots."""
    path.write_text("/**:\n  ros__parameters:\n"
                    f"    env_id: {ENV_ID}\n    capacity: 1000000\n    rate_limit: false\n"
                    "    learning_starts: 1000000000\n    total_env_steps: 1000000000000\n")
    return path


def measure_ingest(light_robots: int, args: argparse.Namespace, domain_id: int,
                   workdir: Path) -> IngestRow:
    """One fresh replay buffer fed by fresh light robot processes; the buffer's stored count
    over ``--ingest-s`` after ``--warmup-s``."""
    from rl_bringup.plan.autoscale import window_from_samples
    from rl_bringup.run.elastic import CpuMeter, status_sample

    env = ros_environment(domain_id, None)
    buffer = Child([str(BIN / "replay_buffer"), "--ros-args", "--params-file",
                    str(replay_params(workdir / "replay_ingest.yaml"))], env=env)
    processes = min(args.light_processes, light_robots)
    bounds = [round(index * light_robots / processes) for index in range(processes + 1)]
    sent_seconds = args.ingest_s + args.warmup_s + 5.0
    senders: list[Child] = []
    observer = Observer(domain_id, 0)
    alive = lambda: buffer.process.poll() is None  # noqa: E731
    try:
        observer.spin_until(lambda: bool(observer.statuses), 60.0, "replay status", alive)
        for low, high in zip(bounds[:-1], bounds[1:]):
            senders.append(Child([sys.executable, str(Path(__file__).resolve()),
                                  "--light-robots-worker", "--robot-ids", f"{low}-{high - 1}",
                                  "--light-rows", str(args.light_rows), "--robot-hz",
                                  f"{args.robot_hz:g}", "--seconds", f"{sent_seconds:g}"],
                                 env=env))
        for sender in senders:
            if sender.wait_for_line(lambda line: line == "ready", 90.0) is None:
                raise RuntimeError(f"a light robot process did not start:\n"
                                   f"{sender.output()[-2000:]}")
        observer.warm_up(args.warmup_s, alive)
        meter = CpuMeter(os.sched_getaffinity(0))
        sender_pids = [sender.pid for sender in senders]
        first_cpu = meter.read([buffer.pid, *sender_pids])
        statuses = observer.window(args.ingest_s, alive)
        last_cpu = meter.read([buffer.pid, *sender_pids])
        for sender in senders:
            sender.wait(sent_seconds + 30.0)
        rejected = int(observer.statuses[-1].rejected_messages)
    finally:
        observer.close()
        for sender in senders:
            sender.stop(grace_s=5.0)
        buffer.stop(grace_s=10.0)
    transitions = window_from_samples([status_sample(msg) for msg in statuses], light_robots,
                                      0.0, 0.0).env_steps_per_s
    published = writer_refused = 0
    for sender in senders:
        results = [line for line in sender.lines if line.startswith(RESULT_PREFIX)]
        if not results:
            raise RuntimeError(f"a light robot process printed no result:\n"
                               f"{sender.output()[-2000:]}")
        result = json.loads(results[-1][len(RESULT_PREFIX):])
        published += result["published"]
        writer_refused += result["refused"]
    cpu = cpus_used(first_cpu, last_cpu)
    offered = light_robots * args.robot_hz
    stored = transitions / args.light_rows
    return IngestRow(
        light_robots=light_robots, robot_hz=args.robot_hz, rows=args.light_rows,
        light_processes=processes, offered_messages_per_s=offered,
        published_messages_per_s=published / sent_seconds, messages_per_s=stored,
        transitions_per_s=transitions, stored_share=stored / offered,
        buffer_cpus=cpu.get(buffer.pid, 0.0),
        senders_cpus=sum(cpu.get(pid, 0.0) for pid in sender_pids), rejected=rejected,
        writer_refused=writer_refused)


def print_ingest(rows: Sequence[IngestRow]) -> None:
    print("\nlight robots  Hz  rows/message  offered messages/s  published/s  stored messages/s  "
          "stored transitions/s  stored/offered  buffer CPU  senders CPU  rejected  "
          "writer refused")
    for row in rows:
        print(f"{row.light_robots:>12}  {row.robot_hz:>2g}  {row.rows:>12}  "
              f"{row.offered_messages_per_s:>18,.0f}  {row.published_messages_per_s:>11,.0f}  "
              f"{row.messages_per_s:>17,.0f}  {row.transitions_per_s:>20,.0f}  "
              f"{row.stored_share:>14.0%}  {row.buffer_cpus:>10.2f}  {row.senders_cpus:>11.2f}  "
              f"{row.rejected:>8}  {row.writer_refused:>14}")


# --- the plot ----------------------------------------------------------------------------------

def plot(fleet: Sequence[FleetRow], ingest: Sequence[IngestRow], path: Path) -> None:
    """The scaling curves: the fleet's stored transitions against the target with the learner's
    updates per transition; where the host's CPUs go per robot count; the replay buffer's stored
    messages against those offered by light robots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (1 if fleet else 0) * 2 + (1 if ingest else 0)
    figure, axes = plt.subplots(1, panels, figsize=(5 * panels, 4), squeeze=False)
    column = iter(axes[0])
    if fleet:
        rows = sorted(fleet, key=lambda row: (row.discovery, row.robots))
        rate, cpus = next(column), next(column)
        for discovery in sorted({row.discovery for row in rows}):
            mine = [row for row in rows if row.discovery == discovery]
            counts = [row.robots for row in mine]
            rate.plot(counts, [row.env_steps_per_s for row in mine], "o-",
                      label=f"stored ({discovery} discovery)")
        counts = sorted({row.robots for row in rows})
        rate.plot(counts, [count * rows[0].rate_hz for count in counts], "k--",
                  label=f"target: robots x {rows[0].rate_hz:g} Hz")
        rate.set_xlabel("robot processes")
        rate.set_ylabel("transitions per second")
        rate.set_title(f"Fleet on one {rows[0].cpus}-core host")
        updates = rate.twinx()
        first = [row for row in rows if row.discovery == rows[0].discovery]
        updates.plot([row.robots for row in first],
                     [row.updates_per_transition for row in first], "s:", color="tab:red")
        updates.set_ylabel("learner's updates per transition (red)")
        updates.set_ylim(bottom=0)
        rate.legend(loc="upper left")
        labels = [str(row.robots) for row in first]
        parts = (("robots", [row.robots * row.robot_cpus for row in first]),
                 ("learner", [row.learner_cpus for row in first]),
                 ("other", [row.other_cpus for row in first]),
                 ("idle", [row.idle_cpus for row in first]))
        bottom = [0.0] * len(first)
        for name, values in parts:
            cpus.bar(labels, values, bottom=bottom, label=name)
            bottom = [low + value for low, value in zip(bottom, values)]
        cpus.set_xlabel("robot processes")
        cpus.set_ylabel("CPUs (cores)")
        cpus.set_title(f"Where the CPUs go ({rows[0].discovery} discovery)")
        cpus.legend()
    if ingest:
        stored = next(column)
        offered = [row.offered_messages_per_s for row in ingest]
        stored.plot(offered, [row.messages_per_s for row in ingest], "o-", label="stored")
        stored.plot(offered, offered, "k--", label="offered")
        stored.set_xscale("log")
        stored.set_yscale("log")
        stored.set_xlabel(f"messages/s offered by light robots at {ingest[0].robot_hz:g} Hz")
        stored.set_ylabel("messages per second")
        stored.set_title(f"Replay buffer ingest ({ingest[0].rows} transition(s)/message)")
        stored.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    print(f"plot: {path}")


# --- main --------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("fleet", "ingest", "both"), default="both")
    parser.add_argument("--robots", type=csv_ints, default=[8, 16, 32],
                        help="fleet: robot process counts (default 8,16,32)")
    parser.add_argument("--rate-hz", type=float, default=10.0,
                        help="fleet: each robot's control rate, max_rate_hz (default 10)")
    parser.add_argument("--discovery", default="server",
                        help="fleet: server, localhost, or both comma-separated (default server)")
    parser.add_argument("--warmup-s", type=float, default=10.0)
    parser.add_argument("--window-s", type=float, default=30.0, help="fleet: measured window")
    parser.add_argument("--light-robots", type=csv_ints, default=[50, 100, 200, 400, 800],
                        help="ingest: light robot counts (default 50,100,200,400,800)")
    parser.add_argument("--robot-hz", type=float, default=20.0,
                        help="ingest: each light robot's message rate (default 20)")
    parser.add_argument("--light-rows", type=int, default=1,
                        help="ingest: transitions per message (default 1: one control period)")
    parser.add_argument("--light-processes", type=int, default=1,
                        help="ingest: processes the light robots are spread over (default 1: "
                             "the other core stays the buffer's)")
    parser.add_argument("--ingest-s", type=float, default=15.0, help="ingest: measured window")
    parser.add_argument("--domain-id", type=int,
                        help="ROS_DOMAIN_ID of every process (default: 20 + pid %% 60)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path, help="write the scaling curves (PNG) here")
    parser.add_argument("--markdown", action="store_true",
                        help="also print docs/results.md's table of the fleet part")
    # the light robot worker (started by the ingest part)
    parser.add_argument("--light-robots-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--robot-ids", default="0-0", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=10.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.discoveries = [part.strip() for part in args.discovery.split(",") if part.strip()]
    if not args.discoveries or set(args.discoveries) - {"server", "localhost"}:
        parser.error(f"--discovery takes server, localhost or both, got {args.discovery!r}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.light_robots_worker:
        return light_robots_main(args)
    domain_id = 20 + os.getpid() % 60 if args.domain_id is None else args.domain_id
    print(f"machine: {len(os.sched_getaffinity(0))} CPUs, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB; domain {domain_id}; loopback only",
          flush=True)
    fleet: list[FleetRow] = []
    ingest: list[IngestRow] = []

    def save() -> None:  # after every row: a later failure loses nothing measured
        if args.json is not None:
            args.json.write_text(json.dumps({"fleet": [asdict(row) for row in fleet],
                                             "ingest": [asdict(row) for row in ingest]},
                                            indent=2))

    # The ingest part and loopback discovery go first: this process' own participant (the
    # observer) does not drop a discovery server it was once a client of.
    with tempfile.TemporaryDirectory(prefix="fleet_bench_") as directory:
        workdir = Path(directory)
        if args.part in ("ingest", "both"):
            for light_robots in args.light_robots:
                row = measure_ingest(light_robots, args, domain_id, workdir)
                ingest.append(row)
                save()
                print(f"{light_robots} light robots: {row.messages_per_s:,.0f} of "
                      f"{row.offered_messages_per_s:,.0f} messages/s stored", flush=True)
            print_ingest(ingest)
        if args.part in ("fleet", "both"):
            for discovery in sorted(args.discoveries):  # localhost before server
                for robots in args.robots:
                    fleet_row = measure_fleet(robots, discovery, args, domain_id, workdir)
                    fleet.append(fleet_row)
                    save()
                    print(f"{robots} robots ({discovery} discovery): "
                          f"{fleet_row.env_steps_per_s:.0f} of "
                          f"{fleet_row.target_env_steps_per_s:.0f} transitions/s, all flowing "
                          f"after {fleet_row.all_flowing_s:.0f} s", flush=True)
            print_fleet(fleet)
    if args.plot is not None and (fleet or ingest):
        plot(fleet, ingest, args.plot)
    if args.markdown and fleet:
        print("\n" + results_table(fleet))
    return 0


if __name__ == "__main__":
    sys.exit(main())
