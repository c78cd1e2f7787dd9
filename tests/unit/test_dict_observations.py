"""Dict observations of vector Boxes are flattened where an env is made, so every mode and the
bare loop learn them (issue 43 item 1), and the goal-conditioned KukaReach that HER will relabel
(rl_core.envs.kuka_reach_goal): its spaces, its sparse reward recomputed for any goal, and the
plan taking it. About 3 s."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rl_bringup.plan.deployment import make_plan
from rl_core.envs import KUKA_REACH_GOAL_ID, VectorEnv, make_env
from rl_core.envs.kuka_reach_goal import MISSED
from rl_core.envs.spaces import flattened_observations, unsupported_spaces
from rl_core.robot.tasks import space_shapes

pytestmark = pytest.mark.unit
VECTOR = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
IMAGE = gymnasium.spaces.Box(0, 255, (2, 64, 64, 3), np.uint8)


def test_a_dict_of_vectors_is_flattened_and_one_with_an_image_is_refused() -> None:
    vectors = gymnasium.spaces.Dict({"state": VECTOR, "goal": VECTOR})
    assert flattened_observations(vectors)
    assert unsupported_spaces("my/Env-v0", vectors, VECTOR) is None
    assert unsupported_spaces("my/Env-v0", vectors, gymnasium.spaces.Discrete(3)) is None
    with_image = gymnasium.spaces.Dict({"state": VECTOR, "image": IMAGE})
    assert not flattened_observations(with_image)
    message = unsupported_spaces("my/Env-v0", with_image, VECTOR)
    assert message is not None and message.startswith("env_id 'my/Env-v0' has observations Dict("), \
        message
    assert not flattened_observations(gymnasium.spaces.Dict({}))


def test_the_goal_env_keeps_the_goal_interface_unflattened() -> None:
    raw = gymnasium.make(KUKA_REACH_GOAL_ID, disable_env_checker=True)
    try:
        check_env(raw.unwrapped, skip_render_check=True)
        space = raw.observation_space
        assert isinstance(space, gymnasium.spaces.Dict)
        assert {key: part.shape for key, part in space.spaces.items()} == {
            "observation": (14,), "achieved_goal": (3,), "desired_goal": (3,)}
        obs, _ = raw.reset(seed=1)
        for _ in range(3):
            obs, reward, terminated, truncated, info = raw.step(raw.action_space.sample())
            assert not terminated and not truncated
            assert reward == (0.0 if info["is_success"] else MISSED)
            assert reward == raw.unwrapped.compute_reward(obs["achieved_goal"],
                                                           obs["desired_goal"], info)
        # A relabelled goal: the goal it reached pays 0; a batch of goals at once.
        assert raw.unwrapped.compute_reward(obs["achieved_goal"], obs["achieved_goal"]) == 0.0
        goals = np.stack([obs["achieved_goal"], obs["achieved_goal"] + 0.5])
        np.testing.assert_array_equal(
            raw.unwrapped.compute_reward(np.stack([obs["achieved_goal"]] * 2), goals),
            np.array([0.0, MISSED], np.float32))
    finally:
        raw.close()


def test_every_node_and_the_bare_loop_see_the_goal_env_flat() -> None:
    assert space_shapes(KUKA_REACH_GOAL_ID) == ((20,), (7,))
    env = make_env(KUKA_REACH_GOAL_ID)
    try:
        obs, _ = env.reset(seed=0)
        # Keys in sorted order: achieved_goal, desired_goal, observation.
        assert obs.shape == (20,)
        np.testing.assert_array_equal(obs[:3], env.unwrapped._end_effector_position()
                                      .astype(np.float32))
        np.testing.assert_array_equal(obs[3:6], env.unwrapped.target_position()
                                      .astype(np.float32))
    finally:
        env.close()
    with VectorEnv(KUKA_REACH_GOAL_ID, 2) as envs:
        assert envs.reset(seed=0).shape == (2, 20)
    plan = make_plan("hybrid", 2, domain_id=7, environ={},
                     extra_parameters={"env_id": KUKA_REACH_GOAL_ID})
    assert plan.processes
