"""Another learner through the gymnasium bridge: Stable-Baselines3's SAC solves cart-pole on a
simulator node in another process, to the evaluation our own learner must reach.

The budget, network and batch come from config/cartpole.yaml (what the bare loop and the ROS
modes train with), so the comparison is like for like. As our own learner keeps its best
checkpoint, SB3 keeps its best evaluated policy (EvalCallback, every ``eval_period`` steps on an
in-process twin of the task, as our periodic evaluation does), and the test asserts on that
policy's final evaluation, which runs through the bridge. SB3's final policy alone ended as low
as 185.2 over 24 seeds
(docs/history/benchmarks-2026-12.md#how-often-each-learning-test-fails-issue-21-item-2-2026-12-04):
it need not be its best.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

from rl_core.config import load_run_config
from rl_core.envs import make_env
from rl_nodes.gym_bridge import BridgeEnv
from tests.learning import report_outcome, seed_overrides
from tests.processes import Child

pytestmark = pytest.mark.system
CONFIG = Path(__file__).resolve().parents[2] / "config" / "cartpole.yaml"
BIN = Path(sys.executable).parent
NAMESPACE = "/robot_0"


class KeepBest(BaseCallback):
    """EvalCallback's ``callback_on_new_best``: a copy of the policy's weights in memory (no
    pickled model file)."""

    def __init__(self) -> None:
        super().__init__()
        self.state: dict | None = None

    def _on_step(self) -> bool:
        self.state = copy.deepcopy(self.model.policy.state_dict())
        return True


def test_stable_baselines3_sac_solves_cartpole_through_the_bridge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path / "sb3"))  # SB3's logger folder, else /tmp
    config = load_run_config(CONFIG, seed_overrides())
    torch.manual_seed(config.simulator.seed)
    torch.set_num_threads(1)  # what our own learner uses on the shared 2-core machines
    # The bridge acts in place of a policy node, and SAC explores with its own random actions.
    simulator = Child([str(BIN / "simulator"), "--ros-args", "-r", f"__ns:={NAMESPACE}",
                       "--params-file", str(CONFIG), "-p", "random_steps:=0",
                       "-p", "visualization_rate_hz:=0.0", "-p", f"seed:={config.simulator.seed}"],
                      env=dict(os.environ))
    env = None
    try:
        env = Monitor(BridgeEnv(config.simulator.env_id, NAMESPACE, timeout_s=30.0))
        model = SAC("MlpPolicy", env, learning_starts=config.replay.learning_starts,
                    batch_size=config.trainer.batch_size, gamma=config.sac.gamma,
                    tau=config.sac.tau, learning_rate=config.sac.actor_lr,
                    policy_kwargs={"net_arch": list(config.sac.hidden_sizes)},
                    seed=config.simulator.seed, device="cpu")
        best = KeepBest()
        twin = Monitor(make_env(config.simulator.env_id))
        evaluation = EvalCallback(twin, callback_on_new_best=best,
                                  n_eval_episodes=config.trainer.eval_episodes,
                                  eval_freq=config.trainer.eval_period, deterministic=True,
                                  verbose=0)
        began = time.monotonic()
        model.learn(total_timesteps=config.replay.total_env_steps, callback=evaluation)
        trained_s = time.monotonic() - began
        twin.close()
        assert best.state is not None, "EvalCallback never evaluated"
        model.policy.load_state_dict(best.state)
        # learn() stops in the middle of an episode, which a remote simulator cannot cut short
        # (reset() continues it): evaluate one episode more and leave out that first one.
        returns, _ = evaluate_policy(model, env, n_eval_episodes=config.trainer.eval_episodes + 1,
                                     deterministic=True, return_episode_rewards=True)
        mean, std = float(np.mean(returns[1:])), float(np.std(returns[1:]))
        print(f"SAC through the bridge: {config.replay.total_env_steps} env steps in "
              f"{trained_s:.0f} s, best of its evaluations ({evaluation.best_mean_reward:.1f}) "
              f"evaluated {mean:.1f} +- {std:.1f}")
        report_outcome("best evaluation", mean, config.trainer.solve_return)
        assert mean >= config.trainer.solve_return, (mean, std, simulator.output()[-2000:])
    finally:
        if env is not None:
            env.close()
        simulator.stop()
