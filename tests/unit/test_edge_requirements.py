"""requirements-edge.txt: the robot-side install is a subset of requirements.txt's pins without
the learning stack (tests/system/test_edge_install.py runs scripts/setup_edge.sh with it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)$")
#: What the ONNX policy node imports beyond the standard library and rl_interfaces.
NEEDED = {"ros-rclpy", "ros-rmw-fastrtps-cpp", "ros-std-msgs", "ros-builtin-interfaces",
          "ros-diagnostic-msgs", "numpy", "pyyaml", "onnxruntime", "cryptography"}
HEAVY = {"torch", "pybullet", "gymnasium", "safetensors", "onnx", "onnxscript", "tensorboard",
         "matplotlib"}


def pins(name: str) -> dict[str, str]:
    """``package -> version`` of a requirements file; every requirement must be an ``==`` pin."""
    found = {}
    for line in (REPO_ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN.match(line)
        if match:
            found[match.group(1).lower()] = match.group(2)
        else:
            assert name == "requirements.txt", f"{name}: {line!r} is not an == pin"
    return found


def test_edge_requirements_are_the_full_pins_of_what_the_onnx_policy_needs() -> None:
    edge, full = pins("requirements-edge.txt"), pins("requirements.txt")
    assert set(edge) == NEEDED
    assert not set(edge) & HEAVY
    for package, version in edge.items():
        assert full.get(package) == version, (
            f"{package}: edge {version} != full {full.get(package)}")

