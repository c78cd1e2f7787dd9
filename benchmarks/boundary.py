#!/usr/bin/env python3
"""The ros2_control boundary: control latency and rate per mode, and its cost in training time.

Part 1, timing like a real robot: per mode (colocated, decoupled, hybrid) and control rate
(50, 100, 250 Hz) the script starts a training run with ``robot_interface:=ros2_control
sim_robot:=false`` and its own ``sim_robot`` in ``free_run`` mode at that rate (a robot that does
not wait for the policy), lets it train for ``--window`` seconds past ``learning_starts`` (so
the process is busy with gradient steps), and reads the simulator's ``/diagnostics``: latency
from a joint state's arrival to the command sent for it (p50, p99) and the achieved control rate
(commands per second) against the robot's rate.

Part 2, the boundary's cost: the KukaReach run of config/kuka_reach.yaml in hybrid mode with two
robots, once with the in-process envs and once across the boundary (sim_robot in lockstep),
same budget, one after the other in this run: wall time, the ratio, evaluation success.

Usage::

    .venv/bin/python benchmarks/boundary.py                      # both parts (~15 min, 2 cores)
    .venv/bin/python benchmarks/boundary.py --part timing --rates 50,100 --window 10
    .venv/bin/python benchmarks/boundary.py --part cost --total-env-steps 30000

Every ROS process runs with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a ``ROS_DOMAIN_ID``
of its own (``--domain-id``, then one more per run). A benchmark: it prints figures; exit code 1
when a run fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is a package at the repository root
    sys.path.insert(0, str(REPO))
from benchmarks.tables import LEFT, RIGHT, figures, markdown_table  # noqa: E402

BIN = Path(sys.executable).parent
MODES = ("colocated", "decoupled", "hybrid")
SIMULATOR = "/robot_0/simulator"


def ros_environment(domain_id: int) -> dict[str, str]:
    return {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
            "ROS_DOMAIN_ID": str(domain_id), "PYTHONUNBUFFERED": "1"}


def stop(process: subprocess.Popen[Any], grace_s: float = 15.0) -> None:
    """SIGINT the process group, then SIGKILL after the grace period."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5.0)


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[Any]:
    handle = log.open("w")
    return subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT,
                            start_new_session=True)


def simulator_figures(domain_id: int, wait_s: float, window_s: float,
                      run: subprocess.Popen[Any]) -> dict[str, str]:
    """The last /diagnostics values of /robot_0/simulator after ``window_s`` seconds of
    stepping past the learning start (waiting up to ``wait_s`` for stepping to begin)."""
    os.environ.update(ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", ROS_DOMAIN_ID=str(domain_id))
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("boundary_benchmark", context=context)
    latest: dict[str, str] = {}

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name == SIMULATOR:
                latest.clear()
                latest.update({item.key: item.value for item in status.values})

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 50)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and int(latest.get("env steps", "0")) < 600:
            if run.poll() is not None:
                return {}  # the run ended (its log says why)
            executor.spin_once(timeout_sec=0.2)
        end = time.monotonic() + window_s
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.2)
        return dict(latest)
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def timing(modes: list[str], rates: list[float], window_s: float, domain_id: int,
           output: Path, repeats: int = 1) -> list[dict[str, Any]]:
    """One run per mode and rate, ``repeats`` rounds of them; a row of figures per run."""
    rows = []
    for repeat, mode, rate in ((r, m, h) for r in range(repeats) for m in modes for h in rates):
        domain_id += 1
        env = ros_environment(domain_id)
        run_dir = output / (f"timing-{mode}-{rate:g}" + (f"-{repeat + 1}" if repeats > 1 else ""))
        run_dir.mkdir(parents=True, exist_ok=True)
        robot = start([str(BIN / "sim_robot"), "--ros-args", "-r", "__ns:=/robot_0",
                       "-p", "robot:=cartpole", "-p", "mode:=free_run",
                       "-p", f"control_period:={1.0 / rate}", "-p", "physics_substeps:=1"],
                      env, run_dir / "sim_robot.log")
        run = start([str(BIN / "rl-bringup"), "launch", mode, "robot_interface:=ros2_control",
                     "sim_robot:=false", f"control_rate_hz:={rate}", "random_steps:=500",
                     "total_env_steps:=1000000", f"output_dir:={run_dir}",
                     f"domain_id:={domain_id}"], env, run_dir / "run.log")
        try:
            values = simulator_figures(domain_id, 120.0, window_s, run)
        finally:
            stop(run)
            stop(robot)
        row = {"mode": mode, "rate_hz": rate,
               "p50_ms": float(values.get("command latency p50 ms", "nan")),
               "p99_ms": float(values.get("command latency p99 ms", "nan")),
               "achieved_hz": float(values.get("control rate hz", "nan"))}
        rows.append(row)
        print(f"  {mode:10s} {rate:6.0f} Hz: latency p50 {row['p50_ms']:.2f} ms, p99 "
              f"{row['p99_ms']:.2f} ms, achieved {row['achieved_hz']:.1f} Hz", flush=True)
    return rows


#: How the page counts runs in a column's header.
RUN_COUNTS = {2: "two", 3: "three", 4: "four", 5: "five"}


def results_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """docs/results.md's "Control latency at the robot boundary" table of :func:`timing`'s
    rows: per mode a p50 / p99 cell and an achieved-rate cell per robot rate, each run's
    latencies in one cell and the achieved rate's range over them (the header says how many
    runs where there are several)."""
    modes = list(dict.fromkeys(row["mode"] for row in rows))
    rates = list(dict.fromkeys(row["rate_hz"] for row in rows))
    runs = {(mode, rate): [row for row in rows if (row["mode"], row["rate_hz"]) == (mode, rate)]
            for mode in modes for rate in rates}
    columns = [("mode", LEFT)]
    for index, rate in enumerate(rates):
        count = max(len(runs[mode, rate]) for mode in modes)
        columns += [(f"{rate:g} Hz{' robot' if index == 0 else ''}: p50 / p99"
                     + (f", {RUN_COUNTS.get(count, count)} runs" if count > 1 else ""), LEFT),
                    ("achieved", LEFT if count > 1 else RIGHT)]
    cells = []
    for mode in modes:
        line = [mode]
        for rate in rates:
            mine = [row for row in runs[mode, rate] if not math.isnan(row["p50_ms"])]
            achieved = sorted(row["achieved_hz"] for row in mine
                              if not math.isnan(row["achieved_hz"]))
            line += [", ".join(f"{figures(row['p50_ms'])} / {figures(row['p99_ms'])} ms"
                               for row in mine) or "-",
                     "-" if not achieved else f"{achieved[0]:.1f} Hz" if len(achieved) == 1
                     else f"{achieved[0]:.1f}–{achieved[-1]:.1f} Hz"]
        cells.append(line)
    return markdown_table(columns, cells)


def cost(total_env_steps: int | None, domain_id: int, output: Path) -> list[dict[str, Any]]:
    rows = []
    for interface in ("in_process", "ros2_control"):
        domain_id += 1
        run_dir = output / f"kuka-{interface}"
        argv = [str(BIN / "rl-bringup"), "launch", "hybrid", "robots:=2", "config:=kuka_reach",
                f"robot_interface:={interface}", f"output_dir:={run_dir}",
                f"domain_id:={domain_id}"]
        if total_env_steps:
            argv.append(f"total_env_steps:={total_env_steps}")
        run_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        process = start(argv, ros_environment(domain_id), run_dir / "run.log")
        try:
            code = process.wait(7200)
        finally:
            stop(process)
        wall = time.monotonic() - started
        result_file = run_dir / "result.json"
        result = json.loads(result_file.read_text()) if code == 0 and result_file.is_file() else {}
        rows.append({"interface": interface, "code": code, "wall_s": wall,
                     "trainer_wall_s": result.get("wall_time_s"),
                     "success_rate": result.get("eval_success_rate"),
                     "env_steps": result.get("env_steps")})
        print(f"  {interface:12s}: exit {code}, {wall:.0f} s wall ({result.get('wall_time_s', 0):.0f}"
              f" s training), success {result.get('eval_success_rate')}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("timing", "cost", "both"), default="both")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--rates", default="50,100,250")
    parser.add_argument("--window", type=float, default=15.0,
                        help="seconds of busy training over which the figures are taken")
    parser.add_argument("--total-env-steps", type=int, default=None,
                        help="budget of the KukaReach runs (default: config/kuka_reach.yaml's)")
    parser.add_argument("--domain-id", type=int, default=60,
                        help="ROS_DOMAIN_ID before the first run's; each run takes the next "
                        "(timing: up to 9 runs a repeat, cost: the 21st and 22nd; at most 101)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timing: runs of every mode and rate, 1 or 2 (default 1; two "
                        "repeats of 9 runs stay below the cost part's domain ids)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print docs/results.md's table of the timing figures")
    parser.add_argument("--output", default=None)
    parser.add_argument("--json", default=None)
    arguments = parser.parse_args(argv)
    if arguments.repeats not in (1, 2):
        parser.error("--repeats takes 1 or 2 (the cost part's domain ids follow the timing's)")
    output = Path(arguments.output or tempfile.mkdtemp(prefix="boundary-bench-"))
    report: dict[str, Any] = {}
    if arguments.part in ("timing", "both"):
        print("control latency (joint state arrival -> command) and achieved rate, cart-pole, "
              "sim_robot free_run:", flush=True)
        report["timing"] = timing(arguments.modes.split(","),
                                  [float(rate) for rate in arguments.rates.split(",")],
                                  arguments.window, arguments.domain_id, output,
                                  arguments.repeats)
    if arguments.part in ("cost", "both"):
        print("KukaReach, hybrid robots:=2, in-process envs against the boundary "
              "(sim_robot lockstep):", flush=True)
        rows = cost(arguments.total_env_steps, arguments.domain_id + 20, output)
        report["cost"] = rows
        if all(row["code"] == 0 for row in rows):
            print(f"  boundary / in-process wall time: {rows[1]['wall_s'] / rows[0]['wall_s']:.2f}")
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(report, indent=2))
    print(f"runs in {output}")
    if arguments.markdown and report.get("timing"):
        print("\n" + results_table(report["timing"]))
    failed = any(row.get("code", 0) != 0 for row in report.get("cost", []))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
