"""ONNX export: onnxruntime acts like the torch actor, metadata round-trips, bad input fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.envs import CARTPOLE_ID, KUKA_REACH_ID
from rl_core.robot.tasks import space_shapes
from rl_core.runs.export import export_onnx
from rl_core.runs.onnx_policy import ARCHITECTURE_KEY, ENV_ID_KEY, OnnxPolicy

pytestmark = pytest.mark.unit

#: (env_id stored in the model or None, hidden sizes): the shipped scenarios' sizes.
CASES = {
    "cartpole": (CARTPOLE_ID, (64, 64)),
    "kuka": (None, (256, 256)),
}
TASKS = {"cartpole": CARTPOLE_ID, "kuka": KUKA_REACH_ID}


@pytest.fixture(scope="module", params=sorted(CASES))
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[SquashedGaussianActor, Path, str | None]:
    """An actor of a scenario's sizes and its exported model (one export per size: exports are
    slow, about 2 s each and 8 s for the first in a process)."""
    stored_env_id, hidden_sizes = CASES[request.param]
    (obs_dim,), (action_dim,) = space_shapes(TASKS[request.param])
    torch.manual_seed(3)
    actor = SquashedGaussianActor(obs_dim, action_dim, hidden_sizes)
    path = export_onnx(actor, tmp_path_factory.mktemp(request.param) / "nested" / "policy.onnx",
                       env_id=stored_env_id)
    return actor, path, stored_env_id


@pytest.mark.parametrize("batch", [1, 5, 64])
def test_onnx_actions_equal_torch_mean_actions(
        exported: tuple[SquashedGaussianActor, Path, str | None], batch: int) -> None:
    actor, path, _ = exported
    policy = OnnxPolicy(path)
    obs = np.random.default_rng(batch).normal(scale=2.0, size=(batch, actor.obs_dim))
    actions = policy.act(obs.astype(np.float32))
    assert actions.dtype == np.float32
    assert actions.shape == (batch, actor.action_dim)
    np.testing.assert_allclose(actions, actor.act(obs, deterministic=True), atol=1e-5, rtol=0)
    assert np.all(np.abs(actions) <= 1.0)


def test_float64_observations_are_cast(exported: tuple[SquashedGaussianActor, Path, str | None]
                                       ) -> None:
    actor, path, _ = exported
    obs = np.random.default_rng(0).normal(size=(3, actor.obs_dim))  # float64
    np.testing.assert_allclose(OnnxPolicy(path).act(obs), actor.act(obs, deterministic=True),
                               atol=1e-5, rtol=0)


def test_metadata_round_trips(exported: tuple[SquashedGaussianActor, Path, str | None]) -> None:
    actor, path, stored_env_id = exported
    policy = OnnxPolicy(path)
    assert policy.architecture == actor.architecture()
    assert (policy.obs_dim, policy.action_dim) == (actor.obs_dim, actor.action_dim)
    assert policy.env_id == stored_env_id
    properties = {entry.key: entry.value for entry in onnx.load(str(path)).metadata_props}
    assert ARCHITECTURE_KEY in properties
    assert (ENV_ID_KEY in properties) == (stored_env_id is not None)


def test_model_has_a_dynamic_batch_and_one_thread(
        exported: tuple[SquashedGaussianActor, Path, str | None]) -> None:
    _, path, _ = exported
    (obs_input,) = onnx.load(str(path)).graph.input
    batch_dim = obs_input.type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param and not batch_dim.HasField("dim_value")
    policy = OnnxPolicy(path)
    assert policy._session.get_session_options().intra_op_num_threads == 1
    assert policy._session.get_providers() == ["CPUExecutionProvider"]


def test_export_writes_atomically_and_leaves_the_actor_alone(tmp_path: Path) -> None:
    actor = SquashedGaussianActor(4, 1, (8,))
    actor.train()
    target = tmp_path / "policy.onnx"
    target.write_bytes(b"an older model")
    assert export_onnx(actor, target) == target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx"]  # no temporary left
    assert actor.training
    obs = np.zeros((2, 4), dtype=np.float32)
    np.testing.assert_allclose(OnnxPolicy(target).act(obs), actor.act(obs, deterministic=True),
                               atol=1e-5, rtol=0)


def test_missing_and_foreign_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no ONNX model"):
        OnnxPolicy(tmp_path / "missing.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a protobuf")
    with pytest.raises(ValueError, match="not a loadable ONNX model"):
        OnnxPolicy(garbage)
    # A valid ONNX model that export_onnx did not write: no architecture metadata.
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Tanh", ["obs"], ["action"])], "foreign",
        [onnx.helper.make_tensor_value_info("obs", onnx.TensorProto.FLOAT, ["N", 4])],
        [onnx.helper.make_tensor_value_info("action", onnx.TensorProto.FLOAT, ["N", 4])])
    foreign = tmp_path / "foreign.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              str(foreign))
    with pytest.raises(ValueError, match="no 'rl_ros2.architecture' metadata"):
        OnnxPolicy(foreign)


def test_wrong_observations_and_stochastic_requests_are_refused(
        exported: tuple[SquashedGaussianActor, Path, str | None]) -> None:
    actor, path, _ = exported
    policy = OnnxPolicy(path)
    with pytest.raises(ValueError, match=r"add a batch axis"):
        policy.act(np.zeros(actor.obs_dim, dtype=np.float32))
    with pytest.raises(ValueError, match=rf"shape \(N, {actor.obs_dim}\)"):
        policy.act(np.zeros((2, actor.obs_dim + 1), dtype=np.float32))
    with pytest.raises(ValueError, match="deterministic"):
        policy.act(np.zeros((1, actor.obs_dim), dtype=np.float32), deterministic=False)


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="SquashedGaussianActor"):
        export_onnx(torch.nn.Linear(4, 1), tmp_path / "linear.onnx")  # type: ignore[arg-type]
    assert not (tmp_path / "linear.onnx").exists()
    existing = tmp_path / "exists.onnx"  # the thread check comes after the existence check
    existing.write_bytes(b"")
    with pytest.raises(ValueError, match="intra_op_threads"):
        OnnxPolicy(existing, intra_op_threads=0)
