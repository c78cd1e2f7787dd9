"""A simulator's stepping (rl_core.acting.stepping): lanes and their step numbers, which answer is
stale, random first steps, the counts, the ros2_control rows, and what diagnostics say."""

from __future__ import annotations

import time

import numpy as np
import pytest
from gymnasium.spaces import Box

from rl_core.acting.gate import ActingGate
from rl_core.acting.stepping import (
    BOUNDARY_ENV_IDS,
    Lane,
    RateMeter,
    Stepper,
    acting_diagnosis,
    acting_values,
    check_actions,
    lane_sizes,
    make_lanes,
    simulator_seed,
)
from rl_core.acting.teleop import Intervention, ScriptedIntervention
from rl_core.config import ConfigError, SimulatorConfig
from rl_core.envs import CARTPOLE_ID, EpisodeRecord, VectorStep
from rl_core.robot.boundary import EpisodeEnd, Transition

pytestmark = pytest.mark.unit


class FakeEnvs:
    """``num_envs`` environments whose observation is the step count; environment 0's episode
    ends every ``episode_length`` steps."""

    def __init__(self, num_envs: int, episode_length: int = 3) -> None:
        self.num_envs, self.episode_length, self.steps = num_envs, episode_length, 0
        self.single_action_space = Box(-1.0, 1.0, (2,), np.float32)
        self.action_shape = (2,)
        self.choices = 0  # a Box action
        self.applied: list[np.ndarray] = []

    def step(self, actions: np.ndarray) -> VectorStep:
        self.applied.append(actions)
        self.steps += 1
        obs = np.full((self.num_envs, 1), float(self.steps), np.float32)
        ended = self.steps % self.episode_length == 0
        terminated = np.array([ended] + [False] * (self.num_envs - 1))
        episodes = [EpisodeRecord(0, 3.0, self.episode_length, True)] if ended else []
        return VectorStep(obs, np.ones(self.num_envs, np.float32), terminated,
                          np.zeros(self.num_envs, bool), obs, episodes)


def stepper(sizes: list[int], random_steps: int = 0) -> Stepper:
    lanes, offset = [], 0
    for index, size in enumerate(sizes):
        lanes.append(Lane(index, FakeEnvs(size), np.arange(offset, offset + size, dtype=np.uint32),
                          np.zeros((size, 1), np.float32)))
        offset += size
    return Stepper(lanes, random_steps, np.random.default_rng(0), robot_id=4, stream=77)


def test_seeds_and_lane_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert simulator_seed(7, 2, 0) == 2007
    assert simulator_seed(7, 2, 1) != simulator_seed(7, 2, 0)  # a respawn draws afresh
    monkeypatch.setenv("RL_ROS2_RESTART_COUNT", "1")  # as the supervisor sets it on a respawn
    assert simulator_seed(7, 2) == simulator_seed(7, 2, 1)
    assert lane_sizes(5, pipeline=True) == [2, 3]
    assert lane_sizes(5, pipeline=False) == [5]
    assert lane_sizes(1, pipeline=True) == [1]  # nothing to pipeline


def test_real_lanes_cover_the_robot_s_environments() -> None:
    lanes = make_lanes(CARTPOLE_ID, 3, pipeline=True, seed=0)
    try:
        assert [lane.env_ids.tolist() for lane in lanes] == [[0], [1, 2]]
        assert [lane.obs.shape for lane in lanes] == [(1, 4), (2, 4)]
    finally:
        for lane in lanes:
            lane.envs.close()


def test_pipelined_step_numbers_tell_the_lane_and_stale_answers_are_ignored() -> None:
    run = stepper([2, 2])
    first, second = run.lanes
    assert [run.batch_step(lane) for lane in run.lanes] == [0, 1]
    assert run.lane_for(1) is second and run.lane_for(0) is first
    run.step(first, np.zeros((2, 2), np.float32), policy_version=4, stamp_ns=0)
    assert run.batch_step(first) == 2
    assert run.lane_for(0) is None  # the answer to a republished batch, already stepped
    assert run.lane_for(2) is first
    first.held = True
    assert run.lane_for(2) is None  # a lane that holds its observations takes no answer


def test_action_shapes_are_checked_with_a_reason() -> None:
    run = stepper([3])
    shape = run.actions_shape(run.lanes[0])
    assert shape == (3, 2)
    check_actions(np.zeros(shape, np.float32), shape)
    with pytest.raises(ValueError, match=r"expected actions of shape \(3, 2\), got shape \(2, 2\)"):
        check_actions(np.zeros((2, 2), np.float32), shape)
    # A Discrete(3) action: rows of one index each.
    check_actions(np.array([[0.0], [2.0]], np.float32), (2, 1), choices=3)
    with pytest.raises(ValueError, match=r"Discrete\(3\) action must be indices in \[0, 3\)"):
        check_actions(np.array([[0.0], [3.0]], np.float32), (2, 1), choices=3)


def test_a_step_counts_and_reports_finished_episodes_by_robot_wide_index() -> None:
    run = stepper([1, 2])
    lane = run.lanes[1]
    actions = np.full((2, 2), 0.5, np.float32)
    rows, episodes = run.step(lane, actions, policy_version=3, stamp_ns=11)
    assert episodes is None and rows.sequence == 0 and rows.policy_version == 3
    assert (rows.robot_id, rows.stream, rows.stamp_ns) == (4, 77, 11)
    np.testing.assert_array_equal(rows.actions, actions)
    np.testing.assert_array_equal(rows.obs, 0.0)  # the observations the actions answered
    np.testing.assert_array_equal(lane.obs, 1.0)  # the next ones
    run.step(lane, actions, 3, 12)
    rows, episodes = run.step(lane, actions, policy_version=5, stamp_ns=13)
    assert rows.sequence == 2 and lane.count == 3
    assert episodes is not None and episodes.env_ids == [1]  # lane 1's first environment
    assert (episodes.robot_id, episodes.stamp_ns) == (4, 13)
    assert (episodes.total_episodes, episodes.total_env_steps, episodes.policy_version) == (1, 6, 5)
    assert (run.step_count, run.total_env_steps, run.total_episodes) == (3, 6, 1)


def test_the_first_random_steps_take_random_actions() -> None:
    run = stepper([2], random_steps=4)
    lane = run.lanes[0]
    zeros = np.zeros((2, 2), np.float32)
    first, _ = run.step(lane, zeros, 0, 0)
    second, _ = run.step(lane, zeros, 0, 0)
    third, _ = run.step(lane, zeros, 0, 0)  # 4 env steps taken: the policy's actions now
    assert first.actions.dtype == np.float32 and np.abs(first.actions).max() > 0
    assert np.abs(first.actions).max() <= 1.0 and np.abs(second.actions).max() > 0
    np.testing.assert_array_equal(third.actions, zeros)
    np.testing.assert_array_equal(lane.envs.applied[0], first.actions)


def test_the_first_random_steps_of_a_discrete_action_are_random_choices() -> None:
    run = stepper([64], random_steps=64)
    lane = run.lanes[0]
    lane.envs.action_shape, lane.envs.choices = (1,), 3
    rows, _ = run.step(lane, np.zeros((64, 1), np.float32), 0, 0)
    assert rows.actions.dtype == np.float32
    assert set(np.unique(rows.actions)) == {0.0, 1.0, 2.0}  # indices, every choice drawn


def test_a_ros2_control_robot_is_counted_as_one_environment() -> None:
    run = Stepper([], random_steps=1, rng=np.random.default_rng(0))
    random, intervened = run.boundary_actions(np.zeros((1, 2)), policy_version=2)
    assert random.shape == (2,) and np.abs(random).max() > 0 and run.policy_version == 2
    assert not intervened
    rows = run.boundary_transition(Transition(np.ones(3), np.zeros(2), 1.5, np.ones(3), True,
                                              False, None), stamp_ns=21)
    assert rows.obs.shape == (1, 3) and rows.obs.dtype == np.float32
    assert rows.rewards.tolist() == [1.5] and rows.terminated.tolist() == [True]
    assert rows.env_ids is BOUNDARY_ENV_IDS and rows.sequence == 0 and rows.stamp_ns == 21
    assert run.boundary_actions(np.full((1, 2), 0.25), 3)[0].tolist() == [0.25, 0.25]
    episodes = run.boundary_episode(EpisodeEnd(4.0, 7, None), stamp_ns=22)
    assert episodes.env_ids == [0] and episodes.successes == [False]
    assert (episodes.total_episodes, episodes.total_env_steps, episodes.policy_version) == (1, 1, 3)


def test_lanes_waiting_for_answers_and_held_lanes() -> None:
    run = stepper([1, 1])
    first, second = run.lanes
    first.sent_at, second.sent_at = 10.0, 11.5
    assert run.unanswered(now=12.0, after_s=1.0) == [first]
    assert run.waiting(now=12.0, after_s=1.0) and not run.waiting(now=10.5, after_s=1.0)
    first.held = True
    assert run.unanswered(now=12.0, after_s=1.0) == [] and run.held() == [first]
    assert run.waiting(now=12.0, after_s=1.0)  # a held lane still waits, for the pause


def test_rate_meter_measures_between_readings() -> None:
    meter = RateMeter(now=0.0)
    assert meter.update(2.0, 100) == pytest.approx(50.0)
    assert meter.update(3.0, 100) == 0.0
    assert meter.update(3.0, 110) > 1e9  # no time passed: large, not a division by zero


def test_diagnosis_says_the_most_important_first() -> None:
    gate = ActingGate(silence_s=1.0)
    assert acting_diagnosis(gate, False, 100.0, 100.0, 0.0) == (False, "stepping")
    warn, message = acting_diagnosis(gate, False, 70.0, 100.0, 0.0)
    assert warn and message == "below target rate (70 < 100 steps/s)"
    assert acting_diagnosis(gate, False, 0.0, 0.0, 0.0) == (False, "stepping")  # no target
    assert acting_diagnosis(gate, True, 0.0, 0.0, 0.0) == (
        True, "waiting for actions (is the policy running?)")
    gate.on_status(True, True, now=0.0)
    assert acting_diagnosis(gate, True, 0.0, 100.0, 0.0) == (
        False, "paused by the replay buffer's rate limiter (learner catching up)")
    gate.on_status(True, False, now=1.0)
    gate.on_tick(now=3.0)
    warn, message = acting_diagnosis(gate, True, 0.0, 100.0, 4.0)
    assert warn and message.startswith("paused: no /replay_status for 3 s")
    assert acting_diagnosis(gate, True, 0.0, 100.0, 4.0, "the robot's") == (True, "the robot's")


def test_diagnostic_values() -> None:
    run = stepper([2, 2])
    run.step(run.lanes[0], np.zeros((2, 2), np.float32), 7, 0)
    values = acting_values(run, ActingGate(1.0), 12.34, {"acting": 10, "experience": 30,
                                                        "all": 40}, now=0.0)
    assert values == {"env steps/s": "12.3", "env steps": 2, "dds bytes": 40,
                      "dds bytes acting": 10, "dds bytes experience": 30,
                      "dds bytes per env step": "20", "episodes": 0, "policy version": 7,
                      "lanes": 2, "acting paused": False, "paused s": "0.0"}


def test_an_operator_drives_instead_of_the_policy_and_the_rows_are_flagged() -> None:
    run = stepper([2], random_steps=2)
    run.intervention = Intervention(2, timeout_s=60.0)
    lane = run.lanes[0]
    policy = np.zeros((2, 2), np.float32)
    first, _ = run.step(lane, policy, 0, 0)  # a random step, no operator yet
    assert first.intervened is None
    run.intervention.on_command([0.5, -0.5], time.monotonic())
    second, _ = run.step(lane, policy, 0, 0)
    np.testing.assert_array_equal(second.actions, [[0.5, -0.5]] * 2)
    np.testing.assert_array_equal(lane.envs.applied[-1], second.actions)
    assert second.intervened.tolist() == [True, True]
    # Through ros2_control: the operator's action goes to the loop, the transition is flagged.
    boundary = Stepper([], 0, np.random.default_rng(0), intervention=run.intervention)
    action, intervened = boundary.boundary_actions(np.zeros((1, 2)), 1)
    assert action.tolist() == [0.5, -0.5] and intervened
    rows = boundary.boundary_transition(Transition(np.ones(3), action, 1.0, np.ones(3), False,
                                                   False, None, intervened), stamp_ns=1)
    assert rows.intervened.tolist() == [True]
    plain = boundary.boundary_transition(Transition(np.ones(3), action, 1.0, np.ones(3), False,
                                                    False, None), stamp_ns=2)
    assert plain.intervened is None


class Halving:
    """A stand-in expert: acts with half of each observation's first value on every dimension."""

    def act(self, obs: np.ndarray) -> np.ndarray:
        return np.repeat(obs[:, :1] / 2.0, 2, axis=1).astype(np.float32)


def test_a_scripted_operator_drives_whole_early_episodes_of_the_envs_it_took() -> None:
    run = stepper([1, 1])  # two lanes of one env each: robot-wide env ids 0 and 1
    # Share 1: every episode that starts in the first 6 steps (summed over envs) is taken.
    run.intervention = ScriptedIntervention(Halving(), 2, 2, 1.0, 6, np.random.default_rng(0))
    lane = run.lanes[1]
    lane.obs = np.full((1, 1), 4.0, np.float32)
    rows, _ = run.step(lane, np.zeros((1, 2), np.float32), 0, 0)
    assert rows.intervened.tolist() == [True]
    np.testing.assert_array_equal(rows.actions, [[2.0, 2.0]])  # the expert's, from lane.obs
    first = run.lanes[0]  # env 0: its episode ends every 3 steps
    for _ in range(3):
        rows, _ = run.step(first, np.zeros((1, 2), np.float32), 0, 0)
        assert rows.intervened.tolist() == [True]
    # Its second episode starts after 4 steps: taken too; its third after 7: not taken.
    for _ in range(3):
        rows, _ = run.step(first, np.zeros((1, 2), np.float32), 0, 0)
        assert rows.intervened.tolist() == [True]
    rows, _ = run.step(first, np.zeros((1, 2), np.float32), 0, 0)
    assert rows.intervened is None and rows.actions.tolist() == [[0.0, 0.0]]
    assert run.intervention.rate == pytest.approx(7 / 8)


def test_a_scripted_operator_takes_about_its_share_of_episodes() -> None:
    operator = ScriptedIntervention(Halving(), 2, 1, 0.1, 0, np.random.default_rng(3))
    taken = 0
    for _ in range(2000):
        taken += bool(operator.driving[0])
        operator.episodes_ended(np.zeros(1, dtype=np.int64))
    assert 150 <= taken <= 250  # 10 % of 2000 episodes, +-5 standard deviations
    assert operator.describe("Task-v0") == ("expert interventions: the scripted expert of "
                                            "Task-v0 takes 10% of the episodes")
    first_steps = ScriptedIntervention(Halving(), 2, 1, 0.5, 6, np.random.default_rng(3))
    assert first_steps.describe("Task-v0").endswith("50% of the episodes that start in the first "
                                                    "6 steps")


def test_a_scripted_operator_drives_a_ros2_control_robot_from_its_observation() -> None:
    operator = ScriptedIntervention(Halving(), 2, 1, 1.0, 0, np.random.default_rng(0))
    boundary = Stepper([], 0, np.random.default_rng(0), intervention=operator)
    action, intervened = boundary.boundary_actions(np.zeros((1, 2)), 1, np.array([1.0, 9.0]))
    assert intervened and action.tolist() == [0.5, 0.5]
    operator.share = 0.0
    boundary.boundary_episode(EpisodeEnd(1.0, 5, True), stamp_ns=1)  # the next one is the policy's
    action, intervened = boundary.boundary_actions(np.zeros((1, 2)), 1, np.array([1.0, 9.0]))
    assert not intervened and action.tolist() == [0.0, 0.0]


def test_scripted_interventions_need_a_task_with_an_expert() -> None:
    with pytest.raises(ConfigError, match="expert_interventions: no scripted expert for"):
        ScriptedIntervention.for_task(CARTPOLE_ID, 1, 1, 0.1, 0, seed=0)
    kuka = ScriptedIntervention.for_task("rl_ros2/KukaReach-v0", 7, 4, 0.5, 100, seed=0)
    assert kuka.driving.shape == (4,)
    with pytest.raises(ConfigError, match="choose one"):
        SimulatorConfig(teleop=True, expert_interventions=0.1)
