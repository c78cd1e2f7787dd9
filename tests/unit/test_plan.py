"""Unit tests of the deployment plan (rl_bringup.plan) and the launch files built on it.

No ROS needed: ``launch`` / ``launch_ros`` are replaced by small fakes that record the actions the
launch files create, so the tests check what ``ros2 launch`` would be asked to start.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import random
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from rl_bringup.plan import arguments, paths
from rl_bringup.plan.deployment import MAX_RESPAWNS, RESPAWN_DELAY_S, Plan, PlanError, ProcessSpec, make_plan
from rl_bringup.plan.discovery import PROFILES_VARIABLE
from rl_bringup.plan.layouts import MODES
from rl_bringup.plan.parameter_overrides import format_parameter_value
from rl_bringup.plan.run_key import with_weights_key
from rl_core.config import NODE_CONFIGS, RENAMED_PARAMETERS, parameters_for

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
LAUNCH_DIR = REPO_ROOT / "launch"
CONFIG_DIR = REPO_ROOT / "config"
LAUNCH_FILES = {
    "colocated.launch.py": "colocated",
    "decoupled.launch.py": "decoupled",
    "hybrid.launch.py": "hybrid",
    "multi_robot.launch.py": None,
}
CLEAN_ENV: dict[str, str] = {}


def plan_for(mode: str, robots: int = 1, **kwargs: Any) -> Plan:
    """A plan with a fixed domain id and no inherited environment."""
    kwargs.setdefault("domain_id", 7)
    return make_plan(mode, robots, environ=CLEAN_ENV, **kwargs)


def layout(plan: Plan) -> list[tuple[str, str, tuple[str, ...], bool, bool]]:
    """(name, executable, nodes, respawn, required) per process."""
    return [
        (
            process.name,
            process.executable,
            tuple(f"{kind}@{namespace}" for kind, namespace in process.hosted_nodes()),
            process.respawn,
            process.required,
        )
        for process in plan.processes
    ]


# ---------------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("robots", [1, 3])
def test_colocated_is_one_required_container_with_every_node(robots: int) -> None:
    plan = plan_for("colocated", robots)
    robot_nodes = tuple(
        node for k in range(robots) for node in (f"simulator@/robot_{k}", f"policy@/robot_{k}")
    )
    assert layout(plan) == [
        ("container", "container",
         (*robot_nodes, "replay_buffer@/", "trainer@/", "diagnostics_aggregator@/"), True, True)
    ]
    (container,) = plan.processes
    assert container.is_container
    assert container.namespace == ""
    node_arguments = [f"{kind}@{ns}" for kind, ns in container.nodes]
    assert container.arguments == [token for node in node_arguments for token in ("--node", node)]


@pytest.mark.parametrize("robots", [1, 3])
def test_decoupled_is_one_process_per_node(robots: int) -> None:
    plan = plan_for("decoupled", robots)
    expected = []
    for k in range(robots):
        expected.append((f"simulator_robot_{k}", "simulator", (f"simulator@/robot_{k}",), True, False))
        expected.append((f"policy_robot_{k}", "policy", (f"policy@/robot_{k}",), True, False))
    expected.append(("replay_buffer", "replay_buffer", ("replay_buffer@/",), True, True))
    expected.append(("trainer", "trainer", ("trainer@/",), True, True))
    # The aggregator respawns, but the run does not end with it (it learns nothing).
    expected.append(("diagnostics_aggregator", "diagnostics_aggregator",
                     ("diagnostics_aggregator@/",), True, False))
    assert layout(plan) == expected
    assert all(not process.is_container and process.arguments == [] for process in plan.processes)


@pytest.mark.parametrize("robots", [1, 3])
def test_hybrid_is_a_container_per_robot_and_one_learner(robots: int) -> None:
    plan = plan_for("hybrid", robots)
    expected = [
        (f"robot_{k}", "container", (f"simulator@/robot_{k}", f"policy@/robot_{k}"), True, False)
        for k in range(robots)
    ]
    expected.append(("learner", "container",
                     ("replay_buffer@/", "trainer@/", "diagnostics_aggregator@/"), True, True))
    assert layout(plan) == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("robots", [1, 3])
def test_every_mode_hosts_the_same_nodes(mode: str, robots: int) -> None:
    nodes = sorted(plan_for(mode, robots).hosted_nodes())
    expected = sorted(
        [(kind, f"/robot_{k}") for k in range(robots) for kind in ("simulator", "policy")]
        + [("replay_buffer", "/"), ("trainer", "/"), ("diagnostics_aggregator", "/")]
    )
    assert nodes == expected


@pytest.mark.parametrize("policy_layout", ["per_robot", "central"])
@pytest.mark.parametrize("mode", MODES)
def test_every_process_respawns_and_learning_processes_are_required_and_get_output_dir(
    mode: str, policy_layout: str
) -> None:
    plan = plan_for(mode, 2, output_dir="/tmp/rl-run", policy_layout=policy_layout)
    learning = set()
    for process in plan.processes:
        kinds = {kind for kind, _ in process.hosted_nodes()}
        hosts_learning = bool(kinds & {"trainer", "replay_buffer"})
        learning |= kinds & {"trainer", "replay_buffer"}
        assert process.respawn, process.name
        assert process.required == hosts_learning, process.name
        # The trainer resumes from its checkpoints and the replay buffer from its snapshots, both
        # in output_dir; the robot processes keep nothing there.
        assert ("output_dir" in process.parameters) == hosts_learning, process.name
        if hosts_learning:
            assert process.parameters["output_dir"] == "/tmp/rl-run"
    assert learning == {"trainer", "replay_buffer"}
    assert all("output_dir" not in process.parameters
               for process in plan_for(mode, 2, policy_layout=policy_layout).processes)
    # robots:=3 (text, as the command line gives it): the learning processes get
    # deployment_robots == 3, the robot processes none.
    assert [process.parameters.get("deployment_robots")
            for process in plan_for(mode, "3", policy_layout=policy_layout).processes] == [
        3 if {kind for kind, _ in process.hosted_nodes()} & {"trainer", "replay_buffer"}
        else None
        for process in plan_for(mode, 3, policy_layout=policy_layout).processes
    ]


def test_decoupled_command_lines_follow_the_ros_arguments_contract() -> None:
    plan = plan_for("decoupled", 1, output_dir="/tmp/rl-run")
    config = str(CONFIG_DIR / "cartpole.yaml")
    by_name = {process.name: process for process in plan.processes}
    simulator_argv = by_name["simulator_robot_0"].argv()
    assert simulator_argv[:6] == [
        "simulator", "--ros-args", "-r", "__ns:=/robot_0", "--params-file", config,
    ]
    # A deployment's robots wait for the replay buffer's first status (rl_core.acting.gate).
    assert simulator_argv[6] == "--params-file" and len(simulator_argv) == 8
    assert yaml.safe_load(Path(simulator_argv[7]).read_text()) == {
        "/**/simulator": {"ros__parameters": {"await_replay_status": True}}}
    assert by_name["policy_robot_0"].argv() == [
        "policy", "--ros-args", "-r", "__ns:=/robot_0", "--params-file", config,
    ]
    trainer_argv = by_name["trainer"].argv()
    assert trainer_argv[:4] == ["trainer", "--ros-args", "--params-file", config]
    # Overrides travel in a second, node-specific parameter file so they beat the scenario
    # file's /**/trainer block (a plain -p would not).
    assert trainer_argv[4] == "--params-file"
    overrides = yaml.safe_load(Path(trainer_argv[5]).read_text())
    # deployment_robots: the robot count, so the replay buffer refuses unknown robot ids.
    assert overrides == {"/**/trainer": {"ros__parameters": {"output_dir": "/tmp/rl-run",
                                                              "deployment_robots": 1}}}
    # The replay buffer gets output_dir too: it snapshots into output_dir/replay.
    replay_argv = by_name["replay_buffer"].argv()
    assert replay_argv[:4] == ["replay_buffer", "--ros-args", "--params-file", config]
    assert replay_argv[4] == "--params-file" and len(replay_argv) == 6
    assert yaml.safe_load(Path(replay_argv[5]).read_text()) == {
        "/**/replay_buffer": {"ros__parameters": {"output_dir": "/tmp/rl-run",
                                                  "deployment_robots": 1}}
    }
    # ... and the robot processes do not.
    for name in ("simulator_robot_0", "policy_robot_0"):
        assert "output_dir" not in by_name[name].parameters
        assert "deployment_robots" not in by_name[name].parameters
    assert by_name["policy_robot_0"].argv("/opt/bin")[0] == "/opt/bin/policy"


def test_container_command_line_follows_the_container_contract() -> None:
    plan = plan_for("hybrid", 1, output_dir="/tmp/out", extra_parameters={"seed": 3})
    learner = plan.processes[-1]
    argv = learner.argv()
    assert argv[:10] == [
        "container", "--node", "replay_buffer@/", "--node", "trainer@/",
        "--node", "diagnostics_aggregator@/",
        "--ros-args", "--params-file", str(CONFIG_DIR / "cartpole.yaml"),
    ]
    assert argv[10] == "--params-file" and len(argv) == 12
    overrides = yaml.safe_load(Path(argv[11]).read_text())
    expected = {"seed": 3, "output_dir": "/tmp/out", "deployment_robots": 1}
    # The aggregator declares none of these parameters: no block of its own.
    assert overrides == {f"/**/{kind}": {"ros__parameters": expected}
                         for kind in ("replay_buffer", "trainer")}
    robot = plan.processes[0]
    assert "-r" not in robot.argv(), "a __ns remap would move every node of a container"
    assert robot.parameters == {"seed": 3, "await_replay_status": True}


def test_relative_output_dir_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plan = plan_for("colocated", output_dir="runs/a")
    assert plan.processes[0].parameters["output_dir"] == str(tmp_path / "runs" / "a")


@pytest.mark.parametrize(
    ("value", "text"),
    [(True, "true"), (3, "3"), (0.5, "0.5"), ("abc", "abc"), ("1", "'1'"), ("true", "'true'"),
     ("it's", "it's"), ([1, 2], "[1,2]"), (["a", "2"], "[a,'2']")],
)
def test_parameter_values_keep_their_type_on_the_command_line(value: Any, text: str) -> None:
    assert format_parameter_value(value) == text


# ---------------------------------------------------------------------------------- environment


def test_environment_defaults_are_loopback_only_with_an_explicit_domain() -> None:
    plan = make_plan("colocated", environ={}, rng=random.Random(3))
    assert plan.environment["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    # The caller's middleware is never changed (ROS conventions; issue 20).
    assert "RMW_IMPLEMENTATION" not in plan.environment
    assert any("not set: this run stays on the loopback" in note and "discovery:=subnet" in note
               for note in plan.notes)
    assert plan.environment["PYTHONUNBUFFERED"] == "1"
    assert "ROS_DISCOVERY_SERVER" not in plan.environment
    assert plan.domain_id_source == "random"
    assert 1 <= plan.domain_id <= 100
    assert plan.environment["ROS_DOMAIN_ID"] == str(plan.domain_id)
    # Both front ends read the environment from the processes.
    assert all(process.env == plan.environment for process in plan.processes)
    assert f"ROS_DOMAIN_ID={plan.domain_id}" in plan.attach_command()


def test_domain_id_comes_from_argument_then_environment_then_random() -> None:
    assert make_plan("colocated", domain_id=0, environ={"ROS_DOMAIN_ID": "5"}).domain_id == 0
    inherited = make_plan("colocated", environ={"ROS_DOMAIN_ID": "5"})
    assert (inherited.domain_id, inherited.domain_id_source) == (5, "environment")
    picks = {make_plan("colocated", environ={}, rng=random.Random(seed)).domain_id for seed in range(40)}
    assert 0 not in picks and len(picks) > 1


@pytest.mark.parametrize(
    ("discovery", "expected"),
    [
        ("localhost", {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}),
        ("SUBNET", {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}),
        (
            "server:127.0.0.1:11811",
            {"ROS_DISCOVERY_SERVER": "127.0.0.1:11811", "ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT"},
        ),
        ("server:learner.local:11888", {"ROS_DISCOVERY_SERVER": "learner.local:11888"}),
    ],
)
def test_discovery_settings(discovery: str, expected: dict[str, str]) -> None:
    plan = plan_for("decoupled", discovery=discovery)
    assert expected.items() <= plan.environment.items()
    if discovery.startswith("server:"):
        assert any("fastdds discovery" in note for note in plan.notes)


@pytest.mark.parametrize("discovery", ["subnet", "server:127.0.0.1:11811"])
def test_multi_host_processes_send_without_blocking(discovery: str) -> None:
    """A multi-host plan gives every process the Fast DDS profile whose UDP sends never block
    (a robot whose link drops must keep running); a localhost plan leaves the transports alone."""
    plan = make_plan("hybrid", robots=2, discovery=discovery, domain_id=3, environ={})
    profile = Path(plan.environment[PROFILES_VARIABLE])
    assert profile == CONFIG_DIR / "fastdds_multihost.xml"
    assert all(process.env[PROFILES_VARIABLE] == str(profile) for process in plan.processes)
    namespace = {"dds": "http://www.eprosima.com"}
    root = ElementTree.parse(profile).getroot()
    transport = root.find("dds:profiles/dds:transport_descriptors/dds:transport_descriptor", namespace)
    assert transport.findtext("dds:type", namespaces=namespace) == "UDPv4"
    assert transport.findtext("dds:non_blocking_send", namespaces=namespace) == "true"
    participant = root.find("dds:profiles/dds:participant", namespace)
    assert participant.get("is_default_profile") == "true"
    rtps = participant.find("dds:rtps", namespace)
    assert rtps.findtext("dds:useBuiltinTransports", namespaces=namespace) == "false"
    assert rtps.findtext("dds:userTransports/dds:transport_id", namespaces=namespace) == \
        transport.findtext("dds:transport_id", namespaces=namespace)
    assert PROFILES_VARIABLE not in make_plan("hybrid", robots=2, domain_id=3, environ={}).environment


def test_a_users_fast_dds_profile_is_kept_with_a_note() -> None:
    plan = make_plan("hybrid", robots=2, discovery="subnet", domain_id=3,
                     environ={"FASTRTPS_DEFAULT_PROFILES_FILE": "/etc/mine.xml"})
    assert PROFILES_VARIABLE not in plan.environment
    assert any("FASTRTPS_DEFAULT_PROFILES_FILE" in note and "non_blocking_send" in note
               for note in plan.notes)


def test_inherited_discovery_server_is_flagged() -> None:
    plan = make_plan("colocated", domain_id=3, discovery="localhost",
                     environ={"ROS_DISCOVERY_SERVER": "10.0.0.1:11811"})
    assert any("ROS_DISCOVERY_SERVER is set in your environment" in note for note in plan.notes)


@pytest.mark.parametrize("environ", [
    {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"},
    {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"},
    {"ROS_DISCOVERY_SERVER": "127.0.0.1:11811"},
    {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT", "ROS_DISCOVERY_SERVER": "127.0.0.1:11811"},
])
def test_the_callers_discovery_is_followed_by_default(environ: dict[str, str]) -> None:
    plan = make_plan("colocated", domain_id=3, environ=environ)
    assert environ.items() <= plan.environment.items()
    assert any(note.startswith("discovery follows your environment") for note in plan.notes)
    assert not any("stays on the loopback" in note for note in plan.notes)
    # An explicit setting still wins over the caller's.
    explicit = make_plan("colocated", domain_id=3, discovery="localhost", environ=environ)
    assert explicit.environment["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"


def test_ros2_launch_plans_use_ros_default_domain_and_keep_the_callers_rmw() -> None:
    plan = make_plan("colocated", environ={"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
                     random_domain=False)
    assert (plan.domain_id, plan.domain_id_source) == (0, "ros_default")
    assert plan.environment["ROS_DOMAIN_ID"] == "0"
    assert "RMW_IMPLEMENTATION" not in plan.environment
    assert any("RMW_IMPLEMENTATION=rmw_cyclonedds_cpp is kept" in note for note in plan.notes)
    assert "ROS_DOMAIN_ID=0 (no ROS_DOMAIN_ID set: ROS's default)" in plan.header_lines()
    # The caller's ROS_DOMAIN_ID still wins, and rl-bringup says that its random pick is its own.
    assert make_plan("colocated", environ={"ROS_DOMAIN_ID": "7"}, random_domain=False).domain_id == 7
    picked = make_plan("colocated", environ={}, rng=random.Random(1))
    assert any("rl-bringup picked one at random" in line for line in picked.header_lines())


# ---------------------------------------------------------------------------------- config


@pytest.mark.parametrize("config", ["cartpole", "cartpole.yaml", str(CONFIG_DIR / "cartpole.yaml")])
def test_config_by_name_or_path(config: str) -> None:
    assert plan_for("colocated", config=config).config_file == str(CONFIG_DIR / "cartpole.yaml")


def test_config_directory_is_the_repository_config_in_a_checkout() -> None:
    assert paths.config_directory() == CONFIG_DIR
    assert {"cartpole", "kuka_reach"} <= set(paths.available_configs())


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "colocate"}, r"unknown mode 'colocate'; valid modes: colocated, decoupled, hybrid"),
        ({"mode": "hybrid", "robots": 0}, r"robots must be an integer from 1 to 64, got 0"),
        ({"mode": "hybrid", "robots": 65}, r"robots must be an integer from 1 to 64"),
        ({"mode": "hybrid", "robots": "two"}, r"robots must be an integer from 1 to 64, got 'two'"),
        (
            {"mode": "decoupled", "config": "nope"},
            r"config 'nope' not found .*nope\.yaml.*available configs in .*: .*cartpole",
        ),
        (
            {"mode": "decoupled", "config": "/does/not/exist.yaml"},
            r"config '/does/not/exist\.yaml' not found .*cartpole",
        ),
        (
            {"mode": "colocated", "discovery": "wan"},
            r"bad discovery 'wan'; valid: environment, localhost, subnet, server:HOST:PORT",
        ),
        ({"mode": "colocated", "discovery": "server:host"}, r"expected server:HOST:PORT"),
        ({"mode": "colocated", "discovery": "server:host:0"}, r"port must be 1\.\.65535"),
        ({"mode": "colocated", "discovery": "server:bad_host!:11811"}, r"not an IPv4 address or host name"),
        ({"mode": "colocated", "domain_id": 102}, r"domain_id must be an integer from 0 to 101, got 102"),
        ({"mode": "colocated", "domain_id": -1}, r"domain_id must be an integer from 0 to 101"),
        ({"mode": "colocated", "domain_id": "x"}, r"domain_id must be an integer from 0 to 101, got 'x'"),
        ({"mode": "colocated", "extra_parameters": {"bad name": 1}}, r"bad parameter name 'bad name'"),
        ({"mode": "colocated", "extra_parameters": {"table": {"a": 1}}}, r"not a ROS 2 parameter type"),
    ],
)
def test_bad_input_raises_plan_error_naming_the_choices(kwargs: dict[str, Any], match: str) -> None:
    mode = kwargs.pop("mode")
    kwargs.setdefault("domain_id", 1)
    with pytest.raises(PlanError, match=match):
        make_plan(mode, environ=CLEAN_ENV, **kwargs)


@pytest.mark.parametrize("inherited", ["233", "-1", "five"])
def test_bad_inherited_domain_id_names_the_variable(inherited: str) -> None:
    message = r"ROS_DOMAIN_ID in the environment must be an integer from 0 to 232"
    with pytest.raises(PlanError, match=message):
        make_plan("colocated", environ={"ROS_DOMAIN_ID": inherited})


@pytest.mark.parametrize(("inherited", "noted"), [("0", False), ("101", False), ("200", True)])
def test_the_callers_domain_id_is_used_as_is(inherited: str, noted: bool) -> None:
    plan = make_plan("colocated", environ={"ROS_DOMAIN_ID": inherited})
    assert (plan.domain_id, plan.domain_id_source) == (int(inherited), "environment")
    assert all(process.env["ROS_DOMAIN_ID"] == inherited for process in plan.processes)
    assert any("ephemeral port range" in note for note in plan.notes) == noted
    assert f"ROS_DOMAIN_ID={inherited} (from your ROS_DOMAIN_ID, as is)" in plan.header_lines()
    # An explicit domain_id:= stays in the range ROS 2 calls safe.
    with pytest.raises(PlanError, match="from 0 to 101"):
        make_plan("colocated", domain_id=200, environ={"ROS_DOMAIN_ID": inherited})


def test_without_a_domain_id_the_header_says_it_was_picked_and_how_to_attach() -> None:
    plan = make_plan("colocated", environ={}, rng=random.Random(3))
    header = plan.header_lines()
    assert any(line.startswith(f"ROS_DOMAIN_ID={plan.domain_id} (no ROS_DOMAIN_ID set: rl-bringup "
                               f"picked one at random for this run") for line in header)
    assert any(line.endswith(f"export ROS_DOMAIN_ID={plan.domain_id} "
                             f"ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST") for line in header)


def test_plan_error_is_a_value_error() -> None:
    assert issubclass(PlanError, ValueError)


# ---------------------------------------------------------------------------------- launch files


class _Recorded:
    """A fake launch action: remembers how it was constructed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs


class FakeLaunchDescription(_Recorded):
    """launch.LaunchDescription."""

    @property
    def entities(self) -> list[Any]:
        return list(self.args[0]) if self.args else list(self.kwargs.get("initial_entities", []))


class FakeDeclareLaunchArgument(_Recorded):
    """launch.actions.DeclareLaunchArgument(name, *, default_value, description, choices)."""

    @property
    def name(self) -> str:
        return str(self.args[0])


class FakeOpaqueFunction(_Recorded):
    """launch.actions.OpaqueFunction(*, function, args, kwargs)."""

    def execute(self, context: Any) -> list[Any]:
        function = self.kwargs["function"]
        return list(function(context, *self.kwargs.get("args", ()),
                             **self.kwargs.get("kwargs", {})) or [])


class FakeShutdown(_Recorded):
    """launch.actions.Shutdown(*, reason)."""


class FakeLogInfo(_Recorded):
    """launch.actions.LogInfo(*, msg)."""


class FakeNode(_Recorded):
    """launch_ros.actions.Node(**kwargs)."""


class FakeGroupAction(_Recorded):
    """launch.actions.GroupAction(*, actions, scoped)."""


class FakeComposableNodeContainer(_Recorded):
    """launch_ros.actions.ComposableNodeContainer(**kwargs)."""


class FakeComposableNode(_Recorded):
    """launch_ros.descriptions.ComposableNode(**kwargs)."""


class FakeContext:
    """launch.LaunchContext: only launch_configurations is used."""

    def __init__(self, launch_configurations: dict[str, str]) -> None:
        self.launch_configurations = launch_configurations


def launch_output_dir(mode: str, given: dict[str, str] | None = None) -> str:
    """The ``output_dir`` a faked launch of ``mode`` passes on: the one ``given``, else the run
    directory :func:`rl_bringup.plan.arguments.default_output_dir` picks (fixed by the fixture)."""
    return (given or {}).get("output_dir") or f"/tmp/rl-default-{mode}"


@pytest.fixture
def fake_launch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Install fake launch / launch_ros modules for the duration of a test.

    The caller's weights key is set, so the launch files write no key file (without one they
    write a key pair per run; see the weights key tests).
    """
    monkeypatch.setenv("RL_ROS2_WEIGHTS_KEY", "ab" * 32)
    monkeypatch.delenv("RL_ROS2_WEIGHTS_KEY_FILE", raising=False)
    # The caller's run identity: no run.id is written into the fixed run directories below.
    monkeypatch.setenv("RL_ROS2_RUN_ID", "fake-launch")
    # A launch without output_dir gets a run directory of its own; a fixed one here.
    monkeypatch.setattr(arguments, "default_output_dir", launch_output_dir)
    launch = types.ModuleType("launch")
    launch_actions = types.ModuleType("launch.actions")
    launch_ros = types.ModuleType("launch_ros")
    launch_ros_actions = types.ModuleType("launch_ros.actions")
    launch.LaunchDescription = FakeLaunchDescription  # type: ignore[attr-defined]
    launch.actions = launch_actions  # type: ignore[attr-defined]
    launch_actions.DeclareLaunchArgument = FakeDeclareLaunchArgument  # type: ignore[attr-defined]
    launch_actions.OpaqueFunction = FakeOpaqueFunction  # type: ignore[attr-defined]
    launch_actions.Shutdown = FakeShutdown  # type: ignore[attr-defined]
    launch_actions.LogInfo = FakeLogInfo  # type: ignore[attr-defined]
    launch_actions.GroupAction = FakeGroupAction  # type: ignore[attr-defined]
    launch_ros.actions = launch_ros_actions  # type: ignore[attr-defined]
    launch_ros_actions.Node = FakeNode  # type: ignore[attr-defined]
    launch_ros_actions.ComposableNodeContainer = FakeComposableNodeContainer  # type: ignore[attr-defined]
    launch_ros_descriptions = types.ModuleType("launch_ros.descriptions")
    launch_ros_descriptions.ComposableNode = FakeComposableNode  # type: ignore[attr-defined]
    launch_ros.descriptions = launch_ros_descriptions  # type: ignore[attr-defined]
    for name, module in {
        "launch": launch,
        "launch.actions": launch_actions,
        "launch_ros": launch_ros,
        "launch_ros.actions": launch_ros_actions,
        "launch_ros.descriptions": launch_ros_descriptions,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    yield


def load_launch_file(file_name: str) -> types.ModuleType:
    """Import a launch file the way ros2 launch does (by path)."""
    path = LAUNCH_DIR / file_name
    spec = importlib.util.spec_from_file_location(f"launch_file_{path.stem.replace('.', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_launch_file(
    file_name: str, overrides: dict[str, str]
) -> tuple[list[FakeDeclareLaunchArgument], list[Any]]:
    """Generate the description, then execute its OpaqueFunction with declared defaults + overrides."""
    description = load_launch_file(file_name).generate_launch_description()
    assert isinstance(description, FakeLaunchDescription)
    declared = [entity for entity in description.entities if isinstance(entity, FakeDeclareLaunchArgument)]
    opaque = [entity for entity in description.entities if isinstance(entity, FakeOpaqueFunction)]
    assert len(opaque) == 1
    configurations = {argument.name: argument.kwargs["default_value"] for argument in declared}
    configurations.update(overrides)
    return declared, flatten(opaque[0].execute(FakeContext(configurations)), configurations)


def flatten(actions: list[Any], configurations: dict[str, str]) -> list[Any]:
    """The actions with scoped groups opened, their OpaqueFunctions run in a copy of the
    configurations (as launch does)."""
    flat: list[Any] = []
    for action in actions:
        if isinstance(action, FakeGroupAction):
            assert action.kwargs["scoped"] is True
            scope = FakeContext(dict(configurations))
            for inner in action.kwargs["actions"]:
                flat.extend(flatten(inner.execute(scope), scope.launch_configurations)
                            if isinstance(inner, FakeOpaqueFunction) else [inner])
        else:
            flat.append(action)
    return flat


@pytest.mark.parametrize("file_name", sorted(LAUNCH_FILES))
def test_launch_file_parses_and_defines_generate_launch_description(file_name: str) -> None:
    tree = ast.parse((LAUNCH_DIR / file_name).read_text(), filename=file_name)
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert functions == ["generate_launch_description"]
    assert ast.get_docstring(tree)


@pytest.mark.parametrize("file_name", sorted(LAUNCH_FILES))
def test_launch_arguments_are_declared_with_descriptions(fake_launch: None, file_name: str) -> None:
    declared, _ = run_launch_file(file_name, {"domain_id": "9"})
    deployment = {"robots", "config", "output_dir", "domain_id", "discovery", "cpus",
                  "policy_layout", "weights_key", "robot_interface", "sim_robot", "task",
                  "use_sim_time", "autostart", "namespace", "log_level", "params_file"}
    # Every node parameter too, so that --show-args lists what name:=value overrides (robots is
    # the central policy's parameter and the deployment argument; the plan sets it).
    parameters = {name for classes in NODE_CONFIGS.values() for cls in classes
                  for name in (field.name for field in dataclasses.fields(cls))}
    parameters -= deployment | {"deployment_robots"}
    # Former names keep working for a release (rl_core.config.RENAMED_PARAMETERS).
    expected = deployment | parameters | set(RENAMED_PARAMETERS)
    # ros2 launch's alone (rl_bringup.launch_helpers)
    expected |= {"use_composition", "remote_composition"}
    if LAUNCH_FILES[file_name] is None:
        expected.add("mode")
    assert {argument.name for argument in declared} == expected
    for argument in declared:
        assert len(argument.kwargs.get("description") or "") > 20, argument.name
        assert "default_value" in argument.kwargs
        if argument.name in parameters:
            assert argument.kwargs["default_value"] == ""
            assert argument.kwargs["description"].startswith("Node parameter (")
        if argument.name in RENAMED_PARAMETERS:
            assert argument.kwargs["description"].startswith("Deprecated: renamed to ")
    # --show-args: the deployment's arguments first, then the node parameters grouped by node.
    names = [argument.name for argument in declared if argument.name != "mode"]
    assert set(names[:len(deployment)]) == deployment
    kinds = [argument.kwargs["description"].split("(")[1].split(",")[0].split(")")[0]
             for argument in declared[len(deployment):] if argument.name in parameters]
    assert kinds == sorted(kinds, key=list(NODE_CONFIGS).index), kinds


@pytest.mark.parametrize("file_name", sorted(LAUNCH_FILES))
def test_launch_parameter_overrides_reach_the_nodes_that_declare_them(
    fake_launch: None, file_name: str
) -> None:
    overrides = {"robots": "2", "domain_id": "11", "total_env_steps": "20000",
                 "actor_lr": "1", "num_envs": "", "deterministic": "true", "mode": "hybrid"}
    _, actions = run_launch_file(file_name, overrides)
    nodes = [action for action in actions if isinstance(action, FakeNode)]
    mode = LAUNCH_FILES[file_name] or "hybrid"
    expected = with_weights_key(make_plan(
        mode, 2, domain_id=11, output_dir=launch_output_dir(mode),
        extra_parameters={"total_env_steps": 20000, "actor_lr": 1.0, "deterministic": True}))
    assert len(nodes) == len(expected.processes)
    for node, process in zip(nodes, expected.processes):
        check_node_matches(node, process)
        # Parsed as YAML like ros2 launch does; an int for a float parameter is widened, an empty
        # value is not given at all.
        # Each node kind's block holds the overrides that kind declares (a simulator's process
        # gets none of these: no file).
        if not process.has_overrides:
            assert node.kwargs["parameters"] == [process.params_file]
            continue
        blocks = yaml.safe_load(Path(node.kwargs["parameters"][1]).read_text())
        owners = {"total_env_steps": "replay_buffer", "actor_lr": "trainer",
                  "deterministic": "policy"}
        for key, block in blocks.items():
            kind, given = key.rsplit("/", 1)[-1], block["ros__parameters"]
            assert {name for name in owners if name in given} == \
                {name for name, owner in owners.items() if owner == kind}, (key, given)
            assert given.get("total_env_steps", 20000) == 20000
            assert isinstance(given.get("actor_lr", 1.0), float)
            assert "num_envs" not in given


def test_launch_and_cli_make_the_same_plan_from_the_same_arguments(
    fake_launch: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from rl_bringup.cli import main

    arguments = {"robots": "2", "domain_id": "11", "total_env_steps": "3000", "seed": "4",
                 "max_rate_hz": "50", "policy_layout": "central"}
    _, actions = run_launch_file("decoupled.launch.py", arguments)
    assert main(["plan", "decoupled", "--format", "yaml",
                 *(f"{key}:={value}" for key, value in arguments.items())]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    nodes = [action for action in actions if isinstance(action, FakeNode)]
    # The last parameter file of each process: its overrides file, or the scenario's file for
    # the diagnostics aggregator, which declares none of the overridden parameters.
    assert [node.kwargs["parameters"][-1] for node in nodes] == \
        [process["argv"][-1] for process in printed["processes"]]
    messages = [action.kwargs["msg"] for action in actions if isinstance(action, FakeLogInfo)]
    assert "rl_bringup: ROS_DOMAIN_ID=11 (given)" in messages


def test_launch_gives_every_process_one_weights_key(
    fake_launch: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RL_ROS2_WEIGHTS_KEY")
    _, actions = run_launch_file("hybrid.launch.py", {"robots": "2", "domain_id": "11",
                                                      "output_dir": str(tmp_path)})
    nodes = [action for action in actions if isinstance(action, FakeNode)]
    # The learner's process holds the private key; the robots' only its public half.
    key_files = {node.kwargs["additional_env"]["RL_ROS2_WEIGHTS_KEY_FILE"] for node in nodes}
    assert key_files == {str(tmp_path / "weights.key"), ""}
    assert len({node.kwargs["additional_env"]["RL_ROS2_WEIGHTS_PUBLIC_KEY"] for node in nodes}) == 1
    assert (tmp_path / "weights.key").is_file()
    # weights_key:=FILE names the key (a multi-host run shares one), as with rl-bringup.
    _, actions = run_launch_file("hybrid.launch.py", {"domain_id": "11",
                                                      "weights_key": str(tmp_path / "weights.key")})
    assert {action.kwargs["additional_env"]["RL_ROS2_WEIGHTS_KEY_FILE"]
            for action in actions if isinstance(action, FakeNode)} == key_files


@pytest.mark.parametrize(
    ("file_name", "overrides"),
    [
        ("colocated.launch.py", {"robots": "3"}),
        ("decoupled.launch.py", {"robots": "3", "output_dir": "/tmp/rl-out"}),
        ("hybrid.launch.py", {"robots": "1", "config": "kuka_reach", "discovery": "subnet"}),
        ("multi_robot.launch.py", {"mode": "hybrid", "robots": "3"}),
        ("multi_robot.launch.py", {"mode": "decoupled", "robots": "1"}),
    ],
)
def test_launch_nodes_match_the_plan(
    fake_launch: None, monkeypatch: pytest.MonkeyPatch, file_name: str, overrides: dict[str, str]
) -> None:
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    overrides = {**overrides, "domain_id": "11"}
    _, actions = run_launch_file(file_name, overrides)
    mode = LAUNCH_FILES[file_name] or overrides["mode"]
    plan = with_weights_key(make_plan(
        mode,
        overrides["robots"],
        config=overrides.get("config", "cartpole"),
        output_dir=launch_output_dir(mode, overrides),
        domain_id=11,
        discovery=overrides.get("discovery", "localhost"),
    ))
    nodes = [action for action in actions if isinstance(action, FakeNode)]
    messages = [action.kwargs["msg"] for action in actions if isinstance(action, FakeLogInfo)]
    assert any("ROS_DOMAIN_ID=11" in message for message in messages)
    assert len(nodes) == len(plan.processes)
    assert any(process.required and process.respawn for process in plan.processes)
    for node, process in zip(nodes, plan.processes):
        check_node_matches(node, process)


def check_node_matches(node: FakeNode, process: ProcessSpec) -> None:
    """The Node action asks launch_ros for exactly the planned process."""
    options = node.kwargs
    assert options["package"] == "rl_nodes"
    assert options["executable"] == process.executable
    assert options["arguments"] == process.arguments
    single_node_namespace = not process.is_container and process.namespace not in ("", "/")
    expected_namespace = process.namespace if single_node_namespace else None
    assert options["namespace"] == expected_namespace
    expected_parameters: list[Any] = [path for path in (process.params_file,
                                                          process.user_params_file) if path]
    if process.has_overrides:
        # The overrides as a file with a block per node kind: a dict would land under /**, below
        # the scenario file's node-specific blocks.
        expected_parameters.append(process.overrides_file())
        overrides = yaml.safe_load(Path(options["parameters"][-1]).read_text())
        assert overrides == {f"/**/{kind}": {"ros__parameters": given}
                             for kind in {kind for kind, _ in process.hosted_nodes()}
                             if (given := parameters_for(kind, process.parameters))}
    assert options["parameters"] == expected_parameters
    assert options["remappings"] == process.remaps
    assert options["ros_arguments"] == (["--log-level", process.log_level] if process.log_level
                                        else [])
    assert options["additional_env"] == process.env
    assert options["additional_env"]["ROS_AUTOMATIC_DISCOVERY_RANGE"] in ("LOCALHOST", "SUBNET")
    assert options["respawn"] == process.respawn
    if process.respawn:
        assert (options["respawn_delay"], options["respawn_max_retries"]) == (RESPAWN_DELAY_S, MAX_RESPAWNS)
    if process.required and process.respawn:
        # A crash respawns the process; only a clean exit (training complete) ends the launch.
        on_exit = options["on_exit"]
        assert callable(on_exit)
        (shutdown,) = on_exit(types.SimpleNamespace(returncode=0), None)
        assert isinstance(shutdown, FakeShutdown)
        assert process.name in shutdown.kwargs["reason"]
        for crash in (1, -9, 3):
            assert on_exit(types.SimpleNamespace(returncode=crash), None) is None
    elif process.required:
        (shutdown,) = options["on_exit"]
        assert isinstance(shutdown, FakeShutdown)
    else:
        assert "on_exit" not in options


@pytest.mark.parametrize(("respawn", "required"), [(True, True), (False, True), (True, False),
                                                  (False, False)])
def test_launch_node_exit_handling_follows_respawn_and_required(
    fake_launch: None, respawn: bool, required: bool
) -> None:
    from rl_bringup.launch_helpers import node_action

    process = plan_for("decoupled").processes[-1]
    process.respawn, process.required = respawn, required
    node = node_action(process)
    assert isinstance(node, FakeNode)
    check_node_matches(node, process)
    if required and not respawn:
        (shutdown,) = node.kwargs["on_exit"]
        assert process.name in shutdown.kwargs["reason"]


def test_launch_with_a_bad_argument_raises_plan_error(fake_launch: None) -> None:
    with pytest.raises(PlanError, match="valid modes"):
        run_launch_file("multi_robot.launch.py", {"mode": "sideways", "domain_id": "1"})
    with pytest.raises(PlanError, match="robots must be"):
        run_launch_file("hybrid.launch.py", {"robots": "100", "domain_id": "1"})


def test_launch_refuses_elastic_robots(fake_launch: None) -> None:
    # ros2 launch starts every process at once; only the rl-bringup supervisor can scale.
    with pytest.raises(PlanError, match="robots:=auto needs `rl-bringup launch"):
        run_launch_file("hybrid.launch.py", {"robots": "auto", "domain_id": "1"})


# ---------------------------------------------------------------------------------- CPU sets

CPU_VARIABLES = ("RL_ROS2_CPUS", "RL_ROS2_LEARNER_CPUS", "RL_ROS2_TORCH_THREADS", "OMP_NUM_THREADS")


def cpu_env(plan: Plan) -> dict[str, dict[str, str]]:
    """The CPU variables of each process, by process name."""
    return {
        process.name: {name: process.env[name] for name in CPU_VARIABLES if name in process.env}
        for process in plan.processes
    }


@pytest.mark.parametrize(
    ("cores", "acting", "learning"),
    [
        ({0}, {0}, {0}),
        ({3}, {3}, {3}),
        ({0, 1}, {0}, {1}),
        ({0, 1, 2}, {0}, {1, 2}),
        ({0, 1, 2, 3}, {0, 1}, {2, 3}),
        ({2, 5, 7, 9}, {2, 5}, {7, 9}),
    ],
)
def test_auto_splits_cores_between_acting_and_learning(
    cores: set[int], acting: set[int], learning: set[int]
) -> None:
    from rl_bringup.plan.cpu_sets import split_cores

    assert split_cores(cores) == (acting, learning)
    plan = plan_for("decoupled", cpus="auto", machine_cpus=cores)
    assert plan.cpu_sets == {"simulator": acting, "policy": acting,
                             "replay_buffer": learning, "trainer": learning}


def test_no_cpu_setting_pins_nothing() -> None:
    for mode in MODES:
        plan = plan_for(mode, 2)
        assert (plan.cpus, plan.cpus_source, plan.cpu_sets) == ("none", "default", {})
        assert all(not variables for variables in cpu_env(plan).values())
        assert all(process.cpus is None and process.torch_threads is None
                   for process in plan.processes)
    assert plan_for("colocated", cpus="none", machine_cpus={0, 1}).cpu_sets == {}


def test_auto_on_two_cores_gives_each_mode_its_cpu_variables() -> None:
    machine = {0, 1}
    acting = {"RL_ROS2_CPUS": "0", "RL_ROS2_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    learning = {"RL_ROS2_CPUS": "1", "RL_ROS2_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    colocated = plan_for("colocated", 2, cpus="auto", machine_cpus=machine)
    assert cpu_env(colocated) == {"container": {
        "RL_ROS2_CPUS": "0-1", "RL_ROS2_LEARNER_CPUS": "1",
        "RL_ROS2_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}}
    decoupled = plan_for("decoupled", 2, cpus="auto", machine_cpus=machine)
    assert cpu_env(decoupled) == {
        "simulator_robot_0": acting, "policy_robot_0": acting,
        "simulator_robot_1": acting, "policy_robot_1": acting,
        "replay_buffer": learning, "trainer": learning,
        # The aggregator runs on the replay buffer's CPUs (cpu_sets.SHARES_CPUS_WITH).
        "diagnostics_aggregator": learning,
    }
    hybrid = plan_for("hybrid", 2, cpus="auto", machine_cpus=machine)
    assert cpu_env(hybrid) == {"robot_0": acting, "robot_1": acting, "learner": learning}
    # The plan's shared environment stays free of per-process settings.
    assert not set(CPU_VARIABLES) & set(hybrid.environment)


def test_torch_threads_follow_the_trainer_cpus() -> None:
    machine = set(range(4))
    colocated = plan_for("colocated", cpus="auto", machine_cpus=machine).processes[0]
    assert (colocated.cpus, colocated.learner_cpus, colocated.torch_threads) == ({0, 1, 2, 3}, {2, 3}, 2)
    assert colocated.env["OMP_NUM_THREADS"] == "2"
    hybrid = plan_for("hybrid", cpus="replay_buffer=0;trainer=1-3", machine_cpus=machine)
    learner = hybrid.processes[-1]
    assert (learner.cpus, learner.learner_cpus, learner.torch_threads) == ({0, 1, 2, 3}, {1, 2, 3}, 3)
    assert hybrid.processes[0].cpus is None  # robot nodes are not named: not pinned
    assert hybrid.processes[0].torch_threads == 1


def test_kind_lists_are_canonical_and_may_name_some_kinds_only() -> None:
    plan = plan_for("decoupled", cpus=" trainer = 1 ; simulator=0,1 ;", machine_cpus={0, 1})
    assert (plan.cpus, plan.cpus_source) == ("simulator=0-1;trainer=1", "argument")
    cpus = {process.name: process.cpus for process in plan.processes}
    assert cpus == {"simulator_robot_0": {0, 1}, "policy_robot_0": None,
                    "replay_buffer": None, "trainer": {1}, "diagnostics_aggregator": None}
    assert plan.to_dict()["cpus"] == {"setting": "simulator=0-1;trainer=1", "source": "argument",
                                      "sets": {"simulator": "0-1", "trainer": "1"}}
    (trainer,) = [process.to_dict() for process in plan.processes if process.name == "trainer"]
    assert (trainer["cpus"], trainer["learner_cpus"], trainer["torch_threads"]) == ("1", None, 1)


@pytest.mark.parametrize(
    ("cpus", "match"),
    [
        ("trainr=1", "unknown node kind 'trainr'.*simulator, policy, replay_buffer, trainer"),
        ("trainer=2", "CPU 2 not available; this machine offers CPUs 0-1"),
        ("trainer=1-0", "runs backwards"),
        ("trainer=x", "bad CPU list 'x'.*valid: auto, none"),
        ("trainer", "bad cpus entry 'trainer'.*valid: auto, none"),
        ("trainer=1;trainer=0", "given twice"),
        ("sometimes", "bad cpus entry 'sometimes'"),
        (";", "bad cpus ';'"),
    ],
)
def test_bad_cpu_settings_raise_plan_error_naming_the_choices(cpus: str, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        plan_for("hybrid", cpus=cpus, machine_cpus={0, 1})


BRINGUP_BLOCKS = {
    "mapping": ('    cpus: {simulator: "0", policy: "0", replay_buffer: "1", trainer: 1}\n',
                "simulator=0;policy=0;replay_buffer=1;trainer=1"),
    "auto": ("    cpus: auto\n", "auto"),
}


def scenario_with_block(tmp_path: Path, block: str) -> Path:
    """The default scenario plus a ``/rl_bringup`` block."""
    path = tmp_path / "scenario.yaml"
    path.write_text((CONFIG_DIR / "cartpole.yaml").read_text()
                    + "\n/rl_bringup:\n  ros__parameters:\n" + block)
    return path


@pytest.mark.parametrize("name", sorted(BRINGUP_BLOCKS))
def test_cpus_come_from_the_scenario_block_unless_given(tmp_path: Path, name: str) -> None:
    from rl_core.config import load_run_config, node_parameters

    block, canonical = BRINGUP_BLOCKS[name]
    path = scenario_with_block(tmp_path, block)
    plan = plan_for("hybrid", config=str(path), machine_cpus={0, 1})
    assert (plan.cpus, plan.cpus_source) == (canonical, "config")
    assert [process.cpus for process in plan.processes] == [{0}, {1}]
    given = plan_for("hybrid", config=str(path), cpus="none", machine_cpus={0, 1})
    assert (given.cpus, given.cpus_source, given.cpu_sets) == ("none", "argument", {})
    # The node configs skip the block (ROS 2 skips it too: no node is named rl_bringup).
    reference = load_run_config(CONFIG_DIR / "cartpole.yaml")
    assert load_run_config(path) == reference
    document = yaml.safe_load(path.read_text())
    assert "cpus" not in node_parameters(document, "trainer")


@pytest.mark.parametrize(
    ("block", "match"),
    [
        ("    cpu: auto\n", r"unknown setting\(s\) \['cpu'\].*valid: cpus"),
        ("    cpus: {trainer: 7}\n", "CPU 7 not available"),
        ("    cpus: {}\n", "empty cpus mapping"),
        ("    cpus:\n", "is empty"),
    ],
)
def test_bad_scenario_blocks_raise_plan_error(tmp_path: Path, block: str, match: str) -> None:
    path = scenario_with_block(tmp_path, block)
    with pytest.raises(PlanError, match=match):
        plan_for("colocated", config=str(path), machine_cpus={0, 1})


def test_plan_table_shows_cpus_and_threads() -> None:
    from rl_bringup.cli import format_plan_table

    table = format_plan_table(plan_for("colocated", cpus="auto", machine_cpus={0, 1}))
    assert "cpus         auto (argument)" in table
    assert "cpus 0-1, learner thread cpus 1, torch threads 1" in table
    partial = format_plan_table(plan_for("decoupled", cpus="trainer=1", machine_cpus={0, 1}))
    assert "cpus any, torch threads 1" in partial
    unpinned = format_plan_table(plan_for("decoupled"))
    assert "cpus         none (default)" in unpinned
    assert "torch threads" not in unpinned


def test_cli_passes_cpus_to_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    from rl_bringup.cli import main

    assert main(["plan", "hybrid", "cpus:=auto", "domain_id:=3", "--format", "yaml"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["cpus"]["setting"] == "auto" and printed["cpus"]["source"] == "argument"
    assert all(process["torch_threads"] >= 1 for process in printed["processes"])
    assert main(["plan", "hybrid", "cpus:=robot=0", "domain_id:=3"]) == 2
    assert "unknown node kind 'robot'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- central policy


def central(mode: str, robots: int = 2, **kwargs: Any) -> Plan:
    return plan_for(mode, robots, policy_layout="central", **kwargs)


@pytest.mark.parametrize("robots", [1, 3])
def test_central_decoupled_runs_one_policy_process_for_every_robot(robots: int) -> None:
    plan = central("decoupled", robots)
    expected = [(f"simulator_robot_{k}", "simulator", (f"simulator@/robot_{k}",), True, False)
                for k in range(robots)]
    expected.append(("policy", "policy", ("policy@/",), True, False))
    expected.append(("replay_buffer", "replay_buffer", ("replay_buffer@/",), True, True))
    expected.append(("trainer", "trainer", ("trainer@/",), True, True))
    expected.append(("diagnostics_aggregator", "diagnostics_aggregator",
                     ("diagnostics_aggregator@/",), True, False))
    assert layout(plan) == expected
    policy = next(process for process in plan.processes if process.name == "policy")
    assert policy.parameters == {"robots": robots}
    assert plan.policy_layout == "central" and plan.to_dict()["policy_layout"] == "central"


@pytest.mark.parametrize("robots", [1, 3])
def test_central_hybrid_keeps_simulators_in_robot_containers_and_the_policy_apart(
    robots: int,
) -> None:
    plan = central("hybrid", robots)
    expected = [(f"robot_{k}", "container", (f"simulator@/robot_{k}",), True, False)
                for k in range(robots)]
    expected.append(("policy", "policy", ("policy@/",), True, False))
    expected.append(("learner", "container",
                     ("replay_buffer@/", "trainer@/", "diagnostics_aggregator@/"), True, True))
    assert layout(plan) == expected
    # Only the learner (replay_buffer + trainer + diagnostics_aggregator) gets
    # deployment_robots; the robot containers and the central policy do not, and only the
    # robot containers (simulators) wait for the replay buffer's first status.
    assert [process.parameters for process in plan.processes] == \
        [{"await_replay_status": True}] * robots + [{"robots": robots},
                                                   {"deployment_robots": robots}]


def test_central_colocated_hosts_one_policy_node_in_the_container() -> None:
    plan = central("colocated", 3)
    robot_nodes = tuple(f"simulator@/robot_{k}" for k in range(3))
    assert layout(plan) == [("container", "container",
                             (*robot_nodes, "policy@/", "replay_buffer@/", "trainer@/",
                              "diagnostics_aggregator@/"), True, True)]
    # One container hosts the policy, the simulators and the learner nodes: it gets robots,
    # deployment_robots and await_replay_status (each node kind reads the one it declares).
    assert plan.processes[0].parameters == {"robots": 3, "deployment_robots": 3,
                                            "await_replay_status": True}


@pytest.mark.parametrize("mode", MODES)
def test_central_modes_host_the_same_nodes(mode: str) -> None:
    nodes = sorted(central(mode, 3).hosted_nodes())
    expected = sorted([("simulator", f"/robot_{k}") for k in range(3)]
                      + [("policy", "/"), ("replay_buffer", "/"), ("trainer", "/"),
                         ("diagnostics_aggregator", "/")])
    assert nodes == expected


def test_per_robot_is_the_default_and_matches_the_explicit_choice() -> None:
    for mode in MODES:
        default, explicit = plan_for(mode, 2), plan_for(mode, 2, policy_layout="per_robot")
        assert layout(default) == layout(explicit)
        assert default.policy_layout == "per_robot"
        assert all("robots" not in process.parameters for process in default.processes)


def test_central_policy_command_line_carries_robots_in_the_overrides_file() -> None:
    plan = central("decoupled", 2, extra_parameters={"deterministic": True})
    policy = next(process for process in plan.processes if process.name == "policy")
    argv = policy.argv()
    config = str(CONFIG_DIR / "cartpole.yaml")
    # Namespace '/': no __ns remap; the node is /policy.
    assert argv[:4] == ["policy", "--ros-args", "--params-file", config]
    assert argv[4] == "--params-file" and len(argv) == 6
    overrides = yaml.safe_load(Path(argv[5]).read_text())
    assert overrides == {"/**/policy": {"ros__parameters": {"deterministic": True, "robots": 2}}}
    # The parameter the plan sets is the one the policy node declares.
    import dataclasses

    from rl_core.config import PolicyConfig

    assert "robots" in {field.name for field in dataclasses.fields(PolicyConfig)}


def test_central_plan_notes_where_get_action_is() -> None:
    plan = central("hybrid", 2)
    assert any("/policy/get_action" in note for note in plan.notes)
    assert not any("get_action" in note for note in plan_for("hybrid", 2).notes)


def test_central_policy_is_pinned_with_the_acting_nodes() -> None:
    plan = central("hybrid", 2, cpus="auto", machine_cpus={0, 1})
    by_name = {process.name: process for process in plan.processes}
    assert by_name["policy"].cpus == {0} and by_name["policy"].torch_threads == 1
    assert by_name["learner"].cpus == {1}


@pytest.mark.parametrize("policy_layout", ["sideways", "", "per-robot", "centralised"])
def test_bad_policy_layout_raises_plan_error_naming_the_choices(policy_layout: str) -> None:
    with pytest.raises(PlanError, match=r"unknown policy_layout .*valid: per_robot, central"):
        plan_for("decoupled", 2, policy_layout=policy_layout)


def test_policy_layout_is_case_and_space_tolerant() -> None:
    assert plan_for("decoupled", 2, policy_layout=" Central ").policy_layout == "central"


def test_cli_passes_policy_layout_to_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    from rl_bringup.cli import main

    assert main(["plan", "decoupled", "robots:=2", "policy_layout:=central", "domain_id:=3",
                 "--format", "yaml"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["policy_layout"] == "central"
    assert [process["name"] for process in printed["processes"]] == \
        ["simulator_robot_0", "simulator_robot_1", "policy", "replay_buffer", "trainer",
         "diagnostics_aggregator"]
    assert main(["plan", "decoupled", "policy_layout:=sideways", "domain_id:=3"]) == 2
    assert "unknown policy_layout 'sideways'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("file_name", "overrides"),
    [
        ("decoupled.launch.py", {"robots": "2", "policy_layout": "central"}),
        ("hybrid.launch.py", {"robots": "3", "policy_layout": "central", "cpus": "auto"}),
        ("multi_robot.launch.py", {"mode": "colocated", "robots": "2", "policy_layout": "central"}),
    ],
)
def test_launch_passes_policy_layout_and_cpus_to_the_plan(
    fake_launch: None, monkeypatch: pytest.MonkeyPatch, file_name: str, overrides: dict[str, str]
) -> None:
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    _, actions = run_launch_file(file_name, {**overrides, "domain_id": "11"})
    mode = LAUNCH_FILES[file_name] or overrides["mode"]
    plan = with_weights_key(make_plan(mode, overrides["robots"], output_dir=launch_output_dir(mode),
                                      domain_id=11, cpus=overrides.get("cpus"),
                                      policy_layout="central"))
    nodes = [action for action in actions if isinstance(action, FakeNode)]
    assert len(nodes) == len(plan.processes)
    assert any(process.required and process.respawn for process in plan.processes)
    for node, process in zip(nodes, plan.processes):
        check_node_matches(node, process)
    messages = [action.kwargs["msg"] for action in actions if isinstance(action, FakeLogInfo)]
    assert any("/policy/get_action" in message for message in messages)


def test_launch_cpus_argument_defaults_to_not_given(fake_launch: None) -> None:
    declared, _ = run_launch_file("decoupled.launch.py", {"domain_id": "11"})
    defaults = {argument.name: argument.kwargs["default_value"] for argument in declared}
    assert defaults["cpus"] == "" and defaults["policy_layout"] == "per_robot"


def test_parameter_files_go_to_a_folder_only_this_user_may_enter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 19: the overrides file of a process cannot be planted or read by another user."""
    import os
    import stat
    import tempfile

    from rl_bringup.plan import process_spec

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    trainer = {process.name: process for process in plan_for("decoupled", 1).processes}["trainer"]
    path = Path(trainer.overrides_file())
    folder = tmp_path / f"rl_bringup-{os.getuid()}"
    assert path.parent == folder and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text()) == yaml.safe_load(trainer.overrides_document())
    # A folder of that name that others may write (planted, or left open) is not used.
    folder.chmod(0o777)
    assert process_spec.private_directory() != folder
    assert Path(trainer.overrides_file()).parent != folder
    folder.chmod(0o700)
    path.unlink()
    folder.rmdir()
    folder.symlink_to(tmp_path)  # a link planted in its place
    assert process_spec.private_directory() != folder


# ------------------------------------------------------------ namespace, log level, params_file


@pytest.mark.parametrize("mode", MODES)
def test_a_namespace_holds_the_whole_deployment(mode: str) -> None:
    plan = make_plan(mode, 2, namespace="lab/a", domain_id=3, environ={})
    assert plan.namespace == "/lab/a"
    assert {namespace for _, namespace in plan.hosted_nodes()} == \
        {"/lab/a", "/lab/a/robot_0", "/lab/a/robot_1"}
    for process in plan.processes:
        argv = process.argv()
        # Every shared (absolute) name of the deployment is remapped under it, in every process.
        for source in ("/experience", "/policy_weights", "/diagnostics", "/tf",
                       "/replay_buffer/sample"):
            assert f"{source}:=/lab/a{source}" in argv, (process.name, argv)
        if process.is_container:
            assert not any(word.startswith("__ns:=") for word in argv)
            assert all(word.startswith("--node") or "@/lab/a" in word
                       for word in process.arguments)
        else:
            assert f"__ns:={process.namespace}" in argv
    # The plain plan has none of it.
    plain = make_plan(mode, 2, domain_id=3, environ={})
    assert all(not process.remaps for process in plain.processes)
    assert "namespace /lab/a" in plan.header_lines()[0]


@pytest.mark.parametrize("namespace", ["1lab", "lab a", "lab//a", "la-b", "~lab"])
def test_a_bad_namespace_names_the_rule(namespace: str) -> None:
    with pytest.raises(PlanError, match="bad namespace.*letters, digits and underscores"):
        make_plan("colocated", namespace=namespace, domain_id=3, environ={})


def test_log_level_and_params_file_reach_every_process(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("/**/trainer:\n  ros__parameters:\n    batch_size: 64\n")
    plan = make_plan("hybrid", 2, log_level="WARN", params_file=str(mine), domain_id=3, environ={},
                     extra_parameters={"batch_size": 32})
    for process in plan.processes:
        argv = process.argv()
        assert argv[argv.index("--log-level") + 1] == "warn"
        files = [argv[index + 1] for index, word in enumerate(argv) if word == "--params-file"]
        # The scenario's file, the user's over it, and the NAME:=VALUE overrides over both.
        assert files[:2] == [plan.config_file, str(mine)]
        assert len(files) == 2 + process.has_overrides


@pytest.mark.parametrize(("content", "match"), [
    (None, "cannot be read"),
    ("a: [", "is not YAML"),
    ("batch_size: 3\n", "not a ROS parameter file"),
    ("/**/trainer:\n  batch_size: 3\n", "not a ROS parameter file"),
])
def test_a_bad_params_file_is_refused_with_the_reason(tmp_path: Path, content: str | None,
                                                      match: str) -> None:
    path = tmp_path / "mine.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(PlanError, match=f"params_file .*{match}"):
        make_plan("colocated", params_file=str(path), domain_id=3, environ={})
    with pytest.raises(PlanError, match="unknown log_level 'loud'; valid: debug, info"):
        make_plan("colocated", log_level="loud", domain_id=3, environ={})


def test_a_namespace_pushed_by_an_including_launch_file_goes_in_front(fake_launch: None) -> None:
    _, actions = run_launch_file("hybrid.launch.py", {"robots": "2", "domain_id": "11",
                                                      "namespace": "lab",
                                                      "ros_namespace": "/site"})
    nodes = [action for action in actions if isinstance(action, FakeNode)]
    expected = with_weights_key(make_plan("hybrid", 2, domain_id=11, namespace="/site/lab",
                                          output_dir=launch_output_dir("hybrid")))
    assert len(nodes) == len(expected.processes)
    for node, process in zip(nodes, expected.processes):
        check_node_matches(node, process)
    # The nodes carry the full namespace; launch_ros must not add the pushed one again.
    assert nodes[0].kwargs["arguments"] == ["--node", "simulator@/site/lab/robot_0",
                                            "--node", "policy@/site/lab/robot_0"]


def test_use_composition_makes_each_container_a_composable_node_container(
        fake_launch: None) -> None:
    _, actions = run_launch_file("hybrid.launch.py", {"robots": "2", "domain_id": "11",
                                                      "use_composition": "true"})
    containers = [action for action in actions if isinstance(action, FakeComposableNodeContainer)]
    assert not [action for action in actions if isinstance(action, FakeNode)]
    assert [(c.kwargs["name"], c.kwargs["namespace"]) for c in containers] == \
        [("container", "/robot_0"), ("container", "/robot_1"), ("container", "/")]
    learner = containers[-1].kwargs
    # Started empty with load_node served, not respawned (launch_ros would not load its nodes
    # again); its clean exit or crash ends the launch; the nodes load learning side first, the
    # trainer last.
    assert learner["arguments"] == ["--remote-composition"] and learner["respawn"] is False
    assert "respawn_delay" not in learner
    (shutdown,) = learner["on_exit"]
    assert isinstance(shutdown, FakeShutdown)
    loads = [(node.kwargs["plugin"], node.kwargs["namespace"])
             for node in learner["composable_node_descriptions"]]
    assert loads == [("rl_nodes::ReplayBuffer", "/"), ("rl_nodes::DiagnosticsAggregator", "/"),
                     ("rl_nodes::Trainer", "/")]
    assert all(node.kwargs["extra_arguments"] == [{"use_intra_process_comms": True}]
               for node in learner["composable_node_descriptions"])
    # The process' parameter files stay the container's (the loaded nodes read them).
    assert learner["parameters"][0].endswith("cartpole.yaml")
    with pytest.raises(PlanError, match="use_composition must be true or false"):
        run_launch_file("colocated.launch.py", {"domain_id": "11", "use_composition": "maybe"})


@pytest.mark.parametrize(("given", "flagged"), [({}, False), ({"remote_composition": "true"}, True)])
def test_remote_composition_is_off_unless_asked_for(fake_launch: None, given: dict[str, str],
                                                    flagged: bool) -> None:
    """Containers serve load_node and unload_node only with remote_composition:=true (issue 41):
    anyone on the domain could call them; single-node processes never get the switch."""
    for file_name in ("hybrid.launch.py", "decoupled.launch.py"):
        _, actions = run_launch_file(file_name, {"robots": "1", "domain_id": "11", **given})
        for node in (action for action in actions if isinstance(action, FakeNode)):
            expect = flagged and node.kwargs["executable"] == "container"
            assert ("--remote-composition" in node.kwargs["arguments"]) is expect, node.kwargs
    with pytest.raises(PlanError, match="remote_composition must be true or false"):
        run_launch_file("colocated.launch.py", {"domain_id": "11", "remote_composition": "maybe"})
