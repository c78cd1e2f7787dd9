#!/usr/bin/env python3
"""Soak: one long training run through the robot boundary under a seeded schedule of faults,
and what it cost (issue 41 item 11; RL-100's reliability figures: hours of operation, faults
survived, experience lost, time back at work, the policy's result at the end).

One ``rl-bringup launch decoupled robots:=2 robot_interface:=ros2_control`` (cart-pole, the
simulators driving sim_robot processes through joint_states, effort commands and the e-stop)
trains with a budget it never reaches for ``--minutes`` (default 60) of schedule, while this
script's node (benchmarks/faults.py's ``Injector``) follows a schedule drawn from ``--seed``:

- every ``--kill-every`` minutes (default 5) a **SIGKILL** of a node process of a kind taken in
  shuffled rounds (replay buffer, trainer, a simulator, a policy, a sim_robot; random robot),
  right after a ``/replay_status`` (so the counts it says are those at the kill); then it waits
  until the supervisor respawned it and it is back at work (snapshot and insert log restored,
  checkpoint resumed, the robot's experience flowing) before anything else happens;
- every ``--hostile-every`` minutes (default 1) a **burst of hostile input**: faults.py's bad
  message and service probes all at once, a forged e-stop release (a plain ``false`` and a
  release signed with a random key while the e-stop is engaged; then the run's signed release),
  joint states from a second publisher, and a small benchmarks/fuzz.py round (services,
  parameters, lifecycle transitions the nodes do not offer, composition where a container
  serves it, the replay buffer's save/load);
- every ``--estop-every`` minutes (default 3) an **e-stop engagement** of a random robot, held
  for two seconds, then the release signed with the run's key.

A simulator SIGKILLed while not engaged comes back engaged (after a fault, by design:
rl_core.robot.estop); the soak notices it on ``/robot_k/estop/state`` and releases it with the
run's key (``RUN/weights.key``), counting such releases by reason, whenever it waits.

At the end of the schedule the run is stopped (SIGINT to the launch's process group: the trainer
writes its checkpoint) and ``rl-bringup eval`` runs 20 deterministic episodes of the run's best
checkpoint, judged against the task's target (cart-pole: mean return >= 180 of at most 200).

Usage::

    .venv/bin/python benchmarks/soak.py --minutes 60 --seed 1 --markdown --json soak.json
    .venv/bin/python benchmarks/soak.py --minutes 4 --kill-every 1      # a short trial

ROS runs with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and the ``--domain-id`` given (default
derived from the process id). Processes are stopped by PID (the launch's process group).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.faults import (  # noqa: E402
    BOUNDARY_KINDS,
    FORGED_STATES,
    HOLD_SETTLE_S,
    RL_BRINGUP,
    ROS2_CONTROL,
    EStopReleases,
    Injector,
    Kill,
    Probe,
    Scenario,
    engage_estop,
    forged_joint_states_probe,
    forged_release_probes,
    fuzz_run,
    launch_command,
    release_estop,
    run_key,
    service_probes,
    topic_probes,
)
from tests.processes import Child  # noqa: E402  (the repository's process helper)

#: A budget no soak reaches: the soak ends the run itself.
TOTAL_ENV_STEPS = 10**9
#: cart-pole's target (config/cartpole.yaml's solve_return; an episode returns at most 200).
TARGET_RETURN, MAX_RETURN = 180.0, 200.0
EVAL_EPISODES = 20
#: How long the soak's own e-stop engagements hold the robot.
ESTOP_HOLD_S = 2.0
#: A burst's benchmarks/fuzz.py round: requests per service, changes per fuzzed node.
BURST_CALLS_PER_SERVICE, BURST_CHANGES_PER_NODE = 1, 3
#: How long the run gets to start (imports, discovery, the first experience and weights).
START_TIMEOUT_S = 300.0
KILL, HOSTILE, ESTOP = "kill", "hostile input", "e-stop"


@dataclass(frozen=True)
class Event:
    """One scheduled fault: when (seconds into the schedule), what, and where."""

    at_s: float
    action: str
    kind: str = ""
    robot: int = 0


def plan_events(minutes: float, kill_every: float, hostile_every: float, estop_every: float,
                robots: int, seed: int, kinds: tuple[str, ...] = BOUNDARY_KINDS) -> list[Event]:
    """The soak's schedule, in time order: kills at every multiple of ``kill_every`` minutes,
    their kinds in shuffled rounds (each kind once per round), hostile input half a period
    into every ``hostile_every``, e-stops a quarter minute after every multiple of
    ``estop_every``; all before ``minutes``. A period of 0 schedules none of its events.

    :raises ValueError: a negative period, or no robots.
    """
    if min(minutes, kill_every, hostile_every, estop_every) < 0 or robots < 1:
        raise ValueError("periods and minutes must be >= 0 and robots >= 1")
    rng = random.Random(seed)

    def times(period: float, offset: float) -> list[float]:
        if period <= 0:
            return []
        count = int((minutes - offset) / period) + 1
        return [60.0 * (offset + k * period) for k in range(count)
                if 0 < offset + k * period < minutes]

    events: list[Event] = []
    rounds: list[str] = []
    for at_s in times(kill_every, kill_every):
        if not rounds:
            rounds = list(kinds)
            rng.shuffle(rounds)
        events.append(Event(at_s, KILL, rounds.pop(), rng.randrange(robots)))
    events += [Event(at_s, HOSTILE, robot=rng.randrange(robots))
               for at_s in times(hostile_every, hostile_every / 2)]
    events += [Event(at_s, ESTOP, robot=rng.randrange(robots))
               for at_s in times(estop_every, estop_every + 0.25)]
    order = {KILL: 0, ESTOP: 1, HOSTILE: 2}
    return sorted(events, key=lambda event: (event.at_s, order[event.action]))


@dataclass
class Burst:
    """One burst of hostile input and how it was refused."""

    at_s: float
    robot: int
    sent: int = 0  # bad messages and requests (the fuzz round's calls not included)
    #: How much each refusing node's counter grew ("node: counter" -> growth).
    counted: dict[str, int] = field(default_factory=dict)
    #: Counters that did not grow within the deadline (their input was not refused visibly).
    not_counted: list[str] = field(default_factory=list)
    held_under_forged_releases: bool = False
    fuzz_calls: int = 0
    unanswered: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    counter_regressions: list[str] = field(default_factory=list)
    duration_s: float = 0.0


@dataclass
class EStopCycle:
    """One e-stop engagement of the soak's own and its signed release."""

    at_s: float
    robot: int
    engaged_after_s: float = 0.0  # publishing true -> the engaged state arrived
    held: bool = False  # no experience from the robot while engaged
    back_after_s: float = 0.0  # the signed release -> experience from the robot again


@dataclass
class SoakReport:
    seed: int
    command: str
    minutes: float
    machine: str
    date: str
    startup_s: float = 0.0
    wall_s: float = 0.0
    kills: list[Kill] = field(default_factory=list)
    bursts: list[Burst] = field(default_factory=list)
    estops: list[EStopCycle] = field(default_factory=list)
    #: E-stops engaged by faults (a simulator back after a SIGKILL) and released, by reason.
    fault_releases: dict[str, int] = field(default_factory=dict)
    #: Processes not running at the end of the schedule.
    processes_lost: list[str] = field(default_factory=list)
    inserted_at_end: int = 0
    run_exit_code: int | None = None
    eval_mean: float | None = None
    eval_std: float | None = None
    eval_output: str = ""
    #: Why the soak stopped before its schedule's end ("" when it did not).
    aborted: str = ""
    #: Events not run: the schedule's end came first (recoveries took longer than planned).
    skipped: int = 0
    lines: list[str] = field(default_factory=list, repr=False)

    @property
    def solved(self) -> bool:
        return self.eval_mean is not None and self.eval_mean >= TARGET_RETURN


# --- the events ------------------------------------------------------------------------------------

def probe_all(scenario: Scenario, probes: list[tuple[Probe, Callable[[], Any]]],
              timeout_s: float = 60.0) -> tuple[dict[str, int], list[str]]:
    """Send every probe's input at once, then wait until each refusing node's counter grew:
    ``(growth per "node: counter", counters that did not grow)``. Probes sharing a counter
    share its growth (faults.py's one-by-one probing waits a diagnostics period for each)."""
    injector = scenario.injector
    groups = {(probe.node, probe.counter) for probe, _ in probes}
    before = {group: injector.counter(*group) for group in groups}
    for _, send in probes:
        send()

    def grown() -> list[tuple[str, str]]:
        return [group for group in groups if injector.counter(*group) <= before[group]]

    deadline = time.monotonic() + timeout_s
    while grown() and time.monotonic() < deadline:
        scenario.tend()
        time.sleep(0.1)
    counted = {f"{node}: {counter}": injector.counter(node, counter) - before[(node, counter)]
               for node, counter in sorted(groups)}
    return counted, [f"{node}: {counter}" for node, counter in grown()]


def hostile_burst(scenario: Scenario, key: Any, rng: random.Random, event: Event,
                  at_s: float) -> Burst:
    """Bad messages and requests, forged releases and joint states, a small fuzz round."""
    injector = scenario.injector
    started = time.monotonic()
    burst = Burst(at_s, event.robot)
    # A fresh genuine batch to replay (the streams change when simulators restart).
    injector.captured_experience = None
    scenario.wait_until(lambda: injector.captured_experience is not None, 60.0,
                        "experience of robot 0")
    probes = [*topic_probes(injector, key), *service_probes(injector)]
    burst.sent = len(probes)
    burst.counted, burst.not_counted = probe_all(scenario, probes)
    releases, burst.held_under_forged_releases = forged_release_probes(scenario, key,
                                                                       event.robot)
    joint_states, send = forged_joint_states_probe(event.robot)
    scenario.probe(joint_states, lambda: send(injector))
    burst.sent += len(releases) + FORGED_STATES
    for probe in [*releases, joint_states]:
        name = f"{probe.node}: {probe.counter}"
        burst.counted[name] = burst.counted.get(name, 0) + probe.counted
    fuzzed = fuzz_run(scenario, rng.randrange(2**32), None, BURST_CALLS_PER_SERVICE,
                      BURST_CHANGES_PER_NODE)
    burst.fuzz_calls = (fuzzed.service_calls + fuzzed.parameter_changes + fuzzed.lifecycle_calls
                        + fuzzed.composition_calls + fuzzed.file_calls)
    burst.unanswered, burst.accepted = fuzzed.unanswered, fuzzed.accepted
    burst.counter_regressions = fuzzed.counter_regressions
    burst.duration_s = time.monotonic() - started
    return burst


def estop_cycle(scenario: Scenario, key: Any, robot: int, at_s: float) -> EStopCycle:
    """Engage ``robot``'s e-stop, hold ESTOP_HOLD_S, release it with the run's key."""
    injector = scenario.injector
    cycle = EStopCycle(at_s, robot)
    cycle.engaged_after_s, _ = engage_estop(scenario, robot)
    state = injector.estop(robot)
    assert state is not None
    scenario.wait_until(lambda: time.monotonic() > state[0] + ESTOP_HOLD_S, 30.0,
                        "the e-stop's hold")
    now = injector.estop(robot)
    cycle.held = (now is not None and now[1] and now[2] == state[2]
                  and injector.experience_seen.get(robot, 0.0) < state[0] + HOLD_SETTLE_S)
    cycle.back_after_s = release_estop(scenario, robot, key)
    return cycle


# --- the run ---------------------------------------------------------------------------------------

def lost_processes(scenario: Scenario) -> list[str]:
    """Processes of the run whose newest pid is not running."""
    lost = []
    for process in scenario.processes():
        try:
            os.kill(scenario.pid_of(process), 0)  # signal 0: only asks whether it exists
        except ProcessLookupError:
            lost.append(process)
    return lost


def evaluate(output_dir: Path, environ: dict[str, str], episodes: int
             ) -> tuple[float | None, float | None, str]:
    """``rl-bringup eval`` of the run's best checkpoint: (mean, std, its output)."""
    done = subprocess.run([RL_BRINGUP, "eval", f"checkpoint:={output_dir}",
                           f"episodes:={episodes}"], env=environ, capture_output=True,
                          text=True, timeout=900, check=False)
    output = done.stdout + done.stderr
    match = re.search(r"mean return (-?[\d.]+) ± ([\d.]+)", output)
    return (float(match.group(1)), float(match.group(2)), output) if match else \
        (None, None, output)


def run_soak(args: argparse.Namespace, output_dir: Path, environ: dict[str, str],
             report: SoakReport, log: Callable[[str], None] = print) -> None:
    """Start the run, follow the schedule, stop the run, evaluate; fills ``report``."""
    domain_id = int(environ["ROS_DOMAIN_ID"])
    rng = random.Random(args.seed)
    events = plan_events(args.minutes, args.kill_every, args.hostile_every, args.estop_every,
                         args.robots, rng.randrange(2**32))
    started = time.monotonic()
    run = Child(launch_command(args.mode, args.robots, output_dir, domain_id, TOTAL_ENV_STEPS,
                               f"robot_interface:={ROS2_CONTROL}"), env=environ)
    injector = Injector(domain_id, boundary_robots=args.robots)
    scenario = Scenario(run, injector, log)
    try:
        scenario.wait_until(lambda: injector.replay()[0] >= 500 and injector.captured_experience
                            and injector.captured_weights, START_TIMEOUT_S,
                            "experience and weights")
        key = run_key(environ, output_dir)
        scenario.releases = EStopReleases(injector, key, args.robots)
        origin = time.monotonic()
        report.startup_s = origin - started
        log(f"soak: the run is at work after {report.startup_s:.0f} s; {len(events)} events "
            f"in {args.minutes:g} minutes")
        for event in events:
            if time.monotonic() - origin >= 60.0 * args.minutes:
                report.skipped = len(events) - events.index(event)
                break  # behind schedule: the recoveries took longer than planned
            scenario.wait_until(lambda event=event: time.monotonic() - origin >= event.at_s,
                                event.at_s + 60.0, f"the event at {event.at_s:.0f} s")
            at_s = time.monotonic() - origin
            if event.action == KILL:
                report.kills.append(scenario.kill(event.kind, event.robot))
            elif event.action == HOSTILE:
                report.bursts.append(hostile_burst(scenario, key, rng, event, at_s))
                burst = report.bursts[-1]
                log(f"hostile input at {at_s / 60:.1f} min: {burst.sent} sent, "
                    f"{sum(burst.counted.values())} refusals counted, not counted "
                    f"{burst.not_counted or 'none'}, {burst.fuzz_calls} fuzz calls "
                    f"({len(burst.unanswered)} unanswered, {len(burst.accepted)} accepted), "
                    f"held under forged releases {burst.held_under_forged_releases}, "
                    f"{burst.duration_s:.1f} s")
            else:
                report.estops.append(estop_cycle(scenario, key, event.robot, at_s))
                cycle = report.estops[-1]
                log(f"e-stop of robot {cycle.robot} at {at_s / 60:.1f} min: engaged after "
                    f"{1e3 * cycle.engaged_after_s:.0f} ms, held {cycle.held}, back at work "
                    f"{cycle.back_after_s:.1f} s after the signed release")
        end = origin + 60.0 * args.minutes
        scenario.wait_until(lambda: time.monotonic() >= end, 60.0 * args.minutes + 60.0,
                            "the end of the schedule")
        report.processes_lost = lost_processes(scenario)
        report.inserted_at_end = injector.replay()[1]
    except (RuntimeError, TimeoutError, KeyboardInterrupt) as error:
        report.aborted = str(error)[:4000] or type(error).__name__
        log(f"soak aborted: {report.aborted}")
    finally:
        if scenario.releases is not None:
            report.fault_releases = dict(scenario.releases.released)
        injector.close()
        report.run_exit_code = run.stop(grace_s=60.0)
        report.wall_s = time.monotonic() - started
        report.lines = run.lines
    report.eval_mean, report.eval_std, report.eval_output = evaluate(output_dir, environ,
                                                                     args.eval_episodes)


# --- the figures -----------------------------------------------------------------------------------

def summary_rows(report: SoakReport) -> list[tuple[str, str]]:
    """(figure, value) rows of the soak's table."""
    kills = [kill for kill in report.kills if kill.signal == "SIGKILL"]
    replay = [kill for kill in kills if kill.lost_rows is not None]
    counted = sum(sum(burst.counted.values()) for burst in report.bursts)
    not_counted = sorted({name for burst in report.bursts for name in burst.not_counted})
    unanswered = sum(len(burst.unanswered) for burst in report.bursts)
    accepted = sum(len(burst.accepted) for burst in report.bursts)
    regressions = sum(len(burst.counter_regressions) for burst in report.bursts)
    held = [burst.held_under_forged_releases for burst in report.bursts] + \
        [cycle.held for cycle in report.estops]

    def spread(values: list[float]) -> str:
        return f"median {sorted(values)[len(values) // 2]:.1f}, max {max(values):.1f}" \
            if values else "-"

    per_kind = ", ".join(f"{kind} {count}" for kind, count
                         in collections.Counter(kill.kind for kill in kills).items())
    evaluation = (f"{report.eval_mean:.1f} ± {report.eval_std:.1f} over {EVAL_EPISODES} "
                  f"episodes (target >= {TARGET_RETURN:g} of {MAX_RETURN:g}): "
                  f"{'met' if report.solved else 'NOT met'}"
                  if report.eval_mean is not None else "no evaluation (see eval_output)")
    return [
        ("schedule", f"{report.minutes:g} min after {report.startup_s:.0f} s of start-up "
                     f"(wall {report.wall_s / 60:.1f} min)"
                     + (f"; {report.skipped} events skipped (behind schedule)"
                        if report.skipped else "")
                     + (f"; ABORTED: {report.aborted.splitlines()[0]}" if report.aborted else "")),
        ("SIGKILLs survived", f"{len(kills)} ({per_kind or '-'})"),
        ("respawn s", spread([kill.respawn_s for kill in kills])),
        ("back at work s", spread([kill.recovery_s for kill in kills])),
        ("replay rows lost per replay-buffer kill",
         ", ".join(f"{kill.lost_rows} of {kill.inserted_at_kill:,}" for kill in replay) or "-"),
        ("hostile bursts", f"{len(report.bursts)}: {sum(b.sent for b in report.bursts)} bad "
                           f"inputs, {counted} refusals counted; counters that did not grow: "
                           f"{', '.join(not_counted) or 'none'}"),
        ("fuzz calls", f"{sum(b.fuzz_calls for b in report.bursts)}: {unanswered} unanswered, "
                       f"{accepted} accepted, {regressions} replay counters back"),
        ("e-stop engagements (soak's)", f"{len(report.estops) + len(report.bursts)}, "
                                        f"robot held in {sum(held)} of {len(held)}"),
        ("e-stops released after faults", ", ".join(
            f"{count} × {reason}" for reason, count in report.fault_releases.items()) or "none"),
        ("processes lost", (", ".join(report.processes_lost) or "none")
         + f"; the run stopped by SIGINT with exit code {report.run_exit_code}"),
        ("transitions inserted", f"{report.inserted_at_end:,}"),
        ("best checkpoint, rl-bringup eval", evaluation),
    ]


def markdown(report: SoakReport) -> str:
    """The soak's figures and per-kill table, with the command and the machine."""
    lines = [f"Soak, {report.machine}, {report.date} (seed {report.seed}):",
             "", f"    {report.command}", "", "| figure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in summary_rows(report)]
    lines += ["", "| kill | at inserts | restored inserts | rows lost | respawn s | back s "
              "| e-stop released |", "|---|---:|---:|---:|---:|---:|---|"]
    for kill in report.kills:
        restored = f"{kill.restored_inserted:,}" if kill.restored_inserted is not None else ""
        lost = kill.lost_rows if kill.lost_rows is not None else ""
        lines.append(f"| {kill.process} | {kill.inserted_at_kill:,} | {restored} | {lost} | "
                     f"{kill.respawn_s:.1f} | {kill.recovery_s:.1f} | "
                     f"{', '.join(kill.estop_released) or ''} |")
    return "\n".join(lines)


def plain(report: SoakReport) -> str:
    width = max(len(name) for name, _ in summary_rows(report))
    return "\n".join([report.command, *(f"{name:<{width}}  {value}"
                                         for name, value in summary_rows(report))])


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0,
                        help="length of the schedule (default 60)")
    parser.add_argument("--kill-every", type=float, default=5.0,
                        help="minutes between SIGKILLs (default 5; 0: none)")
    parser.add_argument("--hostile-every", type=float, default=1.0,
                        help="minutes between bursts of hostile input (default 1; 0: none)")
    parser.add_argument("--estop-every", type=float, default=3.0,
                        help="minutes between e-stop engagements (default 3; 0: none)")
    parser.add_argument("--seed", type=int, default=None, help="the schedule (default: random)")
    parser.add_argument("--mode", default="decoupled", choices=("decoupled", "hybrid",
                                                                "colocated"))
    parser.add_argument("--robots", type=int, default=2)
    parser.add_argument("--eval-episodes", type=int, default=EVAL_EPISODES)
    parser.add_argument("--domain-id", type=int, default=1 + os.getpid() % 100)
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="keep the run (and its log, soak.log) here (default: a temporary "
                             "folder, removed)")
    parser.add_argument("--markdown", action="store_true", help="print the figures as markdown")
    parser.add_argument("--json", type=Path, help="also write the report as JSON")
    parser.add_argument("--tabulate", type=Path, default=None, metavar="JSON",
                        help="print the figures of a report --json wrote, and run nothing")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.robots < 1 or not 0 <= args.domain_id <= 101:
        parser.error("--minutes must be positive, --robots >= 1, --domain-id in 0..101")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(10**6)
    return args


def load_report(path: Path) -> SoakReport:
    """A report as ``--json`` wrote it (its output lines are not kept there)."""
    data = json.loads(path.read_text())
    data["kills"] = [Kill(**kill) for kill in data["kills"]]
    data["bursts"] = [Burst(**burst) for burst in data["bursts"]]
    data["estops"] = [EStopCycle(**cycle) for cycle in data["estops"]]
    return SoakReport(**data)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    if args.tabulate is not None:
        report = load_report(args.tabulate)
        print(markdown(report) if args.markdown else plain(report))
        return 0
    command = (f".venv/bin/python benchmarks/soak.py --minutes {args.minutes:g} --kill-every "
               f"{args.kill_every:g} --hostile-every {args.hostile_every:g} --estop-every "
               f"{args.estop_every:g} --seed {args.seed} --mode {args.mode} --robots "
               f"{args.robots}")
    report = SoakReport(args.seed, command, args.minutes,
                        f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}",
                        time.strftime("%Y-%m-%d"))
    environ = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   ROS_DOMAIN_ID=str(args.domain_id), PYTHONUNBUFFERED="1")
    print(f"soak: {shlex.join(sys.argv)} (seed {args.seed}, ROS_DOMAIN_ID {args.domain_id})",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="rl_soak_") as folder:
        output_dir = args.output_dir or Path(folder) / "run"
        run_soak(args, output_dir, environ, report,
                 log=lambda line: print(line, flush=True))
        if args.output_dir is not None:
            (output_dir / "soak.log").write_text("\n".join(report.lines) + "\n")
    print("\n" + (markdown(report) if args.markdown else plain(report)))
    if args.json:
        data = asdict(report)
        del data["lines"]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2))
    healthy = (not report.aborted and not report.processes_lost and report.solved
               and all(not burst.unanswered and not burst.accepted for burst in report.bursts))
    return 0 if healthy else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the run as for Ctrl-C
    raise SystemExit(main())
