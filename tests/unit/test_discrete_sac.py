"""SAC for a Discrete action (rl_core.algorithms.discrete_sac) and the loops around it: the
choices as float indices, a one-step problem learned, the settings it refuses, checkpoints and
resuming, the vector env, a policy node's model and evaluation with Discrete actions, and a short
bare run. About 10 s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from rl_core.acting.policy_model import build_policy_model
from rl_core.algorithms.discrete_sac import TARGET_ENTROPY_FRACTION, CategoricalActor, DiscreteSAC
from rl_core.config import ConfigError, PolicyConfig, SACConfig, load_run_config
from rl_core.envs import VectorEnv
from rl_core.envs.spaces import action_row_shape, random_actions
from rl_core.learning.evaluation import evaluate
from rl_core.learning.training import train
from rl_core.runs.checkpoint import load_actor, load_checkpoint, resume_or_new, save_checkpoint
from rl_core.runs.onnx_policy import OnnxPolicy
from rl_core.wire.messages import Batch, choice_indices

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
SMALL = SACConfig(hidden_sizes=(32, 32), actor_lr=3e-3, critic_lr=3e-3, alpha_lr=3e-3)


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Small networks: one thread (two, on a loaded 2-core machine, made a step 15x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def bandit_batch(rows: int, rng: np.random.Generator) -> Batch:
    """One-step episodes from one observation: choice 2 of 3 pays 1, the others 0."""
    actions = rng.integers(0, 3, (rows, 1)).astype(np.float32)
    obs = np.ones((rows, 2), dtype=np.float32)
    return Batch(obs, actions, (actions[:, 0] == 2).astype(np.float32), obs,
                 np.ones(rows, dtype=np.float32), np.arange(rows, dtype=np.int64),
                 np.ones(rows, dtype=np.float32))


def test_actions_are_choice_indices_and_deterministic_is_the_most_probable() -> None:
    sac = DiscreteSAC(4, 3, SMALL, seed=1)
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    drawn = sac.act(obs)
    assert drawn.shape == (64, 1) and drawn.dtype == np.float32
    assert set(np.unique(drawn)) <= {0.0, 1.0, 2.0}
    probs, _ = sac.actor(torch.as_tensor(obs))
    np.testing.assert_array_equal(sac.act(obs, deterministic=True)[:, 0],
                                  probs.argmax(-1).numpy())
    assert sac.target_entropy == pytest.approx(TARGET_ENTROPY_FRACTION * np.log(3))


def test_a_one_step_problem_is_learned_and_the_entropy_falls_towards_its_target() -> None:
    sac = DiscreteSAC(2, 3, SMALL, seed=2)
    rng = np.random.default_rng(2)
    for _ in range(300):
        metrics = sac.update(bandit_batch(64, rng))
    q = sac.critic(torch.ones(1, 2)).detach().numpy()[:, 0]  # (members, choices)
    assert np.all(q[:, 2] > q[:, :2].max(axis=1) + 0.5), q
    assert np.all(sac.act(np.ones((1, 2), np.float32), deterministic=True) == 2.0)
    assert metrics["entropy"] < np.log(3) and sac.alpha < SMALL.init_alpha, metrics
    assert sac.update_step == 300 and sac.last_td_errors.shape == (64,)


def test_an_index_that_is_no_choice_is_refused_before_any_step() -> None:
    sac = DiscreteSAC(2, 3, SMALL)
    batch = bandit_batch(8, np.random.default_rng(0))
    batch.actions[0, 0] = 3.0
    with pytest.raises(ValueError, match=r"indices in \[0, 3\)"):
        sac.update(batch)
    assert sac.update_step == 0


@pytest.mark.parametrize("change, named", [({"compile_update": True}, "compile_update"),
                                           ({"demo_bc_weight": 1.0}, "demo_bc_weight"),
                                           ({"critics": 4}, "critics: 4")])
def test_settings_of_continuous_sac_only_are_refused_with_the_fix(change: dict, named: str
                                                                 ) -> None:
    with pytest.raises(ConfigError, match=named):
        DiscreteSAC(4, 2, SACConfig(**change))
    with pytest.raises(ValueError, match="flat observation"):
        DiscreteSAC((3, 64, 64), 2, SACConfig())


def test_a_checkpoint_comes_back_as_discrete_sac_and_resumes_only_as_one(tmp_path: Path
                                                                        ) -> None:
    sac = DiscreteSAC(2, 3, SMALL, seed=3)
    sac.update(bandit_batch(16, np.random.default_rng(3)))
    save_checkpoint(tmp_path / "checkpoint", sac, env_id="CartPole-v1")
    loaded, meta = load_checkpoint(tmp_path / "checkpoint")
    assert isinstance(loaded, DiscreteSAC) and meta["algorithm"] == DiscreteSAC.ALGORITHM
    assert loaded.choices == 3 and loaded.update_step == 1
    obs = np.random.default_rng(4).normal(size=(16, 2)).astype(np.float32)
    np.testing.assert_array_equal(loaded.act(obs, deterministic=True),
                                  sac.act(obs, deterministic=True))
    actor, _ = load_actor(tmp_path / "checkpoint")
    assert isinstance(actor, CategoricalActor) and actor.architecture()["choices"] == 3
    resumed, counters = resume_or_new(tmp_path / "checkpoint", (2,), (1,), 3, SMALL, 0)
    assert isinstance(resumed, DiscreteSAC) and resumed.update_step == 1
    with pytest.raises(ValueError, match=r"holds a learner of a Discrete\(3\) action, this task "
                                         r"has a continuous \(Box\) action"):
        resume_or_new(tmp_path / "checkpoint", (2,), (1,), 0, SMALL, 0)
    assert isinstance(resume_or_new(None, (2,), (1,), 3, SMALL, 0)[0], DiscreteSAC)


def test_the_vector_env_steps_discrete_choices_given_as_float_indices() -> None:
    assert action_row_shape(gymnasium.spaces.Discrete(4)) == (1,)
    np.testing.assert_array_equal(choice_indices(np.array([[0.0], [3.0]]), 4), [0, 3])
    for bad in ([[4.0]], [[-1.0]], [[0.5]]):
        with pytest.raises(ValueError, match="Discrete"):
            choice_indices(np.array(bad), 4)
    random = random_actions(np.random.default_rng(0), (64, 1), 4)
    assert random.dtype == np.float32 and set(np.unique(random)) == {0.0, 1.0, 2.0, 3.0}
    with VectorEnv("CartPole-v1", 2) as envs:
        assert envs.action_shape == (1,) and envs.choices == 2
        envs.reset(seed=0)
        step = envs.step(np.array([[0.0], [1.0]], dtype=np.float32))
        assert step.next_obs.shape == (2, 4)
        with pytest.raises(ValueError, match="Discrete"):
            envs.step(np.array([[0.0], [2.0]], dtype=np.float32))


def test_evaluation_acts_with_the_most_probable_choice() -> None:
    result = evaluate(CategoricalActor(4, 2, (16,)), "CartPole-v1", 2, seed=0)
    assert len(result.returns) == 2 and np.all(result.returns >= 1)


def test_the_bare_loop_trains_a_discrete_task_and_saves_its_kind(tmp_path: Path, run_cli
                                                                 ) -> None:
    """... and ``rl-bringup eval`` evaluates the checkpoint; ``export`` writes its most probable
    choice as an ONNX model, which a policy node acts with as the actor does."""
    overrides = {"replay_buffer": {"total_env_steps": 600, "learning_starts": 200},
                 "simulator": {"random_steps": 200},
                 "trainer": {"eval_episodes": 1, "eval_period": 0}}
    config = load_run_config(REPO / "config" / "cartpole_discrete.yaml", overrides)
    result = train(config, tmp_path / "run", log=lambda _line: None)
    assert result.env_steps >= 600 and result.updates == 200
    meta = json.loads((tmp_path / "run" / "checkpoint" / "checkpoint.json").read_text())
    assert meta["algorithm"] == DiscreteSAC.ALGORITHM and meta["choices"] == 2
    code, out, err = run_cli("eval", f"checkpoint:={tmp_path / 'run'}", "episodes:=1")
    assert code == 0 and "CartPole-v1" in out, (out, err)
    code, out, err = run_cli("export", f"checkpoint:={tmp_path / 'run'}",
                             f"onnx:={tmp_path / 'policy.onnx'}")
    assert code == 0 and "max |onnx - torch| = 0" in out, (out, err)
    exported = OnnxPolicy(tmp_path / "policy.onnx")
    actor, _ = load_actor(tmp_path / "run" / "checkpoint")
    obs = np.random.default_rng(7).normal(size=(32, 4)).astype(np.float32)
    np.testing.assert_array_equal(exported.act(obs), actor.act(obs, deterministic=True))
    assert exported.action_dim == 1 and exported.env_id == "CartPole-v1"
    model, _ = build_policy_model(PolicyConfig(env_id="CartPole-v1",
                                               onnx_model=str(tmp_path / "policy.onnx")))
    np.testing.assert_array_equal(model.act(obs, deterministic=True), exported.act(obs))


def test_a_policy_node_acts_with_a_categorical_actor_and_loads_the_trainers_weights() -> None:
    model, _ = build_policy_model(PolicyConfig(env_id="CartPole-v1", hidden_sizes=(16, 16)))
    assert isinstance(model.actor, CategoricalActor) and model.action_shape == (1,)
    actions = model.act(np.zeros((8, 4), np.float32), deterministic=False)
    assert actions.shape == (8, 1) and set(actions.ravel().tolist()) <= {0.0, 1.0}
    trained = DiscreteSAC(4, 2, SACConfig(hidden_sizes=(16, 16)), seed=5)
    assert trained.actor.architecture() == model.actor.architecture()
    model.load(trained.actor.state_dict())
    obs = np.random.default_rng(6).normal(size=(8, 4)).astype(np.float32)
    np.testing.assert_array_equal(model.act(obs, deterministic=True),
                                  trained.act(obs, deterministic=True))
