#!/usr/bin/env python3
"""Elastic robots: env steps/s of hybrid deployments over robot counts, and one autoscaled run.

* **Curve.** ``rl-bringup launch hybrid robots:=k`` for k = 1..K, measured side by side:
  ``--repeats`` rounds, each round every count in turn in fresh processes (slow drifts of a
  shared machine hit every count alike). One measurement: wait until learning started, the
  learner caught up with the first transitions and k simulators publish experience, then
  ``--warmup-s``, then ``--window-s`` of ``/replay_status``: transitions stored per second (the
  same window the autoscaler judges, :func:`rl_bringup.plan.autoscale.window_from_samples`),
  achieved updates per transition, the share of time the rate limiter blocked acting, CPUs per robot
  process, and the CPU other processes took meanwhile (foreign load: the machine's busy CPUs
  minus this deployment's). The table shows medians and the ratio of each count's median to one
  robot's.
* **Autoscaled.** ``robots:=auto max_robots:=K`` for ``--auto-s`` seconds; its decisions (the
  ``autoscale:`` lines) are printed as they were logged.

Every run learns (cart-pole, SAC, rate limiter on) with ``learning_starts:=100`` and no step
budget; ``--max-rate-hz`` caps each robot's control rate like a real robot's (0: as fast as the
machine goes). ROS runs on the loopback with a ``ROS_DOMAIN_ID`` of this benchmark's own; every
process is stopped by PID (:func:`rl_bringup.run.processes.stop_process`).

Usage::

    .venv/bin/python benchmarks/elastic.py                 # K=4, 3 repeats, robots uncapped
    .venv/bin/python benchmarks/elastic.py --max-rate-hz 25 --json out.json
    .venv/bin/python benchmarks/elastic.py --repeats 0 --auto-s 180    # only robots:=auto

A benchmark, not a test: it prints figures and exits 0 unless a measurement fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
RL_BRINGUP = str(Path(sys.executable).parent / "rl-bringup")
STARTUP_TIMEOUT_S = 180.0
STOP_GRACE_S = 20.0
LEARNING_ARGUMENTS = ("learning_starts:=100", "total_env_steps:=1000000000")


@dataclass
class Measurement:
    """One deployment at a fixed robot count."""

    robots: int
    env_steps_per_s: float
    updates_per_transition: float
    paused_fraction: float
    robot_cpus: float
    foreign_cpus: float


def deployment_pids(root: int) -> list[int]:
    """The supervisor ``root`` and every process below it."""
    try:
        parent = psutil.Process(root)
        return [root, *(child.pid for child in parent.children(recursive=True))]
    except psutil.Error:
        return []


def robot_pids(root: int) -> list[int]:
    """The robot containers (simulator + policy) a supervisor started."""
    pids = []
    for pid in deployment_pids(root):
        try:
            if any("simulator@/robot_" in part for part in psutil.Process(pid).cmdline()):
                pids.append(pid)
        except psutil.Error:
            continue
    return pids


def launch(arguments: Sequence[str], domain_id: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
           "ROS_DOMAIN_ID": str(domain_id), "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        return subprocess.Popen([RL_BRINGUP, "launch", "hybrid", *arguments,
                                 f"domain_id:={domain_id}"], env=env, cwd=REPO, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen[bytes]) -> None:
    from rl_bringup.run.processes import stop_process

    stop_process(process, STOP_GRACE_S)


def measure(robots: int, extra: Sequence[str], args: argparse.Namespace, domain_id: int,
            workdir: Path) -> Measurement:
    """One fresh ``robots:=k`` deployment, measured from a participant in this process."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from rl_bringup.plan.autoscale import learning_steady, window_from_samples
    from rl_bringup.run.elastic import CpuMeter, status_sample
    from rl_core.learning.cpus import available_cpus
    from rl_interfaces.msg import ReplayStatus
    from rl_nodes import graph

    log_path = workdir / f"robots-{robots}-{domain_id}.log"
    process = launch([f"robots:={robots}", f"output_dir:={workdir / f'run-{domain_id}'}",
                      *LEARNING_ARGUMENTS, *extra], domain_id, log_path)
    context = rclpy.Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    node = rclpy.create_node("_elastic_benchmark", context=context)
    statuses: list[ReplayStatus] = []
    node.create_subscription(ReplayStatus, graph.REPLAY_STATUS.name, statuses.append,
                             graph.REPLAY_STATUS.qos.profile())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)

    def spin_until(condition, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace").splitlines()[-30:]
                raise RuntimeError(f"robots:={robots}: no {what}:\n" + "\n".join(tail))
            executor.spin_once(timeout_sec=0.1)

    try:
        def steady() -> bool:
            last = statuses[-1] if statuses else None
            return last is not None and learning_steady(
                last.total_inserted, last.total_sampled, last.learning_starts,
                last.target_updates_per_transition, last.rate_limited) and node.count_publishers(
                graph.EXPERIENCE.name) >= robots

        spin_until(steady, STARTUP_TIMEOUT_S, "steady learning with every robot")
        start = time.monotonic()
        spin_until(lambda: time.monotonic() - start >= args.warmup_s, args.warmup_s + 5, "warm-up")
        meter = CpuMeter(available_cpus())
        pids = deployment_pids(process.pid)
        robot_set = set(robot_pids(process.pid))
        first_cpu = meter.read(pids)
        first = len(statuses)
        spin_until(lambda: len(statuses) > first + 1 and status_sample(statuses[-1]).stamp_s
                   - status_sample(statuses[first]).stamp_s >= args.window_s,
                   args.window_s + 10, "window")
        last_cpu = meter.read(pids)
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        stop(process)
    samples = [status_sample(msg) for msg in statuses[first:]]
    elapsed = last_cpu.at - first_cpu.at
    used = {pid: (last_cpu.busy_s[pid] - first_cpu.busy_s[pid]) / elapsed
            for pid in first_cpu.busy_s.keys() & last_cpu.busy_s.keys()}
    idle, _ = CpuMeter.between(first_cpu, last_cpu)
    window = window_from_samples(samples, robots, idle, 0.0)
    robot_use = [cpus for pid, cpus in used.items() if pid in robot_set]
    foreign = max(0.0, len(meter.cpus) - idle - sum(used.values()))
    return Measurement(robots, window.env_steps_per_s, window.updates_per_transition,
                       window.paused_fraction, statistics.fmean(robot_use) if robot_use else 0.0,
                       foreign)


def report(rows: list[Measurement], max_robots: int) -> list[dict[str, float]]:
    """Print the curve; return it as dictionaries (medians per robot count)."""
    table: list[dict[str, float]] = []
    base: float | None = None
    print("\nrobots  env steps/s (median, min..max)  x 1 robot  updates/transition  "
          "acting blocked  CPUs/robot  foreign CPUs  runs")
    for robots in range(1, max_robots + 1):
        runs = [row for row in rows if row.robots == robots]
        if not runs:
            continue
        rates = [row.env_steps_per_s for row in runs]
        median = statistics.median(rates)
        base = median if robots == 1 else base
        ratio = median / base if base else float("nan")
        figures = {
            "robots": robots, "env_steps_per_s": median, "min": min(rates), "max": max(rates),
            "ratio_to_one_robot": ratio,
            "updates_per_transition": statistics.median(r.updates_per_transition for r in runs),
            "paused_fraction": statistics.median(r.paused_fraction for r in runs),
            "robot_cpus": statistics.median(r.robot_cpus for r in runs),
            "foreign_cpus": statistics.median(r.foreign_cpus for r in runs), "runs": len(runs)}
        table.append(figures)
        print(f"{robots:>6}  {median:>11.1f} ({min(rates):.1f}..{max(rates):.1f})"
              f"{'':>4}  {ratio:>9.2f}  {figures['updates_per_transition']:>18.2f}  "
              f"{figures['paused_fraction']:>14.0%}  {figures['robot_cpus']:>10.2f}  "
              f"{figures['foreign_cpus']:>12.2f}  {len(runs):>4}")
    return table


def autoscaled(extra: Sequence[str], args: argparse.Namespace, domain_id: int,
               workdir: Path) -> list[str]:
    """``robots:=auto`` for ``--auto-s`` seconds; its ``autoscale:`` lines."""
    log_path = workdir / "auto.log"
    process = launch(["robots:=auto", f"max_robots:={args.max_robots}",
                      f"output_dir:={workdir / 'run-auto'}", *LEARNING_ARGUMENTS, *extra,
                      *args.autoscale], domain_id, log_path)
    try:
        deadline = time.monotonic() + args.auto_s
        while time.monotonic() < deadline and process.poll() is None:
            time.sleep(1.0)
    finally:
        stop(process)
    return [line for line in log_path.read_text(errors="replace").splitlines()
            if "autoscale" in line]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-robots", type=int, default=4, help="K: counts 1..K (default 4)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds of every count (default 3; 0: no curve)")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--max-rate-hz", type=float, default=0.0,
                        help="control rate cap of each robot (default 0: none)")
    parser.add_argument("--auto-s", type=float, default=150.0,
                        help="seconds of the robots:=auto run (0: none)")
    parser.add_argument("--autoscale", action="append", default=[], metavar="KEY:=VALUE",
                        help="autoscale setting for the robots:=auto run (repeatable), e.g. "
                        "autoscale_window_s:=5")
    parser.add_argument("--param", action="append", default=[], metavar="KEY:=VALUE",
                        help="extra launch argument for every run (repeatable)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    extra = [f"max_rate_hz:={args.max_rate_hz:g}", *args.param]
    domain_id = 40 + os.getpid() % 50
    print(f"machine: {len(os.sched_getaffinity(0))} CPUs; load average "
          f"{os.getloadavg()[0]:.1f}; launch arguments {' '.join(extra)}; domain {domain_id}")
    rows: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="elastic_bench_") as directory:
        workdir = Path(directory)
        for round_index in range(args.repeats):
            for robots in range(1, args.max_robots + 1):
                row = measure(robots, extra, args, domain_id, workdir)
                rows.append(row)
                print(f"round {round_index + 1}: {robots} robot(s) {row.env_steps_per_s:.1f} "
                      f"env steps/s, {row.updates_per_transition:.2f} updates/transition, "
                      f"acting blocked {row.paused_fraction:.0%}, {row.robot_cpus:.2f} CPUs/robot, "
                      f"foreign {row.foreign_cpus:.2f} CPUs", flush=True)
        table = report(rows, args.max_robots) if rows else []
        decisions = autoscaled(extra, args, domain_id, workdir) if args.auto_s > 0 else []
    if decisions:
        print(f"\nrobots:=auto max_robots:={args.max_robots}, {args.auto_s:g} s:")
        print("\n".join(decisions))
    if args.json is not None:
        args.json.write_text(json.dumps({"arguments": extra, "curve": table,
                                         "runs": [asdict(row) for row in rows],
                                         "autoscale": decisions}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
