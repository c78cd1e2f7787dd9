"""What a policy node acts with (rl_core.acting.policy_model): the torch actor or an exported ONNX
model, and the checks of the observations sent to it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rl_core.acting.experts import KukaReachExpert
from rl_core.acting.policy_model import PolicyModel, build_policy_model
from rl_core.algorithms.encoders import make_actor
from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.config import ConfigError, PolicyConfig
from rl_core.envs import CARTPOLE_ID, KUKA_REACH_ID
from rl_core.runs.export import export_onnx

pytestmark = pytest.mark.unit

IMAGE_SHAPE = (2, 16, 16, 3)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CartPole actor exported to ONNX (one export per module: exports take seconds)."""
    return export_onnx(SquashedGaussianActor(4, 1, (16,)),
                       tmp_path_factory.mktemp("onnx") / "policy.onnx", env_id=CARTPOLE_ID)


def torch_model() -> PolicyModel:
    model, note = build_policy_model(PolicyConfig(hidden_sizes=(16,), device="cpu"))
    assert note is None, "the CPU is not worth a line"
    return model


def test_the_torch_actor_acts_in_the_action_shape_and_loads_weights() -> None:
    model = torch_model()
    assert (model.obs_shape, model.action_shape, model.onnx) == ((4,), (1,), None)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    actions = model.act(obs, deterministic=True)
    assert actions.shape == (5, 1) and np.all(np.abs(actions) <= 1.0)
    other = SquashedGaussianActor(4, 1, (16,))
    model.load(other.state_dict())
    np.testing.assert_allclose(model.act(obs, deterministic=True),
                               other.act(obs, deterministic=True), atol=1e-6)
    with pytest.raises(RuntimeError):
        model.load(SquashedGaussianActor(4, 1, (8,)).state_dict())


def test_the_onnx_model_sizes_the_policy_and_says_what_it_ignores(exported: Path) -> None:
    model, note = build_policy_model(PolicyConfig(onnx_model=str(exported), device="cpu"))
    assert model.actor is None and (model.obs_shape, model.action_shape) == ((4,), (1,))
    assert note is not None and note.startswith(f"acting with ONNX model {exported} (4 -> 1, task "
                                                f"{CARTPOLE_ID}") and "device:=cpu ignored" in note
    assert model.act(np.zeros((3, 4), np.float32), deterministic=False).shape == (3, 1)
    _, note = build_policy_model(PolicyConfig(onnx_model=str(exported)))
    assert note is not None and "ignored" not in note


def test_an_onnx_model_of_another_task_or_no_model_is_a_config_error(exported: Path,
                                                                     tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"was exported for {CARTPOLE_ID}, this policy's env_id "
                       f"is {KUKA_REACH_ID}"):
        build_policy_model(PolicyConfig(onnx_model=str(exported), env_id=KUKA_REACH_ID))
    with pytest.raises(ConfigError, match="onnx_model: "):
        build_policy_model(PolicyConfig(onnx_model=str(tmp_path / "missing.onnx")))


def test_a_model_acts_with_exactly_one_of_onnx_actor_and_expert() -> None:
    with pytest.raises(ValueError, match="not 0"):
        PolicyModel((4,), (1,), 8)
    with pytest.raises(ValueError, match="not 2"):
        PolicyModel((23,), (7,), 8, actor=torch_model().actor, expert=KukaReachExpert())


def test_the_expert_acts_for_its_task_and_follows_no_weights(exported: Path) -> None:
    model, note = build_policy_model(PolicyConfig(env_id=KUKA_REACH_ID, expert=True,
                                                  expert_noise=0.1, seed=3))
    assert model.actor is None and model.onnx is None and "KukaReachExpert, noise 0.1" in note
    obs = np.zeros((2, 23), np.float32)
    obs[:, 20] = 0.3  # the target 0.3 m ahead of the hand: the hand moves towards +x
    actions = model.act(obs, deterministic=False)
    assert actions.shape == (2, 7) and np.all(np.abs(actions) <= 1.0)
    expected = KukaReachExpert(noise=0.1, seed=3).act(obs)
    np.testing.assert_array_equal(actions, expected)
    with pytest.raises(ConfigError, match="expert: no scripted expert for"):
        build_policy_model(PolicyConfig(env_id=CARTPOLE_ID, expert=True))
    with pytest.raises(ConfigError, match="set one of them"):
        build_policy_model(PolicyConfig(env_id=KUKA_REACH_ID, expert=True,
                                        onnx_model=str(exported)))


def test_observations_of_another_shape_are_refused_with_the_expected_one() -> None:
    model = torch_model()
    assert model.observations_refusal(np.zeros((2, 4), np.float32)) is None
    assert model.observations_refusal(np.zeros((2, 3), np.float32)) == (
        "expected observations of shape (N, 4), got (2, 3)")


def test_an_image_task_takes_images_or_the_encoders_features() -> None:
    torch.manual_seed(0)
    actor = make_actor(IMAGE_SHAPE, 1, (16,), feature_dim=8, encoder_channels=4)
    model = PolicyModel(IMAGE_SHAPE, (1,), 8, actor=actor)
    assert model.pixels
    images = np.random.default_rng(0).integers(0, 256, (3, *IMAGE_SHAPE), dtype=np.uint8)
    features = np.zeros((3, 8), np.float32)
    assert model.observations_refusal(images) is None
    assert model.observations_refusal(features) is None
    refusal = model.observations_refusal(np.zeros((3, 7), np.float32))
    assert refusal is not None and "or encoder features (N, 8)" in refusal
    assert model.act(images, deterministic=True).shape == (3, 1)
    assert model.act(features, deterministic=True).shape == (3, 1)


def test_request_observations_are_reshaped_or_refused_with_the_reason() -> None:
    model = torch_model()
    obs = model.request_observations([0.5] * 8, [4], max_rows=10)
    assert obs.shape == (2, 4) and obs.dtype == np.float32
    with pytest.raises(ValueError, match="at most 1 observations per request"):
        model.request_observations([0.0] * 8, [4], max_rows=1)
    for values, shape in (([0.0] * 3, [3]), ([0.0] * 6, [4]), ([], [4]),
                          ([float("nan")] * 4, [4])):
        with pytest.raises(ValueError, match=r"send finite observations with obs_shape \[4\] "
                           "and a multiple of 4 values"):
            model.request_observations(values, shape, max_rows=10)
