"""n-step returns (rl_core.replay.n_step) against a reference computed from whole episodes, the
simulator's stepping with them, and the configurations refused; no ROS (about a second)."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.acting import stepping
from rl_core.config import ConfigError, ReplayConfig, RunConfig, SACConfig
from rl_core.replay.n_step import NStepReturns

pytestmark = pytest.mark.unit

GAMMA = 0.9


def reference(episodes: list[list[tuple[float, float, float]]], ends: list[str], n: int
              ) -> dict[tuple[float, float, bool], float]:
    """The n-step rows of whole episodes: (obs, next_obs, terminated) -> return; a truncated
    episode's last n - 1 rows and an unfinished one's are left out."""
    rows = {}
    for steps, end in zip(episodes, ends):
        for t in range(len(steps)):
            k = min(n, len(steps) - t)
            if k < n and end != "terminated":
                continue
            value = sum(GAMMA ** i * steps[t + i][1] for i in range(k))
            rows[(float(steps[t][0]), float(steps[t + k - 1][2]),
                  end == "terminated" and t + k == len(steps))] = value
    return rows


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_rows_are_the_discounted_sums_of_whole_episodes(n: int) -> None:
    """Three environments, episodes ending at random by termination or truncation."""
    rng = np.random.default_rng(n)
    returns = NStepReturns(n, GAMMA)
    envs = 3
    current: list[list[tuple[float, float, float]]] = [[] for _ in range(envs)]
    episodes, ends = [], []
    got = {}
    for step in range(60):
        obs = step * 10.0 + np.arange(envs, dtype=np.float32)  # every observation unique
        rewards = rng.normal(size=envs).astype(np.float32)
        terminated = rng.random(envs) < 0.1
        truncated = ~terminated & (rng.random(envs) < 0.1)
        for env in range(envs):
            current[env].append((obs[env], float(rewards[env]), obs[env] + 0.5))
            if terminated[env] or truncated[env]:
                episodes.append(current[env])
                ends.append("terminated" if terminated[env] else "truncated")
                current[env] = []
        rows = returns.add(obs[:, None], np.zeros((envs, 1)), rewards, obs[:, None] + 0.5,
                           terminated, truncated)
        np.testing.assert_array_equal(rows.obs[:, 0] % 10, rows.env_index)  # whose rows
        for o, r, nxt, term in zip(rows.obs[:, 0], rows.rewards, rows.next_obs[:, 0],
                                   rows.terminated):
            got[(float(o), float(nxt), bool(term))] = float(r)
    episodes += current  # unfinished: only their complete windows were given
    ends += ["running"] * envs
    expected = reference(episodes, ends, n)
    assert got.keys() == expected.keys()
    assert list(got.values()) == pytest.approx([expected[key] for key in got], abs=1e-5)


def test_the_start_steps_operator_flag_and_the_truncation_mark_follow_the_row() -> None:
    returns = NStepReturns(2, GAMMA)
    one = np.ones(1, np.float32)
    first = returns.add(one[:, None], one[:, None], one, one[:, None], [False], [False],
                        intervened=np.array([True]))
    assert len(first.rewards) == 0 and first.intervened is None  # nothing complete yet
    rows = returns.add(2 * one[:, None], one[:, None], one, one[:, None], [False], [True])
    assert rows.obs[:, 0].tolist() == [1.0] and rows.intervened.tolist() == [True]
    assert rows.truncated.tolist() == [True] and rows.rewards.tolist() == pytest.approx([1.9])
    # The next episode starts afresh: its first step completes nothing.
    assert len(returns.add(one[:, None], one[:, None], one, one[:, None], [False], [False])
               .rewards) == 0


def test_a_simulator_publishes_n_step_rows_once_they_are_complete() -> None:
    lanes = stepping.make_lanes("rl_ros2/CartPoleBalance-v0", 2, False, seed=0)
    stepper = stepping.Stepper(lanes, random_steps=100, rng=np.random.default_rng(0), n_step=3,
                               gamma=GAMMA)
    lane = stepper.lanes[0]
    shape = stepper.actions_shape(lane)
    sent = [stepper.step(lane, np.zeros(shape, np.float32), 0, 0)[0] for _ in range(4)]
    assert sent[0] is None and sent[1] is None  # two steps of three held
    assert [len(e) for e in sent[2:]] == [2, 2] and [e.sequence for e in sent[2:]] == [0, 1]
    assert sent[2].env_ids.tolist() == [0, 1]
    lane.envs.close()


def test_n_step_rows_go_only_where_replay_stores_n_step_rows() -> None:
    assert SACConfig(gamma=0.9, n_step=3).bootstrap_discount == pytest.approx(0.729)
    for replay, what in ((ReplayConfig(her_k=4), "her_k"), (ReplayConfig(demos="d.mcap"),
                                                            "demos")):
        with pytest.raises(ConfigError, match=f"n_step 3 cannot be combined with {what}"):
            RunConfig(replay=replay, sac=SACConfig(n_step=3))
        RunConfig(replay=replay)  # one-step rows: fine
    with pytest.raises(ConfigError, match="n_step"):
        SACConfig(n_step=0)


def test_the_plan_passes_the_trainers_n_step_and_gamma_to_the_simulators(tmp_path) -> None:  # noqa: ANN001
    from rl_bringup.plan.deployment import PlanError
    from rl_bringup.plan.parameter_overrides import node_overrides

    scenario = tmp_path / "n_step.yaml"  # set in the trainer's block only
    scenario.write_text("/**/trainer:\n  ros__parameters:\n    n_step: 3\n    gamma: 0.98\n")
    shared, _ = node_overrides(str(scenario), {}, 1, None, None, False, True)
    assert shared == {"n_step": 3, "gamma": 0.98}
    assert node_overrides(str(scenario), {"n_step": "1"}, 1, None, None, False, True)[0] == {
        "n_step": "1"}  # one-step: nothing to pass on
    with pytest.raises(PlanError, match="n_step 3 cannot be combined with demos"):
        node_overrides(str(scenario), {"demos": "demos.mcap"}, 1, None, None, False, True)
