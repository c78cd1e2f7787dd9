"""The real ``ros2`` command line against real deployments: ``ros2 launch`` of the installed
launch files, then ``ros2 node|topic|param|service`` on the running graph, and SIGINT shutdown.

``ros2 launch`` follows the caller the ROS way (issue 20): with no ``ROS_DOMAIN_ID`` a launch and a
plain ``ros2 topic list`` in another shell meet on ROS's default domain 0, the caller's
``RMW_IMPLEMENTATION`` is never set, and ``namespace:=`` puts two deployments on one domain without
touching each other. Domain 0 is every unconfigured shell's, so the test that leaves
``ROS_DOMAIN_ID`` (and the discovery range) unset runs inside a private network namespace of its
own (tests/system/netns.py: no route out, removed afterwards).

The ``launch`` / ``launch_ros`` / ``ros2cli`` wheels come from ``../shared/ros2-cli`` (developer and
CI machines), which ``scripts/setup.sh`` installs into the venv together with a colcon build of
``composition_interfaces``; the launch files are found through ``AMENT_PREFIX_PATH`` in the venv
prefix, where setup's colcon build installed ``share/rl_bringup``. Without that folder (a user's
machine without ROS) the tests skip with the reason.

Every ``ros2`` command runs with ``--no-daemon`` where it has the option (no daemon outlives the
test), in the test run's own ``ROS_DOMAIN_ID`` and on the loopback (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

from rl_nodes import graph
from tests.processes import REPO, Child
from tests.system.netns import NamespaceUnavailable, Network, bridged_hosts, check_rights

T = TypeVar("T")
#: The per-robot policy's request/response service: /robot_0/policy/get_action.
GET_ACTION_SERVICE = graph.service_name(graph.GET_ACTION, graph.robot_namespace(0))
ROS2_CLI_DIR = Path(os.environ.get("ROS2_CLI_DIR", REPO.parent / "shared" / "ros2-cli"))
ROS2 = Path(sys.executable).parent / "ros2"
#: Deployments that keep running until stopped, capped so the machine stays usable.
ENDLESS = ("total_env_steps:=1000000000", "max_rate_hz:=100")
START_TIMEOUT_S = 150.0
SPIN = ("--no-daemon", "--spin-time", "3")

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not ROS2_CLI_DIR.is_dir(),
                       reason=f"{ROS2_CLI_DIR} is absent: no real ros2 launch / ros2 command line "
                              f"on this machine (scripts/setup.sh installs them from that folder)"),
]


@pytest.fixture(scope="module")
def ros2_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Environment of the ``ros2`` commands: the run's domain and discovery range (conftest),
    the venv as ament prefix, logs in a temporary folder; the daemon stopped at the end."""
    assert ROS2.is_file(), f"{ROS2} missing although {ROS2_CLI_DIR} exists: run scripts/setup.sh"
    env = dict(os.environ)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join(
        filter(None, [sys.prefix, env.get("AMENT_PREFIX_PATH", "")]))
    env["ROS_LOG_DIR"] = str(tmp_path_factory.mktemp("ros_log"))
    yield env
    ros2(env, "daemon", "stop", timeout_s=30.0)  # in case a command started one after all


def ros2(env: dict[str, str], *arguments: str, timeout_s: float = 60.0) -> tuple[int | None, str]:
    """Run ``ros2 ARGUMENTS`` to its end: ``(exit code or None on timeout, output)``."""
    command = Child([str(ROS2), *arguments], env=env)
    try:
        code = command.wait(timeout_s)
    finally:
        command.stop(grace_s=5.0)
    return code, command.output()


# What a daemonless command prints when its --spin-time ended before discovery showed the node
# it was asked about; it then did nothing, so it is asked again.
NOT_DISCOVERED = ("Node not found", "Unable to find container node")


def on_node(env: dict[str, str], *arguments: str) -> tuple[int | None, str]:
    """``ros2 ARGUMENTS --no-daemon --spin-time 3`` about a node the graph has already shown,
    asked again while the command's own discovery has not found it (seen on a busy 2-core CI
    machine: ``ros2 param get /trainer`` said "Node not found" right after ``/trainer`` was
    listed)."""
    verb, command, *rest = arguments
    for _ in range(5):
        code, output = ros2(env, verb, command, *SPIN, *rest)
        if not any(reason in output for reason in NOT_DISCOVERED):
            return code, output
        time.sleep(1.0)
    return code, output


def at_once(*calls: Callable[[], T]) -> list[T]:
    """Run independent ``ros2`` commands side by side and return their results in order: each
    spends most of its 4-5 s waiting (start-up, ``--spin-time``), so a round of them costs about
    one command's time."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def launch(env: dict[str, str], file_name: str, *arguments: str) -> Child:
    """``ros2 launch rl_bringup FILE ARGUMENTS`` in a session of its own."""
    return Child([str(ROS2), "launch", "rl_bringup", file_name, *arguments], env=env)


def poll(check, timeout_s: float, launched: Child | None = None, what: str = ""):
    """Call ``check()`` until it returns something truthy; fail after ``timeout_s`` or when the
    launch exits, with the launch output."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        if launched is not None and launched.process.poll() is not None:
            pytest.fail(f"the launch exited ({launched.process.returncode}) while waiting for "
                        f"{what}:\n{launched.output()[-4000:]}")
        time.sleep(1.0)
    output = launched.output()[-4000:] if launched is not None else ""
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}\n{output}")


def nodes_listed(env: dict[str, str]) -> set[str]:
    code, output = ros2(env, "node", "list", *SPIN)
    return set(output.split()) if code == 0 else set()


def echoed(env: dict[str, str], topic: str, *options: str) -> str | None:
    """The first message on ``topic`` as ``ros2 topic echo --once`` prints it (None: none came)."""
    code, output = ros2(env, "topic", "echo", "--once", "--no-daemon", "--timeout", "20",
                        *options, topic, timeout_s=40.0)
    return output if code == 0 and output.strip() else None


def weights_version(env: dict[str, str]) -> int:
    """The version of the latched /policy_weights (0 when none arrived)."""
    output = echoed(env, graph.WEIGHTS.name, "--field", "version")
    match = re.search(r"^(\d+)$", output or "", flags=re.M)
    return int(match.group(1)) if match else 0


def wait_until_experience_and_weights_flow(env: dict[str, str], launched: Child,
                                           robots: int) -> None:
    """Every robot's experience reaches /experience and the trainer publishes updated weights
    (watched side by side)."""
    # --filter sees what --field selected.
    at_once(*(partial(poll, partial(echoed, env, graph.EXPERIENCE.name, "--field", "robot_id",
                                    "--filter", f"m == {robot}"),
                      START_TIMEOUT_S, launched, f"experience of robot {robot}")
              for robot in range(robots)),
            partial(poll, lambda: weights_version(env) >= 2, START_TIMEOUT_S, launched,
                    "weights version 2"))


def descendants(process: Child) -> list[psutil.Process]:
    try:
        return psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def interrupt_and_check_nothing_is_left(launched: Child) -> None:
    """SIGINT to ``ros2 launch`` alone (its nodes get it from launch), then every process it
    started must be gone."""
    started = descendants(launched)
    assert started, launched.output()[-3000:]
    os.kill(launched.pid, signal.SIGINT)
    code = launched.wait(60.0)
    assert code is not None, "ros2 launch did not exit within 60 s of SIGINT"
    left = [process for process in started if process.is_running()
            and process.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"left behind after SIGINT: {[p.cmdline() for p in left]}"


# ---------------------------------------------------------------------------------- tests


def test_show_args_lists_deployment_arguments_and_node_parameters(ros2_env) -> None:
    code, output = ros2(ros2_env, "launch", "rl_bringup", "colocated.launch.py", "--show-args")
    assert code == 0, output
    for argument in ("robots", "config", "domain_id", "discovery", "policy_layout", "weights_key",
                     "total_env_steps", "actor_lr", "max_rate_hz"):
        assert f"'{argument}':" in output, argument
    assert "Node parameter (trainer)" in output


def test_without_a_domain_the_launch_uses_ros_default_and_says_how_to_attach(
    ros2_env, tmp_path: Path
) -> None:
    # Domain 0 is every unconfigured shell's, so no node may start in it here (see the network
    # namespace test below for a run that does): the ament prefix holds rl_bringup's share
    # folder but not rl_nodes, so the launch prints its header, then fails to find the node
    # executables.
    prefix = tmp_path / "prefix"
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / "rl_bringup").touch()
    (prefix / "share" / "rl_bringup").symlink_to(Path(sys.prefix) / "share" / "rl_bringup")
    env = {name: value for name, value in ros2_env.items()
           if name not in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    env["AMENT_PREFIX_PATH"] = str(prefix)
    env["RL_ROS2_WEIGHTS_KEY"] = "ab" * 32  # no per-run key file in the temporary folder

    # A bad argument stops the launch before anything starts, naming the valid values.
    code, output = ros2(env, "launch", "rl_bringup", "colocated.launch.py", "robots:=0")
    assert code != 0 and "robots must be an integer from 1 to 64" in output, output

    code, output = ros2(env, "launch", "rl_bringup", "colocated.launch.py")
    assert code != 0 and "rl_nodes" in output, output
    assert "ROS_DOMAIN_ID=0 (no ROS_DOMAIN_ID set: ROS's default)" in output, output
    # No range set: the loopback, said with how to widen it.
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE is not set: this run stays on the loopback" in output
    attach = ("attach ROS tools (ros2 topic, rviz2, rqt) with: export "
              "ROS_DOMAIN_ID=0 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST")
    assert attach in output, output


def test_decoupled_two_robots_under_the_ros2_command_line(ros2_env, tmp_path: Path) -> None:
    launched = launch(ros2_env, "decoupled.launch.py", "robots:=2", *ENDLESS,
                      f"output_dir:={tmp_path / 'run'}")
    try:
        expected_nodes = {graph.node_name(kind, graph.robot_namespace(robot))
                          for robot in range(2) for kind in (graph.SIMULATOR, graph.POLICY)}
        expected_nodes |= {graph.node_name(graph.REPLAY_BUFFER), graph.node_name(graph.TRAINER)}
        # One listing per try: two calls can disagree while discovery settles.
        nodes = poll(lambda: (listed := nodes_listed(ros2_env)) >= expected_nodes and listed,
                     START_TIMEOUT_S, launched, "ros2 node list to show every node")
        assert nodes >= expected_nodes

        code, topics = ros2(ros2_env, "topic", "list", "-t", *SPIN)
        assert code == 0, topics
        for topic, namespace in [(graph.EXPERIENCE, "/"), (graph.WEIGHTS, "/"),
                                 (graph.ACTIONS, graph.robot_namespace(1))]:
            assert f"{graph.resolve(topic.name, namespace)} [{topic.type}]" in topics, topics

        wait_until_experience_and_weights_flow(ros2_env, launched, robots=2)

        observations = graph.resolve(graph.OBSERVATIONS.name, graph.robot_namespace(0))
        hz = Child([str(ROS2), "topic", "hz", "--window", "20", observations], env=ros2_env)
        try:
            rate_line = hz.wait_for_line(lambda text: text.startswith("average rate:"), 60.0)
        finally:
            hz.stop(grace_s=5.0)
        assert rate_line is not None, hz.output()
        assert float(rate_line.split(":")[1]) > 1.0, rate_line

        at_once(partial(check_parameters, ros2_env), partial(check_get_action_service, ros2_env))
        interrupt_and_check_nothing_is_left(launched)
    finally:
        launched.stop(grace_s=20.0)


def check_parameters(env: dict[str, str]) -> None:
    """The parameter overrides reached the node; a live parameter changes, a read-only one is
    refused with the reason."""
    buffer_budget, trainer_budget, (code, output), refused = at_once(
        partial(on_node, env, "param", "get", "/replay_buffer", "total_env_steps"),
        # It moved to the replay buffer: the trainer declares it only to say so (unset here).
        partial(on_node, env, "param", "get", "/trainer", "total_env_steps"),
        partial(on_node, env, "param", "set", "/trainer", "actor_lr", "0.0005"),
        partial(on_node, env, "param", "set", "/trainer", "seed", "5"))
    assert buffer_budget[0] == 0 and "Integer value is: 1000000000" in buffer_budget[1], \
        buffer_budget
    assert trainer_budget[0] == 0 and "Integer value is: 0" in trainer_budget[1], trainer_budget
    assert code == 0 and "Set parameter successful" in output, output
    assert "Setting parameter failed: Trying to set a read-only parameter: seed" in refused[1], \
        refused
    (code, output), (seed_code, seed) = at_once(
        partial(on_node, env, "param", "get", "/trainer", "actor_lr"),
        partial(on_node, env, "param", "get", "/trainer", "seed"))
    assert code == 0 and "Double value is: 0.0005" in output, output
    assert seed_code == 0 and "Integer value is: 0" in seed, seed


def check_get_action_service(env: dict[str, str]) -> None:
    """``ros2 service call`` of the policy's get_action: one cart-pole observation in, one action
    in [-1, 1] out."""
    request = "{obs_shape: [4], obs: [0.0, 0.0, 0.05, 0.0], deterministic: true}"
    code, output = ros2(env, "service", "call", GET_ACTION_SERVICE, graph.GET_ACTION.type,
                        request)
    assert code == 0 and "success=True" in output, output
    actions = re.search(r"actions=\[([^\]]*)\]", output)
    assert actions is not None, output
    values = [float(value) for value in actions.group(1).split(",")]
    assert len(values) == 1 and -1.0 <= values[0] <= 1.0, output


def test_hybrid_two_robots_flow_and_stop_on_sigint(ros2_env, tmp_path: Path) -> None:
    launched = launch(ros2_env, "hybrid.launch.py", "robots:=2", *ENDLESS,
                      f"output_dir:={tmp_path / 'run'}")
    try:
        wait_until_experience_and_weights_flow(ros2_env, launched, robots=2)
        interrupt_and_check_nothing_is_left(launched)
    finally:
        launched.stop(grace_s=20.0)


# ---------------------------------------------------------------- following the caller


@pytest.fixture
def private_host() -> Iterator[Network]:
    """One host in a network namespace of its own (skipped, or failed under CI=true, where
    namespaces cannot be made)."""
    try:
        check_rights()
    except NamespaceUnavailable as reason:
        message = f"cannot create network namespaces: {reason}"
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"{message} (CI=true: this test must run; run it as root)")
        pytest.skip(message)
    with bridged_hosts(["h"], subnet=231, tag=f"{os.getpid()}lc") as network:
        yield network


def test_with_no_domain_a_launch_and_a_plain_topic_list_meet_and_rmw_is_kept(
    ros2_env: dict[str, str], private_host: Network, tmp_path: Path
) -> None:
    # A caller with no ROS_DOMAIN_ID, no discovery range and no RMW_IMPLEMENTATION: a fresh shell.
    env = {name: value for name, value in ros2_env.items()
           if name not in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "RMW_IMPLEMENTATION")}
    argv = [str(ROS2), "launch", "rl_bringup", "colocated.launch.py",
            "total_env_steps:=1000000000", "max_rate_hz:=100", f"output_dir:={tmp_path / 'run'}"]
    launched = Child(private_host.exec_argv("h", argv, env), env=dict(os.environ))
    try:
        experience = graph.EXPERIENCE.name

        def listed() -> bool:
            command = Child(private_host.exec_argv(
                "h", [str(ROS2), "topic", "list", *SPIN], env), env=dict(os.environ))
            try:
                command.wait(60.0)
            finally:
                command.stop(grace_s=5.0)
            return experience in command.output().split()

        poll(listed, START_TIMEOUT_S, launched, f"a plain `ros2 topic list` to show {experience}")
        output = launched.output()
        assert "ROS_DOMAIN_ID=0 (no ROS_DOMAIN_ID set: ROS's default)" in output, output[-3000:]
        assert "this run stays on the loopback" in output
        (container,) = [process for process in descendants(launched)
                        if "--node" in process.cmdline()]
        environment = container.environ()
        assert environment["ROS_DOMAIN_ID"] == "0"
        assert environment["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
        assert "RMW_IMPLEMENTATION" not in environment, "the launch set RMW_IMPLEMENTATION"
    finally:
        launched.stop(grace_s=20.0)


def test_two_namespaced_deployments_train_on_one_domain_apart(
    ros2_env: dict[str, str], tmp_path: Path
) -> None:
    """lab_a colocated (intra-process), lab_b hybrid (its robot and learner processes talk over
    DDS through the remapped names), both on the test's domain."""
    runs = {name: tmp_path / name for name in ("lab_a", "lab_b")}
    # Different budgets: a deployment that counted the other's experience would end early.
    # At 100 steps/s lab_b runs for about 20 s, long enough to look at its graph.
    budgets = {"lab_a": 1200, "lab_b": 2000}
    files = {"lab_a": "colocated.launch.py", "lab_b": "hybrid.launch.py"}
    launched = {name: launch(ros2_env, files[name], f"namespace:={name}",
                             f"total_env_steps:={budgets[name]}", "eval_episodes:=1",
                             "max_rate_hz:=100", f"output_dir:={run}")
                for name, run in runs.items()}
    try:
        expected_nodes = {f"/{name}/{node}" for name in runs
                          for node in ("robot_0/simulator", "robot_0/policy", "replay_buffer",
                                       "trainer")}

        def listed() -> set[str] | None:
            code, output = ros2(ros2_env, "node", "list", *SPIN)
            names = set(output.split()) if code == 0 else set()
            return names if names >= expected_nodes else None

        nodes = poll(listed, START_TIMEOUT_S, launched["lab_b"], "the namespaced nodes")
        assert not any(name.startswith(("/robot_", "/trainer", "/replay_buffer"))
                       for name in nodes), nodes
        wanted = {graph.in_namespace("/lab_b", topic.name)
                  for topic in (graph.EXPERIENCE, graph.WEIGHTS, graph.REPLAY_STATUS,
                                graph.EPISODES)}
        names = poll(lambda: (listed := set(ros2(ros2_env, "topic", "list", *SPIN)[1].split()))
                     >= wanted and listed, START_TIMEOUT_S, launched["lab_b"],
                     "the namespaced topics")
        assert not names & {graph.EXPERIENCE.name, graph.WEIGHTS.name}, names
        poll(lambda: "/lab_b/replay_buffer/sample" in ros2(ros2_env, "service", "list",
                                                             *SPIN)[1].split(),
             START_TIMEOUT_S, launched["lab_b"], "the namespaced sample service")
        for name, child in launched.items():
            code = child.wait(300.0)
            assert code == 0, child.output()[-4000:]
        for name, run in runs.items():
            result = json.loads((run / "result.json").read_text())
            assert budgets[name] <= result["env_steps"] < budgets[name] + 300, (name, result)
            assert f"namespace /{name}" in launched[name].output()
    finally:
        for child in launched.values():
            child.stop(grace_s=20.0)


# ---------------------------------------------------------------- lifecycle


def lifecycle_set(env: dict[str, str], node: str, transition: str) -> str:
    """``ros2 lifecycle set NODE TRANSITION`` (asked again while the command has not discovered
    the node yet), and its output returned."""
    code, output = on_node(env, "lifecycle", "set", node, transition)
    assert code == 0, (node, transition, output)
    return output


def replay_figure(env: dict[str, str], field: str) -> int:
    """A field of the latest /replay_status (published every second), asked up to ten times
    (a `ros2 topic echo` without the daemon may give up before it discovers the publisher)."""
    for _ in range(10):
        output = echoed(env, graph.REPLAY_STATUS.name, "--field", field)
        match = re.search(r"^(\d+)$", output or "", flags=re.M)
        if match:
            return int(match.group(1))
    pytest.fail(f"no /replay_status {field} came: {output}")


# ---------------------------------------------------------------- composition


def component_list(env: dict[str, str], launched: Child, wanted: set[str],
                   unwanted: AbstractSet[str] = frozenset()) -> str:
    """The first ``ros2 component list`` that shows every ``wanted`` name and no ``unwanted`` one
    (a listing may come before discovery settles)."""
    def listed() -> str | None:
        code, output = on_node(env, "component", "list")
        names = set(output.split())
        return output if code == 0 and names >= wanted and not names & unwanted else None

    return poll(listed, START_TIMEOUT_S, launched, f"ros2 component list to show {wanted}")


def test_a_run_under_ros2_lifecycle_and_ros2_component(
    ros2_env: dict[str, str], tmp_path: Path
) -> None:
    """One colocated run, started with autostart:=false: an orchestrator's configure and
    activate bring it up; ``ros2 lifecycle`` pauses and resumes the trainer with nothing lost;
    ``ros2 component`` lists the container, loads a second robot that steps, and unloads it
    (remote composition switched on: off by default, issue 41)."""
    launched = launch(ros2_env, "colocated.launch.py", *ENDLESS, "autostart:=false",
                      "remote_composition:=true", f"output_dir:={tmp_path / 'run'}")
    try:
        nodes = ("/replay_buffer", "/trainer", "/robot_0/policy", "/robot_0/simulator")

        def unconfigured() -> bool:
            code, output = ros2(ros2_env, "lifecycle", "get", "/robot_0/simulator", *SPIN)
            return code == 0 and output.startswith("unconfigured [1]")

        poll(unconfigured, START_TIMEOUT_S, launched, "an unconfigured simulator")
        assert echoed(ros2_env, graph.EXPERIENCE.name, "--field", "robot_id") is None
        # What an orchestrator does: configure everything (side by side: each node builds
        # itself), then activate, learning side first.
        for output in at_once(*(partial(lifecycle_set, ros2_env, node, "configure")
                                for node in nodes)):
            assert "Transitioning successful" in output, output
        for node in nodes:
            assert "Transitioning successful" in lifecycle_set(ros2_env, node, "activate")
        wait_until_experience_and_weights_flow(ros2_env, launched, robots=1)
        check_lifecycle(ros2_env, launched)
        check_components(ros2_env, launched)
        assert launched.process.poll() is None, launched.output()[-3000:]
    finally:
        launched.stop(grace_s=20.0)


def check_lifecycle(env: dict[str, str], launched: Child) -> None:
    """``ros2 lifecycle`` lists the nodes; the trainer deactivated takes no batch, activated
    again it learns on with the buffer kept."""
    managed = {"/trainer", "/replay_buffer", "/robot_0/simulator", "/robot_0/policy"}

    def listed() -> bool:  # a listing may come before discovery settles
        code, output = ros2(env, "lifecycle", "nodes", *SPIN)
        return code == 0 and set(output.split()) >= managed

    poll(listed, START_TIMEOUT_S, launched, f"ros2 lifecycle nodes to list {managed}")
    code, output = on_node(env, "lifecycle", "get", "/trainer")
    assert code == 0 and output.startswith("active [3]"), output
    assert "Transitioning successful" in lifecycle_set(env, "/trainer", "deactivate")
    code, output = on_node(env, "lifecycle", "get", "/trainer")
    assert output.startswith("inactive [2]"), output
    time.sleep(3.0)  # statuses from before the pause have gone by
    sampled, stored = (replay_figure(env, field) for field in ("total_sampled", "size"))
    time.sleep(4.0)
    assert replay_figure(env, "total_sampled") == sampled, "learning went on"
    assert "Transitioning successful" in lifecycle_set(env, "/trainer", "activate")
    poll(lambda: replay_figure(env, "total_sampled") > sampled, START_TIMEOUT_S, launched,
         "learning to resume")
    assert replay_figure(env, "size") >= stored  # nothing lost


def check_components(env: dict[str, str], launched: Child) -> None:
    """``ros2 component`` lists the container; a second robot loaded into it steps and its
    experience is learned from; a bad plugin is refused with the reason; unload removes."""
    component_list(env, launched, {"/container", "/robot_0/simulator", "/robot_0/policy",
                                   "/replay_buffer", "/trainer"})
    for code, output in at_once(*(
            partial(on_node, env, "component", "load", "/container", "rl_nodes", plugin,
                    "--node-namespace", "/robot_1")
            for plugin in ("rl_nodes::Simulator", "rl_nodes::Policy"))):
        assert code == 0 and "Loaded component" in output, output
    # The run's autostart:=false holds for loaded nodes too: the orchestrator brings them up.
    for transition in ("configure", "activate"):
        for output in at_once(*(partial(lifecycle_set, env, node, transition)
                                for node in ("/robot_1/policy", "/robot_1/simulator"))):
            assert "Transitioning successful" in output, output
    wait_until_experience_and_weights_flow(env, launched, robots=2)
    output = component_list(env, launched, {"/robot_1/simulator", "/robot_1/policy"})
    simulator_1 = re.search(r"^\s*(\d+)\s+/robot_1/simulator$", output, flags=re.M)
    assert simulator_1 is not None, output
    code, output = on_node(env, "component", "load", "/container", "rl_nodes", "rl_nodes::Nope")
    assert code != 0 and "valid: rl_nodes::simulator" in output.lower(), output
    code, output = on_node(env, "component", "unload", "/container", simulator_1.group(1))
    assert code == 0 and "Unloaded component" in output, output
    component_list(env, launched, {"/robot_1/policy"}, {"/robot_1/simulator"})


def test_use_composition_loads_the_nodes_into_a_composable_node_container_and_trains(
    ros2_env: dict[str, str], tmp_path: Path
) -> None:
    launched = launch(ros2_env, "colocated.launch.py", "use_composition:=true",
                      "total_env_steps:=700", "eval_episodes:=1", f"output_dir:={tmp_path / 'run'}")
    try:
        code = launched.wait(240.0)
    finally:
        launched.stop(grace_s=20.0)
    output = launched.output()
    assert code == 0, output[-4000:]
    # launch_ros's LoadComposableNodes loaded each node through the container's service, the
    # trainer last (it found the simulator's experience publisher: interleaved updates).
    loaded = re.findall(r"Loaded node '(/[\w/]+)' in container '/container'", output)
    assert loaded[0] == "/replay_buffer" and loaded[-1] == "/trainer", loaded
    assert set(loaded) >= {"/robot_0/simulator", "/robot_0/policy", "/diagnostics_aggregator"}
    assert "update mode: interleaved" in output, output[-4000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["env_steps"] == 700, result
