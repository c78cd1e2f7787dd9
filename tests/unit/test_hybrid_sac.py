"""An arm and a choice (a Dict action of one Box and discrete parts; rl_core.algorithms.hybrid_sac,
rl_core.envs.spaces.ArmAndChoice): the rows the nodes carry, the learner on a one-step problem,
what it refuses, checkpoints, resuming, export, a policy node's model, and a short bare run on a
user's env with a gripper (tests/system/user_packages). About 10 s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from rl_core.acting.policy_model import build_policy_model
from rl_core.algorithms.hybrid_sac import CHOICE_EXPLORATION, HybridActor, HybridSAC
from rl_core.config import ConfigError, PolicyConfig, SACConfig, load_run_config
from rl_core.envs import VectorEnv, make_env
from rl_core.envs.spaces import (
    MAX_JOINT_CHOICES,
    ArmAndChoice,
    action_choices,
    action_row_shape,
    random_actions,
    unsupported_spaces,
)
from rl_core.learning.training import train
from rl_core.runs.checkpoint import load_actor, load_checkpoint, resume_or_new, save_checkpoint
from rl_core.runs.export import export_onnx
from rl_core.runs.onnx_policy import OnnxPolicy
from rl_core.wire.messages import Batch

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
USER_PACKAGES = REPO / "tests" / "system" / "user_packages"
POINT_GRIP = "user_env_module:PointGrip-v0"
SMALL = SACConfig(hidden_sizes=(32, 32), actor_lr=3e-3, critic_lr=3e-3, alpha_lr=3e-3)
BOX = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)


@pytest.fixture(autouse=True)
def one_torch_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Small networks: one thread; the user's env module importable as a node would find it."""
    monkeypatch.syspath_prepend(str(USER_PACKAGES))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def bandit_batch(rows: int, rng: np.random.Generator) -> Batch:
    """One-step episodes: the reward is highest for an arm value of 0.5 and choice 2 of 3."""
    arm = rng.uniform(-1.0, 1.0, (rows, 1)).astype(np.float32)
    choice = rng.integers(0, 3, (rows, 1)).astype(np.float32)
    rewards = (choice[:, 0] == 2) - np.abs(arm[:, 0] - 0.5)
    obs = np.ones((rows, 2), dtype=np.float32)
    return Batch(obs, np.concatenate([arm, choice], axis=1), rewards.astype(np.float32), obs,
                 np.ones(rows, dtype=np.float32), np.arange(rows, dtype=np.int64),
                 np.ones(rows, dtype=np.float32))


def test_a_dict_of_an_arm_and_a_gripper_travels_as_the_arms_values_then_one_index() -> None:
    space = gymnasium.spaces.Dict({"arm": BOX, "gripper": gymnasium.spaces.Discrete(3, start=-1),
                                   "lights": gymnasium.spaces.MultiBinary(2)})
    env = gymnasium.make("Pendulum-v1")  # any env: ArmAndChoice reads its action space
    env.action_space = space
    wrapped = ArmAndChoice(env)
    assert action_row_shape(wrapped.action_space) == (3,)
    assert action_choices(wrapped.action_space) == 12  # 3 gripper values x 4 light patterns
    action = wrapped.action(np.array([0.25, -0.5, 7.0], dtype=np.float32))
    # index 7 = (gripper 1, lights 3): the gripper's value 1 + start -1, the lights (1, 1)
    np.testing.assert_array_equal(action["arm"], [0.25, -0.5])
    assert action["gripper"] == 0 and action["lights"].tolist() == [1, 1]
    assert all(space[key].contains(value) for key, value in action.items())
    random = random_actions(np.random.default_rng(0), (256, 3), 12)
    assert np.all(np.abs(random[:, :2]) <= 1.0) and set(np.unique(random[:, 2])) == set(range(12))
    env.close()


@pytest.mark.parametrize("action_space, observation_space", [
    (gymnasium.spaces.Dict({"arm": BOX, "gripper": gymnasium.spaces.Discrete(3)}),
     gymnasium.spaces.Box(0, 255, (3, 64, 64), np.uint8)),
    (gymnasium.spaces.Dict({"arm": BOX, "other": BOX, "gripper": gymnasium.spaces.Discrete(3)}),
     BOX),
    (gymnasium.spaces.Dict({"arm": BOX, "keys": gymnasium.spaces.MultiBinary(MAX_JOINT_CHOICES)}),
     BOX)])
def test_other_arm_and_choice_actions_are_refused_in_one_line(
        action_space: gymnasium.Space, observation_space: gymnasium.Space) -> None:
    message = unsupported_spaces("my/Arm-v0", observation_space, action_space)
    assert message is not None and "\n" not in message
    assert "a Dict action of one vector Box and such discrete parts" in message, message


def test_the_arm_and_the_choice_are_learned_on_a_one_step_problem() -> None:
    sac = HybridSAC(2, 1, 3, SMALL, seed=2)
    rng = np.random.default_rng(2)
    for _ in range(400):
        metrics = sac.update(bandit_batch(64, rng))
    action = sac.act(np.ones((1, 2), np.float32), deterministic=True)[0]
    assert action[1] == 2.0 and abs(action[0] - 0.5) < 0.25, action
    q = sac.choice_critic(torch.ones(1, 2)).detach().numpy()[:, 0]  # (members, choices)
    assert np.all(q[:, 2] > q[:, :2].max(axis=1) + 0.5), q
    assert np.isfinite(metrics["choice_critic_loss"]) and sac.update_step == 400, metrics
    assert sac.last_td_errors.shape == (64,)
    drawn = sac.act(np.ones((4000, 2), np.float32))
    explored = float(np.mean(drawn[:, 1] != 2.0))
    assert abs(explored - CHOICE_EXPLORATION * 2 / 3) < 0.03, explored  # random: 1 in 3 is 2


def test_a_choice_that_is_no_index_and_settings_it_lacks_are_refused() -> None:
    sac = HybridSAC(2, 1, 3, SMALL)
    batch = bandit_batch(8, np.random.default_rng(0))
    batch.actions[0, 1] = 3.0
    with pytest.raises(ValueError, match=r"last value\) of an arm-and-choice action must be an "
                                         r"index in \[0, 3\)"):
        sac.update(batch)
    assert sac.update_step == 0
    with pytest.raises(ConfigError, match="compile_update: false"):
        HybridSAC(2, 1, 3, SACConfig(compile_update=True))
    with pytest.raises(ValueError, match="flat observation"):
        HybridSAC((3, 64, 64, 3), 1, 3, SMALL)


def test_a_checkpoint_comes_back_as_the_arm_and_choice_learner_and_its_onnx_model_acts_alike(
        tmp_path: Path) -> None:
    sac = HybridSAC(2, 1, 3, SMALL, seed=3)
    sac.update(bandit_batch(16, np.random.default_rng(3)))
    save_checkpoint(tmp_path / "checkpoint", sac, env_id=POINT_GRIP)
    loaded, meta = load_checkpoint(tmp_path / "checkpoint")
    assert isinstance(loaded, HybridSAC) and meta["algorithm"] == HybridSAC.ALGORITHM
    assert (loaded.choices, loaded.action_dim, loaded.update_step) == (3, 2, 1)
    obs = np.random.default_rng(4).normal(size=(16, 2)).astype(np.float32)
    np.testing.assert_array_equal(loaded.act(obs, deterministic=True),
                                  sac.act(obs, deterministic=True))
    actor, _ = load_actor(tmp_path / "checkpoint")
    assert isinstance(actor, HybridActor) and actor.architecture() == sac.actor.architecture()
    assert isinstance(resume_or_new(tmp_path / "checkpoint", (2,), (2,), 3, SMALL, 0)[0],
                      HybridSAC)
    with pytest.raises(ValueError, match=r"holds a learner of an arm of 1 values and a choice of "
                                         r"3, this task has a Discrete\(3\) action"):
        resume_or_new(tmp_path / "checkpoint", (2,), (1,), 3, SMALL, 0)
    exported = OnnxPolicy(export_onnx(actor, tmp_path / "policy.onnx", env_id=POINT_GRIP))
    assert exported.action_dim == 2
    np.testing.assert_allclose(exported.act(obs), actor.act(obs, deterministic=True), atol=1e-6)


def test_a_policy_node_acts_with_the_arm_and_choice_actor_and_loads_the_trainers_weights(
        ) -> None:
    model, _ = build_policy_model(PolicyConfig(env_id=POINT_GRIP, hidden_sizes=(16, 16)))
    assert isinstance(model.actor, HybridActor) and model.action_shape == (2,)
    actions = model.act(np.zeros((8, 3), np.float32), deterministic=False)
    assert actions.shape == (8, 2) and set(actions[:, 1].tolist()) <= {0.0, 1.0, 2.0}
    trained = HybridSAC(3, 1, 3, SACConfig(hidden_sizes=(16, 16), critic_layer_norm=True), seed=5)
    assert trained.actor.architecture() == model.actor.architecture()
    model.load(trained.actor.state_dict())
    obs = np.random.default_rng(6).normal(size=(8, 3)).astype(np.float32)
    np.testing.assert_array_equal(model.act(obs, deterministic=True),
                                  trained.act(obs, deterministic=True))


def test_the_bare_loop_trains_a_users_env_with_a_gripper_and_saves_its_kind(tmp_path: Path
                                                                           ) -> None:
    with make_env(POINT_GRIP) as env:
        assert isinstance(env.action_space, gymnasium.spaces.Box)  # ArmAndChoice's HybridBox
    with VectorEnv(POINT_GRIP, 2) as envs:
        assert envs.action_shape == (2,) and envs.choices == 3
        envs.reset(seed=0)
        assert envs.step(np.array([[0.5, 0.0], [-0.5, 2.0]], np.float32)).next_obs[0, 2] == 1.0
    task = {"env_id": POINT_GRIP, "hidden_sizes": [32, 32]}
    overrides = {"simulator": {"env_id": POINT_GRIP, "random_steps": 200, "num_envs": 2},
                 "policy": task,
                 "replay_buffer": {"env_id": POINT_GRIP, "total_env_steps": 600,
                                   "learning_starts": 200},
                 "trainer": {**task, "eval_episodes": 1, "eval_period": 0}}
    config = load_run_config(REPO / "config" / "cartpole_discrete.yaml", overrides)
    result = train(config, tmp_path / "run", log=lambda _line: None)
    assert result.env_steps >= 600 and result.updates == 200
    meta = json.loads((tmp_path / "run" / "checkpoint" / "checkpoint.json").read_text())
    assert meta["algorithm"] == HybridSAC.ALGORITHM and meta["choices"] == 3
