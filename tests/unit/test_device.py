"""The ``device`` parameter: resolution, the error for CUDA without CUDA, and the learner's
tensors staying on the chosen device (CUDA cases skip with the reason where there is none)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rl_core.algorithms.sac import METRIC_NAMES, SAC
from rl_core.config import ConfigError, PolicyConfig, SACConfig, TrainerConfig, load_run_config
from rl_core.learning.device import cuda_unavailable_reason, resolve_device
from rl_core.learning.training import main as train_bare_main
from rl_core.runs.checkpoint import load_checkpoint, save_checkpoint
from rl_core.runs.export import export_onnx
from rl_core.runs.onnx_policy import OnnxPolicy
from tests.unit.test_sac import fixed_batch

pytestmark = pytest.mark.unit
NO_CUDA = cuda_unavailable_reason()
needs_cuda = pytest.mark.skipif(bool(NO_CUDA), reason=f"no CUDA device: {NO_CUDA}")
needs_no_cuda = pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is present")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]


def small_sac(device: str, seed: int = 0) -> SAC:
    return SAC(3, 2, SACConfig(hidden_sizes=(32, 32)), seed=seed, device=device)


def test_cpu_is_cpu_and_auto_follows_torch() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected


@needs_no_cuda
def test_cuda_without_cuda_is_a_configuration_error_naming_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_device("cuda")
    message = str(caught.value)
    assert "device:=cuda" in message and NO_CUDA in message
    assert "device:=auto" in message and "device:=cpu" in message
    assert "TORCH_VARIANT=" in message


@pytest.mark.parametrize("config_class", [PolicyConfig, TrainerConfig])
def test_configs_take_the_three_devices_and_refuse_others(config_class: type) -> None:
    assert config_class().device == "auto"
    for name in ("auto", "cpu", "cuda"):  # checked by resolve_device, not by the config
        assert config_class(device=name).device == name
    with pytest.raises(ConfigError, match="device must be one of auto, cpu, cuda"):
        config_class(device="gpu")


@needs_no_cuda
def test_bare_loop_with_cuda_but_no_cuda_exits_2(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cuda.yaml"
    config.write_text("/**/trainer:\n  ros__parameters:\n    device: cuda\n")
    assert load_run_config(config).trainer.device == "cuda"
    assert train_bare_main(["--config", str(config), "--output", str(tmp_path / "run")]) == 2
    assert "device:=cuda" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("device", DEVICES)
def test_sac_keeps_its_state_on_the_device(device: str) -> None:
    sac = small_sac(device)
    tensors = [*(p for module in sac.modules().values() for p in module.parameters()),
               sac.log_alpha]
    assert {tensor.device.type for tensor in tensors} == {device}
    metrics = sac.update(fixed_batch())
    assert tuple(metrics) == METRIC_NAMES and all(np.isfinite(list(metrics.values())))
    states = [value for optimizer in sac.optimizers().values()
              for slots in optimizer.state.values() for value in slots.values()
              if isinstance(value, torch.Tensor) and value.dim() > 0]
    assert states and {tensor.device.type for tensor in states} == {device}
    assert isinstance(sac.last_td_errors, np.ndarray) and sac.last_td_errors.dtype == np.float32
    assert sac.last_td_errors.shape == (64,)
    actions = sac.act(np.zeros((5, 3), dtype=np.float32))
    assert isinstance(actions, np.ndarray) and actions.shape == (5, 2)


@needs_cuda
def test_a_seed_gives_the_same_initial_weights_on_cpu_and_cuda() -> None:
    cpu, cuda = small_sac("cpu", seed=3), small_sac("cuda", seed=3)
    for (name, a), (_, b) in zip(cpu.actor.state_dict().items(), cuda.actor.state_dict().items()):
        torch.testing.assert_close(a, b.cpu(), msg=name)
    # One update on the same batch: the deterministic parts agree up to float differences.
    batch = fixed_batch()
    np.testing.assert_allclose(cpu.actor.act(batch.obs, deterministic=True),
                               cuda.actor.act(batch.obs, deterministic=True), atol=1e-5)


@pytest.mark.parametrize("saved_on, loaded_on", [
    ("cpu", "cpu"),
    pytest.param("cuda", "cpu", marks=needs_cuda),
    pytest.param("cpu", "cuda", marks=needs_cuda),
])
def test_checkpoints_are_cpu_tensors_and_load_onto_any_device(tmp_path: Path, saved_on: str,
                                                              loaded_on: str) -> None:
    sac = small_sac(saved_on)
    batch = fixed_batch()
    for _ in range(3):
        sac.update(batch)
    save_checkpoint(tmp_path / "ckpt", sac)
    restored, _ = load_checkpoint(tmp_path / "ckpt", loaded_on)
    assert restored.device.type == loaded_on and restored.update_step == 3
    for (name, a), (_, b) in zip(sac.actor.state_dict().items(),
                                 restored.actor.state_dict().items()):
        assert b.device.type == loaded_on
        torch.testing.assert_close(a.cpu(), b.cpu(), msg=name)
    restored.update(batch)  # the optimizer state followed the parameters


@pytest.mark.parametrize("device", DEVICES)
def test_onnx_export_of_an_actor_on_any_device_runs_on_the_cpu(tmp_path: Path,
                                                               device: str) -> None:
    actor = small_sac(device).actor
    path = export_onnx(actor, tmp_path / "policy.onnx")
    assert actor.mean.weight.device.type == device  # the actor itself stays where it was
    obs = np.random.default_rng(0).normal(size=(7, 3)).astype(np.float32)
    np.testing.assert_allclose(OnnxPolicy(path).act(obs), actor.act(obs, deterministic=True),
                               atol=1e-5)
