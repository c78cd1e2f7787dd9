"""The ONNX policy node runs where torch, pybullet and gymnasium are missing.

A fresh interpreter of this venv with those packages made unimportable (``sys.modules[name] =
None``, which is how Python marks a module that cannot be imported) builds the policy node with
``onnx_model:=`` and applies the process settings: the fast, offline stand-in for the robot-side
install that tests/system/test_edge_install.py builds from PyPI.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.envs import CARTPOLE_ID
from rl_core.runs.export import export_onnx

pytestmark = pytest.mark.integration
ABSENT = ("torch", "pybullet", "pybullet_data", "gymnasium", "safetensors", "onnx", "sensor_msgs",
          "PIL")

PROBE = """
import sys
for name in {absent!r}:
    sys.modules[name] = None
import numpy as np
import rclpy
from rl_nodes.policy import PolicyNode
from rl_nodes.process_settings import apply_process_settings

assert apply_process_settings({{}}).torch_threads is None
rclpy.init(args=["--ros-args", "-p", "onnx_model:={model}"])
node = PolicyNode("/robot_0")
actions = node._act(np.zeros((3, 4), np.float32), deterministic=True)
assert actions.shape == (3, 1), actions.shape
node.destroy_node()
rclpy.shutdown()
print("EDGE_OK")
"""


def test_the_onnx_policy_node_needs_no_torch_pybullet_or_gymnasium(tmp_path: Path,
                                                                   ros_env: dict[str, str]) -> None:
    model = export_onnx(SquashedGaussianActor(4, 1, (32,)), tmp_path / "policy.onnx",
                        env_id=CARTPOLE_ID)
    result = subprocess.run([sys.executable, "-c", PROBE.format(absent=ABSENT, model=model)],
                            env=ros_env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "EDGE_OK" in result.stdout, result.stdout + result.stderr
    assert "no weights key" not in result.stderr  # an ONNX policy follows no weights
