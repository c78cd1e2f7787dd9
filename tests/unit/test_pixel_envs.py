"""Pixel variants of the tasks: shapes, resolution, seeding, same dynamics (check_env: test_envs)."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.algorithms.encoders import is_image_shape
from rl_core.envs import (
    CARTPOLE_ID,
    CARTPOLE_PIXELS_ID,
    KUKA_REACH_ID,
    KUKA_REACH_PIXELS_ID,
    VectorEnv,
    make_env,
)
from rl_core.envs.pixels import (
    CARTPOLE_ACTION_REPEAT,
    DEFAULT_FRAME_STACK,
    DEFAULT_RESOLUTION,
    KUKA_REACH_ACTION_REPEAT,
)
from rl_core.robot.tasks import space_shapes

pytestmark = pytest.mark.unit

PIXEL_IDS = {CARTPOLE_PIXELS_ID: CARTPOLE_ID, KUKA_REACH_PIXELS_ID: KUKA_REACH_ID}
ACTION_REPEATS = {CARTPOLE_PIXELS_ID: CARTPOLE_ACTION_REPEAT,
                  KUKA_REACH_PIXELS_ID: KUKA_REACH_ACTION_REPEAT}


@pytest.mark.parametrize("env_id", PIXEL_IDS)
def test_default_shape_and_same_task_as_state_variant(env_id: str) -> None:
    obs_shape, action_shape = space_shapes(env_id)
    assert obs_shape == (DEFAULT_FRAME_STACK, DEFAULT_RESOLUTION, DEFAULT_RESOLUTION, 3)
    assert action_shape == space_shapes(PIXEL_IDS[env_id])[1]
    pixel_env, state_env = make_env(env_id), make_env(PIXEL_IDS[env_id])
    try:
        assert is_image_shape(pixel_env.observation_space.shape)
        assert pixel_env.observation_space.dtype == np.uint8
        assert not is_image_shape(state_env.observation_space.shape)
        # Time limits count agent steps, so the episodes last as long as the state task's.
        assert (pixel_env.spec.max_episode_steps * ACTION_REPEATS[env_id]
                == state_env.spec.max_episode_steps)
    finally:
        pixel_env.close()
        state_env.close()


def test_resolution_and_frame_stack_are_configurable() -> None:
    env = make_env(CARTPOLE_PIXELS_ID, width=40, height=30, frame_stack=4)
    try:
        obs, _ = env.reset(seed=0)
        assert obs.shape == (4, 30, 40, 3) and obs.dtype == np.uint8
        # A new episode is padded with its first frame.
        assert all(np.array_equal(obs[0], frame) for frame in obs[1:])
        first_frame = obs[-1]
        for _ in range(10):
            obs, *_ = env.step(np.ones(1, dtype=np.float32))
        assert not np.array_equal(obs[-1], first_frame), "the newest frame shows the cart moved"
        assert np.array_equal(obs[-1], env.render())
    finally:
        env.close()


@pytest.mark.parametrize("kwargs", [{"width": 0}, {"height": -1}, {"frame_stack": 0},
                                    {"action_repeat": 0}, {"camera_distance": 0.0},
                                    {"render_mode": "human"}])
def test_invalid_arguments_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        make_env(CARTPOLE_PIXELS_ID, **kwargs)


def test_same_seed_gives_identical_frames_and_the_state_task_returns() -> None:
    actions = np.random.default_rng(3).uniform(-1, 1, (60, 1)).astype(np.float32)

    def rollout(env_id: str, repeat: int) -> tuple[list[np.ndarray], list[float]]:
        env = make_env(env_id, **({"width": 32, "height": 32} if env_id != CARTPOLE_ID else {}))
        observations, rewards = [env.reset(seed=7)[0]], []
        try:
            for action in np.repeat(actions, repeat, axis=0):
                obs, reward, terminated, truncated, _ = env.step(action)
                observations.append(obs)
                rewards.append(reward)
                if terminated or truncated:
                    break
        finally:
            env.close()
        return observations, rewards

    first, second = rollout(CARTPOLE_PIXELS_ID, 1), rollout(CARTPOLE_PIXELS_ID, 1)
    assert all(np.array_equal(a, b) for a, b in zip(first[0], second[0], strict=True))
    # The state task with every action held for the repeat earns the same rewards in total.
    state_rewards = rollout(CARTPOLE_ID, CARTPOLE_ACTION_REPEAT)[1]
    assert sum(state_rewards) == sum(first[1])
    assert max(first[1]) == CARTPOLE_ACTION_REPEAT


def test_vector_env_keeps_uint8_frames() -> None:
    envs = VectorEnv(CARTPOLE_PIXELS_ID, 2, width=16, height=16, frame_stack=2)
    try:
        obs = envs.reset(seed=0)
        assert obs.shape == (2, 2, 16, 16, 3) and obs.dtype == np.uint8
        step = envs.step(np.zeros((2, 1), dtype=np.float32))
        assert step.next_obs.dtype == np.uint8 and step.obs.shape == obs.shape
    finally:
        envs.close()

