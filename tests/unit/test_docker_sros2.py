"""Unit tests of the SROS2 overlay of docker/ (what can be checked without Docker): every
container that runs nodes gets security enforced with an enclave of its own that the keystore
service creates, mounted read-only; the image has ``ros2 security`` and the keystore script."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"


def compose(name: str) -> dict[str, Any]:
    return yaml.safe_load((DOCKER_DIR / name).read_text())


def node_services() -> dict[str, list[str]]:
    """Services of compose.yaml that run rl_nodes' container: name -> its --node arguments."""
    services = {}
    for name, service in compose("compose.yaml")["services"].items():
        command = service.get("command", [])
        if "container" in command:
            services[name] = [command[i + 1] for i, arg in enumerate(command) if arg == "--node"]
    return services


def test_every_node_container_enforces_security_with_its_own_enclave() -> None:
    overlay = compose("compose.sros2.yaml")["services"]
    keystore_command = overlay["keystore"]["command"]
    created = set(keystore_command[2:])
    enclaves = {}
    for name, nodes in node_services().items():
        environment = overlay[name]["environment"]
        assert environment["ROS_SECURITY_ENABLE"] == "true"
        assert environment["ROS_SECURITY_STRATEGY"] == "Enforce"  # no silent fallback
        keystore = environment["ROS_SECURITY_KEYSTORE"]
        assert f"rl_keystore:{keystore}:ro" in overlay[name]["volumes"]
        assert overlay[name]["depends_on"]["keystore"]["condition"] == \
            "service_completed_successfully"
        enclave = environment["ROS_SECURITY_ENCLAVE_OVERRIDE"]
        enclaves[name] = enclave
        # One participant per process: the enclave is named after the process' namespace.
        namespaces = {node.split("@", 1)[1] for node in nodes}
        assert namespaces == {"/"} and enclave == "/learner" or namespaces == {enclave}, \
            (name, nodes, enclave)
    assert len(set(enclaves.values())) == len(enclaves), enclaves
    assert created == set(enclaves.values()), (created, enclaves)
    assert keystore_command[:2] == ["sros2_keystore.sh", "/keystore"]
    assert "rl_keystore:/keystore" in overlay["keystore"]["volumes"]


def test_image_has_ros2_security_and_the_keystore_script() -> None:
    text = (DOCKER_DIR / "Dockerfile").read_text().replace("\\\n", " ")
    installs = [shlex.split(line.split("apt-get install", 1)[1].split("&&", 1)[0])
                for line in text.splitlines() if "apt-get install" in line]
    assert any("ros-kilted-sros2" in packages for packages in installs), installs
    copies = [shlex.split(line)[1:] for line in text.splitlines() if line.startswith("COPY ")]
    assert ["docker/sros2_keystore.sh", "/usr/local/bin/sros2_keystore.sh"] in copies


def test_keystore_script_is_valid_bash_and_explains_its_usage() -> None:
    script = DOCKER_DIR / "sros2_keystore.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "usage:" in done.stderr
