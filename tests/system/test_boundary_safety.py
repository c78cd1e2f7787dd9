"""The robot boundary's safety behaviour in real runs (``rl-bringup launch ... robot_interface:=
ros2_control``), probed from a test node over DDS: the e-stop holds the robot within one control
period in every mode and only a release signed with the run's key lifts it (the probe, a second
participant, also tries a plain ``false`` and a release signed with another key), a simulator
killed while the e-stop is engaged comes back holding, a second publisher's joint states are
refused, a killed policy makes the boundary hold the robot within ``command_timeout`` (and the
respawned policy drives it again), nodes under ``use_sim_time``
follow ``/clock`` and keep reporting when it stops, a respawned sim_robot is driven again, and
the real ``ros2`` command line sees ros2_control's topics.

Each run trains cart-pole across the boundary (sim_robot, lockstep, effort commands on
``/robot_0/effort_controller/commands``) with a budget it never reaches, so it keeps running
while the tests probe it; runs of the same mode and arguments are shared between tests (one at
a time, on a 2-core machine) and stopped by PID (SIGINT, grace period, SIGKILL). Every process
discovers peers on the loopback only, in this pytest run's own ROS_DOMAIN_ID (tests/conftest.py).

Timings are measured in this process: from publishing (the e-stop) or killing (the policy) to
receiving the hold command. They include DDS delivery both ways and this process' scheduling,
so they are upper bounds of what the boundary itself takes.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.subscription import MessageInfo
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String

from rl_core.robot import estop as estop_release
from rl_core.robot.safety import ESTOP as ESTOP_HOLD
from rl_core.robot.safety import TIMEOUT as DEADLINE_HOLD
from rl_core.robot.tasks import CartPoleBalanceTask
from rl_core.security.weights_auth import KEY_FILE_NAME, KEY_FILE_VARIABLE, SigningKey, load_key
from rl_interfaces.msg import EpisodeStatistics, ObservationBatch, ReplayStatus
from rl_nodes import graph
from rl_nodes.estop_listener import raise_priority
from tests.processes import Child
from tests.system.test_ros2_cli import ROS2, ROS2_CLI_DIR, ros2

pytestmark = pytest.mark.system

BIN = Path(sys.executable).parent
RL_BRINGUP = str(BIN / "rl-bringup")

NAMESPACE = graph.robot_namespace(0)
TASK = CartPoleBalanceTask
CONTROLLER = f"{TASK.command_interface}_controller"
COMMANDS = graph.resolve(graph.command_topic(CONTROLLER).name, NAMESPACE)
ESTOP_TOPIC = graph.resolve(graph.ESTOP.name, NAMESPACE)
ESTOP_STATE_TOPIC = graph.resolve(graph.ESTOP_STATE.name, NAMESPACE)
ESTOP_RELEASE_TOPIC = graph.resolve(graph.ESTOP_RELEASE.name, NAMESPACE)
OBSERVATIONS = graph.resolve(graph.OBSERVATIONS.name, NAMESPACE)
JOINT_STATES = graph.resolve(graph.ROBOT_JOINT_STATES.name, NAMESPACE)
SIMULATOR = graph.node_name(graph.SIMULATOR, NAMESPACE)
TRAINER = graph.node_name(graph.TRAINER)
#: The e-stop must hold the robot within one control period (graph.ESTOP).
CONTROL_PERIOD_S = TASK.control_period
#: Set for every run (the parameter's default is 0.5 s), so a killed policy is noticed sooner.
COMMAND_TIMEOUT_S = 0.3
#: Scheduling allowance on top of command_timeout: the boundary checks the deadline on a timer of
#: min(control period, 50 ms) = 20 ms, and the hold then crosses DDS once; more for a machine
#: shared with other work.
DEADLINE_MARGIN_S = 0.1
#: A budget no run reaches: runs keep training until the tests stop them.
RUN_ARGUMENTS = ("robot_interface:=ros2_control", "total_env_steps:=1000000000",
                 f"command_timeout:={COMMAND_TIMEOUT_S}")
START_TIMEOUT_S = 150.0
#: E-stop engagements per mode: the first checks everything, the others add latency samples.
ESTOP_TRIALS = 5
#: How long the robot is watched after forged releases (it must only be held).
FORGED_RELEASE_WINDOW_S = 0.5
#: How long the respawn of a simulator killed while the e-stop was engaged is watched.
RESPAWN_WINDOW_S = 2.0
#: Forged joint states a second publisher sends.
FORGED_STATES = 20
#: The count of joint states from publishers other than the robot (robot_boundary.diagnose).
REJECTED_JOINT_STATES = "joint states from other publishers"
#: How long "nothing arrives" is watched while the e-stop is engaged (first trial; then shorter).
ENGAGED_WINDOW_S = 1.0
SHORT_ENGAGED_WINDOW_S = 0.3
#: How long the probe spins before an engagement. Right after it stood idle (the previous test's
#: ros2 commands), the first hold reached it 6-25 ms after the e-stop (median 15 ms, 17 runs with
#: one busy-loop process beside the run on 2 cores), the later ones mostly 1-8 ms; with 0.5 s of
#: spinning first, the first came 1-5 ms after (7 runs). The figure wanted is the run's, not
#: that of a probe waking up.
SETTLE_S = 0.5
#: The probe stands for the robot's controller, whose threads a robot computer runs ahead of
#: other work (controller_manager asks for a real-time priority): its DDS threads get the
#: e-stop thread's priority (rl_nodes.estop_listener), so that a hold's arrival is timed when
#: it comes, not when a busy machine gets round to the test.
#: base.CLOCK_FROZEN_S: a node under use_sim_time says so once its clock stood still this long.
CLOCK_FROZEN_MESSAGE = "clock has not moved"

#: Figures printed at the end of the module (run with -s to see them).
MEASURED: dict[str, str] = {}


def run_environment() -> dict[str, str]:
    """The environment of every process a test here starts: this pytest run's domain id and
    loopback-only discovery, as the ros_env fixture gives them (tests/conftest.py)."""
    env = dict(os.environ)
    assert env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST", "network-safety rule"
    assert env.get("ROS_DOMAIN_ID", "").isdigit(), "an explicit ROS_DOMAIN_ID is required"
    return env


def is_hold(values: tuple[float, ...]) -> bool:
    """An effort hold (SafetyLayer.hold for the effort interface): every value zero."""
    return bool(values) and all(value == 0.0 for value in values)


def stamp_ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


# ------------------------------------------------------------------------------------ the probe


@contextlib.contextmanager
def threads_started_raised() -> Iterator[None]:
    """Threads started inside run ahead of other work, as the e-stop thread does
    (rl_nodes.estop_listener.raise_priority; Linux: a new thread takes its creator's policy);
    the calling thread gets its own back after."""
    thread = threading.get_native_id()
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    niceness = os.getpriority(os.PRIO_PROCESS, thread)
    raise_priority()
    try:
        yield
    finally:
        os.sched_setscheduler(0, policy, param)
        try:
            os.setpriority(os.PRIO_PROCESS, thread, niceness)
        except OSError:
            pass


@dataclass(frozen=True)
class Command:
    received: float  # time.monotonic() when the probe's callback ran
    values: tuple[float, ...]
    #: How long before ``received`` the sample had reached the probe's DDS reader (its
    #: MessageInfo's received_timestamp): what the probe's own scheduling added.
    queued_s: float = 0.0

    @property
    def delivered(self) -> float:
        """time.monotonic() when the command reached the probe's DDS reader, as it would reach
        a controller's."""
        return self.received - self.queued_s


@dataclass(frozen=True)
class Observation:
    received: float  # time.monotonic()
    stamp_ns: int  # the simulator's clock when it published it
    obs: tuple[float, ...]


@dataclass(frozen=True)
class Status:
    received: float  # time.monotonic()
    name: str
    message: str
    values: dict[str, str]
    stamp_ns: int  # the DiagnosticArray's header stamp (the node's clock)
    clock_ns: int | None  # the newest /clock value this probe had when it arrived


@dataclass
class Probe:
    """A test node in the run's domain, on the robot's command, e-stop, observation,
    /diagnostics and /replay_status topics (and /clock with ``clock``). Callbacks record the
    monotonic time of receipt; the test thread spins the executor while it waits."""

    run: Child
    domain_id: int
    clock: bool = False
    #: The run's directory: its weights.key signs e-stop releases.
    output_dir: Path | None = None
    commands: list[Command] = field(default_factory=list)
    #: (receipt time, engaged, challenge, reason) of each estop/state.
    estop_states: list[tuple[float, bool, str, str]] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    statuses: list[Status] = field(default_factory=list)
    #: (receipt time, total_sampled) of each /replay_status.
    replay_statuses: list[tuple[float, int]] = field(default_factory=list)
    clocks: list[tuple[float, int]] = field(default_factory=list)
    #: When each /clock message was published (its DDS source timestamp, wall ns).
    clock_sources: list[int] = field(default_factory=list)
    #: Armed by :meth:`estop_at_episode_end`: (monotonic time, commands received) at the publish.
    _estop_at_episode_end: bool = False
    episode_estop: tuple[float, int] | None = None

    def __post_init__(self) -> None:
        self.context = rclpy.Context()
        with threads_started_raised():  # DDS's receive threads of the probe
            rclpy.init(args=[], context=self.context, domain_id=self.domain_id)
            self.node = rclpy.create_node("_boundary_safety_probe", context=self.context)
        node, stream = self.node, graph.STREAM.profile()
        node.create_subscription(Float64MultiArray, COMMANDS, self._on_command, stream)
        node.create_subscription(ObservationBatch, OBSERVATIONS, self._on_observation,
                                 graph.OBSERVATIONS.qos.profile())
        node.create_subscription(DiagnosticArray, graph.DIAGNOSTICS.name, self._on_diagnostics,
                                 graph.DIAGNOSTICS.qos.profile())
        node.create_subscription(ReplayStatus, graph.REPLAY_STATUS.name, self._on_replay_status,
                                 graph.REPLAY_STATUS.qos.profile())
        node.create_subscription(EpisodeStatistics, graph.EPISODES.name, self._on_episode,
                                 graph.EPISODES.qos.profile(), raw=True)
        if self.clock:
            node.create_subscription(Clock, graph.CLOCK.name, self._on_clock,
                                     graph.CLOCK.qos.profile())
        # The e-stop as an operator's panel would send it: reliable, volatile, depth 10.
        self.estop_pub = node.create_publisher(Bool, ESTOP_TOPIC, graph.ESTOP.qos.profile())
        node.create_subscription(String, ESTOP_STATE_TOPIC, self._on_estop_state,
                                 graph.ESTOP_STATE.qos.profile())
        self.release_pub = node.create_publisher(String, ESTOP_RELEASE_TOPIC,
                                                 graph.ESTOP_RELEASE.qos.profile())
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(node)

    # --- callbacks

    def _on_command(self, msg: Float64MultiArray, info: MessageInfo) -> None:
        queued_s = max(0.0, 1e-9 * (time.time_ns() - info["received_timestamp"]))
        self.commands.append(Command(time.monotonic(), tuple(msg.data), queued_s))

    def _on_observation(self, msg: ObservationBatch) -> None:
        self.observations.append(Observation(time.monotonic(), stamp_ns(msg.header.stamp),
                                             tuple(msg.obs)))

    def _on_episode(self, _: bytes) -> None:
        if self._estop_at_episode_end:
            self._estop_at_episode_end = False
            self.episode_estop = (time.monotonic(), len(self.commands))
            self.estop_pub.publish(Bool(data=True))

    def _on_estop_state(self, msg: String) -> None:
        self.estop_states.append((time.monotonic(), *estop_release.parse_state(msg.data)))

    def _on_replay_status(self, msg: ReplayStatus) -> None:
        self.replay_statuses.append((time.monotonic(), msg.total_sampled))

    def _on_clock(self, msg: Clock, info: MessageInfo) -> None:
        self.clocks.append((time.monotonic(), stamp_ns(msg.clock)))
        self.clock_sources.append(int(info["source_timestamp"]))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        received = time.monotonic()
        clock_ns = self.clocks[-1][1] if self.clocks else None
        for status in msg.status:
            self.statuses.append(Status(received, status.name, status.message,
                                        {kv.key: kv.value for kv in status.values},
                                        stamp_ns(msg.header.stamp), clock_ns))

    # --- waiting

    def spin_until(self, predicate: Callable[[], object], what: str, timeout_s: float):
        """Spin until ``predicate()`` is truthy and return it; fail after ``timeout_s`` or when
        the run exits, with the run's output."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = predicate()
            if result:
                return result
            assert self.run.process.poll() is None, (
                f"the run exited ({self.run.process.returncode}) while waiting for {what}:\n"
                f"{self.run.output()[-4000:]}")
            if time.monotonic() > deadline:
                # Every line but the trainer's progress (which would fill the tail): what the
                # robots, the sim_robots and the supervisor said.
                lines = [line for line in self.run.lines if "]: steps " not in line]
                pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}\n"
                            + "\n".join(lines)[-6000:])
            self.executor.spin_once(timeout_sec=0.005)

    def spin_for(self, seconds: float) -> None:
        """Spin through a window in which the test watches what (does not) arrive."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=min(0.005, max(end - time.monotonic(), 0.0)))

    def next_command(self, after: int, predicate: Callable[[Command], bool], what: str,
                     timeout_s: float) -> int:
        """The index of the first command from index ``after`` on that satisfies ``predicate``."""
        def found() -> int | None:
            for index in range(after, len(self.commands)):
                if predicate(self.commands[index]):
                    return index + 1  # truthy, also for index 0
            return None

        return self.spin_until(found, what, timeout_s) - 1

    def wait_until_stepping(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Commands that are not holds arrive (the policy acts through the boundary)."""
        start = len(self.commands)
        self.next_command(start, lambda c: not is_hold(c.values), f"commands on {COMMANDS}",
                          timeout_s)
        self.next_command(len(self.commands), lambda c: not is_hold(c.values),
                          f"more commands on {COMMANDS}", timeout_s)

    def wait_until_learning(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """The trainer takes batches (/replay_status: total_sampled > 0): past learning_starts,
        so the gradient steps compete with the robot's loop for the CPU (colocated: for the
        dispatch thread), as in a real run."""
        self.spin_until(lambda: self.replay_statuses and self.replay_statuses[-1][1] > 0,
                        "the trainer to take batches (/replay_status total_sampled > 0)",
                        timeout_s)

    def latest_status(self, name: str, after: float = -1.0,
                      predicate: Callable[[Status], bool] = lambda s: True) -> Status | None:
        for status in reversed(self.statuses):
            if status.received <= after:
                return None
            if status.name == name and predicate(status):
                return status
        return None

    def wait_for_status(self, name: str, what: str, timeout_s: float, after: float = -1.0,
                        predicate: Callable[[Status], bool] = lambda s: True) -> Status:
        return self.spin_until(lambda: self.latest_status(name, after, predicate), what,
                               timeout_s)

    def estop(self, engaged: bool) -> float:
        """Publish the e-stop; the monotonic time just before the publish."""
        self.spin_until(lambda: self.estop_pub.get_subscription_count() > 0,
                        f"the simulator's subscription to {ESTOP_TOPIC}", 30.0)
        sent_at = time.monotonic()
        self.estop_pub.publish(Bool(data=engaged))
        return sent_at

    def engaged_challenge(self, after: float = -1.0) -> str:
        """The challenge of the e-stop's engagement, once the robot reports it engaged."""
        state = self.spin_until(
            lambda: next((s for s in reversed(self.estop_states) if s[0] > after and s[1]), None),
            "estop/state to say engaged", 10.0)
        return state[2]

    def run_key(self) -> SigningKey:
        """The run's private key: the environment's where the test run gives one (rl-bringup
        then signs with it), else the one rl-bringup wrote into the run directory."""
        key = load_key(run_environment())
        if key is None:
            assert self.output_dir is not None
            key = load_key({KEY_FILE_VARIABLE: str(self.output_dir / KEY_FILE_NAME)})
        assert key is not None
        return key

    def release(self, key: SigningKey | None = None, after: float = -1.0) -> float:
        """Release the e-stop as the operator does (signed with the run's key, or ``key``);
        returns the monotonic time of the publish."""
        key = key or self.run_key()
        text = estop_release.release_text(key, NAMESPACE, self.engaged_challenge(after))
        self.spin_until(lambda: self.release_pub.get_subscription_count() > 0,
                        f"the simulator's subscription to {ESTOP_RELEASE_TOPIC}", 30.0)
        self.release_pub.publish(String(data=text))
        return time.monotonic()

    def estop_at_episode_end(self, timeout_s: float) -> tuple[float, int]:
        """Publish the e-stop from the callback of the next /episodes message: it then reaches
        the boundary while that waits for the robot's reset of the next episode (or just
        after). Returns (monotonic time before the publish, commands received by then)."""
        self.spin_until(lambda: self.estop_pub.get_subscription_count() > 0,
                        f"the simulator's subscription to {ESTOP_TOPIC}", 30.0)
        self.episode_estop, self._estop_at_episode_end = None, True
        return self.spin_until(lambda: self.episode_estop, "the end of an episode", timeout_s)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


# ------------------------------------------------------------------------------- the runs


@dataclass
class Deployment:
    """One ``rl-bringup launch`` run and the probe on its graph."""

    key: tuple[str, ...]
    run: Child
    probe: Probe

    def pid_of(self, process_name: str) -> int:
        """The pid of the newest start of ``process_name`` the supervisor reported."""
        pattern = re.compile(rf"started {re.escape(process_name)} \(pid (\d+)\)")
        pids = [int(match.group(1)) for line in self.run.lines
                if (match := pattern.search(line))]
        assert pids, f"no 'started {process_name}' line:\n{self.run.output()[-3000:]}"
        return pids[-1]

    def stop(self) -> None:
        try:
            self.probe.close()
        finally:
            self.run.stop(grace_s=15.0)


class Deployments:
    """Runs shared between the tests of this module, one at a time: asking for another mode or
    other arguments stops the current run first."""

    def __init__(self, output_root: Path) -> None:
        self.env = run_environment()
        self.domain_id = int(self.env["ROS_DOMAIN_ID"])
        self.output_root = output_root
        self.current: Deployment | None = None
        self.started = 0

    def get(self, mode: str, *arguments: str, clock: bool = False) -> Deployment:
        key = (mode, *arguments, f"clock={clock}")
        current = self.current
        if current is not None and current.key == key and current.run.process.poll() is None:
            return current
        self.discard()
        self.started += 1
        output_dir = self.output_root / f"run{self.started}_{mode}"
        run = Child([RL_BRINGUP, "launch", mode, *RUN_ARGUMENTS, *arguments,
                     f"output_dir:={output_dir}", f"domain_id:={self.domain_id}"], env=self.env)
        try:
            probe = Probe(run, self.domain_id, clock=clock, output_dir=output_dir)
        except BaseException:
            run.stop(grace_s=15.0)
            raise
        self.current = Deployment(key, run, probe)
        started_at = time.monotonic()
        probe.wait_until_stepping()
        probe.wait_until_learning()
        MEASURED[f"{' '.join(key)}: start to learning"] = f"{time.monotonic() - started_at:.1f} s"
        return self.current

    def discard(self) -> None:
        """Stop the current run (a test that changed it for good calls this)."""
        if self.current is not None:
            current, self.current = self.current, None
            current.stop()


@pytest.fixture(scope="module")
def deployments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployments]:
    pool = Deployments(tmp_path_factory.mktemp("boundary_safety"))
    try:
        yield pool
    finally:
        pool.discard()
        if MEASURED:
            print("\nboundary safety figures:")
            for name, value in MEASURED.items():
                print(f"  {name}: {value}")


# ------------------------------------------------------------------------------------- ros2 CLI


@pytest.mark.skipif(not ROS2_CLI_DIR.is_dir(),
                    reason=f"{ROS2_CLI_DIR} is absent: no real ros2 command line on this machine "
                           "(scripts/setup.sh installs it from that folder)")
def test_ros2_cli_sees_ros2_control_topics(deployments: Deployments,
                                           tmp_path: Path) -> None:
    assert ROS2.is_file(), f"{ROS2} missing although {ROS2_CLI_DIR} exists: run scripts/setup.sh"
    deployment = deployments.get("colocated")
    env = dict(deployments.env)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join(
        filter(None, [sys.prefix, env.get("AMENT_PREFIX_PATH", "")]))
    env["ROS_LOG_DIR"] = str(tmp_path / "ros_log")

    expected = [f"{JOINT_STATES} [{graph.ROBOT_JOINT_STATES.type}]",
                f"{COMMANDS} [{graph.command_topic(CONTROLLER).type}]"]

    def listed() -> str | None:
        code, output = ros2(env, "topic", "list", "-t", "--no-daemon", "--spin-time", "3")
        return output if code == 0 and all(line in output.splitlines() for line in expected) \
            else None

    probe = deployment.probe
    topics = probe.spin_until(listed, "ros2 topic list -t to show the robot's topics", 60.0)
    assert all(line in topics.splitlines() for line in expected), topics

    def echoed() -> str | None:
        # With the type given, echo does not depend on having discovered the publisher yet.
        code, output = ros2(env, "topic", "echo", "--once", "--no-daemon", "--timeout", "20",
                            JOINT_STATES, graph.ROBOT_JOINT_STATES.type, timeout_s=40.0)
        return output if code == 0 and "name:" in output else None

    message = probe.spin_until(echoed, f"ros2 topic echo --once {JOINT_STATES}", 90.0)
    for joint in TASK.joint_names:
        assert joint in message, message


# --------------------------------------------------------------------------------------- e-stop


def engage_and_release(probe: Probe, window_s: float, check_diagnostics: bool,
                       at_episode_end: bool = False) -> float:
    """One e-stop engagement and release; returns the seconds from publishing ``true`` to
    receiving the hold command. ``at_episode_end``: engage it as an episode ends."""
    # Publish right after a fresh command (an episode's last one is too): the boundary then
    # sends no hold of its own (deadline or acting pause) for command_timeout, so the first hold
    # that comes is the e-stop's.
    probe.spin_for(SETTLE_S)
    if at_episode_end:
        sent_at, mark = probe.estop_at_episode_end(30.0)
    else:
        probe.next_command(len(probe.commands), lambda c: not is_hold(c.values),
                           "a command before the e-stop", 30.0)
        mark = len(probe.commands)
        sent_at = probe.estop(True)
    index = probe.next_command(mark, lambda c: is_hold(c.values), "the e-stop's hold command",
                               5.0)
    hold = probe.commands[index]
    latency = hold.delivered - sent_at
    # Engaged: watch that nothing but holds is commanded and no observation is published. An
    # observation stamped after the hold was received was published while engaged.
    hold_wall_ns = time.time_ns() - int((time.monotonic() - hold.received) * 1e9)
    if check_diagnostics:
        reported = probe.wait_for_status(
            SIMULATOR, "/diagnostics of the simulator to report the e-stop", 5.0,
            after=hold.received, predicate=lambda s: s.values.get("e-stop") == "True")
        assert "e-stop" in reported.message, reported
        assert int(reported.values[graph.SAFETY_KEY_PREFIX + ESTOP_HOLD]) >= 1, reported.values
    probe.spin_for(max(0.0, hold.received + window_s - time.monotonic()))
    engaged = probe.commands[index + 1:]
    assert all(is_hold(c.values) for c in engaged), (
        f"commands other than holds while the e-stop is engaged: {[c.values for c in engaged]}")
    published = [o for o in probe.observations if o.received > sent_at
                 and o.stamp_ns > hold_wall_ns]
    assert not published, (
        f"{len(published)} observation(s) published while the e-stop was engaged (acting must "
        "pause): " + "; ".join(f"{(o.stamp_ns - hold_wall_ns) * 1e-6:.1f} ms after the hold, "
                               f"obs {[round(v, 3) for v in o.obs]}" for o in published))

    if check_diagnostics:
        # A second participant tries to release: a plain false, and a release signed with a key
        # that is not the run's. Neither lifts the e-stop.
        probe.estop(False)
        probe.release(SigningKey(os.urandom(32)), after=sent_at)
        probe.spin_for(FORGED_RELEASE_WINDOW_S)
        forged = probe.commands[index + 1:]
        assert all(is_hold(c.values) for c in forged), (
            f"a forged release moved the robot: {[c.values for c in forged if not is_hold(c.values)]}")
        assert probe.estop_states[-1][1], "a forged release was taken"
    released_at = probe.release(after=sent_at)
    resumed = probe.next_command(len(probe.commands), lambda c: not is_hold(c.values),
                                 "commands after the e-stop's release", 30.0)
    assert probe.commands[resumed].received > released_at
    probe.spin_until(lambda: probe.observations and probe.observations[-1].received > released_at,
                     "observations after the e-stop's release", 10.0)
    if check_diagnostics:
        probe.wait_for_status(SIMULATOR, "/diagnostics of the simulator to report the release",
                              5.0, after=released_at,
                              predicate=lambda s: s.values.get("e-stop") == "False")
    return latency


#: One rerun: in a whole-suite run in two lanes (2026-12-07) one of 15 engagements took 78 ms
#: (decoupled: 6.9, 5.8, 13.5, 78.2, 0.7 ms), the others at most 13.5 ms; a hold that is late
#: every time still fails.
@pytest.mark.flaky(reruns=1, reruns_delay=2)
@pytest.mark.parametrize("mode", ["colocated", "hybrid", "decoupled"])
def test_estop_holds_the_robot_within_one_control_period(deployments: Deployments,
                                                         mode: str) -> None:
    probe = deployments.get(mode).probe
    try:
        latencies = [engage_and_release(probe, ENGAGED_WINDOW_S if trial == 0 else
                                        SHORT_ENGAGED_WINDOW_S, check_diagnostics=trial == 0)
                     for trial in range(ESTOP_TRIALS)]
    finally:
        if probe.context.ok() and probe.estop_states and probe.estop_states[-1][1]:
            probe.release()  # leave the shared run stepping
    figures = ", ".join(f"{1e3 * latency:.1f}" for latency in latencies)
    MEASURED[f"e-stop to hold, {mode}"] = (f"{figures} ms (median "
                                           f"{1e3 * statistics.median(latencies):.1f} ms)")
    assert max(latencies) <= CONTROL_PERIOD_S, (
        f"{mode}: the hold came {figures} ms after the e-stop; it must come within one control "
        f"period ({1e3 * CONTROL_PERIOD_S:.0f} ms)")


def test_estop_as_an_episode_ends_keeps_acting_paused(deployments: Deployments) -> None:
    """Engaged while the boundary waits for the robot's reset service (the e-stop is published
    the moment /episodes reports the end of an episode), the e-stop still holds the robot and
    pauses acting: no observation of the new episode goes out until it is released."""
    probe = deployments.get("decoupled").probe
    try:
        latencies = [engage_and_release(probe, SHORT_ENGAGED_WINDOW_S, check_diagnostics=False,
                                        at_episode_end=True)
                     for _ in range(ESTOP_TRIALS)]
    finally:
        if probe.context.ok() and probe.estop_states and probe.estop_states[-1][1]:
            probe.release()
    MEASURED["e-stop to hold as an episode ends, decoupled"] = ", ".join(
        f"{1e3 * latency:.1f}" for latency in latencies) + " ms"


def test_a_simulator_killed_while_engaged_holds_after_its_respawn_until_a_signed_release(
        deployments: Deployments) -> None:
    """The e-stop latches in the run directory: SIGKILL of the simulator while it is engaged
    (an OOM kill, a crash), and the respawned simulator holds the robot and publishes no
    observation until the operator's signed release; a forged one is refused. About 15 s."""
    deployment = deployments.get("decoupled")
    probe = deployment.probe
    probe.next_command(len(probe.commands), lambda c: not is_hold(c.values),
                       "a command before the e-stop", 30.0)
    sent_at = probe.estop(True)
    probe.next_command(len(probe.commands), lambda c: is_hold(c.values), "the e-stop's hold", 5.0)
    probe.engaged_challenge(after=sent_at)
    pid = deployment.pid_of("simulator_robot_0")
    os.kill(pid, signal.SIGKILL)  # a process this test's run started, by its PID
    killed_at, killed_wall_ns = time.monotonic(), time.time_ns()
    respawned = re.compile(r"started simulator_robot_0 \(pid (\d+)\)")
    probe.spin_until(lambda: any((m := respawned.search(line)) and int(m.group(1)) != pid
                                 for line in deployment.run.lines),
                     "the supervisor to respawn simulator_robot_0", 60.0)
    state = probe.spin_until(
        lambda: next((s for s in reversed(probe.estop_states) if s[0] > killed_at), None),
        "the respawned simulator's estop/state", 60.0)
    assert state[1] and state[3] == estop_release.BY_OPERATOR, state
    mark = len(probe.commands)
    probe.estop(False)  # a second participant's release attempts
    probe.release(SigningKey(os.urandom(32)), after=killed_at)
    probe.spin_for(RESPAWN_WINDOW_S)
    after_respawn = probe.commands[mark:]
    assert all(is_hold(c.values) for c in after_respawn), (
        f"the respawned simulator moved the robot while engaged: {after_respawn}")
    # By when it was published: one the killed simulator sent before the e-stop may arrive
    # after the kill on a busy machine (a whole-suite run, 2026-12-07: stamped 5 ms before the
    # e-stop engaged).
    assert not [o for o in probe.observations if o.stamp_ns > killed_wall_ns], \
        "the respawned simulator observed (acted) while the e-stop was engaged"
    released_at = probe.release(after=killed_at)
    probe.next_command(len(probe.commands), lambda c: not is_hold(c.values),
                       "commands after the signed release", 60.0)
    MEASURED["simulator killed while engaged: release to commands"] = (
        f"{time.monotonic() - released_at:.1f} s")


def test_joint_states_from_a_second_publisher_are_refused(deployments: Deployments) -> None:
    """A second participant publishes forged joint states (a position past the limits, a
    future stamp): the boundary keeps to sim_robot's and counts the rest. About 5 s."""
    deployment = deployments.get("decoupled")
    probe = deployment.probe
    forger = probe.node.create_publisher(JointState, JOINT_STATES, graph.STREAM.profile())
    probe.spin_until(lambda: forger.get_subscription_count() > 0,
                     "the simulator's subscription to the forged joint_states", 30.0)
    mark, forged_at = len(probe.commands), time.monotonic()
    for _ in range(FORGED_STATES):
        msg = JointState(name=list(TASK.joint_names), position=[14.0, 0.0], velocity=[0.0, 0.0])
        msg.header.stamp.sec = 2**31 - 1  # from the far future
        forger.publish(msg)
        probe.spin_for(0.01)
    rejected = probe.wait_for_status(
        SIMULATOR, "the forged joint states counted on /diagnostics", 10.0, after=forged_at,
        predicate=lambda s: int(s.values.get(REJECTED_JOINT_STATES, "0")) > 0)
    assert int(rejected.values[REJECTED_JOINT_STATES]) >= 1, rejected.values
    probe.next_command(mark, lambda c: not is_hold(c.values),
                       "commands going on from sim_robot's states", 10.0)
    assert not [o for o in probe.observations if o.received > forged_at
                and abs(o.obs[0]) > 10.0], "a forged state reached an observation"
    probe.node.destroy_publisher(forger)


# ------------------------------------------------------------------------- a killed policy


#: One rerun: in a whole-suite run in two lanes (2026-12-07, stop 57) the hold once came 33 ms
#: after the last command, before the deadline (a hold, so safe, but not the deadline's); the
#: cause is not found. A hold that is early or late every time still fails.
@pytest.mark.flaky(reruns=1, reruns_delay=2)
def test_a_killed_policy_makes_the_boundary_hold_within_the_command_timeout(
        deployments: Deployments) -> None:
    deployment = deployments.get("decoupled")
    probe, run = deployment.probe, deployment.run
    deadline_key = graph.SAFETY_KEY_PREFIX + DEADLINE_HOLD
    before = probe.wait_for_status(SIMULATOR, "the simulator's /diagnostics", 10.0,
                                   predicate=lambda s: deadline_key in s.values)
    pid = deployment.pid_of("policy_robot_0")
    assert "policy" in " ".join(psutil.Process(pid).cmdline())

    probe.next_command(len(probe.commands), lambda c: not is_hold(c.values),
                       "a command before the kill", 30.0)
    mark = len(probe.commands)
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)  # a process this test's run started, by its PID
    index = probe.next_command(mark, lambda c: is_hold(c.values),
                               "a hold command after the policy was killed",
                               COMMAND_TIMEOUT_S + 5.0)
    hold = probe.commands[index]
    # Timed where the commands reached the probe's DDS reader (as a controller's would): the
    # probe's callbacks share this pytest process with everything else the suite has built up,
    # and a pause there (a garbage collection late in a long suite) is not the boundary's.
    last_active = max((c.delivered for c in probe.commands[:index] if not is_hold(c.values)))
    after_last = hold.delivered - last_active
    after_kill = hold.delivered - killed_at
    MEASURED["policy killed: last command to hold"] = f"{1e3 * after_last:.0f} ms"
    MEASURED["policy killed: kill to hold"] = f"{1e3 * after_kill:.0f} ms"
    MEASURED["policy killed: the probe's own delay"] = f"{1e3 * hold.queued_s:.0f} ms"
    limit = COMMAND_TIMEOUT_S + DEADLINE_MARGIN_S
    assert after_last <= limit and after_kill <= limit, (
        f"the hold came {after_last:.3f} s after the last command ({after_kill:.3f} s after the "
        f"kill); command_timeout is {COMMAND_TIMEOUT_S} s (+{DEADLINE_MARGIN_S} s margin)")
    # The deadline runs from the observation that followed the last command (lockstep: each
    # command brings a state): a hold much earlier than command_timeout is not the deadline's.
    assert after_last >= COMMAND_TIMEOUT_S - 0.05, f"a hold only {after_last:.3f} s after a command"

    counted = probe.wait_for_status(
        SIMULATOR, f"'{deadline_key}' to go up on /diagnostics", 5.0, after=hold.received,
        predicate=lambda s: int(s.values.get(deadline_key, "0"))
        > int(before.values[deadline_key]))
    assert "e-stop" not in counted.message

    respawned = re.compile(r"started policy_robot_0 \(pid (\d+)\)")
    probe.spin_until(lambda: any((m := respawned.search(line)) and int(m.group(1)) != pid
                                 for line in run.lines),
                     "the supervisor to respawn policy_robot_0", 60.0)
    resumed = probe.next_command(index, lambda c: not is_hold(c.values),
                                 "commands from the respawned policy", 120.0)
    assert all(is_hold(c.values) for c in probe.commands[index:resumed])
    MEASURED["policy killed: kill to commands again"] = (
        f"{probe.commands[resumed].received - killed_at:.1f} s")


# ------------------------------------------------------------------------------- simulated time


SIM_TIME_RUN = ("colocated", "use_sim_time:=true")
SIM_ROBOT_PROCESS = "sim_robot_robot_0"


def test_nodes_follow_clock_and_keep_reporting_when_it_stops(deployments: Deployments) -> None:
    deployment = deployments.get(*SIM_TIME_RUN, clock=True)
    check_stamps_follow_clock(deployment.probe)
    check_reports_go_on_without_clock(deployment)


def test_a_respawned_sim_robot_is_driven_again(deployments: Deployments) -> None:
    """A second publisher on joint_states (the probe's, silent) when the sim_robot is killed:
    the respawned sim_robot's states are refused while both are there (which is the robot
    cannot be told; before issue 41's last round the first state heard was pinned, whoever
    sent it), the robot only held; once the second publisher leaves, the respawned sim_robot
    (its clock and joint_states stamps begin at 0 again) is pinned and the boundary drives it:
    commands resume. About 25 s beyond the shared run."""
    deployment = deployments.get(*SIM_TIME_RUN, clock=True)
    probe, run = deployment.probe, deployment.run
    try:
        other = probe.node.create_publisher(JointState, JOINT_STATES, graph.STREAM.profile())
        starts, before = starts_of(run, SIM_ROBOT_PROCESS), len(run.lines)
        os.kill(deployment.pid_of(SIM_ROBOT_PROCESS), signal.SIGKILL)  # this run's, by PID
        probe.spin_until(lambda: starts_of(run, SIM_ROBOT_PROCESS) > starts,
                         f"the supervisor to respawn {SIM_ROBOT_PROCESS}", 30.0)
        # A ready line after the kill (the previous test stops a start before it gets there,
        # so counting them against the starts would be off by one).
        ready = f"[{SIM_ROBOT_PROCESS}]"
        probe.spin_until(lambda: any(line.startswith(ready) and line.endswith(": ready")
                                     for line in run.lines[before:]),
                         f"the respawned {SIM_ROBOT_PROCESS} to be ready", 60.0)
        refused = re.compile(r"rejected joint states .*publishers on joint_states and none "
                             r"pinned")
        seen = len(run.lines)
        probe.spin_until(lambda: any(refused.search(line) for line in run.lines[seen:]),
                         "the respawned sim_robot's states refused while two publish", 30.0)
        mark = len(probe.commands)
        probe.spin_for(2.0)
        assert all(is_hold(c.values) for c in probe.commands[mark:]), \
            "a command moved the robot while two publishers were on joint_states"
        probe.node.destroy_publisher(other)
        left_at = time.monotonic()
        mark = len(probe.commands)
        deadline = time.monotonic() + 30.0
        while (not any(not is_hold(c.values) for c in probe.commands[mark:])
               and time.monotonic() < deadline):
            assert run.process.poll() is None, run.output()[-3000:]
            probe.executor.spin_once(timeout_sec=0.005)
        simulator = probe.latest_status(SIMULATOR, left_at)
        assert any(not is_hold(c.values) for c in probe.commands[mark:]), (
            f"no command reached the respawned sim_robot within 30 s of the second publisher "
            f"leaving; the simulator says: {simulator.message if simulator else 'nothing'} "
            f"(phase {simulator.values.get('phase') if simulator else '?'})")
    finally:
        deployments.discard()  # its robot was restarted: a run not to share further


def starts_of(run: Child, process_name: str) -> int:
    return sum(f"started {process_name} (pid" in line for line in run.lines)


#: How far, in wall seconds, a node's diagnostics stamp may lag or lead the /clock the probe had
#: when the message arrived. Simulated time runs at the step rate (sim_robot in lockstep advances
#: one control period per command), so a bound in simulated seconds would be a bound on a busy
#: machine's latency: a CI run on 2 cores saw the trainer's stamp 1.16 s of simulated time (58
#: steps) behind, where runs here see 0 to 3 steps.
CLOCK_WINDOW_S = 1.0


def check_stamps_follow_clock(probe: Probe) -> None:
    """/diagnostics stamps of the trainer and the simulator are simulated time (from 0, far from
    wall time): a value /clock took within ``CLOCK_WINDOW_S`` wall seconds of their arrival."""
    probe.spin_until(lambda: probe.clocks, "/clock", 30.0)
    wall_ns = time.time_ns()
    since = time.monotonic()
    for name in (TRAINER, SIMULATOR):
        status = probe.wait_for_status(
            name, f"/diagnostics of {name} stamped with a moving clock", 10.0, after=since,
            predicate=lambda s: s.clock_ns is not None and s.stamp_ns > 0)
        assert status.stamp_ns < wall_ns // 2, f"{name} stamps wall time: {status.stamp_ns}"
        window_end = status.received + CLOCK_WINDOW_S
        probe.spin_until(lambda end=window_end: probe.clocks[-1][0] > end,
                         f"/clock {CLOCK_WINDOW_S:g} s after {name}'s diagnostics", 30.0)
        window = [value for received, value in probe.clocks
                  if abs(received - status.received) <= CLOCK_WINDOW_S]
        assert window, f"no /clock within {CLOCK_WINDOW_S:g} s of {name}'s diagnostics"
        offset_s = (status.stamp_ns - status.clock_ns) * 1e-9
        MEASURED[f"use_sim_time: {name} diagnostics stamp - newest /clock"] = f"{offset_s:+.3f} s"
        assert min(window) <= status.stamp_ns <= max(window), (
            f"{name}'s diagnostics stamp {status.stamp_ns} ns is not a /clock value of the "
            f"{CLOCK_WINDOW_S:g} s around its arrival ({min(window)} to {max(window)} ns; the "
            f"newest /clock then was {status.clock_ns} ns)")


def check_reports_go_on_without_clock(deployment: Deployment) -> None:
    """Kill sim_robot (the only /clock publisher) by PID: /replay_status and /diagnostics go on
    on wall time, and the nodes say that the clock has not moved.

    The supervisor respawns sim_robot after 2 s, and a node reports the frozen clock 2 to 3 s
    after its diagnostics timer last saw it move, so the respawn's /clock could come first. The
    new process is therefore stopped (SIGSTOP, by the pid the supervisor prints) as soon as it
    starts, before it publishes anything, and continued (SIGCONT) once the checks are done.
    """
    probe, run = deployment.probe, deployment.run
    pid = deployment.pid_of(SIM_ROBOT_PROCESS)
    assert "sim_robot" in " ".join(psutil.Process(pid).cmdline())
    os.kill(pid, signal.SIGKILL)  # a process this test's run started, by its PID
    killed_at, killed_wall_ns = time.monotonic(), time.time_ns()
    held: list[int] = []
    respawned = re.compile(rf"started {SIM_ROBOT_PROCESS} \(pid (\d+)\)")
    watched = (TRAINER, SIMULATOR, graph.node_name(graph.REPLAY_BUFFER))

    def hold_the_respawn() -> None:
        for line in run.lines if not held else ():
            match = respawned.search(line)
            if match and int(match.group(1)) != pid:
                os.kill(int(match.group(1)), signal.SIGSTOP)
                held.append(int(match.group(1)))

    def frozen_report(name: str) -> Status | None:
        return probe.latest_status(name, killed_at, lambda s: CLOCK_FROZEN_MESSAGE in s.message)

    try:
        # Watch until both nodes report it, or for 8 s (the report is due within about 4 s).
        end = time.monotonic() + 8.0
        while time.monotonic() < end and not all(frozen_report(n) for n in (TRAINER, SIMULATOR)):
            hold_the_respawn()
            assert run.process.poll() is None, run.output()[-3000:]
            probe.executor.spin_once(timeout_sec=0.005)
        hold_the_respawn()
        window = (killed_at + 0.5, time.monotonic())
        seconds = window[1] - window[0]
        # Judged by when each message was published: one sent just before the kill may be
        # taken from the probe's queue well after it (a loaded machine did, 0.2 s late).
        clocks = [ns for ns in probe.clock_sources if ns > killed_wall_ns]
        statuses = [t for t, _ in probe.replay_statuses if window[0] < t <= window[1]]
        diagnostics = {name: [s for s in probe.statuses
                              if s.name == name and window[0] < s.received <= window[1]]
                       for name in watched}
        MEASURED["clock stopped: watched"] = f"{seconds:.1f} s"
        MEASURED["clock stopped: /replay_status received"] = str(len(statuses))
        MEASURED["clock stopped: /diagnostics received"] = ", ".join(
            f"{name} {len(found)}" for name, found in diagnostics.items())
        reports = {name: frozen_report(name) for name in (TRAINER, SIMULATOR)}
        MEASURED["clock stopped: kill to 'clock has not moved'"] = ", ".join(
            f"{name} {report.received - killed_at:.1f} s" if report else f"{name} never"
            for name, report in reports.items())
        assert held, f"sim_robot was not respawned within {seconds:.0f} s:\n{run.output()[-3000:]}"
        assert not clocks, f"/clock went on after sim_robot was killed ({len(clocks)} published after it)"
        assert len(statuses) >= 2, (
            f"/replay_status stopped with /clock: {len(statuses)} in {seconds:.1f} s of wall "
            "time (its timer must run on a steady clock)")
        for name, found in diagnostics.items():
            assert len(found) >= 2, (f"/diagnostics of {name} stopped with /clock: {len(found)} "
                                     f"in {seconds:.1f} s (its timer must run on a steady clock)")
        for name, report in reports.items():
            assert report is not None, (f"{name} did not report '{CLOCK_FROZEN_MESSAGE}': "
                                        f"{[s.message for s in diagnostics[name]]}")
    finally:
        for stopped in held:  # the next test drives the respawned robot
            if psutil.pid_exists(stopped):
                os.kill(stopped, signal.SIGCONT)
