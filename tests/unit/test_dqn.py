"""Double DQN for a Discrete action (rl_core.algorithms.dqn): it learns a one-step problem, acts
epsilon-greedily, checkpoints and exports as a categorical actor's shape, resumes only as
itself, and ``algorithm: dqn`` is refused for any other action, by the plan before any process
starts. About 6 s (small networks; one ONNX export)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rl_bringup.plan.deployment import PlanError, make_plan
from rl_core.acting.policy_model import build_policy_model
from rl_core.algorithms import new_algorithm
from rl_core.algorithms.dqn import DQN, GreedyActor
from rl_core.config import ConfigError, PolicyConfig, SACConfig, load_run_config
from rl_core.runs.checkpoint import load_actor, load_checkpoint, resume_or_new, save_checkpoint
from rl_core.runs.export import export_onnx
from rl_core.runs.onnx_policy import OnnxPolicy
from tests.unit.test_discrete_sac import bandit_batch, one_torch_thread  # noqa: F401 - autouse

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
SMALL = SACConfig(algorithm="dqn", hidden_sizes=(32, 32), critic_lr=3e-3, tau=0.1)


def test_a_one_step_problem_is_learned_and_the_target_follows() -> None:
    dqn = new_algorithm((2,), (1,), 3, SMALL, seed=2)
    assert isinstance(dqn, DQN)
    rng = np.random.default_rng(2)
    for _ in range(300):
        metrics = dqn.update(bandit_batch(64, rng))
    q = dqn.actor.values(torch.ones(1, 2)).detach().numpy()[0]
    assert q[2] == pytest.approx(1.0, abs=0.1) and np.all(np.abs(q[:2]) < 0.1), q
    target = dqn.target.values(torch.ones(1, 2)).detach().numpy()[0]
    assert target == pytest.approx(q, abs=0.1)  # tau 0.1 over 300 updates
    assert np.all(dqn.act(np.ones((4, 2), np.float32), deterministic=True) == 2.0)
    assert metrics["critic_loss"] < 0.01 and dqn.update_step == 300
    assert dqn.last_td_errors.shape == (64,)


def test_the_target_bootstraps_with_the_n_step_discount_of_the_target_network() -> None:
    config = SACConfig(algorithm="dqn", hidden_sizes=(8,), gamma=0.9, n_step=3, critic_lr=0.0)
    dqn = DQN(2, 3, config, seed=0)
    batch = bandit_batch(4, np.random.default_rng(0))._replace(
        rewards=np.zeros(4, np.float32), terminated=np.zeros(4, np.float32))
    next_obs = torch.as_tensor(batch.next_obs)
    chosen = dqn.actor.values(next_obs).argmax(-1, keepdim=True)
    expected = 0.9 ** 3 * dqn.target.values(next_obs).gather(-1, chosen).squeeze(-1)
    q = dqn.actor.values(torch.as_tensor(batch.obs)).gather(
        -1, torch.as_tensor(batch.actions, dtype=torch.int64)).squeeze(-1)
    dqn.update(batch)  # learning rate 0: nothing moves, the TD errors are |q - target|
    np.testing.assert_allclose(dqn.last_td_errors, (q - expected).abs().detach().numpy(),
                               rtol=1e-5)


def test_acting_is_epsilon_greedy_and_deterministic_is_greedy() -> None:
    actor = GreedyActor(2, 4, (8,), epsilon=0.0)
    obs = np.random.default_rng(1).normal(size=(2000, 2)).astype(np.float32)
    greedy = actor.values(torch.as_tensor(obs)).argmax(-1).numpy()
    np.testing.assert_array_equal(actor.act(obs)[:, 0], greedy)
    actor.epsilon = 1.0
    counts = np.bincount(actor.act(obs)[:, 0].astype(int), minlength=4)
    assert counts.min() > 400, counts  # uniform: 500 each
    np.testing.assert_array_equal(actor.act(obs, deterministic=True)[:, 0], greedy)


def test_settings_of_sac_only_and_other_actions_are_refused_with_the_fix() -> None:
    for change in ({"compile_update": True}, {"demo_bc_weight": 1.0}):
        with pytest.raises(ConfigError, match="algorithm dqn has an eager update"):
            DQN(4, 2, SACConfig(algorithm="dqn", **change))
    for choices, width, words in ((0, 3, r"a continuous \(Box\) action of 3"),
                                  (3, 4, "an arm of 3 values and a choice of 3")):
        with pytest.raises(ConfigError, match=f"algorithm dqn learns a Discrete action; this "
                                              f"task has {words}; set algorithm: sac"):
            new_algorithm((4,), (width,), choices, SMALL, 0)
    with pytest.raises(ConfigError, match="algorithm must be one of sac, dqn"):
        SACConfig(algorithm="ppo")


def test_policy_and_trainer_must_agree_on_the_algorithm() -> None:
    with pytest.raises(ConfigError, match="policy.algorithm sac differs from the trainer's dqn"):
        load_run_config(REPO / "config" / "cartpole_dqn.yaml", {"policy": {"algorithm": "sac"}})
    config = load_run_config(REPO / "config" / "cartpole_dqn.yaml")
    assert config.sac.algorithm == config.policy.algorithm == "dqn"


def test_the_plan_refuses_dqn_for_a_box_action_before_any_process() -> None:
    with pytest.raises(PlanError) as refused:
        make_plan("colocated", 1, domain_id=7, environ={}, extra_parameters={"algorithm": "dqn"})
    assert str(refused.value) == ("algorithm dqn learns a Discrete action; this task has a "
                                  "continuous (Box) action of 1; set algorithm: sac")
    plan = make_plan("hybrid", 2, domain_id=7, environ={},
                     extra_parameters={"env_id": "CartPole-v1", "algorithm": "dqn"})
    assert plan.processes


def test_a_checkpoint_comes_back_as_dqn_exports_and_resumes_only_as_one(tmp_path: Path) -> None:
    dqn = DQN(2, 3, SMALL, seed=3)
    dqn.update(bandit_batch(16, np.random.default_rng(3)))
    save_checkpoint(tmp_path / "checkpoint", dqn, env_id="CartPole-v1")
    loaded, meta = load_checkpoint(tmp_path / "checkpoint")
    assert isinstance(loaded, DQN) and meta["algorithm"] == "dqn" and loaded.update_step == 1
    obs = np.random.default_rng(4).normal(size=(16, 2)).astype(np.float32)
    np.testing.assert_array_equal(loaded.act(obs, deterministic=True),
                                  dqn.act(obs, deterministic=True))
    actor, _ = load_actor(tmp_path / "checkpoint")
    assert isinstance(actor, GreedyActor) and actor.architecture()["kind"] == "greedy_q_actor"
    resumed, _ = resume_or_new(tmp_path / "checkpoint", (2,), (1,), 3, SMALL, 0)
    assert isinstance(resumed, DQN) and resumed.update_step == 1
    with pytest.raises(ValueError, match="holds a learner of algorithm dqn, this run's is sac"):
        resume_or_new(tmp_path / "checkpoint", (2,), (1,), 3, SACConfig(hidden_sizes=(32, 32)), 0)
    policy = OnnxPolicy(export_onnx(actor, tmp_path / "policy.onnx", env_id="CartPole-v1"))
    np.testing.assert_array_equal(policy.act(obs), dqn.act(obs, deterministic=True))


def test_a_policy_node_acts_with_the_greedy_actor_and_loads_the_trainers_weights() -> None:
    model, _ = build_policy_model(PolicyConfig(env_id="CartPole-v1", hidden_sizes=(16, 16),
                                               algorithm="dqn", exploration_epsilon=0.2))
    assert isinstance(model.actor, GreedyActor) and model.actor.epsilon == 0.2
    trained = DQN(4, 2, SACConfig(algorithm="dqn", hidden_sizes=(16, 16)), seed=5)
    assert trained.actor.architecture() == model.actor.architecture()
    model.load(trained.actor.state_dict())
    obs = np.random.default_rng(6).normal(size=(8, 4)).astype(np.float32)
    np.testing.assert_array_equal(model.act(obs, deterministic=True),
                                  trained.act(obs, deterministic=True))
