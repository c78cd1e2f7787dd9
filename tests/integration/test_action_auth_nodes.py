"""Only the robot's own policy drives it: over DDS, action batches for the pending step that
carry no MAC, another robot's MAC or a MAC of other actions are refused and counted, and so are
the policy's genuine answers to observations the simulator did not publish (harvested by a peer
and replayed), while the robot keeps stepping with its policy's actions (rl_core.security.action_auth)."""

from __future__ import annotations

import array
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from rl_core.security import action_auth
from rl_core.security.action_auth import ActionKeys
from rl_interfaces.msg import ActionBatch, ExperienceBatch, ObservationBatch
from rl_nodes import graph
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.policy import PolicyNode
from rl_nodes.simulator import SimulatorNode
from tests.integration.in_process import overrides_file, spinning
from tests.processes import REPO, Child, wait_until

pytestmark = pytest.mark.integration
CONFIG = REPO / "config" / "cartpole.yaml"
BIN = Path(sys.executable).parent
#: The run's action key of these tests; robot 0's and robot 1's keys derive from it.
RUN = ActionKeys(bytes(range(50, 82)))
#: What the forger sends: no genuine action is ever exactly this.
FORGED_VALUE = 0.8125


def key_environment(robot_keys: str) -> dict[str, str]:
    """The action key variables of a process holding ``robot_keys`` alone (as rl-bringup gives
    robot 0's processes), none of the suite's run key."""
    return {action_auth.KEY_VARIABLE: "", action_auth.KEY_FILE_VARIABLE: "",
            action_auth.ROBOT_KEYS_VARIABLE: robot_keys}


class Forger:
    """A peer on the domain: hears robot 0's observations and at once answers each pending step
    with forged actions (three kinds in turn), and records the actions the robot took."""

    def __init__(self, probe: Any) -> None:
        self.sent = 0
        self.taken: list[np.ndarray] = []
        self._pub = probe.create_publisher(ActionBatch, "/robot_0/actions",
                                           graph.ACTIONS.qos.profile())
        probe.create_subscription(ObservationBatch, "/robot_0/observations", self._forge,
                                  graph.OBSERVATIONS.qos.profile())
        probe.create_subscription(ExperienceBatch, graph.EXPERIENCE.name,
                                  lambda msg: self.taken.append(np.array(msg.actions)),
                                  graph.EXPERIENCE.qos.profile())

    def _forge(self, observations: ObservationBatch) -> None:
        actions = np.full((observations.num_envs, 1), FORGED_VALUE, dtype=np.float32)
        seen = action_auth.observation_digest(np.array(observations.obs, np.float32).reshape(
            observations.num_envs, *observations.obs_shape))
        kind = self.sent % 3
        if kind == 0:
            mac = b""  # what anyone could send before
        elif kind == 1:  # robot 1 taken over: its own key, robot 0's step and observations
            mac = ActionKeys(robot_keys={0: RUN.key(1)}).mac(0, observations.step, actions, 0,
                                                             seen)
        else:  # robot 0's MAC, of other actions
            mac = RUN.mac(0, observations.step, actions * 0.5, 0, seen)
        msg = ActionBatch(robot_id=0, step=observations.step, num_envs=observations.num_envs,
                          action_shape=[1], policy_version=0)
        msg.actions = array.array("f", actions.reshape(-1))
        msg.mac = array.array("B", mac)
        self._pub.publish(msg)
        self.sent += 1

    def forged_steps_taken(self) -> int:
        return sum(int(np.any(actions == np.float32(FORGED_VALUE))) for actions in self.taken)


@pytest.fixture
def robot_0_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process holds robot 0's action key alone (as rl-bringup gives robot 0's processes)
    and rclpy is initialised with a simulator that takes no random steps."""
    for name, value in key_environment(action_auth.format_robot_keys({0: RUN.key(0)})).items():
        monkeypatch.setenv(name, value)
    overrides = overrides_file(tmp_path, {"simulator": {"random_steps": 0, "num_envs": 2}})
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    try:
        yield
    finally:
        rclpy.try_shutdown()


def run_robot(nodes: list[Any], check: Callable[[SimulatorNode, Any], None],
              peer: Callable[[Any], Any] = Forger) -> None:
    """Spin ``nodes`` (the simulator first) with a ``peer`` (a :class:`Forger`) in a DDS
    participant of its own (a process' own participant is filtered as a duplicate of its
    zero-copy hand-offs), and run ``check`` meanwhile."""
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    forger_node = rclpy.create_node("action_forger", context=context)
    forger = peer(forger_node)
    forger_executor = SingleThreadedExecutor(context=context)
    forger_executor.add_node(forger_node)
    spinner = threading.Thread(target=forger_executor.spin, daemon=True)
    spinner.start()
    helper = rclpy.create_node("action_test")
    try:
        with spinning(nodes, helper):
            done = threading.Event()
            ipc = IntraProcessManager.for_context(helper.context)
            drain = threading.Thread(target=ipc.spin_until, args=(done.is_set, 120.0),
                                     daemon=True)
            drain.start()
            try:
                check(nodes[0], forger)
            finally:
                done.set()
                drain.join(5.0)
    finally:
        forger_executor.shutdown(timeout_sec=1.0)
        spinner.join(5.0)  # a forging callback in flight ends before its publisher is destroyed
        forger_node.destroy_node()
        rclpy.try_shutdown(context=context)


def refused_while_stepping(sim: SimulatorNode, forger: Forger, policy: str) -> None:
    """The forger's batches are refused and counted, none is taken, and the robot steps."""
    assert wait_until(lambda: sim.rejections.get("actions", 0) >= 30, 60.0), (
        f"forged actions were not refused ({sim.rejections}, {forger.sent} sent, "
        f"{forger.forged_steps_taken()} taken): {policy}")
    before = sim.total_env_steps
    assert wait_until(lambda: sim.total_env_steps >= before + 20, 20.0), \
        f"the robot stopped stepping with its policy's actions: {policy}"
    assert forger.forged_steps_taken() == 0, "the robot stepped with forged actions"
    assert len(forger.taken) >= 20 and forger.sent >= 30
    assert sim.rejected_messages >= sim.rejections["actions"]


def test_a_policy_in_another_process_drives_the_robot_and_forgers_are_refused(
        robot_0_key: None) -> None:
    env = {**os.environ,
           **key_environment(action_auth.format_robot_keys({0: RUN.key(0)}))}
    policy = Child([str(BIN / "policy"), "--ros-args", "-r", "__ns:=/robot_0", "--params-file",
                    str(CONFIG)], env=env)
    try:
        sim = SimulatorNode("/robot_0")
        run_robot([sim], lambda sim, forger: refused_while_stepping(sim, forger,
                                                                    policy.output()[-3000:]))
        assert policy.process.poll() is None, policy.output()
    finally:
        policy.stop()


def test_without_any_key_the_policy_of_the_same_process_still_drives_the_robot(
        robot_0_key: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A robot container started without rl-bringup (compose, Kubernetes, by hand): its policy
    and simulator share a key of the process, which no one outside it holds."""
    for name, value in key_environment("").items():
        monkeypatch.setenv(name, value)
    sim, policy = SimulatorNode("/robot_0"), PolicyNode("/robot_0")
    assert not sim.action_check.keys.any_configured
    run_robot([sim, policy], lambda sim, forger: refused_while_stepping(sim, forger, "local"))


# --- a peer harvesting the policy's answers to observations of its own ---------------------------

#: The stamp (seconds) of the harvester's observations, which the policy's answers echo: far from
#: any simulator's clock, so the harvester tells its own batches and their answers apart.
HARVEST_STAMP_S = 7
#: How many steps ahead of the simulator the harvester asks the policy.
LEAD_STEPS = 30


class Harvester:
    """A peer on the domain (the attack of issue 41): sends robot 0's policy observations of its
    own for steps the simulator has not reached, keeps the policy's genuine answers, and replays
    each on ``/robot_0/actions`` the moment the simulator publishes that step, ahead of the
    policy's answer to the real observations."""

    def __init__(self, probe: Any) -> None:
        self.harvested: dict[int, ActionBatch] = {}
        self.replayed: set[int] = set()
        self._asked: set[int] = set()
        self._rng = np.random.default_rng(41)
        self._observations_pub = probe.create_publisher(
            ObservationBatch, "/robot_0/observations", graph.OBSERVATIONS.qos.profile())
        self._actions_pub = probe.create_publisher(ActionBatch, "/robot_0/actions",
                                                   graph.ACTIONS.qos.profile())
        probe.create_subscription(ObservationBatch, "/robot_0/observations",
                                  self._on_observations, graph.OBSERVATIONS.qos.profile())
        probe.create_subscription(ActionBatch, "/robot_0/actions", self._on_actions,
                                  graph.ACTIONS.qos.profile())

    def _on_observations(self, msg: ObservationBatch) -> None:
        if msg.header.stamp.sec == HARVEST_STAMP_S:
            return  # our own
        harvested = self.harvested.get(msg.step)
        if harvested is not None:
            self._actions_pub.publish(harvested)
            self.replayed.add(msg.step)
        future = msg.step + LEAD_STEPS
        if future not in self._asked:
            self._asked.add(future)
            forged = ObservationBatch(robot_id=0, step=future, num_envs=msg.num_envs,
                                      obs_shape=msg.obs_shape, env_ids=msg.env_ids)
            forged.header.stamp.sec = HARVEST_STAMP_S
            forged.obs = array.array("f", self._rng.uniform(-0.05, 0.05, len(msg.obs)))
            self._observations_pub.publish(forged)

    def _on_actions(self, msg: ActionBatch) -> None:
        if msg.header.stamp.sec == HARVEST_STAMP_S:  # the policy's answer to our observations
            self.harvested.setdefault(msg.step, msg)


def taken_actions(sim: SimulatorNode) -> dict[int, np.ndarray]:
    """The actions ``sim`` steps with from now on, by step (recorded as it steps)."""
    taken: dict[int, np.ndarray] = {}
    step = sim.stepper.step

    def recording(lane: Any, actions: np.ndarray, *args: Any) -> Any:
        taken[sim.stepper.batch_step(lane)] = np.array(actions, dtype=np.float32)
        return step(lane, actions, *args)

    sim.stepper.step = recording  # type: ignore[method-assign]
    return taken


def harvested_answers_refused(sim: SimulatorNode, harvester: Harvester, policy: Child) -> None:
    """The replays reach the simulator at its pending step, none is stepped with, each is
    refused and counted, and the robot keeps stepping with its policy's actions."""
    taken = taken_actions(sim)
    refused_before = sim.rejections.get("actions", 0)
    assert wait_until(lambda: len(harvester.replayed) >= 30, 60.0), (
        f"the harvester replayed {len(harvester.replayed)} answers "
        f"({len(harvester.harvested)} harvested): {policy.output()[-3000:]}")
    last_replayed = max(harvester.replayed)
    assert wait_until(lambda: sim.stepper.step_count > last_replayed + 2, 20.0), \
        "the robot stopped stepping with its policy's actions"
    on_harvested = [step for step in sorted(harvester.replayed) if step in taken and np.array_equal(
        taken[step].reshape(-1), np.array(harvester.harvested[step].actions, np.float32))]
    assert not on_harvested, f"steps {on_harvested} ran on harvested actions"
    assert sim.rejections.get("actions", 0) - refused_before >= 30, sim.rejections


def test_answers_harvested_with_a_peers_observations_do_not_drive_the_robot(
        robot_0_key: None) -> None:
    """A policy process and a simulator; a second participant asks the policy about future steps
    and replays its answers. About 6 s (the policy process starting, then 30 replays)."""
    env = {**os.environ,
           **key_environment(action_auth.format_robot_keys({0: RUN.key(0)}))}
    policy = Child([str(BIN / "policy"), "--ros-args", "-r", "__ns:=/robot_0", "--params-file",
                    str(CONFIG)], env=env)
    try:
        sim = SimulatorNode("/robot_0")
        run_robot([sim], lambda sim, harvester: harvested_answers_refused(sim, harvester, policy),
                  Harvester)
        assert policy.process.poll() is None, policy.output()
    finally:
        policy.stop()
