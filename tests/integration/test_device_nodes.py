"""``device:=`` on the trainer and the policy node.

``cpu`` and ``auto`` run everywhere, ``cuda`` where torch sees a GPU (skipped with the reason
elsewhere); weights leave the trainer as CPU tensors whatever its device, and ``device:=cuda``
without CUDA ends the executables with exit code 2 and a message that names the fix.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import rclpy
import torch
import yaml
from rclpy.executors import SingleThreadedExecutor

from rl_core.learning.device import cuda_unavailable_reason, resolve_device
from rl_nodes import graph
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.messages import WEIGHTS, Weights
from rl_nodes.policy import PolicyNode
from rl_nodes.trainer import TrainerNode
from tests.processes import REPO, Child

pytestmark = pytest.mark.integration
CONFIG = REPO / "config" / "cartpole.yaml"
NO_CUDA = cuda_unavailable_reason()
needs_cuda = pytest.mark.skipif(bool(NO_CUDA), reason=f"no CUDA device: {NO_CUDA}")


def params_file(directory: Path, device: str) -> Path:
    path = directory / "device.yaml"
    path.write_text(yaml.safe_dump({
        "/**/policy": {"ros__parameters": {"device": device}},
        "/**/trainer": {"ros__parameters": {"device": device, "output_dir": str(directory / "run"),
                                            "checkpoint_period": 0.0}},
    }))
    return path


@pytest.mark.parametrize("device", ["cpu", "auto", pytest.param("cuda", marks=needs_cuda)])
def test_trainer_and_policy_use_the_device_and_weights_travel_on_the_cpu(tmp_path: Path,
                                                                         device: str) -> None:
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG),
                     "--params-file", str(params_file(tmp_path, device))])
    nodes: list[rclpy.node.Node] = []
    executor = SingleThreadedExecutor()
    try:
        policy, trainer = PolicyNode("/robot_0"), TrainerNode("/")
        probe = rclpy.create_node("device_probe")
        nodes = [policy, trainer, probe]
        expected = resolve_device(device).type
        assert trainer.sac.device.type == expected
        assert {p.device.type for p in trainer.sac.actor.parameters()} == {expected}
        assert policy.actor is not None
        assert {p.device.type for p in policy.actor.parameters()} == {expected}
        received: list[Weights] = []
        ipc = IntraProcessManager.for_context(probe.context)
        ipc.create_subscription(probe, WEIGHTS, graph.WEIGHTS.name, received.append,
                                graph.WEIGHTS.qos.profile())
        for node in nodes:
            executor.add_node(node)
        trainer._publish_weights()
        assert ipc.spin_until(lambda: received and policy.version == 1, 30.0)
        assert {tensor.device.type for tensor in received[0].tensors().values()} == {"cpu"}
        obs = torch.zeros(3, 4).numpy()
        assert policy._act(obs, deterministic=True).shape == (3, 1)
    finally:
        for node in nodes:
            if isinstance(node, TrainerNode):
                node.close()  # not finished: writes its checkpoint (CPU tensors) into tmp_path
        executor.shutdown(timeout_sec=1.0)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()


@pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is present")
@pytest.mark.parametrize("executable", ["policy", "trainer"])
def test_device_cuda_without_cuda_exits_2_and_names_the_fix(tmp_path: Path, ros_env,
                                                            executable: str) -> None:
    bin_dir = Path(sys.executable).parent
    child = Child([str(bin_dir / executable), "--ros-args", "--params-file",
                   str(params_file(tmp_path, "cuda"))], env=ros_env)
    try:
        assert child.wait(90.0) == 2, child.output()
        output = child.output()
        assert "configuration error: device:=cuda, but" in output, output
        assert "device:=auto" in output and "TORCH_VARIANT=" in output
        assert "Traceback" not in output
    finally:
        child.stop()
