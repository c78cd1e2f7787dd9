"""Unit tests of docker/: what can be checked without Docker.

The compose file must parse and start only executables that rl_nodes installs; the Dockerfile's
pinned learning dependencies must equal requirements.txt's; the network-safety settings hold.
"""

from __future__ import annotations

import ast
from pathlib import Path
import re
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO_ROOT / "docker"
LEARNING_PACKAGES = ("torch", "pybullet", "gymnasium", "safetensors")
PIN = re.compile(r"^\s*([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)\s*$")


def requirement_pins() -> dict[str, str]:
    """``name -> version`` of the ``==`` pins in requirements.txt (names lower-cased)."""
    pins = {}
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        match = PIN.match(line.split("#", 1)[0])
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def dockerfile_text() -> str:
    """The Dockerfile with line continuations joined into one logical line each."""
    return (DOCKER_DIR / "Dockerfile").read_text().replace("\\\n", " ")


def console_scripts(setup_py: Path) -> set[str]:
    """Names of the console_scripts a setup.py declares, read with ast (nothing is executed)."""
    tree = ast.parse(setup_py.read_text(), filename=str(setup_py))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    entries = ast.literal_eval(value)
                    return {entry.split("=", 1)[0].strip() for entry in entries}
    raise AssertionError(f"no console_scripts in {setup_py}")


def compose() -> dict[str, Any]:
    """docker/compose.yaml, parsed (merge keys resolved by PyYAML)."""
    data = yaml.safe_load((DOCKER_DIR / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def ros2_run_target(command: list[str]) -> tuple[str, str, list[str]]:
    """(package, executable, rest) of a ``ros2 run PACKAGE EXECUTABLE ...`` command."""
    assert command[:2] == ["ros2", "run"], command
    return command[2], command[3], command[4:]


def hosted_nodes(arguments: list[str]) -> list[str]:
    """The ``KIND@NAMESPACE`` values of the container's ``--node`` arguments."""
    return [arguments[index + 1] for index, token in enumerate(arguments) if token == "--node"]


def test_dockerfile_pins_equal_requirements() -> None:
    pins = requirement_pins()
    text = dockerfile_text()
    for package in LEARNING_PACKAGES:
        found = re.findall(rf"(?<![\w-]){re.escape(package)}==([\w.+-]+)", text)
        assert found, f"{package} is not pinned in the Dockerfile"
        assert set(found) == {pins[package]}, (
            f"{package}: Dockerfile {found} != requirements.txt {pins[package]}"
        )


def test_dockerfile_does_not_pip_install_ros_wheels_or_numpy() -> None:
    pip_lines = [
        line for line in dockerfile_text().splitlines() if re.search(r"\bpip3? install\b", line)
    ]
    assert pip_lines
    for line in pip_lines:
        assert "ros-" not in line, "ROS packages come from apt in the image"
        # The ROS extensions are built against the apt numpy; a pip numpy would shadow it.
        assert "numpy" not in line


def test_dockerfile_builds_on_kilted_with_colcon_and_the_repository_sources() -> None:
    text = dockerfile_text()
    assert re.search(r"^FROM ros:kilted\s*$", text, re.MULTILINE)
    for folder in ("src", "config", "launch"):
        assert re.search(rf"^COPY {folder} ", text, re.MULTILINE), folder
    assert "colcon build" in text
    assert "ros-kilted-rviz2" in text and "ros-kilted-rqt" in text
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST" in text
    entrypoint = re.search(r'^ENTRYPOINT \["([^"]+)"\]', text, re.MULTILINE)
    assert entrypoint and entrypoint.group(1) == "/entrypoint.sh"
    script = (DOCKER_DIR / "entrypoint.sh").read_text()
    assert "source /opt/ros/kilted/setup.bash" in script
    assert 'exec "$@"' in script


def test_compose_names_only_executables_rl_nodes_installs() -> None:
    scripts = console_scripts(REPO_ROOT / "src" / "rl_nodes" / "setup.py")
    services = compose()["services"]
    assert services
    for name, service in services.items():
        package, executable, _ = ros2_run_target(service["command"])
        assert package == "rl_nodes", name
        assert executable in scripts, f"{name} runs {executable!r}; rl_nodes installs {sorted(scripts)}"


def test_compose_is_one_learner_and_robots_on_one_network_and_domain() -> None:
    data = compose()
    services = data["services"]
    learner = services.pop("learner")
    _, _, arguments = ros2_run_target(learner["command"])
    assert hosted_nodes(arguments) == ["replay_buffer@/", "trainer@/"]
    assert services, "at least one robot service"
    namespaces = set()
    for name, service in services.items():
        _, _, arguments = ros2_run_target(service["command"])
        nodes = hosted_nodes(arguments)
        assert [node.split("@")[0] for node in nodes] == ["simulator", "policy"], name
        assert len({node.split("@")[1] for node in nodes}) == 1, name
        namespaces.add(nodes[0].split("@")[1])
    assert namespaces == {f"/robot_{k}" for k in range(len(services))}

    every_service = [learner, *services.values()]
    environments = [service["environment"] for service in every_service]
    assert all(env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET" for env in environments)
    assert len({str(env["ROS_DOMAIN_ID"]) for env in environments}) == 1
    networks = {tuple(service["networks"]) for service in every_service}
    assert len(networks) == 1
    (network,) = next(iter(networks))
    # The SUBNET discovery range must stay on a private network with no route out.
    assert data["networks"][network].get("internal") is True


def test_compose_config_paths_point_into_the_installed_share_folder() -> None:
    for service in compose()["services"].values():
        command = service["command"]
        params_file = command[command.index("--params-file") + 1]
        assert params_file.startswith("/ws/install/rl_bringup/share/rl_bringup/config/")
        default_name = re.sub(r"\$\{RL_CONFIG:-([^}]+)\}", r"\1", params_file).rsplit("/", 1)[1]
        assert (REPO_ROOT / "config" / default_name).is_file()


def test_every_compose_service_gets_the_weights_key_as_a_secret() -> None:
    data = compose()
    assert data["secrets"]["weights_key"] == {"file": "./weights.key"}
    for name, service in data["services"].items():
        assert service["secrets"] == ["weights_key"], name
        assert service["environment"]["RL_ROS2_WEIGHTS_KEY_FILE"] == "/run/secrets/weights_key"
