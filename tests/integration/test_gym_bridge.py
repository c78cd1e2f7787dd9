"""rl_nodes.gym_bridge against simulator nodes in another process: spaces, same-step autoreset
with the final observations in ``info``, several robots' namespaces, and clear errors when the
simulator is missing, gone, or does not apply the bridge's actions."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import rclpy
import yaml
from stable_baselines3.common.env_checker import check_env

from rl_core.security import weights_auth
from rl_core.security.signed_status import StatusSigner, sign_status
from rl_interfaces.msg import ReplayStatus
from rl_nodes import graph
from rl_nodes.gym_bridge import BridgeEnv, BridgeVectorEnv, SimulatorProtocolError, SimulatorTimeout
from tests.processes import Child

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent
ENV_ID = "rl_ros2/CartPoleBalance-v0"
#: Robot -> its simulator's parameters. Robot 2 keeps random actions for its first steps, which
#: the bridge must refuse.
SIMULATORS = {0: {"num_envs": 2}, 1: {"num_envs": 3}, 2: {"num_envs": 1, "random_steps": 1000},
              3: {"num_envs": 1}}
TIMEOUT_S = 20.0


def simulators(tmp_path: Path, robots: list[int]) -> Child:
    """One process running the simulators of ``robots`` (parameters from SIMULATORS)."""
    parameters = {f"/robot_{robot}/simulator": {"ros__parameters": {
        "env_id": ENV_ID, "random_steps": 0, "visualization_rate_hz": 0.0, **SIMULATORS[robot]}}
        for robot in robots}
    path = tmp_path / f"simulators_{'_'.join(map(str, robots))}.yaml"
    path.write_text(yaml.safe_dump(parameters))
    nodes = [argument for robot in robots for argument in ("--node", f"simulator@/robot_{robot}")]
    return Child([str(BIN / "container"), *nodes, "--ros-args", "--params-file", str(path)],
                 env=dict(os.environ))


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    child = simulators(tmp_path_factory.mktemp("bridge"), [0, 1, 2])
    try:
        yield child
    finally:
        child.stop()


def test_vector_env_steps_two_robots_with_same_step_autoreset(running: Child) -> None:
    envs = BridgeVectorEnv(ENV_ID, ["/robot_0", "/robot_1"], timeout_s=TIMEOUT_S)
    try:
        assert envs.num_envs == 5
        assert envs.metadata["autoreset_mode"].name == "SAME_STEP"
        obs, _ = envs.reset(seed=3)
        assert obs.shape == (5, 4) and envs.observation_space.contains(obs)
        ended = np.zeros(5, dtype=bool)
        for _ in range(400):  # a random cart-pole episode lasts a few dozen steps
            previous = obs
            obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
            assert obs.shape == (5, 4) and rewards.shape == (5,)
            np.testing.assert_array_equal(rewards, 1.0)  # +1 per step, the last one included
            done = terminated | truncated
            if done.any():
                np.testing.assert_array_equal(info["_final_obs"], done)
                for index in np.flatnonzero(done):
                    final = info["final_obs"][index]
                    # The final observation is the failed state, the returned one a fresh start.
                    assert np.abs(final[[0, 2]]).max() > np.abs(obs[index][[0, 2]]).max()
                    assert np.abs(obs[index]).max() <= 0.05 + 1e-6  # reset noise
            else:
                assert "final_obs" not in info
            assert not np.array_equal(obs, previous)
            ended |= done
            if ended[:2].any() and ended[2:].any():
                break
        assert ended[:2].any() and ended[2:].any(), "both robots should have finished episodes"
    finally:
        envs.close()


def test_single_env_needs_a_simulator_with_one_environment(running: Child) -> None:
    with pytest.raises(ValueError, match="num_envs: 1"):
        BridgeEnv(ENV_ID, "/robot_1", timeout_s=TIMEOUT_S)


def test_missing_simulator_is_a_clear_timeout() -> None:
    start = time.monotonic()
    with pytest.raises(SimulatorTimeout, match="is a simulator running in namespace /robot_7"):
        BridgeEnv(ENV_ID, "/robot_7", timeout_s=2.0)
    assert time.monotonic() - start < 10.0


def test_actions_the_simulator_replaces_are_refused(running: Child) -> None:
    env = BridgeEnv(ENV_ID, "/robot_2", timeout_s=TIMEOUT_S)
    try:
        env.reset()
        with pytest.raises(SimulatorProtocolError, match="random_steps:=0"):
            env.step(env.action_space.sample())
    finally:
        env.close()


def test_single_env_episode_and_the_simulator_gone(tmp_path: Path) -> None:
    child = simulators(tmp_path, [3])
    env = None
    try:
        env = BridgeEnv(ENV_ID, "/robot_3", timeout_s=TIMEOUT_S)
        # Stable-Baselines3's conformance check passes. gymnasium's check_env cannot: it wants
        # reset(seed) to repeat an episode, which a remote robot cannot do.
        check_env(env)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (4,) and env.observation_space.contains(obs)
        for length in range(1, 201):
            obs, reward, terminated, truncated, _ = env.step(np.array([1.0], np.float32))
            assert reward == 1.0
            if terminated or truncated:
                break
        assert terminated and length < 200  # full force one way topples the pole
        assert np.abs(obs[[0, 2]]).max() > 0.19  # step returned the final state...
        start, _ = env.reset()
        assert np.abs(start).max() <= 0.05 + 1e-6  # ...and reset() the simulator's reset one
        env.envs.link.timeout_s = 3.0
        child.stop()
        began = time.monotonic()
        with pytest.raises(SimulatorTimeout, match="the simulator is gone"):
            env.step(np.zeros(1, np.float32))
        assert time.monotonic() - began < 10.0
    except BaseException:
        print(child.output()[-4000:])  # the simulator's side, shown with the failure
        raise
    finally:
        if env is not None:
            env.close()
        child.stop()


def test_a_rate_limiter_pause_is_waited_out_not_a_timeout(running: Child) -> None:
    """A replay buffer's rate limiter holds the simulator's observations: longer than the
    bridge's timeout here, and the step still completes once acting resumes."""
    envs = BridgeVectorEnv(ENV_ID, ["/robot_0"], timeout_s=TIMEOUT_S)
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = rclpy.create_node("pausing_replay_buffer", context=context)
    status = node.create_publisher(ReplayStatus, graph.REPLAY_STATUS.name,
                                   graph.REPLAY_STATUS.qos.profile())
    paused, stop, published = threading.Event(), threading.Event(), [0]
    paused.set()

    signer = StatusSigner(weights_auth.load_key())  # the learner's key, as the suite's nodes have

    def publish() -> None:  # as a replay buffer does, a few times a second, signed
        while not stop.wait(0.2):
            msg = ReplayStatus(rate_limited=True, acting_paused=paused.is_set())
            sign_status(msg, signer)
            status.publish(msg)
            published[0] += 1

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        envs.reset()
        # The 3 simulators of the process and the bridge hear the pause.
        envs.link.wait_until(lambda: status.get_subscription_count() >= 4, envs.robots[0],
                             "the simulators' /replay_status subscriptions")
        heard = published[0]
        envs.link.wait_until(lambda: envs.link.acting_paused and published[0] >= heard + 2,
                             envs.robots[0], "the pause")
        envs.link.timeout_s = 1.0
        resume = threading.Timer(3.0, paused.clear)
        resume.start()
        began = time.monotonic()
        obs, *_ = envs.step(np.zeros((2, 1), np.float32))
        waited = time.monotonic() - began
        resume.join()
        assert obs.shape == (2, 4)
        assert waited >= 2.0, f"the simulator did not pause (step took {waited:.2f} s)"
    finally:
        paused.clear()
        stop.set()
        publisher.join(timeout=5.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        envs.close()


def test_a_pixel_task_crosses_as_compressed_images(tmp_path: Path) -> None:
    """The frames of a pixel task's simulator (observation_codec png) reach the bridge as
    ``uint8`` observations, joined from the batch and image topics; the experience too."""
    pixels_id = "rl_ros2/CartPoleBalancePixels-v0"
    path = tmp_path / "pixels.yaml"
    path.write_text(yaml.safe_dump({"/robot_5/simulator": {"ros__parameters": {
        "env_id": pixels_id, "num_envs": 2, "random_steps": 0, "visualization_rate_hz": 0.0,
        "observation_codec": "png"}}}))
    child = Child([str(BIN / "container"), "--node", "simulator@/robot_5", "--ros-args",
                   "--params-file", str(path)], env=dict(os.environ))
    try:
        envs = BridgeVectorEnv(pixels_id, ["/robot_5"], timeout_s=TIMEOUT_S)
        try:
            assert envs.single_observation_space.dtype == np.uint8
            obs, _ = envs.reset(seed=0)
            assert obs.shape == (2, *envs.single_observation_space.shape) and obs.dtype == np.uint8
            assert obs.max() > obs.min(), "rendered frames, not an empty placeholder"
            for _ in range(4):
                obs, rewards, terminated, truncated, _ = envs.step(envs.action_space.sample())
            assert obs.shape[0] == 2 and rewards.shape == (2,) and np.all(rewards >= 0)
            assert envs.link.rejected_messages == 0
        finally:
            envs.close()
    finally:
        child.stop()


def test_a_discrete_task_is_bridged_with_its_own_spaces(tmp_path: Path) -> None:
    """Gymnasium's CartPole-v1 (``Discrete(2)``): the bridge exposes the env's own spaces, and
    its choices reach the simulator as rows of one index each."""
    path = tmp_path / "discrete.yaml"
    path.write_text(yaml.safe_dump({"/robot_6/simulator": {"ros__parameters": {
        "env_id": "CartPole-v1", "num_envs": 2, "random_steps": 0}}}))
    child = Child([str(BIN / "container"), "--node", "simulator@/robot_6", "--ros-args",
                   "--params-file", str(path)], env=dict(os.environ))
    try:
        envs = BridgeVectorEnv("CartPole-v1", ["/robot_6"], timeout_s=TIMEOUT_S)
        try:
            assert envs.single_action_space == gymnasium.spaces.Discrete(2)
            obs, _ = envs.reset(seed=0)
            assert obs.shape == (2, 4)
            for _ in range(5):
                obs, rewards, _, _, _ = envs.step(envs.action_space.sample())
            assert obs.shape == (2, 4) and np.all(rewards == 1.0)
            assert envs.link.rejected_messages == 0
        finally:
            envs.close()
    finally:
        child.stop()
