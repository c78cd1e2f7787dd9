"""Unit tests of the SROS2 overlay of docker/ (what can be checked without Docker): every
service of compose.yaml that runs nodes gets security enforced with an enclave that the keystore
service creates, mounted read-only: the learner its own, the scalable robot service one shared by
its replicas (the trade-off is stated in compose.sros2.yaml); the image has ``ros2 security``
and the keystore script."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.container_commands import parse_node_command

pytestmark = pytest.mark.unit

DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"


def compose(name: str) -> dict[str, Any]:
    return yaml.safe_load((DOCKER_DIR / name).read_text())


def node_services() -> dict[str, tuple[list[str], bool]]:
    """Services of compose.yaml that run nodes: name -> (their namespaces, scalable)."""
    services = {}
    for name, service in compose("compose.yaml")["services"].items():
        command = parse_node_command(service["command"])
        namespaces = sorted({node.split("@", 1)[1] for node in command.nodes})
        services[name] = (namespaces, bool(command.replica))
    return services


def test_every_node_service_enforces_security_with_a_created_enclave() -> None:
    overlay = compose("compose.sros2.yaml")["services"]
    keystore_command = overlay["keystore"]["command"]
    created = set(keystore_command[2:])
    enclaves = {}
    services = node_services()
    assert set(overlay) - {"keystore"} == set(services), "the overlay names compose.yaml's services"
    for name, (namespaces, scalable) in services.items():
        environment = overlay[name]["environment"]
        assert environment["ROS_SECURITY_ENABLE"] == "true"
        assert environment["ROS_SECURITY_STRATEGY"] == "Enforce"  # no silent fallback
        keystore = environment["ROS_SECURITY_KEYSTORE"]
        assert f"rl_keystore:{keystore}:ro" in overlay[name]["volumes"]
        assert overlay[name]["depends_on"]["keystore"]["condition"] == \
            "service_completed_successfully"
        enclave = environment["ROS_SECURITY_ENCLAVE_OVERRIDE"]
        enclaves[name] = enclave
        # One participant per process: the learner's enclave is its own; the replicas of a
        # scalable robot service (namespace known only at start) share the /robot enclave.
        if scalable:
            assert enclave == "/robot", (name, enclave)
        else:
            assert namespaces == ["/"] and enclave == f"/{name}", (name, namespaces, enclave)
    assert len(set(enclaves.values())) == len(enclaves), enclaves
    assert created == set(enclaves.values()), (created, enclaves)
    assert keystore_command[:2] == ["sros2_keystore.sh", "/keystore"]
    assert "rl_keystore:/keystore" in overlay["keystore"]["volumes"]
    # Nothing in the overlay pins a robot replica (a name would stop --scale).
    assert not {"container_name", "hostname"} & set(overlay["robot"])


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
