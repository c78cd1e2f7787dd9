"""Hindsight relabelling in the replay buffer (rl_core.replay.hindsight, issue 43 item 3):
episodes followed per robot and environment through interleaved rows, goals drawn from the same
episode at the same or a later step, rewards recomputed, rows of open or overwritten episodes
kept, and the configuration refused for a task without goals. About 2 s."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium
import numpy as np
import pytest

from rl_bringup.plan.deployment import PlanError, make_plan
from rl_core.config import ConfigError, ReplayConfig
from rl_core.envs import KUKA_REACH_GOAL_ID
from rl_core.replay import hindsight
from rl_core.replay.buffer import ReplayBuffer
from rl_core.replay.build import new_replay
from rl_core.replay.hindsight import GoalLayout, Hindsight, episode_keys, is_goal_env
from rl_core.replay.service import ReplayService

pytestmark = pytest.mark.unit
#: Observations [achieved (1), desired (1), step (1)]: the achieved "goal" is the step number.
LAYOUT = GoalLayout(achieved=slice(0, 1), desired=slice(1, 2))


def reached(achieved: np.ndarray, desired: np.ndarray, _info: object) -> np.ndarray:
    return (np.abs(achieved - desired).sum(-1) < 0.5).astype(np.float32)


def rows(robot: int, env: int, steps: range, goal: float = 99.0) -> dict[str, np.ndarray]:
    """Transitions of one episode's ``steps``; next_obs achieves ``100 * robot + 10 * env +
    step + 1``."""
    achieved = np.array([100 * robot + 10 * env + s for s in steps], np.float32)
    obs = np.stack([achieved, np.full_like(achieved, goal), achieved], axis=1)
    next_obs = obs.copy()
    next_obs[:, 0] += 1.0
    return {"obs": obs, "actions": np.zeros((len(steps), 1), np.float32),
            "rewards": np.zeros(len(steps), np.float32), "next_obs": next_obs,
            "terminated": np.zeros(len(steps), bool)}


def store(buffer: ReplayBuffer, hindsight: Hindsight, robot: int, env: int, steps: range,
          last: bool) -> None:
    data = rows(robot, env, steps)
    truncated = np.zeros(len(steps), bool)
    truncated[-1] = last
    slots = buffer.add(**data, truncated=truncated)
    hindsight.record(slots, episode_keys(robot, np.full(len(steps), env)), truncated)


def test_goals_come_from_the_same_episode_at_the_same_or_a_later_step() -> None:
    buffer = ReplayBuffer(3, 1, 64, seed=0)
    hindsight = Hindsight(LAYOUT, reached, k=4, capacity=64, seed=1)
    # Two robots' episodes interleaved; robot 1's second episode stays open.
    store(buffer, hindsight, 0, 0, range(0, 3), last=False)
    store(buffer, hindsight, 1, 2, range(0, 4), last=True)
    store(buffer, hindsight, 0, 0, range(3, 6), last=True)
    store(buffer, hindsight, 1, 2, range(0, 2), last=False)
    assert len(hindsight) == 2
    batch = buffer.sample(4000)
    out = hindsight.relabel(batch, buffer.next_obs_at)
    changed = out.obs[:, 1] != 99.0
    assert 0.6 < changed.mean() < 0.73  # k/(k+1) of the ended episodes' rows: 0.8 * 10/12
    step = out.obs[:, 2]
    owner = np.floor(step / 10)  # 0: robot 0 env 0; 12: robot 1 env 2
    goal = out.obs[changed, 1]
    # The goal is the next observation's achievement of a step >= the row's, same episode.
    assert np.all(np.floor((goal[goal >= 0] - 1) / 10) == owner[changed])
    assert np.all(goal >= step[changed] + 1)
    assert np.all(goal <= np.where(owner[changed] == 0, 6, 124))
    np.testing.assert_array_equal(out.next_obs[changed, 1], goal)
    # Rewards recomputed: 1 where the row's own next step achieved the new goal.
    np.testing.assert_array_equal(out.rewards[changed],
                                  (np.abs(out.next_obs[changed, 0] - goal) < 0.5))
    assert out.rewards[changed].any() and not out.rewards[~changed].any()
    # Open episodes (robot 1's second, in slots 10 and 11) are never relabelled.
    assert not np.any(changed & (batch.indices >= 10))
    np.testing.assert_array_equal(batch.obs[:, 1], 99.0)  # the sampled batch is not changed
    assert hindsight.relabelled == int(changed.sum())


def test_overwritten_rows_end_their_episode_and_a_clear_forgets_all() -> None:
    buffer = ReplayBuffer(3, 1, 8, seed=0)
    hindsight = Hindsight(LAYOUT, reached, k=1, capacity=8, seed=1)
    store(buffer, hindsight, 0, 0, range(0, 6), last=True)
    store(buffer, hindsight, 0, 1, range(0, 4), last=True)  # overwrites slots 0 and 1
    assert len(hindsight) == 1  # the first episode is forgotten with its first rows
    out = hindsight.relabel(buffer.sample(500), buffer.next_obs_at)
    relabelled = out.obs[:, 1] != 99.0
    assert relabelled.any() and np.all(np.floor((out.obs[relabelled, 1] - 1) / 10) == 1)
    hindsight.clear()
    assert len(hindsight) == 0
    out = hindsight.relabel(buffer.sample(100), buffer.next_obs_at)
    np.testing.assert_array_equal(out.obs[:, 1], 99.0)


def test_the_goal_env_layout_and_a_task_without_goals_refused() -> None:
    point = gymnasium.spaces.Box(-1, 1, (3,))
    space = gymnasium.spaces.Dict({"observation": gymnasium.spaces.Box(-1, 1, (5,)),
                                   "desired_goal": point, "achieved_goal": point})
    assert GoalLayout.of(space) == GoalLayout(slice(0, 3), slice(3, 6))  # sorted keys
    assert GoalLayout.of(point) is None
    config = ReplayConfig(env_id="Pendulum-v1", her_k=4)
    with pytest.raises(ConfigError, match="her_k:=4 relabels goals, but env_id 'Pendulum-v1' "
                                          "is not goal-conditioned"):
        new_replay(config, ReplayBuffer(3, 1, 8))
    with pytest.raises(PlanError, match="is not goal-conditioned"):
        make_plan("colocated", 1, domain_id=7, environ={},
                  extra_parameters={"env_id": "Pendulum-v1", "her_k": 4})
    replay = new_replay(ReplayConfig(env_id=KUKA_REACH_GOAL_ID, her_k=4),
                        ReplayBuffer(20, 7, 8))
    assert replay.hindsight is not None and replay.hindsight.probability == 0.8


def test_finding_out_whether_a_task_has_goals_closes_the_env_it_made(monkeypatch) -> None:
    # The plan asks before any process starts; a pybullet env left open keeps its physics
    # server (and a GUI, where one is configured) for the rest of the planning process.
    made: list[gymnasium.Env] = []
    closed: list[str] = []
    make = gymnasium.make

    def recorded(env_id: str, **kwargs):
        env = make(env_id, **kwargs)
        close = env.close
        env.close = lambda: (closed.append(env_id), close())[1]
        made.append(env)
        return env

    monkeypatch.setattr(hindsight.gymnasium, "make", recorded)
    assert is_goal_env(KUKA_REACH_GOAL_ID) and not is_goal_env("Pendulum-v1")
    assert closed == [KUKA_REACH_GOAL_ID, "Pendulum-v1"], "an env made to inspect was left open"
    assert made[0].unwrapped._client is None  # its pybullet server is gone


def test_the_replay_service_follows_each_robots_episodes_and_reports_them() -> None:
    config = ReplayConfig(env_id=KUKA_REACH_GOAL_ID, her_k=4, capacity=100, learning_starts=4,
                          error_buffer=50, updates_per_transition=1.0)
    service = ReplayService(config, (20,), (7,), lambda kind, reason: None, lambda: None, 1000)
    for sequence in range(6):  # two robots, two envs each; every third step ends an episode
        for robot in (0, 1):
            ended = np.full(2, sequence % 3 == 2)
            service.insert(SimpleNamespace(
                robot_id=robot, stream=1, sequence=sequence,
                obs=np.zeros((2, 20), np.float32), actions=np.zeros((2, 7), np.float32),
                rewards=np.full(2, -1.0, np.float32), next_obs=np.zeros((2, 20), np.float32),
                terminated=np.zeros(2, bool), truncated=ended, policy_version=0,
                intervened=None, env_ids=np.array([0, 1], np.uint32)))
    _, _, values = service.diagnostics()
    assert values["hindsight episodes"] == 8  # 2 robots x 2 envs x 2 episodes
    answer = service.sample(SimpleNamespace(batch_size=16, max_batches=2))
    assert answer.batches
    _, _, values = service.diagnostics()
    assert values["hindsight relabelled"] > 0
    # Every goal is 0 and was reached: a relabelled row pays 0 where it stored -1.
    relabelled = np.concatenate([batch.rewards for batch in answer.batches])
    assert set(relabelled.tolist()) <= {-1.0, 0.0} and 0.0 in relabelled
