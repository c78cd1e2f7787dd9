"""A task whose spaces rl_ros2 cannot learn is refused once, by the plan, before any process
starts, with one line naming the spaces, what is supported and how to get there (issue 43
item 1); an env made directly (VectorEnv) says the same. A Discrete action is planned, without
the settings that act continuously, and so is a small MultiDiscrete or MultiBinary one, as one
Discrete over its combinations. About 2 s (classic-control envs)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from rl_bringup.plan.deployment import PlanError, make_plan
from rl_core.envs import VectorEnv
from rl_core.envs.spaces import SUPPORTED_SPACES, unsupported_spaces

pytestmark = pytest.mark.unit

BOX = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
IMAGE = gymnasium.spaces.Box(0, 255, (3, 64, 64), np.uint8)


def _broken_env(**_: object) -> gymnasium.Env:
    raise RuntimeError("needs a robot arm")


gymnasium.register("rl_ros2_test/Broken-v0", entry_point=_broken_env)


@pytest.mark.parametrize("mode", ["colocated", "decoupled", "hybrid"])
def test_a_discrete_action_task_is_planned_in_every_mode(mode: str) -> None:
    plan = make_plan(mode, 2, domain_id=7, environ={}, extra_parameters={"env_id": "CartPole-v1"})
    assert plan.processes


@pytest.mark.parametrize("setting", ["teleop:=true", "expert_interventions:=0.5", "expert:=true"])
def test_a_discrete_action_task_refuses_what_acts_continuously(setting: str) -> None:
    name, value = setting.split(":=")
    with pytest.raises(PlanError) as refused:
        make_plan("colocated", 1, domain_id=7, environ={},
                  extra_parameters={"env_id": "CartPole-v1", name: value})
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"env_id 'CartPole-v1' has a discrete action or part, which {setting} "
                              "cannot drive"), message
    plan = make_plan("colocated", 1, domain_id=7, environ={},
                     extra_parameters={"env_id": "CartPole-v1",
                                       name: "0.0" if name == "expert_interventions" else "false"})
    assert plan.processes


def test_a_discrete_action_with_an_image_observation_is_refused() -> None:
    message = unsupported_spaces("my/Env-v0", IMAGE, gymnasium.spaces.Discrete(3))
    assert message is not None and message.startswith(
        "env_id 'my/Env-v0' has observations Box(0, 255, (3, 64, 64), uint8) with actions "
        "Discrete(3): rl_ros2 learns "), message
    assert SUPPORTED_SPACES in message and "wrapper" in message, message


def test_a_box_task_and_a_robot_task_are_planned() -> None:
    for env_id in ("Pendulum-v1", "rl_ros2/CartPoleBalancePixels-v0"):
        plan = make_plan("colocated", 1, domain_id=7, environ={},
                         extra_parameters={"env_id": env_id})
        assert plan.processes
    plan = make_plan("hybrid", 1, domain_id=7, environ={}, robot_interface="ros2_control",
                     task="rl_core.robot.tasks:KukaReachTask")
    assert plan.processes


def test_an_unknown_or_broken_task_is_refused_by_the_plan() -> None:
    with pytest.raises(PlanError, match="unknown env_id 'Nope-v0'.*rl_ros2 provides"):
        make_plan("colocated", domain_id=7, environ={}, extra_parameters={"env_id": "Nope-v0"})
    with pytest.raises(PlanError, match="unknown env_id 'no_such_module:Task'"):
        make_plan("colocated", domain_id=7, environ={},
                  extra_parameters={"env_id": "no_such_module:Task"})
    with pytest.raises(PlanError, match="'rl_ros2_test/Broken-v0' cannot be made here "
                                        r"\(RuntimeError: needs a robot arm\); install"):
        make_plan("colocated", domain_id=7, environ={},
                  extra_parameters={"env_id": "rl_ros2_test/Broken-v0"})


@pytest.mark.parametrize(("observation", "action", "named"), [
    (gymnasium.spaces.Dict({"state": BOX, "image": IMAGE}), BOX, "observations Dict("),
    (BOX, gymnasium.spaces.MultiDiscrete([10, 10]), "actions MultiDiscrete("),
    (BOX, gymnasium.spaces.MultiBinary(7), "actions MultiBinary("),
    (gymnasium.spaces.Discrete(5), gymnasium.spaces.Dict({"arm": BOX}),
     "observations Discrete(5) and actions Dict("),
])
def test_every_unsupported_space_is_named(observation, action, named: str) -> None:
    message = unsupported_spaces("my/Env-v0", observation, action)
    assert message is not None and message.startswith(f"env_id 'my/Env-v0' has {named}"), message
    assert unsupported_spaces("my/Env-v0", IMAGE, BOX) is None


def test_vector_env_refuses_with_the_same_words() -> None:
    with pytest.raises(ValueError) as refused:
        VectorEnv("Blackjack-v1", num_envs=1)
    assert str(refused.value) == unsupported_spaces(
        "Blackjack-v1", gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(32),
                                                gymnasium.spaces.Discrete(11),
                                                gymnasium.spaces.Discrete(2))),
        gymnasium.spaces.Discrete(2))


class PressButtons(gymnasium.Env):
    """Three buttons (``MultiBinary(3)``) or a dial and a switch (``MultiDiscrete([3, 2])``),
    recording the combinations it was given."""

    def __init__(self, action_space: gymnasium.Space) -> None:
        self.observation_space = BOX
        self.action_space = action_space
        self.applied: list[np.ndarray] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.applied.append(np.asarray(action))
        return np.zeros(3, np.float32), 0.0, False, False, {}


gymnasium.register("rl_ros2_test/Buttons-v0", entry_point=lambda: PressButtons(
    gymnasium.spaces.MultiBinary(3)), max_episode_steps=5)
gymnasium.register("rl_ros2_test/Dial-v0", entry_point=lambda: PressButtons(
    gymnasium.spaces.MultiDiscrete([3, 2])), max_episode_steps=5)


@pytest.mark.parametrize(("env_id", "choices"), [("rl_ros2_test/Buttons-v0", 8),
                                                 ("rl_ros2_test/Dial-v0", 6)])
def test_a_small_multi_discrete_action_is_one_discrete_over_its_combinations(
        env_id: str, choices: int) -> None:
    with VectorEnv(env_id, num_envs=1) as envs:
        assert envs.choices == choices and envs.action_shape == (1,)
        envs.reset(seed=0)
        for index in range(choices):
            envs.step(np.array([[float(index)]], np.float32))
        applied = envs.envs[0].unwrapped.applied
        assert len({tuple(np.ravel(action)) for action in applied}) == choices  # each once
    plan = make_plan("hybrid", 2, domain_id=7, environ={}, extra_parameters={"env_id": env_id})
    assert plan.processes
