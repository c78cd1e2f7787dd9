"""What the launch_testing tests of this folder share (one ``test_<mode>_launch.py`` per mode).

Each test starts ``<mode>.launch.py`` from the installed ``share/rl_bringup/launch`` with a tiny
training budget, watches the running graph from an rclpy node of the test process, and lets the
deployment end itself: a required process exits 0 when training is complete and the launch file
shuts the launch down. Then the post-shutdown tests read the exit codes and ``result.json``.

One launch_testing detail shapes :class:`Deployment`: launch_testing fails a run whose launch
service stops before the active tests have returned ("Processes under test stopped before tests
completed"), and the launch file's ``Shutdown`` stops it within milliseconds of that clean exit,
while the test thread is still waking up to see it. So the test description holds the launch's
shutdown (a completion future, :meth:`Deployment.hold_shutdown`) until the test thread has
finished, :data:`HOLD_LIMIT_S` at most; the processes still get their SIGINT at once.

Every test runs on the loopback, in a domain of its own (``conftest.py``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import threading
import time
import unittest
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import launch_testing.actions
import launch_testing.asserts
import rclpy
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription, RegisterEventHandler
from launch.event_handlers import OnProcessExit, OnShutdown
from launch.launch_description_sources import PythonLaunchDescriptionSource
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.qos import qos_profile_sensor_data

from rl_interfaces.msg import ExperienceBatch, PolicyWeights
from rl_nodes import graph

#: Transitions to train for: past the scenario's learning start (500), so the trainer updates
#: and publishes weights, long enough that the probe has matched the simulator's experience
#: publisher before the run ends (at 600, once the faster update of issue 21 had shortened the
#: learning part to about 2 s, a hybrid run once ended before the probe saw any experience), and
#: small enough for CI's 2 cores.
TOTAL_ENV_STEPS = 3000
EVAL_EPISODES = 1
#: Every node in the graph (five torch processes starting at once on 2 cores in decoupled mode).
NODES_TIMEOUT_S = 180.0
#: Experience on /experience once the nodes are up, and the end of training after that.
FLOW_TIMEOUT_S = 120.0
RUN_TIMEOUT_S = 300.0
#: At most this long the launch's shutdown waits for the test thread (see the module docstring).
HOLD_LIMIT_S = 30.0
#: The nodes of robot 0 and the learner, as rl_nodes.graph names them.
EXPECTED_NODES = frozenset({
    graph.node_name(graph.SIMULATOR, graph.robot_namespace(0)),
    graph.node_name(graph.POLICY, graph.robot_namespace(0)),
    graph.node_name(graph.REPLAY_BUFFER),
    graph.node_name(graph.TRAINER),
})


@dataclass
class Deployment:
    """One launch of a mode under test, and what the test description records of it.

    :ivar mode: colocated, decoupled or hybrid.
    :ivar output_dir: the run's ``output_dir`` (a new temporary folder).
    :ivar exits: ``(process name, exit code)`` of every process exit in order, respawns included
        (launch_testing's ``proc_info`` keeps only the last exit of each process).
    :ivar shut_down: set when the launch began to shut down.
    :ivar shutdown_reason: the reason of the first shutdown event.
    :ivar exits_before_shutdown: how many process exits came before the first shutdown event.
    :ivar test_thread: the thread running the active tests (set by their ``setUpClass``).
    """

    mode: str
    output_dir: Path
    exits: list[tuple[str, int]] = field(default_factory=list)
    shut_down: threading.Event = field(default_factory=threading.Event)
    shutdown_reason: str = ""
    exits_before_shutdown: int = 0
    test_thread: threading.Thread | None = None

    def record_exit(self, event: Any, _context: Any) -> None:
        """``OnProcessExit`` handler: remember the exit."""
        self.exits.append((event.process_name, event.returncode))

    def hold_shutdown(self, event: Any, context: Any) -> None:
        """``OnShutdown`` handler: record the first shutdown and keep the launch service running
        until the active tests have returned."""
        if not self.shut_down.is_set():
            self.shutdown_reason = str(event.reason)
            self.exits_before_shutdown = len(self.exits)
            self.shut_down.set()
        context.add_completion_future(context.asyncio_loop.create_task(self._tests_finished()))

    async def _tests_finished(self) -> None:
        deadline = time.monotonic() + HOLD_LIMIT_S
        while time.monotonic() < deadline:
            if self.test_thread is not None and not self.test_thread.is_alive():
                return
            await asyncio.sleep(0.05)


def describe(mode: str) -> tuple[LaunchDescription, dict[str, Any]]:
    """The test description of ``mode``: the installed launch file with the tiny budget, the
    recorders of :class:`Deployment`, and ``ReadyToTest`` once the processes are started.

    :param mode: colocated, decoupled or hybrid (``<mode>.launch.py``).
    :returns: the launch description and the test context (``deployment``).
    """
    deployment = Deployment(
        mode=mode, output_dir=Path(tempfile.mkdtemp(prefix=f"rl_bringup_{mode}_launch_test_")))
    launch_file = Path(get_package_share_directory("rl_bringup")) / "launch" / f"{mode}.launch.py"
    arguments = {"robots": "1", "total_env_steps": str(TOTAL_ENV_STEPS),
                 "eval_episodes": str(EVAL_EPISODES), "output_dir": str(deployment.output_dir)}
    description = LaunchDescription([
        RegisterEventHandler(OnProcessExit(on_exit=deployment.record_exit)),
        RegisterEventHandler(OnShutdown(on_shutdown=deployment.hold_shutdown)),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(str(launch_file)),
                                 launch_arguments=arguments.items()),
        launch_testing.actions.ReadyToTest(),
    ])
    return description, {"deployment": deployment}


class GraphProbe:
    """An rclpy node of the test process, in a context of its own, spun in a background thread:
    it collects the node names the graph shows and what arrives on /experience and
    /policy_weights. Experience is read best-effort, so the probe never holds a publisher back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: set[str] = set()
        self._experience_robots: set[int] = set()
        self._weights_versions: set[int] = set()
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("launch_test_probe", context=self.context)
        self.node.create_subscription(ExperienceBatch, graph.EXPERIENCE.name,
                                      self._on_experience, qos_profile_sensor_data)
        self.node.create_subscription(PolicyWeights, graph.WEIGHTS.name, self._on_weights,
                                      graph.WEIGHTS.qos.profile())
        self.node.create_timer(0.25, self._list_nodes)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="graph_probe", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except ExternalShutdownException:
            pass  # close() shut the context down

    def _list_nodes(self) -> None:
        names = {graph.node_name(name, namespace)
                 for name, namespace in self.node.get_node_names_and_namespaces()}
        with self._lock:
            self._nodes |= names

    def _on_experience(self, message: ExperienceBatch) -> None:
        with self._lock:
            self._experience_robots.add(int(message.robot_id))

    def _on_weights(self, message: PolicyWeights) -> None:
        with self._lock:
            self._weights_versions.add(int(message.version))

    def nodes(self) -> set[str]:
        """Every fully qualified node name seen so far."""
        with self._lock:
            return set(self._nodes)

    def experience_robots(self) -> set[int]:
        """The robots whose experience arrived on /experience."""
        with self._lock:
            return set(self._experience_robots)

    def weights_versions(self) -> set[int]:
        """The versions of the policy weights that arrived."""
        with self._lock:
            return set(self._weights_versions)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
        self._thread.join(timeout=5.0)


def wait_for(condition: Callable[[], bool], timeout_s: float, deployment: Deployment,
             what: str, state: Callable[[], object] = lambda: None) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s``, or at once when the launch
    shuts down first.

    :param what: what it waits for, for the failure message.
    :param state: what the failure message shows of the state at the time.
    :raises AssertionError: naming ``what`` and showing ``state()``.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if deployment.shut_down.is_set():
            raise AssertionError(f"{deployment.mode}: the launch shut down "
                                 f"({deployment.shutdown_reason}) before {what} (state: {state()}); "
                                 f"process exits: {deployment.exits}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{deployment.mode}: no {what} within {timeout_s:.0f} s "
                                 f"(state: {state()})")
        time.sleep(0.1)


class WhileRunning(unittest.TestCase):
    """The deployment at work, in order: its nodes join the graph, experience flows, and the end
    of training ends the launch. Subclassed once per mode."""

    probe: GraphProbe

    @classmethod
    def setUpClass(cls, deployment: Deployment) -> None:
        # Right after the processes are started: the probe matches the publishers as they come up.
        deployment.test_thread = threading.current_thread()
        cls.probe = GraphProbe()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.probe.close()

    def test_1_every_node_joins_the_graph(self, deployment: Deployment) -> None:
        wait_for(lambda: EXPECTED_NODES <= self.probe.nodes(), NODES_TIMEOUT_S, deployment,
                 f"nodes {sorted(EXPECTED_NODES)} in the graph",
                 lambda: f"nodes seen {sorted(self.probe.nodes())}")

    def test_2_experience_flows(self, deployment: Deployment) -> None:
        wait_for(lambda: 0 in self.probe.experience_robots(), FLOW_TIMEOUT_S, deployment,
                 f"experience of robot 0 on {graph.EXPERIENCE.name}",
                 lambda: f"experience seen from robots {sorted(self.probe.experience_robots())}")

    def test_3_the_end_of_training_shuts_the_launch_down(self, deployment: Deployment) -> None:
        self.assertTrue(deployment.shut_down.wait(RUN_TIMEOUT_S),
                        f"{deployment.mode}: training did not end within {RUN_TIMEOUT_S:.0f} s")
        # The launch ended itself: a process exited 0 and that exit started the shutdown.
        first_exits = deployment.exits[:deployment.exits_before_shutdown]
        self.assertTrue(first_exits, f"shut down with no process exit: {deployment.shutdown_reason}")
        self.assertEqual(first_exits[0][1], 0, f"the first exit was not clean: {first_exits}")
        self.assertTrue(self.probe.weights_versions(),
                        f"no policy weights arrived on {graph.WEIGHTS.name}")


class AfterShutdown(unittest.TestCase):
    """After the launch: exit codes, the process layout of the mode, and the run's results.
    Subclassed once per mode, decorated ``@launch_testing.post_shutdown_test()``.

    :cvar PROCESSES: the fewest and the most processes the mode starts for one robot.
    """

    PROCESSES: tuple[int, int] = (1, 1)

    @classmethod
    def tearDownClass(cls, deployment: Deployment) -> None:
        shutil.rmtree(deployment.output_dir, ignore_errors=True)

    def test_every_process_exited_cleanly_and_none_crashed(self, proc_info: Any,
                                                           deployment: Deployment) -> None:
        launch_testing.asserts.assertExitCodes(proc_info)
        # Respawned crashes too: proc_info holds only each process' last exit.
        self.assertEqual([exit_ for exit_ in deployment.exits if exit_[1] != 0], [])

    def test_the_mode_started_its_processes(self, proc_info: Any) -> None:
        fewest, most = self.PROCESSES
        names = proc_info.process_names()
        self.assertTrue(fewest <= len(names) <= most,
                        f"{len(names)} processes, expected {fewest} to {most}: {names}")

    def test_the_run_wrote_its_results(self, deployment: Deployment) -> None:
        result_file = deployment.output_dir / "result.json"
        self.assertTrue(result_file.is_file(), f"no {result_file}")
        result = json.loads(result_file.read_text())
        self.assertGreaterEqual(result["env_steps"], TOTAL_ENV_STEPS)
        # The replay buffer's rate limiter granted the updates the budget pays for, no more and
        # no fewer: one per transition after learning_starts (the bare loop's number).
        self.assertAlmostEqual(result["updates_per_transition"], 1.0, delta=0.02, msg=result)
        self.assertGreaterEqual(result["weights_version"], 1)
        self.assertEqual(len(result["eval_returns"]), EVAL_EPISODES)
