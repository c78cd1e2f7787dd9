"""Unit tests of the pybullet gymnasium environments in ``rl_core.envs``."""

from __future__ import annotations

import subprocess
import sys
import warnings
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rl_core.envs import (
    CARTPOLE_ID,
    CARTPOLE_PIXELS_ID,
    KUKA_REACH_ID,
    KUKA_REACH_PIXELS_ID,
    CartPoleBalanceEnv,
    EpisodeRecord,
    KukaReachEnv,
    PybulletRobotEnv,
    VectorEnv,
    make_env,
    register_envs,
)

ENV_IDS = [CARTPOLE_ID, KUKA_REACH_ID]
ENV_CLASSES: dict[str, type[PybulletRobotEnv]] = {
    CARTPOLE_ID: CartPoleBalanceEnv,
    KUKA_REACH_ID: KukaReachEnv,
}
OBS_SIZES = {CARTPOLE_ID: 4, KUKA_REACH_ID: 23}
ACTION_SIZES = {CARTPOLE_ID: 1, KUKA_REACH_ID: 7}


@pytest.fixture(params=ENV_IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def raw_env(env_id: str) -> Iterator[PybulletRobotEnv]:
    env = ENV_CLASSES[env_id](render_mode="rgb_array")
    try:
        yield env
    finally:
        env.close()


def _rollout(env: gymnasium.Env, seed: int, actions: np.ndarray) -> np.ndarray:
    """Returns the stacked observations of a seeded rollout (stops at episode end)."""
    observations = [env.reset(seed=seed)[0]]
    for action in actions:
        observation, _, terminated, truncated, _ = env.step(action)
        observations.append(observation)
        if terminated or truncated:
            break
    return np.stack(observations)


def _urdf_tree(env: PybulletRobotEnv) -> ElementTree.Element:
    return ElementTree.fromstring(env.urdf_text())


# ------------------------------------------------------------------ conformance


@pytest.mark.unit
def test_check_env_passes_on_unwrapped_env(env_id: str) -> None:
    # Made through gymnasium so that the raw env carries its spec, which
    # check_env needs to test the render modes.
    env = gymnasium.make(env_id, render_mode="rgb_array")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


@pytest.mark.unit
@pytest.mark.parametrize("made_id, kwargs", [
    (CARTPOLE_ID, {}), (KUKA_REACH_ID, {}),
    # The pixel variants are wrappers by construction (rl_core.envs.pixels); small frames.
    (CARTPOLE_PIXELS_ID, {"width": 24, "height": 16, "frame_stack": 2}),
    (KUKA_REACH_PIXELS_ID, {"width": 24, "height": 16, "frame_stack": 2}),
])
def test_check_env_passes_on_made_env(made_id: str, kwargs: dict[str, int]) -> None:
    env = gymnasium.make(made_id, render_mode="rgb_array", **kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # check_env always remarks that a wrapped env is not the raw one.
            warnings.filterwarnings("ignore", message=".*different from the unwrapped version")
            check_env(env, skip_render_check=False)
    finally:
        env.close()


@pytest.mark.unit
def test_registration_is_idempotent_and_sets_time_limits() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register_envs()
        register_envs()
    assert gymnasium.spec(CARTPOLE_ID).max_episode_steps == 200
    assert gymnasium.spec(KUKA_REACH_ID).max_episode_steps == 100


@pytest.mark.unit
def test_package_does_not_import_rclpy() -> None:
    code = "import sys, rl_core.envs; assert 'rclpy' not in sys.modules, 'rclpy imported'"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.unit
def test_invalid_render_mode_is_rejected(env_id: str) -> None:
    with pytest.raises(ValueError, match="render_mode"):
        ENV_CLASSES[env_id](render_mode="human")


# ----------------------------------------------------------- spaces and seeding


@pytest.mark.unit
def test_spaces_and_dtypes(raw_env: PybulletRobotEnv, env_id: str) -> None:
    observation_space = raw_env.observation_space
    action_space = raw_env.action_space
    assert isinstance(observation_space, gymnasium.spaces.Box)
    assert isinstance(action_space, gymnasium.spaces.Box)
    assert observation_space.shape == (OBS_SIZES[env_id],)
    assert observation_space.dtype == np.float32
    assert np.all(np.isfinite(observation_space.low))
    assert np.all(np.isfinite(observation_space.high))
    assert action_space.shape == (ACTION_SIZES[env_id],)
    assert action_space.dtype == np.float32
    np.testing.assert_array_equal(action_space.low, -1.0)
    np.testing.assert_array_equal(action_space.high, 1.0)

    observation, info = raw_env.reset(seed=0)
    assert observation.dtype == np.float32
    assert observation in observation_space
    assert isinstance(info, dict)
    observation, reward, terminated, truncated, info = raw_env.step(action_space.sample())
    assert observation.dtype == np.float32
    assert observation in observation_space
    assert isinstance(reward, float)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)


@pytest.mark.unit
def test_same_seed_and_actions_give_identical_observations(env_id: str) -> None:
    actions = np.random.default_rng(7).uniform(-1, 1, (40, ACTION_SIZES[env_id]))
    actions = actions.astype(np.float32)
    first, second = make_env(env_id), make_env(env_id)
    try:
        trajectory = _rollout(first, 3, actions)
        np.testing.assert_array_equal(trajectory, _rollout(second, 3, actions))
        # The same instance, reseeded after it has been used, repeats itself too.
        np.testing.assert_array_equal(trajectory, _rollout(first, 3, actions))
        other_seed = _rollout(first, 4, actions)
        assert not np.array_equal(trajectory[0], other_seed[0])
    finally:
        first.close()
        second.close()


# ---------------------------------------------------------------- rendering


@pytest.mark.unit
def test_render_returns_rgb_image(raw_env: PybulletRobotEnv) -> None:
    raw_env.reset(seed=0)
    image = raw_env.render()
    assert isinstance(image, np.ndarray)
    assert image.dtype == np.uint8
    assert image.shape == (raw_env.render_height, raw_env.render_width, 3)
    # Something other than the background must be in view.
    assert image.min() < 200


@pytest.mark.unit
def test_render_without_render_mode_returns_none(env_id: str) -> None:
    env = ENV_CLASSES[env_id]()
    try:
        env.reset(seed=0)
        assert env.render() is None
    finally:
        env.close()


# ------------------------------------------------------------- introspection


@pytest.mark.unit
def test_joint_names_match_urdf_movable_joints(raw_env: PybulletRobotEnv) -> None:
    movable = [
        joint.get("name")
        for joint in _urdf_tree(raw_env).iter("joint")
        if joint.get("type") in ("revolute", "continuous", "prismatic")
    ]
    assert raw_env.joint_names() == movable
    raw_env.reset(seed=0)
    assert raw_env.joint_positions().shape == (len(movable),)
    assert raw_env.joint_velocities().shape == (len(movable),)


@pytest.mark.unit
def test_link_world_poses_cover_urdf_links(raw_env: PybulletRobotEnv) -> None:
    raw_env.reset(seed=0)
    poses = raw_env.link_world_poses()
    urdf_links = {link.get("name") for link in _urdf_tree(raw_env).iter("link")}
    assert set(poses) == urdf_links
    for name, (position, quaternion) in poses.items():
        assert position.shape == (3,) and quaternion.shape == (4,), name
        assert np.all(np.isfinite(position)) and np.all(np.isfinite(quaternion)), name
        assert np.linalg.norm(quaternion) == pytest.approx(1.0, abs=1e-6), name


@pytest.mark.unit
def test_target_position(raw_env: PybulletRobotEnv) -> None:
    raw_env.reset(seed=0)
    target = raw_env.target_position()
    if isinstance(raw_env, CartPoleBalanceEnv):
        assert target is None
    else:
        assert target is not None and target.shape == (3,)
        assert np.all(target >= raw_env.target_low) and np.all(target <= raw_env.target_high)


# ---------------------------------------------------------------- task logic


@pytest.mark.unit
def test_cartpole_terminates_when_pole_falls() -> None:
    env = CartPoleBalanceEnv()
    try:
        env.reset(seed=0)
        # Pushing one way the whole time tips the pole over the other way.
        for step in range(1, 200):
            observation, reward, terminated, truncated, _ = env.step(np.ones(1, np.float32))
            assert reward == 1.0 and not truncated
            if terminated:
                break
        assert terminated, "pole never fell"
        assert abs(observation[2]) > env.angle_limit or abs(observation[0]) > env.position_limit
        assert step < 100
    finally:
        env.close()


@pytest.mark.unit
def test_cartpole_terminates_when_pole_starts_past_the_limit() -> None:
    env = CartPoleBalanceEnv(reset_noise=0.0)
    try:
        env.reset(seed=0)
        env.bullet_client.resetJointState(env.robot_id, env._pole_joint, 0.25)
        _, _, terminated, _, _ = env.step(np.zeros(1, np.float32))
        assert terminated
    finally:
        env.close()


@pytest.mark.unit
def test_kuka_succeeds_when_end_effector_is_at_target() -> None:
    env = KukaReachEnv()
    try:
        observation, _ = env.reset(seed=5)
        end_effector = observation[14:17].astype(np.float64)
        observation, info = env.reset(seed=5, options={"target_position": end_effector})
        # The start pose for a seed does not depend on the target option.
        np.testing.assert_allclose(observation[14:17], end_effector, atol=1e-6)
        np.testing.assert_allclose(env.target_position(), end_effector)
        observation, reward, terminated, truncated, info = env.step(np.zeros(7, np.float32))
        assert terminated and not truncated
        assert info["is_success"] is True
        assert reward > -env.success_distance
    finally:
        env.close()


@pytest.mark.unit
def test_kuka_does_not_succeed_far_from_target() -> None:
    env = KukaReachEnv()
    try:
        observation, info = env.reset(seed=5, options={"target_position": [0.0, 0.6, 1.0]})
        assert not info["is_success"]
        _, reward, terminated, _, info = env.step(np.zeros(7, np.float32))
        assert not terminated and info["is_success"] is False
        assert reward == pytest.approx(-info["distance"])
        np.testing.assert_allclose(
            observation[20:23], observation[17:20] - observation[14:17], atol=1e-6
        )
    finally:
        env.close()


@pytest.mark.unit
@pytest.mark.parametrize(
    "target", [[0.0, 0.0], [5.0, 0.0, 0.0], [np.nan, 0.0, 0.5]], ids=["short", "far", "nan"]
)
def test_kuka_rejects_invalid_target_option(target: list[float]) -> None:
    env = KukaReachEnv()
    try:
        with pytest.raises(ValueError, match="target_position"):
            env.reset(seed=0, options={"target_position": target})
    finally:
        env.close()


@pytest.mark.unit
def test_env_step_rejects_non_finite_action(raw_env: PybulletRobotEnv) -> None:
    raw_env.reset(seed=0)
    action = np.zeros(raw_env.action_space.shape, np.float32)
    action[0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        raw_env.step(action)


# ------------------------------------------------------------------ VectorEnv


def _random_actions(env_id: str, steps: int, num_envs: int, seed: int = 0) -> np.ndarray:
    shape = (steps, num_envs, ACTION_SIZES[env_id])
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.unit
def test_vector_env_spaces_and_seeding() -> None:
    with VectorEnv(CARTPOLE_ID, 3) as vector_env:
        assert vector_env.single_observation_space.shape == (4,)
        assert vector_env.single_action_space.shape == (1,)
        assert len(vector_env.envs) == 3
        obs = vector_env.reset(seed=10)
        assert obs.shape == (3, 4) and obs.dtype == np.float32
        single = make_env(CARTPOLE_ID)
        try:
            for index in range(3):
                np.testing.assert_array_equal(obs[index], single.reset(seed=10 + index)[0])
        finally:
            single.close()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "expected_ends"),
    [
        (CARTPOLE_ID, {"max_episode_steps": 15}, {(True, False, None), (False, True, None)}),
        (KUKA_REACH_ID, {"max_episode_steps": 4}, {(False, True, False)}),
        (KUKA_REACH_ID, {"success_distance": 10.0}, {(True, False, True)}),
    ],
    ids=["cartpole-falls-or-times-out", "kuka-times-out", "kuka-succeeds"],
)
def test_vector_env_matches_single_envs_reset_when_their_episode_ends(
    env_id: str, env_kwargs: dict[str, float], expected_ends: set[tuple[bool, bool, bool | None]]
) -> None:
    num_envs, seed = 3, 5
    actions = _random_actions(env_id, 40, num_envs)
    singles = [make_env(env_id, **env_kwargs) for _ in range(num_envs)]
    ends = set()  # (terminated, truncated, is_success) of the episode ends seen
    try:
        expected_obs = [env.reset(seed=seed + index)[0] for index, env in enumerate(singles)]
        returns, lengths = [0.0] * num_envs, [0] * num_envs
        with VectorEnv(env_id, num_envs, **env_kwargs) as vector_env:
            np.testing.assert_array_equal(vector_env.reset(seed=seed), expected_obs)
            for batch in actions:
                result = vector_env.step(batch)
                expected_records = []
                for index, env in enumerate(singles):
                    observation, reward, terminated, truncated, info = env.step(batch[index])
                    np.testing.assert_array_equal(result.next_obs[index], observation)
                    assert result.rewards[index] == np.float32(reward)
                    assert (result.terminated[index], result.truncated[index]) == (
                        terminated, truncated)
                    returns[index] += reward
                    lengths[index] += 1
                    if terminated or truncated:
                        ends.add((terminated, truncated, info.get("is_success")))
                        expected_records.append(EpisodeRecord(
                            index, returns[index], lengths[index], info.get("is_success")))
                        returns[index], lengths[index] = 0.0, 0
                        observation, _ = env.reset()
                    np.testing.assert_array_equal(result.obs[index], observation)
                assert result.episodes == expected_records
    finally:
        for env in singles:
            env.close()
    assert ends == expected_ends


@pytest.mark.unit
def test_vector_env_autoresets_in_the_same_step() -> None:
    with VectorEnv(CARTPOLE_ID, 2) as vector_env:
        vector_env.reset(seed=0)
        # Env 0 is pushed over; env 1 gets no force and stays up for a while.
        actions = np.array([[1.0], [0.0]], dtype=np.float32)
        for step in range(1, 200):
            result = vector_env.step(actions)
            assert result.rewards.dtype == np.float32 and result.rewards.shape == (2,)
            assert result.terminated.dtype == bool and result.truncated.dtype == bool
            if result.terminated[0]:
                break
            # Without an episode end, the next observation is the one to act on.
            np.testing.assert_array_equal(result.next_obs, result.obs)
            assert result.episodes == []
        assert result.terminated[0], "env 0 never terminated"
        assert not result.terminated[1]
        final = result.next_obs[0]
        limits = vector_env.envs[0].unwrapped
        assert abs(final[0]) > limits.position_limit or abs(final[2]) > limits.angle_limit
        # The observation to act on is a fresh reset observation.
        assert np.all(np.abs(result.obs[0]) <= limits.reset_noise + 1e-6)
        np.testing.assert_array_equal(result.next_obs[1], result.obs[1])
        assert result.episodes == [EpisodeRecord(0, float(step), step, None)]
        # The new episode of env 0 starts upright.
        second = vector_env.step(np.zeros((2, 1), np.float32))
        assert not second.terminated[0]


@pytest.mark.unit
def test_vector_env_results_are_not_overwritten_by_later_steps() -> None:
    # The simulator node keeps a step's obs until the next step's transition is published.
    with VectorEnv(CARTPOLE_ID, 2) as vector_env:
        first_obs = vector_env.reset(seed=0)
        kept = first_obs.copy()
        first = vector_env.step(np.ones((2, 1), np.float32))
        kept_step = [array.copy() for array in first[:5]]
        for _ in range(30):
            vector_env.step(np.ones((2, 1), np.float32))
        np.testing.assert_array_equal(first_obs, kept)
        for array, copy in zip(first[:5], kept_step, strict=True):
            np.testing.assert_array_equal(array, copy)


@pytest.mark.unit
def test_vector_env_reset_with_a_seed_restarts_every_random_stream() -> None:
    actions = _random_actions(KUKA_REACH_ID, 12, 2)

    def rollout(vector_env: VectorEnv, seed: int) -> list[np.ndarray]:
        observations = [vector_env.reset(seed=seed)]
        observations += [vector_env.step(batch).obs for batch in actions]
        return observations

    # Episodes of 5 steps, so the rollout includes unseeded autoresets.
    with VectorEnv(KUKA_REACH_ID, 2, max_episode_steps=5) as vector_env:
        first = rollout(vector_env, 3)
        np.testing.assert_array_equal(first, rollout(vector_env, 3))
        # A fresh seed (as a respawned simulator uses) gives fresh episodes.
        other = rollout(vector_env, 3 + 1_000_003)
        assert not any(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.unit
@pytest.mark.parametrize(
    "actions",
    [np.zeros((3, 1)), np.zeros((2,)), np.zeros((2, 2))],
    ids=["too-many-envs", "flat", "too-wide"],
)
def test_vector_env_rejects_misshaped_actions_before_any_env_steps(actions: np.ndarray) -> None:
    valid = np.full((2, 1), 0.5, np.float32)
    with VectorEnv(CARTPOLE_ID, 2) as vector_env, VectorEnv(CARTPOLE_ID, 2) as untouched:
        vector_env.reset(seed=0)
        untouched.reset(seed=0)
        with pytest.raises(ValueError, match=r"\(2, 1\)"):
            vector_env.step(actions)
        np.testing.assert_array_equal(vector_env.step(valid).obs, untouched.step(valid).obs)


@pytest.mark.unit
def test_vector_env_step_raises_for_a_non_finite_action(env_id: str) -> None:
    with VectorEnv(env_id, 2) as vector_env:
        vector_env.reset(seed=0)
        actions = np.zeros((2, ACTION_SIZES[env_id]), np.float32)
        actions[1, 0] = np.nan
        with pytest.raises(ValueError, match="finite"):
            vector_env.step(actions)


@pytest.mark.unit
def test_vector_env_requires_reset_and_valid_size() -> None:
    with pytest.raises(ValueError, match="num_envs"):
        VectorEnv(CARTPOLE_ID, 0)
    with VectorEnv(CARTPOLE_ID, 1) as vector_env:
        with pytest.raises(gymnasium.error.ResetNeeded):
            vector_env.step(np.zeros((1, 1), np.float32))
    vector_env.close()  # a second close is harmless
