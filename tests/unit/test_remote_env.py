"""Gymnasium environments over remote simulators (rl_core.acting.remote_env) with a fake link: the
step protocol (republishes, restarts, skipped steps, replaced actions), same-step autoreset,
reset() without a reset, and the single environment."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium
import numpy as np
import pytest
from gymnasium.spaces import Box

from rl_core.acting.remote_env import (
    KEPT_EXPERIENCE,
    REPUBLISH_AFTER_S,
    RemoteRobot,
    RemoteVectorEnv,
    SimulatorProtocolError,
    SingleRemoteEnv,
    check_bridge_arguments,
)

pytestmark = pytest.mark.unit
OBS_SPACE = Box(-10.0, 10.0, (2,), np.float32)
ACTION_SPACE = Box(-1.0, 1.0, (1,), np.float32)
SECOND_NS = 1_000_000_000


@dataclass
class Batch:
    robot_id: int
    step: int
    obs: np.ndarray


@dataclass
class Rows:
    robot_id: int
    stream: int
    sequence: int
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


class FakeSimulator:
    """A simulator of ``num_envs`` environments answering each action batch at once, as the
    simulator node does: rows for the step, then the next observations. An environment's
    observation is ``[its episode step, its index]``; episodes last ``episode_length`` steps."""

    def __init__(self, robot: RemoteRobot, num_envs: int, episode_length: int = 3,
                 obs_size: int = 2) -> None:
        self.robot, self.num_envs, self.episode_length = robot, num_envs, episode_length
        self.obs_size = obs_size
        self.steps = np.zeros(num_envs, np.int64)
        self.step, self.stream, self.replace_actions = 0, 1, False
        self.robot.publish = self.on_actions
        robot.on_observations(Batch(robot.robot_id, 0, self.obs()))

    def obs(self) -> np.ndarray:
        obs = np.stack([self.steps, np.arange(self.num_envs)], axis=1).astype(np.float32)
        return obs[:, :self.obs_size]

    def on_actions(self, step: int, actions: np.ndarray, stamp_ns: int) -> None:
        if step != self.step:
            return  # a republish of an answer already handled
        self.steps += 1
        terminated = self.steps >= self.episode_length
        final = self.obs()
        self.steps[terminated] = 0
        applied = np.zeros_like(actions) + 0.5 if self.replace_actions else actions
        self.robot.on_experience(Rows(self.robot.robot_id, self.stream, step, applied,
                                      np.ones(self.num_envs, np.float32), final, terminated,
                                      np.zeros(self.num_envs, bool)))
        self.step += 1
        self.robot.on_observations(Batch(self.robot.robot_id, self.step, self.obs()))


class FakeLink:
    """The link of a test: every answer has arrived when it is asked for."""

    def __init__(self, robots: list[RemoteRobot]) -> None:
        self.robots, self.closed = robots, False

    def synchronise(self) -> None:
        for robot in self.robots:
            robot.synchronise()

    def receive(self, robot: RemoteRobot) -> tuple[object, object]:
        assert robot.arrived(0), "the fake simulator answers at once"
        return robot.take()

    def close(self) -> None:
        self.closed = True


def bridged(*num_envs: int, obs_size: int = 2) -> tuple[RemoteVectorEnv, list[FakeSimulator]]:
    robots = [RemoteRobot(f"/robot_{k}", k, lambda *args: None) for k in range(len(num_envs))]
    simulators = [FakeSimulator(robot, n, obs_size=obs_size) for robot, n in zip(robots, num_envs)]
    space = Box(-10.0, 10.0, (obs_size,), np.float32)
    return RemoteVectorEnv(FakeLink(robots), "fake", space, ACTION_SPACE), simulators


def test_arguments_are_checked_with_a_reason() -> None:
    check_bridge_arguments(["/robot_0", "/robot_1"], [0, 1], 1.0)
    with pytest.raises(ValueError, match="at least one robot"):
        check_bridge_arguments([], [], 1.0)
    with pytest.raises(ValueError, match="distinct robots"):
        check_bridge_arguments(["/robot_1", "/a/robot_1"], [1, 1], 1.0)
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        check_bridge_arguments(["/robot_0"], [0], 0.0)


def test_vector_env_autoresets_in_the_same_step_with_final_obs_in_info() -> None:
    envs, _ = bridged(2, 1)
    assert envs.num_envs == 3 and envs.metadata["autoreset_mode"].name == "SAME_STEP"
    obs, info = envs.reset(seed=1)
    assert obs.shape == (3, 2) and info == {} and obs.dtype == np.float32
    np.testing.assert_array_equal(obs[:, 1], [0, 1, 0])  # robot by robot, then by index
    for _ in range(2):
        obs, rewards, terminated, truncated, info = envs.step(np.zeros((3, 1), np.float32))
        assert rewards.dtype == np.float64 and not terminated.any() and info == {}
    obs, rewards, terminated, truncated, info = envs.step(np.zeros((3, 1), np.float32))
    assert terminated.all() and not truncated.any()
    np.testing.assert_array_equal(info["_final_obs"], True)
    np.testing.assert_array_equal(np.stack(info["final_obs"])[:, 0], 3)  # the final state...
    np.testing.assert_array_equal(obs[:, 0], 0)  # ...and the reset one returned
    envs.close()
    assert envs.link.closed  # type: ignore[attr-defined]


def test_steps_are_checked_and_reset_mid_episode_warns_once() -> None:
    envs, _ = bridged(1)  # construction synchronised: step() may come before reset()
    with pytest.raises(ValueError, match=r"actions must have shape \(1, 1\)"):
        envs.step(np.zeros((2, 1), np.float32))
    envs.step(np.zeros((1, 1), np.float32))
    with pytest.warns(UserWarning, match="middle of an episode"):
        obs, _ = envs.reset()
    assert obs[0, 0] == 1  # the episode continues


def test_observations_of_another_task_close_the_link() -> None:
    robot = RemoteRobot("/robot_0", 0, lambda *args: None)
    FakeSimulator(robot, 1, obs_size=1)
    link = FakeLink([robot])
    with pytest.raises(ValueError, match=r"shape \(1,\), but fake has \(2,\)"):
        RemoteVectorEnv(link, "fake", OBS_SPACE, ACTION_SPACE)
    assert link.closed


def test_a_lost_answer_is_sent_again_at_most_every_interval() -> None:
    sent: list[tuple[int, int]] = []
    robot = RemoteRobot("/robot_0", 0, lambda step, actions, stamp: sent.append((step, stamp)))
    robot.on_observations(Batch(0, 5, np.zeros((1, 2))))
    robot.synchronise()
    robot.send(np.ones((1, 1)), now_ns=0)
    assert sent == [(5, 0)] and robot.step == 6 and robot.sent_step == 5
    assert not robot.arrived(int(REPUBLISH_AFTER_S * SECOND_NS) - 1)
    assert not robot.arrived(int(REPUBLISH_AFTER_S * SECOND_NS) + 1)  # republished
    assert not robot.arrived(int(REPUBLISH_AFTER_S * SECOND_NS) + 2)  # not again so soon
    assert [step for step, _ in sent] == [5, 5]


def test_a_restarted_or_skipping_simulator_is_a_protocol_error() -> None:
    robot = RemoteRobot("/robot_0", 0, lambda *args: None)
    robot.on_observations(Batch(0, 5, np.zeros((1, 2))))
    robot.synchronise()
    robot.send(np.ones((1, 1)), 0)
    robot.on_observations(Batch(0, 2, np.zeros((1, 2))))
    with pytest.raises(SimulatorProtocolError, match="restarted"):
        robot.arrived(0)
    robot.on_observations(Batch(0, 8, np.zeros((1, 2))))
    with pytest.raises(SimulatorProtocolError, match="pipeline: false"):
        robot.arrived(0)
    robot.on_observations(Batch(1, 6, np.zeros((1, 2))))  # another robot's: ignored
    assert robot.latest is not None and robot.latest.step == 8


def test_the_last_stream_heard_wins_and_old_rows_are_pruned() -> None:
    robot = RemoteRobot("/robot_0", 0, lambda *args: None)
    rows = [Rows(0, 2, sequence, np.ones((1, 1), np.float32), np.ones(1), np.zeros((1, 2)),
                 np.zeros(1, bool), np.zeros(1, bool)) for sequence in range(4)]
    robot.on_experience(rows[0])
    # Another stream (an older run, or one forged with the largest number) replaces what was
    # kept, but cannot shut the genuine stream out: its next rows replace it again.
    robot.on_experience(Rows(0, 2**64 - 1, 9, *[np.zeros(1)] * 5))
    assert list(robot.experience) == [9] and robot.stream == 2**64 - 1
    robot.on_experience(rows[1])
    assert list(robot.experience) == [1] and robot.stream == 2
    robot.on_experience(rows[3])
    robot.on_observations(Batch(0, 1, np.zeros((1, 2))))
    robot.synchronise()
    robot.send(np.ones((1, 1)), 0)
    robot.on_observations(Batch(0, 2, np.zeros((1, 2))))
    assert robot.arrived(0)
    _, experience = robot.take()
    assert experience is rows[1] and list(robot.experience) == [3]
    robot.on_experience(Rows(0, 3, 0, *[np.zeros(1)] * 5))  # a newer run: starts afresh
    assert list(robot.experience) == [0] and robot.stream == 3
    for sequence in range(1, 200):  # a flood of one stream is bounded
        robot.on_experience(Rows(0, 3, sequence, *[np.zeros(1)] * 5))
    assert len(robot.experience) == KEPT_EXPERIENCE
    assert min(robot.experience) == 200 - KEPT_EXPERIENCE


def test_replaced_actions_are_refused() -> None:
    envs, simulators = bridged(1)
    envs.reset()
    simulators[0].replace_actions = True
    with pytest.raises(SimulatorProtocolError, match="random_steps:=0"):
        envs.step(np.zeros((1, 1), np.float32))


def test_silence_causes() -> None:
    robot = RemoteRobot("/robot_4", 4, lambda *args: None)
    assert "is a simulator running in namespace /robot_4" in robot.silence_cause("/t", 0)
    assert "has a publisher" in robot.silence_cause("/t", 1)
    robot.on_observations(Batch(4, 0, np.zeros((1, 2))))
    assert "the simulator is gone" in robot.silence_cause("/t", 0)
    robot.synchronise()
    robot.send(np.zeros((1, 1), np.float32), 0)
    assert "sent nothing for this step" in robot.silence_cause("/t", 1)
    robot.on_observations(Batch(4, 1, np.zeros((1, 2))))  # answered, but no experience rows
    assert "experience rows of that step did not arrive" in robot.silence_cause("/t", 1)
    assert "the bridge needs n_step 1" in robot.silence_cause("/t", 1)


def test_single_env_returns_the_final_obs_then_the_reset_one() -> None:
    envs, _ = bridged(1)
    env = SingleRemoteEnv(envs, "/robot_0")
    assert isinstance(env, gymnasium.Env) and env.observation_space == OBS_SPACE
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2,)
    for length in range(1, 10):
        obs, reward, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
        assert reward == 1.0
        if terminated:
            break
    assert length == 3 and obs[0] == 3  # the final state
    start, _ = env.reset()
    assert start[0] == 0  # the simulator's reset observation, without a new synchronisation


def test_single_env_needs_one_environment() -> None:
    envs, _ = bridged(2)
    with pytest.raises(ValueError, match="steps 2 environments; SingleRemoteEnv needs "
                                         r"num_envs: 1 \(use RemoteVectorEnv\)"):
        SingleRemoteEnv(envs, "/robot_0")
    assert envs.closed
