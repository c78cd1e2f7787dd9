"""Unit tests of ``rl-bringup compose`` and the compose file it wrote, docker/compose.yaml
(Docker cannot run here; the files are validated by the ``compose-spec`` parser, a strict
implementation of the Compose specification, and their meaning is checked by reading them).

docker/compose.yaml must equal what its header's command generates now; every generated file
must be valid Compose; robots are one scalable service per robot process whose replicas claim
their index; every command runs an executable rl_nodes installs; the network is internal."""

from __future__ import annotations

import os
import re
import shlex
import stat
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import yaml
from compose_spec import PyCompose

from rl_bringup.plan.deployment import make_plan
from rl_bringup.run import replica
from rl_bringup.tools.deploy import compose
from rl_bringup.tools.deploy.containers import layout_from_values
from rl_bringup.tools.subcommand import parse_key_values
from rl_core.security import action_auth
from tests.unit.container_commands import (
    REPO_ROOT,
    node_executables,
    parse_node_command,
    without_params_files,
)

pytestmark = pytest.mark.unit

COMMITTED = REPO_ROOT / "docker" / "compose.yaml"
MODES = ("colocated", "decoupled", "hybrid")
REGENERATE = re.compile(r"^#\s+(rl-bringup compose .*)$", re.MULTILINE)


def committed() -> dict[str, Any]:
    return yaml.safe_load(COMMITTED.read_text())


@pytest.fixture
def generate(run_cli: Callable[..., tuple[int, str, str]],
             tmp_path: Path) -> Callable[..., tuple[Path, dict[str, Any]]]:
    """``rl-bringup compose ARGS output:=FILE`` in a fresh folder: the file and its content."""

    def run(*arguments: str) -> tuple[Path, dict[str, Any]]:
        output = tmp_path / "_".join(arguments).replace(":=", "-") / "compose.yaml"
        code, out, err = run_cli("compose", *arguments, f"output:={output}")
        assert code == 0, err
        assert "docker compose" in out
        return output, yaml.safe_load(output.read_text())

    return run


def test_the_committed_compose_file_is_the_generated_one() -> None:
    text = COMMITTED.read_text()
    (command,) = REGENERATE.findall(text)
    words = shlex.split(command)
    assert words[:2] == ["rl-bringup", "compose"]
    mode, values = parse_key_values(words[2:], compose.KEYS, positional_mode=True)
    assert REPO_ROOT / values["output"] == COMMITTED
    _, layout = layout_from_values({**values, "mode": mode}, discovery="subnet")
    assert text == compose.compose_text(layout, COMMITTED, values.get("image",
                                                                      compose.DEFAULT_IMAGE)), (
        f"docker/compose.yaml is stale: run `{command}`")


@pytest.mark.parametrize("mode", MODES)
def test_generated_files_are_valid_compose(
        generate: Callable[..., tuple[Path, dict[str, Any]]], mode: str) -> None:
    output, _ = generate(mode, "robots:=3")
    parsed = PyCompose.from_yaml(output.read_text())
    assert parsed.service_names()
    assert (output.parent / "weights.key").stat().st_mode & 0o077 == 0


def test_the_committed_file_is_valid_compose_and_the_validator_is_strict() -> None:
    PyCompose.from_yaml(COMMITTED.read_text())
    broken = committed()
    broken["services"]["robot"]["scael"] = 3
    with pytest.raises(ValueError, match="scael"):
        PyCompose.from_yaml(yaml.safe_dump(broken))


def test_every_reference_is_declared_at_the_top_level() -> None:
    data = committed()
    for name, service in data["services"].items():
        assert set(service["networks"]) <= set(data["networks"]), name
        assert set(service["secrets"]) <= set(data["secrets"]), name
        assert {config["source"] for config in service.get("configs", [])} <= \
            set(data.get("configs", {})), name
        named = {volume.split(":", 1)[0] for volume in service.get("volumes", [])
                 if not volume.startswith((".", "/"))}
        assert named <= set(data.get("volumes", {})), name
        assert set(service.get("depends_on", [])) <= set(data["services"]), name


@pytest.mark.parametrize(("mode", "robot_services"), [
    ("hybrid", {"robot": ["simulator", "policy"]}),
    ("decoupled", {"simulator": ["simulator"], "policy": ["policy"]}),
    ("colocated", {}),
])
def test_robots_are_one_scalable_service_per_robot_process(
        generate: Callable[..., tuple[Path, dict[str, Any]]], mode: str,
        robot_services: dict[str, list[str]]) -> None:
    _, data = generate(mode, "robots:=3", "max_robots:=8")
    scaled = {name: service for name, service in data["services"].items() if "scale" in service}
    assert set(scaled) == set(robot_services)
    claim_dirs = set()
    for name, service in scaled.items():
        assert service["scale"] == 3
        assert "container_name" not in service and "hostname" not in service  # would not scale
        command = parse_node_command(service["command"])
        assert command.replica["--max-robots"] == "8"
        claim_dir = command.replica["--claim-dir"]
        claim_dirs.add(claim_dir)
        mounted = [volume.split(":") for volume in service["volumes"]]
        assert any(claim_dir.startswith(target + "/") and source in data["volumes"]
                   for source, target in mounted), (claim_dir, mounted)
        # Replica k runs what the plan runs for robot k.
        became = parse_node_command(replica.substitute(service["command"], 2))
        plan = {process.name: process for process in make_plan(mode, 3, environ={}).processes}
        expected = plan["robot_2" if name == "robot" else f"{name}_robot_2"]
        assert became.executable == expected.executable
        # The parameter files' paths differ; a service that hosts a simulator has overrides
        # (await_replay_status) from a config.
        assert without_params_files(became.arguments) == without_params_files(expected.argv()[1:])
        assert len(became.params_files) == expected.argv().count("--params-file")
        kinds = [node.split("@")[0] for node in became.nodes] or [became.executable]
        assert kinds == robot_services[name]
    assert len(claim_dirs) == len(scaled), "each robot service claims in a folder of its own"
    for name, service in data["services"].items():
        if name in scaled:
            continue
        command = parse_node_command(service["command"])
        if service_kinds(service) == {"diagnostics_aggregator"}:
            # decoupled's aggregator service declares no deployment parameter: no overrides.
            assert len(command.params_files) == 1 and "configs" not in service, name
            continue
        configs = {config["target"]: data["configs"][config["source"]]["content"]
                   for config in service["configs"]}
        for kind, block in yaml.safe_load(configs[command.params_files[-1]]).items():
            if kind == "/**/simulator":  # colocated: the robots in the learner's process
                assert block == {"ros__parameters": {"await_replay_status": True}}
                continue
            assert block["ros__parameters"]["deployment_robots"] == 8


def test_compose_names_only_executables_rl_nodes_installs() -> None:
    scripts = node_executables()
    for name, service in committed()["services"].items():
        command = parse_node_command(service["command"])
        assert command.package == "rl_nodes", name
        assert command.executable in scripts, f"{name} runs {command.executable!r}"


def test_compose_is_one_learner_and_robots_on_one_internal_network_and_domain() -> None:
    data = committed()
    services = data["services"]
    learner = parse_node_command(services["learner"]["command"])
    assert learner.nodes == ["replay_buffer@/", "trainer@/", "diagnostics_aggregator@/"]
    robot = parse_node_command(services["robot"]["command"])
    assert robot.nodes == [f"simulator@{replica.PLACEHOLDER}", f"policy@{replica.PLACEHOLDER}"]
    environments = [service["environment"] for service in services.values()]
    assert all(env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET" for env in environments)
    assert len({str(env["ROS_DOMAIN_ID"]) for env in environments}) == 1
    networks = {tuple(service["networks"]) for service in services.values()}
    assert len(networks) == 1
    (network,) = next(iter(networks))
    # The SUBNET discovery range must stay on a private network with no route out.
    assert data["networks"][network].get("internal") is True


def test_compose_config_paths_point_into_the_installed_share_folder() -> None:
    for service in committed()["services"].values():
        params_file = parse_node_command(service["command"]).params_files[0]
        assert params_file.startswith("/ws/install/rl_bringup/share/rl_bringup/config/")
        default_name = re.sub(r"\$\{RL_CONFIG:-([^}]+)\}", r"\1", params_file).rsplit("/", 1)[1]
        assert (REPO_ROOT / "config" / default_name).is_file()


def test_only_the_learner_gets_the_private_key_the_robots_its_public_half() -> None:
    data = committed()
    assert data["secrets"] == {"weights_key": {"file": "./weights.key"},
                               "weights_public_key": {"file": "./weights.pub"}}
    assert data["services"]["learner"]["secrets"] == ["weights_key"]
    assert data["services"]["learner"]["environment"]["RL_ROS2_WEIGHTS_KEY_FILE"] == \
        "/run/secrets/weights_key"
    robot = data["services"]["robot"]
    assert robot["secrets"] == ["weights_public_key"]
    assert robot["environment"]["RL_ROS2_WEIGHTS_KEY_FILE"] == ""
    assert robot["environment"]["RL_ROS2_WEIGHTS_PUBLIC_KEY_FILE"] == \
        "/run/secrets/weights_public_key"


ACTING = {"simulator", "policy"}
LEARNING = {"trainer", "replay_buffer"}
ACTION_VARIABLES = (action_auth.KEY_VARIABLE, action_auth.KEY_FILE_VARIABLE,
                    action_auth.ROBOT_KEYS_VARIABLE)


def service_kinds(service: dict[str, Any]) -> set[str]:
    """The node kinds a service hosts (a container's ``--node`` list, else its executable)."""
    command = parse_node_command(service["command"])
    return {node.split("@")[0] for node in command.nodes} or {command.executable}


def action_keys_in(service: dict[str, Any], secrets: dict[str, Path]) -> action_auth.ActionKeys:
    """The action keys a service's nodes load, with its secrets read from the host's files."""
    environment = {name: str(secrets.get(value, value))
                   for name, value in service["environment"].items()
                   if name in ACTION_VARIABLES}
    return action_auth.load_keys(environment)


@pytest.mark.parametrize(("mode", "holders"), [
    ("decoupled", {"simulator", "policy"}),
    # One process hosts a robot's simulator and its policy: its own process' key suffices, and
    # without the run key a robot container taken over cannot drive another robot.
    ("hybrid", set()),
    ("colocated", set()),
])
def test_services_of_one_robot_share_the_run_action_key_and_the_learner_gets_none(
        generate: Callable[..., tuple[Path, dict[str, Any]]],
        run_cli: Callable[..., tuple[int, str, str]], mode: str, holders: set[str]) -> None:
    output, data = generate(mode, "robots:=2")
    services = data["services"]
    given = {name for name, service in services.items() if "action_key" in service["secrets"]}
    assert given == holders
    key_file = output.parent / action_auth.KEY_FILE_NAME
    for name, service in services.items():
        kinds = service_kinds(service)
        environment = service["environment"]
        if name in given:
            # A simulator or policy whose counterpart is another service, never the learner.
            assert kinds & ACTING and not ACTING <= kinds and not kinds & LEARNING, name
            assert environment[action_auth.KEY_FILE_VARIABLE] == compose.ACTION_SECRET_PATH
            assert environment[action_auth.KEY_VARIABLE] == \
                environment[action_auth.ROBOT_KEYS_VARIABLE] == ""
        else:
            assert not kinds & ACTING or ACTING <= kinds, f"{name} hosts half a robot, no key"
            assert not any(environment.get(variable) for variable in ACTION_VARIABLES), name
    if not holders:
        assert "action_key" not in data["secrets"] and not key_file.exists()
        return
    assert data["secrets"]["action_key"] == {"file": f"./{action_auth.KEY_FILE_NAME}"}
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    # What the policy service signs, the simulator service steps with; another run's key fails.
    secrets = {compose.ACTION_SECRET_PATH: key_file}
    simulator = action_auth.ActionCheck(action_keys_in(services["simulator"], secrets))
    policy = action_keys_in(services["policy"], secrets)
    actions = np.zeros((2, 1), dtype=np.float32)
    seen = action_auth.observation_digest(np.zeros((2, 4), dtype=np.float32))
    for robot in (0, 5):
        simulator.expect(robot, 7, [seen])  # the observations it published
        assert simulator.refusal(robot, 7, actions, 3, policy.mac(robot, 7, actions, 3, seen)) \
            is None
    forged = action_auth.ActionKeys(run_key=os.urandom(action_auth.KEY_BYTES))
    assert simulator.refusal(0, 7, actions, 3, forged.mac(0, 7, actions, 3, seen)) is not None
    before = key_file.read_text()
    code, out, err = run_cli("compose", mode, "robots:=3", f"output:={output}")
    assert code == 0 and f"action key {key_file}" in out, err
    assert key_file.read_text() == before, "regenerating keeps the run's action key"


def test_a_scenario_outside_the_image_is_refused(
        run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    scenario = tmp_path / "mine.yaml"
    scenario.write_text((REPO_ROOT / "config" / "cartpole.yaml").read_text())
    output = tmp_path / "out" / "compose.yaml"
    code, _, err = run_cli("compose", "hybrid", f"config:={scenario}", f"output:={output}")
    assert code == 2
    assert "installed in the image" in err
    assert not output.exists()


def assert_unprivileged(name: str, service: dict[str, Any]) -> None:
    """A service as restricted as the Kubernetes pods: the image's user, a read-only root with a
    tmpfs for what ROS writes, no capabilities, no privilege escalation."""
    from rl_bringup.tools.deploy.k8s_objects import IMAGE_UID

    assert str(service["user"]) == f"{IMAGE_UID}:{IMAGE_UID}" and IMAGE_UID != 0, name
    assert service["read_only"] is True, name
    assert service["cap_drop"] == ["ALL"] and "cap_add" not in service, name
    assert "no-new-privileges:true" in service["security_opt"], name
    assert not service.get("privileged") and "pid" not in service, name
    assert service.get("network_mode") != "host" and "ipc" not in service, name
    scratch = service["tmpfs"]
    environment = service["environment"]
    # ROS's logs (ROS_HOME, else HOME/.ros) and matplotlib's cache land on the tmpfs.
    for variable in ("HOME", "ROS_HOME", "MPLCONFIGDIR"):
        assert any(environment[variable] == folder or environment[variable].startswith(folder + "/")
                   for folder in scratch), (name, variable)


def test_the_committed_services_run_unprivileged_with_a_read_only_root() -> None:
    for name, service in committed()["services"].items():
        assert_unprivileged(name, service)


@pytest.mark.parametrize("mode", MODES)
def test_every_generated_service_runs_unprivileged_with_a_read_only_root(
        generate: Callable[..., tuple[Path, dict[str, Any]]], mode: str) -> None:
    _, data = generate(mode, "robots:=2")
    for name, service in data["services"].items():
        assert_unprivileged(name, service)
        # What a node keeps is on a volume: the learner's output_dir, the robots' claims.
        targets = [volume.split(":")[1] for volume in service["volumes"]]
        assert targets, name
