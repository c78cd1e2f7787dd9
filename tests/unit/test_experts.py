"""Scripted experts (rl_core.acting.experts): the KukaReach expert reaches every target of the env."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import rl_core.envs  # noqa: F401 - registers rl_ros2/KukaReach-v0
from rl_core.acting.experts import KukaReachExpert, make_expert

pytestmark = pytest.mark.unit


def run_episodes(expert: KukaReachExpert, episodes: int) -> tuple[float, list[int]]:
    env = gymnasium.make("rl_ros2/KukaReach-v0")
    successes, lengths = 0, []
    try:
        for episode in range(episodes):
            obs, info = env.reset(seed=1000 + episode)
            done, steps = False, 0
            while not done:
                action = expert.act(obs)[0]
                assert action.dtype == np.float32 and np.all(np.abs(action) <= 1.0)
                obs, _, terminated, truncated, info = env.step(action)
                done, steps = terminated or truncated, steps + 1
            successes += bool(info["is_success"])
            lengths.append(steps)
    finally:
        env.close()
    return successes / episodes, lengths


def test_the_expert_reaches_every_target_well_within_an_episode() -> None:
    rate, lengths = run_episodes(KukaReachExpert(), 20)
    assert rate == 1.0
    assert max(lengths) <= 30  # of the 100 steps an episode may take


def test_noisy_demonstrations_differ_and_still_reach() -> None:
    obs = gymnasium.make("rl_ros2/KukaReach-v0").reset(seed=3)[0]
    first, second = KukaReachExpert(noise=0.1, seed=1), KukaReachExpert(noise=0.1, seed=2)
    assert not np.array_equal(first.act(obs), second.act(obs))
    assert np.array_equal(KukaReachExpert().act(obs), KukaReachExpert().act(obs))
    rate, _ = run_episodes(KukaReachExpert(noise=0.1, seed=1), 10)
    assert rate == 1.0


def test_batches_bad_shapes_and_unknown_tasks() -> None:
    obs = gymnasium.make("rl_ros2/KukaReach-v0").reset(seed=3)[0]
    batch = np.stack([obs, obs])
    assert KukaReachExpert().act(batch).shape == (2, 7)
    with pytest.raises(ValueError, match="23 values"):
        KukaReachExpert().act(np.zeros(4))
    with pytest.raises(ValueError, match="gain must be positive"):
        KukaReachExpert(gain=0.0)
    assert isinstance(make_expert("rl_ros2/KukaReach-v0", noise=0.05), KukaReachExpert)
    with pytest.raises(ValueError, match="no scripted expert for 'CartPole-v1'.*KukaReach"):
        make_expert("CartPole-v1")
