"""Elastic robots (``rl-bringup launch hybrid robots:=auto``): measure, decide, start or retire.

A thread of the supervisor process with a small ROS participant (:class:`RosSession`, a hidden
tool node). It reads ``/replay_status`` and, with psutil, the robots' idle CPUs and each robot
process's CPU time; once learning is steady (:func:`rl_bringup.plan.autoscale.learning_steady`) it
measures windows at a fixed robot count, asks :class:`rl_bringup.plan.autoscale.Autoscaler`, and
starts a standby robot (:meth:`Supervisor.start_standby`) or retires the newest
(:meth:`Supervisor.retire`, by SIGINT, so experience already published is delivered). Every
decision is logged and published on ``/diagnostics`` (:data:`rl_nodes.graph.AUTOSCALER_STATUS`).

A window during which a supervised process restarted, or whose replay counters went backwards,
is discarded. rclpy is imported only when the thread starts, so plans and fixed launches never
load it. How it runs and what it prints: docs/elastic.md.
"""

from __future__ import annotations

import math
import os
import threading
import time
import traceback
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import psutil

from rl_bringup.plan.autoscale import (
    ADD,
    HOLD,
    RETIRE,
    Autoscaler,
    Decision,
    StatusSample,
    Window,
    learning_steady,
    window_from_samples,
)
from rl_bringup.plan.deployment import Plan
from rl_bringup.plan.discovery import DISCOVERY_RANGE_VARIABLE, DISCOVERY_SERVER_VARIABLE
from rl_bringup.run.supervision import RESTARTING, RUNNING, STANDBY
from rl_bringup.run.supervisor import Supervisor
from rl_core.learning.cpus import available_cpus
from rl_core.security import weights_auth
from rl_core.security.signed_status import StatusCheck
from rl_nodes import graph

#: Phases of the controller, as the diagnostics show them.
WAITING, SETTLING, MEASURING, STARTING, RETIRING = (
    "waiting for learning to start and catch up", "settling", "measuring", "starting a robot",
    "retiring a robot")
STOP_TIMEOUT_S = 5.0
#: A hold for the cause of the decision before is logged again after this long.
REPEATED_HOLD_LOG_S = 60.0


@dataclass(frozen=True)
class CpuReading:
    """CPU counters at one moment: per CPU ``(idle s, total s)``, per pid busy seconds."""

    at: float
    per_cpu: tuple[tuple[float, float], ...]
    busy_s: dict[int, float]


class CpuMeter:
    """Idle CPUs among ``cpus`` and the CPUs processes used, between two readings (psutil)."""

    def __init__(self, cpus: Collection[int]) -> None:
        self.cpus = frozenset(cpus)

    def read(self, pids: Iterable[int]) -> CpuReading:
        per_cpu = []
        for index, times in enumerate(psutil.cpu_times(percpu=True)):
            if index in self.cpus:
                idle = times.idle + getattr(times, "iowait", 0.0)
                busy = (times.user + times.nice + times.system + getattr(times, "irq", 0.0)
                        + getattr(times, "softirq", 0.0) + getattr(times, "steal", 0.0))
                per_cpu.append((idle, idle + busy))
        busy_s: dict[int, float] = {}
        for pid in pids:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue  # exited meanwhile; the window is discarded anyway
            busy_s[pid] = times.user + times.system
        return CpuReading(time.monotonic(), tuple(per_cpu), busy_s)

    @staticmethod
    def between(first: CpuReading, last: CpuReading) -> tuple[float, float]:
        """``(idle CPUs, CPUs per process)`` over the time between two readings."""
        idle = sum((b_idle - a_idle) / (b_total - a_total)
                   for (a_idle, a_total), (b_idle, b_total) in zip(first.per_cpu, last.per_cpu)
                   if b_total > a_total)
        elapsed = last.at - first.at
        used = [(last.busy_s[pid] - first.busy_s[pid]) / elapsed
                for pid in first.busy_s.keys() & last.busy_s.keys()] if elapsed > 0 else []
        return idle, (sum(used) / len(used) if used else 0.0)


def status_sample(msg: Any) -> StatusSample:
    """The fields of an ``rl_interfaces/msg/ReplayStatus`` a window needs."""
    return StatusSample(stamp_s=msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec,
                        total_inserted=msg.total_inserted, total_sampled=msg.total_sampled,
                        insert_blocked_s=msg.insert_blocked_s,
                        target_updates_per_transition=msg.target_updates_per_transition,
                        rate_limited=msg.rate_limited)


class ElasticRobots:
    """The autoscaler of an elastic plan, running beside :meth:`Supervisor.run`.

    Use it as a context manager around ``supervisor.run()``: it starts its thread on entry and
    stops it on exit.

    :param supervisor: the supervisor of ``plan`` (with its standby processes).
    :param plan: a plan with :attr:`Plan.autoscale` set.
    """

    def __init__(self, supervisor: Supervisor, plan: Plan) -> None:
        if plan.autoscale is None:
            raise ValueError("the plan has a fixed robot count (robots:=auto makes it elastic)")
        self.supervisor = supervisor
        self.settings = plan.autoscale
        self.robot_names = plan.elastic_robot_processes()
        self.autoscaler = Autoscaler(self.settings)
        self.domain_id = plan.domain_id
        self.namespace = plan.namespace
        variables = (DISCOVERY_RANGE_VARIABLE, DISCOVERY_SERVER_VARIABLE, "RMW_IMPLEMENTATION")
        self._discovery = {name: plan.environment[name] for name in variables
                           if name in plan.environment}
        # Only the learner's signed statuses count (rl_core.security.signed_status): a forged one must not
        # start or stop robots.
        self.status_check = StatusCheck(weights_auth.load_public_key({**os.environ,
                                                                      **plan.environment}))
        robot_cpus = [process.cpus for process in plan.processes
                      if process.name in self.robot_names]
        self.cpu_meter = CpuMeter(robot_cpus[0] if robot_cpus and robot_cpus[0] is not None
                                  else available_cpus())
        self.target = self.settings.min_robots
        self.phase = WAITING
        self.last_decision: Decision | None = None
        self.last_window: Window | None = None
        self._until = 0.0
        self._hold_logged_at = -math.inf
        self._samples: list[StatusSample] = []
        self._window_pids: dict[str, int | None] = {}
        self._window_cpu: CpuReading | None = None
        self._latest: Any = None  # newest rl_interfaces/ReplayStatus
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autoscaler", daemon=True)
        self._node: Any = None
        self._diagnostics: Any = None

    def __enter__(self) -> ElasticRobots:
        # The participant must discover like the deployment (loopback by default).
        os.environ.update(self._discovery)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback_: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=STOP_TIMEOUT_S)

    # ------------------------------------------------------------------------------ the thread

    def _name(self, topic: graph.Topic) -> str:
        """Where the run's ``topic`` is (under its ``namespace:=``)."""
        return graph.in_namespace(self.namespace, topic.name)

    def _run(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray  # noqa: PLC0415

        from rl_bringup.run.ros_session import RosSession  # noqa: PLC0415
        from rl_interfaces.msg import ReplayStatus  # noqa: PLC0415

        try:
            with RosSession("autoscaler", self.domain_id) as session:
                self._node = session.node
                self._node.create_subscription(ReplayStatus, self._name(graph.REPLAY_STATUS),
                                               self._on_status, graph.REPLAY_STATUS.qos.profile())
                self._diagnostics = self._node.create_publisher(
                    DiagnosticArray, self._name(graph.DIAGNOSTICS),
                    graph.DIAGNOSTICS.qos.profile())
                self._log(f"starting with {self.target} robot(s)")
                next_report = 0.0
                while not self._stop.is_set():
                    session.spin_once(0.1)
                    now = time.monotonic()
                    if self._step(now) or now >= next_report:
                        self._publish_diagnostics()
                        next_report = now + graph.DIAGNOSTICS_PERIOD_S
        except Exception:  # noqa: BLE001 - the run goes on with the robots it has; say why scaling stopped
            self._log("stopped by an error; the robots stay as they are:\n"
                      + traceback.format_exc().rstrip())

    def _on_status(self, msg: Any) -> None:
        from rl_core.security.signed_status import status_refusal  # noqa: PLC0415

        refusal = status_refusal(msg, self.status_check)
        if refusal is not None:
            if self.status_check.refused in (1, 10, 100) or self.status_check.refused % 1000 == 0:
                self._log(f"{self.status_check.refused} /replay_status ignored; the last: {refusal}")
            return
        self._latest = msg
        if self.phase == MEASURING:
            self._samples.append(status_sample(msg))

    def _step(self, now: float) -> bool:
        """Advance the phase; ``True`` when a decision was taken."""
        if self.supervisor.stopping:
            return False  # the processes are going away: nothing left to measure
        if self.phase == WAITING:
            status = self._latest
            steady = status is not None and learning_steady(
                status.total_inserted, status.total_sampled, status.learning_starts,
                status.target_updates_per_transition, status.rate_limited)
            if steady and self._robots_ready():
                self._settle(now, self.settings.warmup_s)
        elif self.phase == SETTLING:
            if now >= self._until:
                self._begin_window()
        elif self.phase == MEASURING:
            return self._measure(now)
        elif self.phase == STARTING:
            if self._robots_ready():
                self._settle(now, self.settings.settle_s)
            elif now >= self._until:
                name = self.robot_names[self.target - 1]
                self._apply(self.autoscaler.added_robot_failed(
                    self.target, now, f"{name} published no experience within "
                    f"{self.settings.ready_timeout_s:g} s"), now)
                return True
        elif self.phase == RETIRING:
            if self.supervisor.states()[self.robot_names[self.target]].state == STANDBY:
                self._settle(now, self.settings.settle_s)
        return False

    def _measure(self, now: float) -> bool:
        if self._pids() != self._window_pids:
            self._log("window discarded: a process restarted during it")
            self._settle(now, self.settings.settle_s)
            return False
        samples = self._samples
        if len(samples) < 2 or samples[-1].stamp_s - samples[0].stamp_s < self.settings.window_s:
            return False
        assert self._window_cpu is not None
        idle_cpus, robot_cpus = CpuMeter.between(self._window_cpu, self._cpu_reading())
        try:
            window = window_from_samples(samples, self.target, idle_cpus, robot_cpus)
        except ValueError as error:
            self._log(f"window discarded: {error}")
            self._settle(now, self.settings.settle_s)
            return False
        self.last_window = window
        self._apply(self.autoscaler.decide(window, now), now)
        return True

    # ------------------------------------------------------------------------------ actions

    def _apply(self, decision: Decision, now: float) -> None:
        previous, self.last_decision = self.last_decision, decision
        if decision.action == ADD:
            name = self.robot_names[decision.robots_before]
            self.supervisor.start_standby(name)
            self.phase, self._until = STARTING, now + self.settings.ready_timeout_s
        elif decision.action == RETIRE:
            name = self.robot_names[decision.robots_after]
            self.supervisor.retire(name)
            self.phase = RETIRING
        else:
            name = ""
            self._begin_window(keep_last=True)  # measure on, from the last report
        self.target = decision.robots_after
        repeated = (decision.action == HOLD and previous is not None
                    and previous.action == HOLD and previous.cause == decision.cause)
        if repeated and now - self._hold_logged_at < REPEATED_HOLD_LOG_S:
            return
        if decision.action == HOLD:
            self._hold_logged_at = now
        self._log(decision.describe(name))

    def _settle(self, now: float, seconds: float) -> None:
        self.phase, self._until = SETTLING, now + seconds

    def _begin_window(self, keep_last: bool = False) -> None:
        """Start a window now; ``keep_last``: continue from the previous window's last report."""
        self._samples = self._samples[-1:] if keep_last else []
        self._window_pids = self._pids()
        self._window_cpu = self._cpu_reading()
        self.phase = MEASURING

    # ------------------------------------------------------------------------------ readings

    def _pids(self) -> dict[str, int | None]:
        return {name: state.pid for name, state in self.supervisor.states().items()}

    def _cpu_reading(self) -> CpuReading:
        states = self.supervisor.states()
        return self.cpu_meter.read(states[name].pid for name in self.robot_names[:self.target]
                                   if states[name].pid is not None)

    def _robots_ready(self) -> bool:
        """The wanted robots run and each simulator's ``/experience`` publisher is in the graph."""
        states = self.supervisor.states()
        if any(states[name].state not in (RUNNING, RESTARTING)
               for name in self.robot_names[:self.target]):
            return False
        return self._node.count_publishers(self._name(graph.EXPERIENCE)) >= self.target

    # ------------------------------------------------------------------------------ reporting

    def _log(self, message: str) -> None:
        self.supervisor.log(f"autoscale: {message}")

    def _publish_diagnostics(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue  # noqa

        warning, message, values = self.diagnose()
        status = DiagnosticStatus(level=DiagnosticStatus.WARN if warning else DiagnosticStatus.OK,
                                  name=graph.AUTOSCALER_STATUS, message=message,
                                  hardware_id="rl_bringup",
                                  values=[KeyValue(key=key, value=str(value))
                                          for key, value in values.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._diagnostics.publish(array)

    def diagnose(self) -> tuple[bool, str, dict[str, object]]:
        """``(warning, message, values)`` of the autoscaler's DiagnosticStatus; a warning when
        the last robot added never started working."""
        settings = self.settings
        decision = self.last_decision
        window = self.last_window
        message = (f"{self.target} robot(s) ({settings.min_robots}..{settings.max_robots}), "
                   f"{self.phase}")
        if decision is not None:
            message += f"; last decision: {decision.action} ({decision.reason})"
        values: dict[str, object] = {
            "robots": self.target, "min robots": settings.min_robots,
            "max robots": settings.max_robots, "phase": self.phase,
            "decisions": len(self.autoscaler.decisions),
            "last decision": decision.action if decision is not None else "none",
            "last reason": decision.reason if decision is not None else "",
            "env steps/s by robots": ", ".join(f"{robots}: {rate:.1f}" for robots, rate
                                               in sorted(self.autoscaler.throughput.items())),
        }
        if window is not None:
            values.update({
                "window env steps/s": f"{window.env_steps_per_s:.1f}",
                "window updates per transition": _number(window.updates_per_transition),
                "window acting paused": f"{window.paused_fraction:.2f}",
                "window idle CPUs": f"{window.idle_cpus:.2f}",
                "window CPUs per robot": f"{window.robot_cpus:.2f}",
            })
        return decision is not None and decision.window is None, message, values


def _number(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"
