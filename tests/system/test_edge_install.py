"""Robot-side install: scripts/setup_edge.sh puts requirements-edge.txt, the built rl_interfaces
and the rl_core/rl_nodes sources into a fresh venv without torch or pybullet; the ONNX policy
node run from that venv keeps a simulator of the full venv stepping over DDS on the loopback.

The install needs PyPI (or pip's cache) and the rl_interfaces that scripts/setup.sh built into
this venv; the edge processes get an environment without this venv's library path, so nothing of
the full install can leak into them, and /proc/PID/maps proves it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.envs import CARTPOLE_ID
from rl_core.runs.export import export_onnx
from rl_interfaces.msg import ActionBatch, EpisodeStatistics
from rl_nodes import graph
from tests.processes import REPO, Child

pytestmark = pytest.mark.system
FULL_PREFIX = Path(sys.prefix).resolve()
#: What the full venv has and the edge venv must not.
HEAVY_PACKAGES = ("torch", "pybullet", "gymnasium", "safetensors", "onnx")
#: Variables through which a process of the full venv would lend its libraries to a child.
LEAKING_VARIABLES = ("LD_LIBRARY_PATH", "_ROS_WHEELS_BOOTSTRAP_COMPLETE", "PYTHONPATH",
                     "VIRTUAL_ENV", "PYTHONHOME")
INSTALL_TIMEOUT_S = 300.0
STEPS = 300  # environment steps the simulator must make on the edge policy's actions


def edge_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` (the run's ROS domain and loopback range) without the full venv's paths."""
    return {key: value for key, value in environ.items() if key not in LEAKING_VARIABLES}


@pytest.fixture(scope="module")
def edge_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not list((FULL_PREFIX / "lib").glob("librl_interfaces__*.so")):
        pytest.skip(f"rl_interfaces is not built into {FULL_PREFIX} (scripts/setup.sh does that)")
    venv = tmp_path_factory.mktemp("edge") / "venv"
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "setup_edge.sh"), str(venv)],
        env={**edge_environment(os.environ), "FROM": str(FULL_PREFIX)},
        capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    assert result.returncode == 0, result.stdout + result.stderr
    print(f"edge install: {time.monotonic() - started:.0f} s; {result.stdout.splitlines()[-1]}")
    return venv


def test_the_edge_venv_has_no_torch_or_pybullet_and_imports_the_policy_node(
        edge_venv: Path, ros_env: dict[str, str]) -> None:
    probe = ("import importlib.util, sys\n"
             f"found = [m for m in {HEAVY_PACKAGES!r} if importlib.util.find_spec(m)]\n"
             "import rclpy, onnxruntime, rl_interfaces.msg, rl_nodes.policy\n"
             f"loaded = [m for m in {HEAVY_PACKAGES!r} if m in sys.modules]\n"
             "print('FOUND', found, 'LOADED', loaded, 'PREFIX', sys.prefix)\n")
    result = subprocess.run([str(edge_venv / "bin" / "python"), "-c", probe],
                            env=edge_environment(ros_env), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"FOUND [] LOADED [] PREFIX {edge_venv}" in result.stdout, result.stdout
    listed = subprocess.run([str(edge_venv / "bin" / "python"), "-m", "pip", "list",
                             "--format=freeze"], env=edge_environment(ros_env),
                            capture_output=True, text=True, timeout=60).stdout.lower()
    for package in ("torch", "pybullet", "gymnasium"):
        assert f"\n{package}==" not in f"\n{listed}", listed


def test_the_onnx_policy_of_the_edge_venv_drives_a_simulator_of_the_full_venv(
        edge_venv: Path, ros_env: dict[str, str], tmp_path: Path) -> None:
    model = export_onnx(SquashedGaussianActor(4, 1, (64, 64)), tmp_path / "policy.onnx",
                        env_id=CARTPOLE_ID)
    namespace = ["-r", "__ns:=/robot_0"]
    policy = Child([str(edge_venv / "bin" / "policy"), "--ros-args", *namespace,
                    "-p", f"onnx_model:={model}"],
                   env=edge_environment(ros_env))
    simulator = Child([str(Path(sys.executable).parent / "simulator"), "--ros-args", *namespace,
                       "-p", "random_steps:=0", "-p", "visualization_rate_hz:=0.0"], env=ros_env)
    rclpy.init(args=[])
    node = rclpy.create_node("edge_probe")
    actions: list[ActionBatch] = []
    steps = [0]
    node.create_subscription(ActionBatch, "/robot_0/actions", actions.append,
                             graph.ACTIONS.qos.profile())
    node.create_subscription(EpisodeStatistics, "/episodes",
                             lambda msg: steps.__setitem__(0, max(steps[0], msg.total_env_steps)),
                             graph.EPISODES.qos.profile())
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        deadline = time.monotonic() + 90.0
        while time.monotonic() < deadline and not (steps[0] >= STEPS and len(actions) >= 20):
            executor.spin_once(timeout_sec=0.1)
            assert policy.process.poll() is None, policy.output()
            assert simulator.process.poll() is None, simulator.output()
        assert steps[0] >= STEPS and len(actions) >= 20, (steps, len(actions), policy.output(),
                                                          simulator.output())
        assert all(msg.policy_version == 0 and list(msg.action_shape) == [1] for msg in actions)
        assert "acting with ONNX model" in policy.output(), policy.output()
        # The edge process runs on the edge venv's code only: every shared library it has mapped
        # comes from the edge venv, the base Python or the system, none from the full install
        # (or from a build folder the copied libraries might link to).
        mapped = {fields[5] for fields in (line.split(maxsplit=5) for line in
                                           Path(f"/proc/{policy.pid}/maps").read_text().splitlines())
                  if len(fields) == 6}
        allowed = (f"{edge_venv}/", f"{Path(sys.base_prefix).resolve()}/", "/usr/", "/lib")
        assert not sorted(path for path in mapped if ".so" in path and not path.startswith(allowed))
        assert not [path for path in mapped if path.startswith(f"{FULL_PREFIX}/")]
        assert any(path.startswith(f"{edge_venv}/") and "onnxruntime" in path for path in mapped)
        assert any(path.startswith(f"{edge_venv}/lib/librl_interfaces__") for path in mapped)
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
        simulator.stop()
        policy.stop()
