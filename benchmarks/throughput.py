#!/usr/bin/env python3
"""Acting throughput of rl_ros2 in environment steps per second: bare loop vs. ROS deployments.

Three ways of running the same acting loop (vector env + the same actor network):

* ``bare``       ``VectorEnv.step(actor.act(obs))`` in a loop; no ROS at all.
* ``colocated``  simulator and policy nodes in one process, talking through the zero-copy
                 :class:`rl_nodes.intra_process.IntraProcessManager`; measured inside that process
                 by reading ``SimulatorNode.total_env_steps`` around a timed ``manager.spin``.
* ``decoupled``  the ``simulator`` and ``policy`` executables as two processes talking over DDS;
                 measured from this process by sampling ``/episodes`` (EpisodeStatistics carries the
                 simulator's ``total_env_steps`` and stamp) at the start and end of the window. The
                 subscription exists only while sampling, so the simulator does not convert and
                 publish ``/episodes`` over DDS during the window.
* ``central``    central batched inference (SEED RL shape): ``--robots`` (4) ``simulator``
                 processes of width W each (``/robot_k``) and ONE ``policy`` process with
                 ``robots:=N`` answering all of them with one forward pass per round; the total
                 env steps/s of all robots (each sampled from ``/episodes`` as above) is compared
                 with the bare loop at width N x W, the same number of environments in one loop.
                 The policy's robots per forward pass and batching latency are read from its
                 ``/diagnostics`` during the window (1 Hz, a few small messages).

``--pipeline`` runs the simulators of ``decoupled`` and ``central`` with ``pipeline:=true`` (two
lanes in flight, so physics overlaps transport and inference).

Every measurement runs in fresh processes (``repeats`` rounds, each round every mode and width in
turn, so slow drifts of a noisy machine hit all modes alike); the table reports the median. The
machine is small and may be shared: each run measures the CPU time other processes took meanwhile
and is repeated (``--retries``) when that exceeds ``--max-foreign-load`` cores; before each run it
waits a little (``--quiet-wait``) for other load to drop. Runs that stay contended are kept and
marked ``*``.
ROS runs with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a ``ROS_DOMAIN_ID`` of this run's own.

Usage::

    .venv/bin/python benchmarks/throughput.py                      # cart-pole, widths 1 and 64
    .venv/bin/python benchmarks/throughput.py --env kuka --json out.json
    .venv/bin/python benchmarks/throughput.py --modes bare,colocated --widths 1 --profile
    .venv/bin/python benchmarks/throughput.py --modes bare,central --widths 16 --pipeline

This is a benchmark, not a test: it prints figures and the targets of the design, and exits 0
even when a target is missed (non-zero only when a measurement fails).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import resource
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rl_core.names.variables import ACTION_KEY, ACTION_KEY_FILE

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is a package at the repository root
    sys.path.insert(0, str(REPO))
from benchmarks import protection  # noqa: E402
from benchmarks.tables import LEFT, RIGHT, markdown_table, number  # noqa: E402

BIN_DIR = Path(sys.executable).parent  # the venv's console scripts (simulator, policy)
MODES = ("bare", "colocated", "decoupled", "central")
DEFAULT_MODES = ("bare", "colocated", "decoupled")  # central starts N + 1 processes: opt in
ENV_ALIASES = {"cartpole": "rl_ros2/CartPoleBalance-v0", "kuka": "rl_ros2/KukaReach-v0"}
NAMESPACE = "/robot_0"
RESULT_PREFIX = "THROUGHPUT_RESULT "
#: Design targets: (mode, width, minimum ratio to the bare loop at the same width).
TARGETS = (("colocated", 1, 0.8), ("decoupled", 64, 0.6))
#: Central batched inference: N robots of width W >= this ratio of the bare loop at width N x W
#: (checked at every width measured).
CENTRAL_TARGET = 0.8
CENTRAL_POLICY_NODE = "/policy"  # the central policy's diagnostics status name
STARTUP_TIMEOUT_S = 90.0  # process start + 64 pybullet clients + DDS discovery on a slow machine
STOP_GRACE_S = 5.0


# --- configuration ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    """What one measurement needs; passed to worker processes as command-line flags."""

    env_id: str
    width: int
    hidden: tuple[int, ...]
    warmup_s: float
    duration_s: float
    seed: int = 0


def params_yaml(settings: Settings) -> str:
    """A self-contained params file: the policy's actions drive every step, no rate limit."""
    hidden = ", ".join(str(h) for h in settings.hidden)
    return (
        "/**:\n  ros__parameters:\n"
        f"    env_id: {settings.env_id}\n    hidden_sizes: [{hidden}]\n    seed: {settings.seed}\n"
        "/**/simulator:\n  ros__parameters:\n"
        f"    num_envs: {settings.width}\n    random_steps: 0\n    max_rate_hz: 0.0\n"
        "/**/policy:\n  ros__parameters:\n    deterministic: false\n"
    )


def child_environment(domain_id: int, torch_threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", ROS_DOMAIN_ID=str(domain_id),
               PYTHONUNBUFFERED="1")
    # Simulators and policies started here by hand share one action key, as a launch's do
    # (rl_core.security.action_auth): without it a simulator steps only with a policy of its own process.
    if not (env.get(ACTION_KEY) or env.get(ACTION_KEY_FILE)):
        env[ACTION_KEY] = secrets.token_hex(32)
    if torch_threads > 0:  # torch's intra-op pool follows OMP_NUM_THREADS in every process
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(torch_threads)
    return env


class ForeignLoadMeter:
    """CPU time other processes (and the hypervisor: steal) took while a run was going on.

    The target machine is small and shared; a run during which something else computed is not
    comparable with the others. Foreign load = machine busy time (/proc/stat, steal included)
    minus the CPU time of this process and of the children it reaped, per second of wall time,
    in cores. ``None`` where /proc/stat is unavailable.
    """

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as stat:
                values = [int(v) for v in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system irq softirq steal (guest time is already counted in user)
        busy = sum(values[i] for i in (0, 1, 2, 5, 6, 7) if i < len(values))
        ours = sum(getattr(resource.getrusage(who), field)
                   for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for field in ("ru_utime", "ru_stime"))
        return time.monotonic(), busy / os.sysconf("SC_CLK_TCK"), ours

    def cores(self) -> float | None:
        end = self._read()
        if self._start is None or end is None or end[0] <= self._start[0]:
            return None
        busy, ours = end[1] - self._start[1], end[2] - self._start[2]
        return max(0.0, busy - ours) / (end[0] - self._start[0])


def foreign_load_now(seconds: float = 1.0) -> float | None:
    """Cores busy with other processes over ``seconds`` while this benchmark runs nothing."""
    meter = ForeignLoadMeter()
    time.sleep(seconds)
    return meter.cores()


def wait_for_quiet(limit: float, patience_s: float) -> float | None:
    """Wait up to ``patience_s`` until other processes use at most ``limit`` cores; the last load."""
    deadline = time.monotonic() + patience_s
    while True:
        load = foreign_load_now(0.5)
        if load is None or load <= limit or time.monotonic() >= deadline:
            return load


# --- worker side: bare loop and colocated nodes, each in a fresh process ------------------------

def _profiled(enabled: bool) -> cProfile.Profile | None:
    return cProfile.Profile() if enabled else None


def _print_profile(profile: cProfile.Profile | None, limit: int = 25) -> None:
    if profile is not None:
        pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(limit)


def worker_bare(settings: Settings, profile_enabled: bool) -> dict[str, float]:
    """``VectorEnv`` + ``SquashedGaussianActor.act`` with nothing in between."""
    import numpy as np
    import torch

    from rl_core.algorithms.networks import SquashedGaussianActor
    from rl_core.envs import VectorEnv

    torch.manual_seed(settings.seed)
    envs = VectorEnv(settings.env_id, settings.width)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    act_shape = envs.single_action_space.shape
    actor = SquashedGaussianActor(obs_dim, int(np.prod(act_shape)), settings.hidden)
    obs = envs.reset(seed=settings.seed)

    def run(seconds: float) -> tuple[int, float]:
        nonlocal obs
        steps, start = 0, time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            actions = actor.act(obs.reshape(settings.width, -1), deterministic=False)
            obs = envs.step(actions.reshape((settings.width, *act_shape))).obs
            steps += settings.width
        return steps, time.perf_counter() - start

    run(settings.warmup_s)
    profile = _profiled(profile_enabled)
    if profile is not None:
        profile.enable()
    steps, elapsed = run(settings.duration_s)
    if profile is not None:
        profile.disable()
    envs.close()
    _print_profile(profile)
    return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed,
            "torch_threads": torch.get_num_threads()}


def worker_colocated(settings: Settings, params_file: str, profile_enabled: bool
                     ) -> dict[str, float]:
    """Simulator + policy nodes in this process, as ``rl_nodes.runtime.run_nodes`` runs them.

    The rclpy executor spins in a background thread (timers, parameters, DDS); the dispatch loop
    (``manager.spin``) runs here and is timed; the step count is read between spins.
    """
    import rclpy
    import torch
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from rl_nodes.intra_process import IntraProcessManager
    from rl_nodes.policy import PolicyNode
    from rl_nodes.simulator import SimulatorNode

    rclpy.init(args=["throughput-colocated", "--ros-args", "--params-file", params_file])
    manager = IntraProcessManager.for_context(rclpy.get_default_context())
    executor = SingleThreadedExecutor()
    simulator = SimulatorNode(namespace=NAMESPACE)
    policy = PolicyNode(namespace=NAMESPACE)
    nodes = [simulator, policy]
    try:
        for node in nodes:
            executor.add_node(node)

        def spin_executor() -> None:
            try:
                executor.spin()
            except ExternalShutdownException:
                pass

        threading.Thread(target=spin_executor, name="rclpy-executor", daemon=True).start()
        for node in nodes:
            node.start()
        manager.spin(timeout_s=settings.warmup_s)  # callbacks that fail raise: no silent zeros
        profile = _profiled(profile_enabled)
        if profile is not None:
            profile.enable()
        start_steps, start = simulator.total_env_steps, time.perf_counter()
        manager.spin(timeout_s=settings.duration_s)
        steps, elapsed = simulator.total_env_steps - start_steps, time.perf_counter() - start
        if profile is not None:
            profile.disable()
        _print_profile(profile)
        return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed,
                "torch_threads": torch.get_num_threads(),
                "dds_publications": manager.stats["dds_publications"],
                "local_deliveries": manager.stats["local_deliveries"]}
    finally:
        for node in reversed(nodes):
            node.close()
        executor.shutdown(timeout_sec=1.0)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()


# --- orchestrator side --------------------------------------------------------------------------

class Child:
    """A child process in its own process group, output to a log file; stopped by PID only."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], log_path: Path) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(self.argv, env=env, cwd=REPO, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.process.poll() is None

    def output_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of output, without pybullet's per-client noise."""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join([line for line in text if not line.startswith("argv[0]=")][-lines:])

    def stop(self) -> int | None:
        """SIGINT the process group this object started, SIGKILL it after a grace period."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(timeout=10)
        self._log.close()
        return self.process.returncode


class MeasurementError(RuntimeError):
    """A measurement could not be taken; the message says why and shows the process output."""


def run_worker(kind: str, settings: Settings, params_file: Path, env: dict[str, str],
               workdir: Path, profile: bool) -> dict[str, float]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", kind,
            "--worker-settings", json.dumps(asdict(settings)), "--worker-params", str(params_file)]
    if profile:
        argv.append("--profile")
    child = Child(argv, env, workdir / f"{kind}-{settings.width}.log")
    timeout = STARTUP_TIMEOUT_S + settings.warmup_s + settings.duration_s
    try:
        child.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.stop()
        raise MeasurementError(f"{kind} worker did not finish within {timeout:.0f} s:\n"
                               f"{child.output_tail()}") from None
    child.stop()
    lines = child.log_path.read_text(errors="replace").splitlines()
    results = [line for line in lines if line.startswith(RESULT_PREFIX)]
    if child.process.returncode != 0 or not results:
        raise MeasurementError(f"{kind} worker failed (exit {child.process.returncode}):\n"
                               f"{child.output_tail()}")
    if profile:
        print(f"--- profile: {kind}, width {settings.width} ---")
        print("\n".join(line for line in lines
                        if not line.startswith((RESULT_PREFIX, "argv[0]=", "pybullet build"))))
    return json.loads(results[-1][len(RESULT_PREFIX):])


class EpisodeSampler:
    """Samples ``(stamp_ns, total_env_steps)`` of the simulators from ``/episodes`` on demand.

    The subscription exists only while a sample is taken: with no outside subscriber the
    simulator does not publish ``/episodes`` over DDS, so measuring does not load the loop.
    """

    def __init__(self) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self._rclpy = rclpy
        self.context = Context()
        rclpy.init(args=["throughput-observer"], context=self.context)
        self.node = rclpy.create_node("throughput_observer", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="observer-executor", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException, ShutdownException

        try:
            self.executor.spin()
        except (ExternalShutdownException, ShutdownException):
            pass

    def sample(self, timeout_s: float, alive: Sequence[Child], robots: int = 1
               ) -> dict[int, tuple[int, int]]:
        """The first ``/episodes`` message of each robot ``0 .. robots - 1`` published after this
        call: ``{robot_id: (stamp_ns, steps)}``."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        from rl_interfaces.msg import EpisodeStatistics

        not_before = time.time_ns()
        got: dict[int, tuple[int, int]] = {}
        ready = threading.Event()

        def on_message(msg: EpisodeStatistics) -> None:
            stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            robot = int(msg.robot_id)
            if stamp >= not_before and robot < robots and robot not in got:
                got[robot] = (stamp, int(msg.total_env_steps))
                if len(got) == robots:
                    ready.set()

        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        subscription = self.node.create_subscription(EpisodeStatistics, "/episodes", on_message,
                                                     qos)
        try:
            deadline = time.monotonic() + timeout_s
            while not ready.wait(0.1):
                dead = [child for child in alive if not child.alive()]
                if dead:
                    raise MeasurementError(f"{dead[0].argv[0]} exited "
                                           f"({dead[0].process.returncode}):\n"
                                           f"{dead[0].output_tail()}")
                if time.monotonic() > deadline:
                    missing = sorted(set(range(robots)) - set(got))
                    raise MeasurementError(
                        f"no /episodes message of robot(s) {missing} within {timeout_s:.0f} s (the "
                        f"nodes did not start stepping, or episodes never end):\n"
                        + "\n".join(f"[{c.argv[0]}]\n{c.output_tail()}" for c in alive))
        finally:
            self.node.destroy_subscription(subscription)
        return dict(got)

    def start_diagnostics(self, status_name: str) -> None:
        """Collect the values of ``/diagnostics`` statuses named ``status_name`` until
        :meth:`stop_diagnostics` (every node publishes one status a second: negligible load)."""
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        self._statuses: list[dict[str, str]] = []

        def on_message(msg: DiagnosticArray) -> None:
            self._statuses.extend({pair.key: pair.value for pair in status.values}
                                  for status in msg.status if status.name == status_name)

        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        self._diagnostics = self.node.create_subscription(DiagnosticArray, "/diagnostics",
                                                          on_message, qos)

    def stop_diagnostics(self) -> list[dict[str, str]]:
        """The statuses collected since :meth:`start_diagnostics`."""
        self.node.destroy_subscription(self._diagnostics)
        return list(self._statuses)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self._rclpy.try_shutdown(context=self.context)


#: Figures of the central policy's /diagnostics kept per run (see :func:`batching_figures`).
BATCHING_KEYS = ("robots_per_pass", "observations_per_pass", "batch_wait_ms", "answer_latency_ms")


def batching_figures(statuses: Sequence[dict[str, str]]) -> dict[str, float]:
    """Means of the central policy's per-second batching figures (periods with forward passes)."""
    keys = dict(zip(BATCHING_KEYS, ("robots per forward pass", "observations per forward pass",
                                    "batch wait ms", "answer latency ms")))
    active = [status for status in statuses if int(status.get("forward passes", "0") or 0) > 0]
    figures: dict[str, float] = {}
    for name, key in keys.items():
        values = [float(status[key]) for status in active if key in status]
        if values:
            figures[name] = statistics.fmean(values)
    return figures


def measure_processes(mode: str, settings: Settings, params_file: Path, env: dict[str, str],
                      workdir: Path, options: argparse.Namespace) -> dict[str, float]:
    """The executables over DDS; the rate from two /episodes samples of every robot.

    ``decoupled``: one simulator and its policy in ``/robot_0``. ``central``: ``options.robots``
    simulators (``/robot_k``) and one policy process with ``robots:=N`` in ``/``.
    """
    params = ["--ros-args", "--params-file", str(params_file)]
    simulator_extra = ["-p", "pipeline:=true"] if options.pipeline else []
    robots = options.robots if mode == "central" else 1
    commands: list[tuple[str, list[str]]] = [
        (f"simulator-{robot}", [str(BIN_DIR / "simulator"), *params, "-r",
                                f"__ns:=/robot_{robot}", *simulator_extra])
        for robot in range(robots)]
    if mode == "central":
        window = ([] if options.batch_window_ms is None
                  else ["-p", f"batch_window_ms:={float(options.batch_window_ms)}"])
        commands.append(("policy", [str(BIN_DIR / "policy"), *params, "-p", f"robots:={robots}",
                                    *window]))
    else:
        commands.append(("policy", [str(BIN_DIR / "policy"), *params, "-r", f"__ns:={NAMESPACE}"]))
    children: list[Child] = []
    sampler = EpisodeSampler()
    statuses: list[dict[str, str]] = []
    try:
        for name, argv in commands:
            children.append(Child(argv, env, workdir / f"{mode}-{name}-{settings.width}.log"))
        sampler.sample(STARTUP_TIMEOUT_S, children, robots)  # every robot has begun stepping
        time.sleep(settings.warmup_s)
        start = sampler.sample(STARTUP_TIMEOUT_S, children, robots)
        if mode == "central":
            sampler.start_diagnostics(CENTRAL_POLICY_NODE)
        time.sleep(settings.duration_s)
        end = sampler.sample(STARTUP_TIMEOUT_S, children, robots)
        if mode == "central":
            statuses = sampler.stop_diagnostics()
    finally:
        codes = [child.stop() for child in reversed(children)]
        sampler.close()
    rate, steps, seconds = 0.0, 0, 0.0
    for robot in range(robots):
        robot_seconds = (end[robot][0] - start[robot][0]) / 1e9
        robot_steps = end[robot][1] - start[robot][1]
        if robot_seconds <= 0 or robot_steps <= 0:
            raise MeasurementError(f"{mode}: robot {robot} made no progress between samples "
                                   f"({robot_steps} steps in {robot_seconds:.3f} s); exit codes "
                                   f"{codes}")
        rate += robot_steps / robot_seconds  # robots are sampled at slightly different times
        steps += robot_steps
        seconds = max(seconds, robot_seconds)
    return {"steps": steps, "seconds": seconds, "steps_per_s": rate, "robots": robots,
            **batching_figures(statuses)}


# --- report -------------------------------------------------------------------------------------

@dataclass
class Row:
    mode: str
    width: int
    runs: list[float] = field(default_factory=list)
    loads: list[float | None] = field(default_factory=list)  # other processes' cores per run
    contended: int = 0  # runs that kept too much other load after retries
    robots: int = 1  # robots of width ``width`` each (central: N)
    batching: list[dict[str, float]] = field(default_factory=list)  # central: per run

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else float("nan")

    @property
    def environments(self) -> int:
        """Environments stepped in all: the bare loop to compare with has this width."""
        return self.robots * self.width

    @property
    def label(self) -> str:
        return f"{self.robots}x{self.width}" if self.robots > 1 else str(self.width)


def ratio(rows: dict[tuple[str, int], Row], mode: str, width: int) -> float | None:
    """Median steps/s of ``mode`` over the bare loop's with as many environments."""
    row = rows.get((mode, width))
    bare = rows.get(("bare", row.environments)) if row is not None else None
    if bare is None or row is None or not bare.runs or not row.runs:
        return None
    return row.median / bare.median


def verdict_of(r: float | None, minimum: float) -> str:
    if r is None:
        return "not measured"
    return "PASS" if r >= minimum else f"SHORT (by {(minimum - r) * 100:.0f} points)"


def report(rows: dict[tuple[str, int], Row], header: str) -> list[dict[str, object]]:
    print()
    print(header)
    print(f"{'mode':<11} {'width':>5} {'steps/s (median)':>17} {'min..max':>17} {'x bare':>7}")
    for (mode, width), row in sorted(rows.items(), key=lambda kv: (kv[1].environments,
                                                                   MODES.index(kv[0][0]))):
        r = ratio(rows, mode, width)
        spread = f"{min(row.runs):,.0f}..{max(row.runs):,.0f}" if row.runs else "-"
        print(f"{mode:<11} {row.label:>5} {row.median:>17,.0f} {spread:>17} "
              f"{'-' if r is None else f'{r:.2f}':>7}" + (" *" * bool(row.contended)))
    for row in rows.values():
        if row.batching:
            figures = {key: statistics.median(run[key] for run in row.batching if key in run)
                       for key in sorted({key for run in row.batching for key in run})}
            print(f"{row.mode} {row.label}: policy /diagnostics (median of runs): "
                  + ", ".join(f"{key.replace('_', ' ')} {value:.2f}"
                              for key, value in figures.items()))
    print()
    outcomes = []
    targets = [(mode, width, minimum, f"{mode} >= {minimum:.1f}x bare at width {width}")
               for mode, width, minimum in TARGETS]
    targets += [(row.mode, row.width, CENTRAL_TARGET,
                 f"central ({row.robots} robots x {row.width}) >= {CENTRAL_TARGET:.1f}x bare at "
                 f"width {row.environments}")
                for row in rows.values() if row.mode == "central"]
    for mode, width, minimum, text in targets:
        r = ratio(rows, mode, width)
        verdict = verdict_of(r, minimum)
        shown = "-" if r is None else f"{r:.2f}x"
        print(f"target: {text}: {shown:>6}  {verdict}")
        outcomes.append({"mode": mode, "width": width, "minimum_ratio": minimum, "ratio": r,
                         "verdict": verdict.split()[0] if r is not None else verdict})
    return outcomes


#: docs/results.md's "Acting throughput" table.
RESULTS_COLUMNS = (("mode", LEFT), ("width", RIGHT), ("steps/s", RIGHT), ("min..max", RIGHT),
                   ("x bare", RIGHT), ("target", LEFT), ("date", LEFT))


def results_table(rows: dict[tuple[str, int], Row], date: str) -> str:
    """docs/results.md's "Acting throughput" table of ``rows``, measured on ``date``: median
    steps/s, the range over runs (of two or more), the ratio to the bare loop with as many
    environments, and the verdict where the design has a target (``width`` of a central row:
    its robots' environments in all, the bare loop it is compared with)."""
    targets = {(mode, width): minimum for mode, width, minimum in TARGETS}
    cells = []
    for (mode, width), row in sorted(rows.items(), key=lambda kv: (kv[1].environments,
                                                                   MODES.index(kv[0][0]))):
        r = ratio(rows, mode, width)
        minimum = CENTRAL_TARGET if mode == "central" else targets.get((mode, width))
        target = "" if minimum is None or r is None else \
            f">= {minimum:.1f}: {'met' if r >= minimum else 'SHORT'}"
        spread = f"{min(row.runs):,.0f}..{max(row.runs):,.0f}" if len(row.runs) > 1 else ""
        label = f"central, {row.robots} robots x {row.width}" if mode == "central" else mode
        cells.append([label, str(row.environments), number(row.median), spread,
                      "" if r is None else f"{r:.2f}", target, date])
    return markdown_table(RESULTS_COLUMNS, cells)


def round_runs(modes: Sequence[str], widths: Sequence[int], robots: int) -> list[tuple[str, int]]:
    """The ``(mode, width)`` runs of one round: every mode at every width, and for ``central``
    at width W also its reference, the bare loop at width N x W (when bare is measured)."""
    runs: list[tuple[str, int]] = []
    for width in widths:
        for mode in modes:
            if mode == "central" and "bare" in modes:
                runs.append(("bare", robots * width))
            runs.append((mode, width))
    return list(dict.fromkeys(runs))  # without repeats, in order


# --- command line -------------------------------------------------------------------------------

def csv_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}") from error
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def csv_modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in modes if m not in MODES]
    if not modes or unknown:
        raise argparse.ArgumentTypeError(f"modes must be among {', '.join(MODES)}; got {text!r}")
    return modes


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Acting throughput (env steps/s): bare loop vs colocated (zero-copy, one "
                    "process) vs decoupled (DDS, two processes) vs central (N simulator "
                    "processes, one batching policy process).")
    parser.add_argument("--env", default="cartpole",
                        help="cartpole, kuka, or a registered gymnasium id (default: cartpole)")
    parser.add_argument("--widths", type=csv_ints, default=(1, 64),
                        help="vector widths (num_envs), comma-separated (default: 1,64)")
    parser.add_argument("--modes", type=csv_modes, default=DEFAULT_MODES,
                        help=f"comma-separated subset of {','.join(MODES)} (default: "
                             f"{','.join(DEFAULT_MODES)})")
    parser.add_argument("--robots", type=int, default=4,
                        help="central mode: simulator processes (robots) of width W each, "
                             "compared with the bare loop at width robots x W (default: 4)")
    parser.add_argument("--batch-window-ms", type=float, default=None,
                        help="central mode: the policy's batch_window_ms (default: the node's "
                             "default, 2 ms)")
    parser.add_argument("--pipeline", action="store_true",
                        help="run the simulators of decoupled and central with pipeline:=true "
                             "(two lanes of environments in flight)")
    parser.add_argument("--hidden", type=csv_ints, default=(256, 256),
                        help="actor hidden layer sizes (default: 256,256)")
    parser.add_argument("--duration", type=float, default=2.0,
                        help="seconds measured per run (default: 2)")
    parser.add_argument("--warmup", type=float, default=0.5,
                        help="seconds of stepping before each measured window (default: 0.5)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per mode and width, each in fresh processes; the median is "
                             "reported (default: 3)")
    parser.add_argument("--max-foreign-load", type=float, default=0.25,
                        help="cores of other processes' CPU use (and steal) above which a run "
                             "counts as contended and is repeated (default: 0.25)")
    parser.add_argument("--retries", type=int, default=1,
                        help="extra attempts of a contended run before its figure is kept and "
                             "marked (default: 1)")
    parser.add_argument("--quiet-wait", type=float, default=20.0,
                        help="seconds to wait, before each run, for other load to drop below "
                             "--max-foreign-load (default: 20)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch intra-op threads of the bare loop and the in-process colocated "
                             "nodes (OMP_NUM_THREADS); 0 = torch's default pool. Default 1, as "
                             "rl_nodes.runtime.run_nodes sets for every node process (so the "
                             "decoupled executables always use 1); see "
                             "docs/performance.md#one-torch-thread")
    parser.add_argument("--domain-id", type=int, default=1 + os.getpid() % 100,
                        help="ROS_DOMAIN_ID of this run (default: 1 + pid %% 100)")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    parser.add_argument("--protection", action="store_true",
                        help="also time the fault and security protections (admission checks, "
                             "weights signing, snapshots) against the rates of this run "
                             "(benchmarks/protection.py)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print docs/results.md's tables of the figures measured "
                             "(acting throughput; protection costs with --protection)")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the measured window of bare and colocated runs and print "
                             "the top functions (slows them down; for diagnosis only)")
    parser.add_argument("--worker", choices=("bare", "colocated"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-settings", help=argparse.SUPPRESS)
    parser.add_argument("--worker-params", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.warmup < 0 or args.repeats < 1 or args.retries < 0:
        parser.error("--duration must be > 0, --warmup >= 0, --repeats >= 1, --retries >= 0")
    if not 0 <= args.domain_id <= 101:
        parser.error("--domain-id must be in 0..101")
    if not 1 <= args.robots <= 64 or (args.batch_window_ms is not None
                                      and not 0 <= args.batch_window_ms <= 1000):
        parser.error("--robots must be in 1..64 and --batch-window-ms in 0..1000")
    return args


def worker_main(args: argparse.Namespace) -> int:
    raw = json.loads(args.worker_settings)
    settings = Settings(**{**raw, "hidden": tuple(raw["hidden"])})
    if args.worker == "bare":
        result = worker_bare(settings, args.profile)
    else:
        result = worker_colocated(settings, args.worker_params, args.profile)
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker:
        return worker_main(args)
    # This process hosts the DDS observer: same network-safety settings as the children.
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = str(args.domain_id)
    env_id = ENV_ALIASES.get(args.env, args.env)
    env = child_environment(args.domain_id, args.torch_threads)
    started = time.time()
    header = (f"{env_id}, actor {'x'.join(map(str, args.hidden))}, {args.duration:g} s windows "
              f"after {args.warmup:g} s warm-up, median of {args.repeats}; "
              f"{os.cpu_count()} CPUs, torch threads: "
              f"{args.torch_threads or 'default'}; ROS_DOMAIN_ID={args.domain_id}"
              + ("; pipelined simulators" if args.pipeline else "")
              + (f"; central: {args.robots} robots, batch window "
                 f"{'default' if args.batch_window_ms is None else f'{args.batch_window_ms:g} ms'}"
                 if "central" in args.modes else ""))
    print(f"throughput: {header}", flush=True)
    load_before = foreign_load_now()
    if load_before is not None:
        print(f"throughput: other processes use {load_before:.2f} cores before the first run"
              + ("  WARNING: figures will be low and noisy" if load_before > args.max_foreign_load
                 else ""), flush=True)
    rows: dict[tuple[str, int], Row] = {}
    with tempfile.TemporaryDirectory(prefix="rl_ros2-throughput-") as tmp:
        workdir = Path(tmp)
        runs = round_runs(args.modes, args.widths, args.robots)
        params: dict[int, Path] = {}
        for width in sorted({width for _, width in runs}):
            settings = Settings(env_id, width, args.hidden, args.warmup, args.duration)
            params[width] = workdir / f"params-{width}.yaml"
            params[width].write_text(params_yaml(settings))
        try:
            for repeat in range(args.repeats):
                for mode, width in runs:
                    settings = Settings(env_id, width, args.hidden, args.warmup, args.duration)
                    robots = args.robots if mode == "central" else 1
                    row = rows.setdefault((mode, width), Row(mode, width, robots=robots))
                    for attempt in range(args.retries + 1):
                        wait_for_quiet(args.max_foreign_load, args.quiet_wait)
                        meter = ForeignLoadMeter()
                        if mode in ("decoupled", "central"):
                            result = measure_processes(mode, settings, params[width], env,
                                                       workdir, args)
                        else:
                            result = run_worker(mode, settings, params[width], env, workdir,
                                                args.profile)
                        load = meter.cores()
                        contended = load is not None and load > args.max_foreign_load
                        batching = {key: result[key] for key in BATCHING_KEYS if key in result}
                        print(f"  run {repeat + 1}/{args.repeats} {mode:<10} width {row.label:>4}: "
                              f"{result['steps_per_s']:>9,.0f} steps/s "
                              f"({result['steps']} steps in {result['seconds']:.2f} s)"
                              + ("" if load is None else f", other load {load:.2f} cores")
                              + "".join(f", {key.replace('_', ' ')} {value:.2f}"
                                        for key, value in batching.items())
                              + (" CONTENDED" + (", again" if attempt < args.retries else "")
                                 if contended else ""), flush=True)
                        if not contended or attempt == args.retries:
                            break
                    row.runs.append(result["steps_per_s"])
                    row.loads.append(load)
                    row.contended += contended
                    if batching:
                        row.batching.append(batching)
        except MeasurementError as error:
            print(f"throughput: measurement failed: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("throughput: interrupted; reporting the runs so far", file=sys.stderr)
    outcomes = report(rows, header)
    protections = {}
    costs: dict[int, list[protection.Cost]] = {}
    rates: dict[int, dict[str, float]] = {}
    if args.protection:
        for width in args.widths:
            rates[width] = {mode: statistics.median(row.runs)
                            for (mode, row_width), row in rows.items()
                            if row_width == width and row.runs}
            costs[width] = protection.measure(env_id, width, args.hidden)
            protections[width] = protection.report(costs[width], width, rates[width])
    contended = sum(row.contended for row in rows.values())
    if contended:
        print(f"WARNING: {contended} run(s) kept more than {args.max_foreign_load:.2f} cores of "
              "other load after retries (marked *); rerun on a quiet machine")
    print(f"(total {time.time() - started:.0f} s)")
    if args.markdown:
        date = time.strftime("%Y-%m-%d")
        print("\n" + results_table(rows, date))
        if costs:
            print("\n" + protection.results_table(costs, rates, date))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version()},
            "other_load_cores_before": load_before,
            "protection": protections,
            "settings": {"env_id": env_id, "hidden": list(args.hidden),
                         "widths": list(args.widths), "modes": list(args.modes),
                         "duration_s": args.duration, "warmup_s": args.warmup,
                         "repeats": args.repeats, "torch_threads": args.torch_threads or None,
                         "pipeline": args.pipeline, "central_robots": args.robots,
                         "batch_window_ms": args.batch_window_ms},
            "results": [{"mode": row.mode, "width": row.width, "robots": row.robots,
                         "runs": row.runs, "other_load_cores": row.loads,
                         "contended_runs": row.contended, "median": row.median,
                         "ratio_to_bare": ratio(rows, row.mode, row.width),
                         "bare_width": row.environments, "policy_batching": row.batching}
                        for row in rows.values()],
            "targets": outcomes,
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
