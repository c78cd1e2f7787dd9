"""``rl_core.robot.tasks``: the built-in tasks against the in-process envs they mirror, the task
declaration check, and finding tasks by name."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import ClassVar

import gymnasium
import numpy as np
import pytest

from rl_core.envs import CARTPOLE_ID, KUKA_REACH_ID, KukaReachEnv, PybulletRobotEnv, make_env
from rl_core.robot import JointSample, JointTarget
from rl_core.robot.task import Outcome, Task
from rl_core.robot.tasks import (
    TASKS,
    CartPoleBalanceTask,
    KukaReachTask,
    is_task_name,
    load_task,
)

pytestmark = pytest.mark.unit

TASK_CLASSES: dict[str, type[Task]] = {CARTPOLE_ID: CartPoleBalanceTask,
                                       KUKA_REACH_ID: KukaReachTask}


@pytest.fixture(params=[CARTPOLE_ID, KUKA_REACH_ID])
def env_id(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def env(env_id: str) -> Iterator[gymnasium.Env]:
    environment = make_env(env_id)
    try:
        yield environment
    finally:
        environment.close()


@pytest.fixture
def kuka_env() -> Iterator[gymnasium.Env]:
    environment = make_env(KUKA_REACH_ID)
    try:
        yield environment
    finally:
        environment.close()


def _robot(env: gymnasium.Env) -> PybulletRobotEnv:
    robot = env.unwrapped
    assert isinstance(robot, PybulletRobotEnv)
    return robot


def _sample(env: gymnasium.Env, task: Task, stamp: float = 0.0) -> JointSample:
    """The env's joint state as the boundary would deliver it, in the task's joint order."""
    robot = _robot(env)
    order = [robot.joint_names().index(name) for name in task.joint_names]
    return JointSample(stamp=stamp, position=robot.joint_positions()[order],
                       velocity=robot.joint_velocities()[order],
                       effort=np.zeros(len(order)))


# --- the built-in tasks mirror their envs -----------------------------------------------------


def test_declaration_matches_env(env_id: str, env: gymnasium.Env) -> None:
    task = TASK_CLASSES[env_id]()
    task.check()
    robot = _robot(env)
    assert task.env_id == env_id
    assert TASKS[env_id] is type(task)
    assert task.urdf_path == robot.urdf_path
    assert task.control_period == robot.control_period
    assert env.spec is not None and task.max_episode_steps == env.spec.max_episode_steps
    assert set(task.joint_names) <= set(robot.joint_names())
    assert task.observation_space == env.observation_space
    assert task.action_space == env.action_space


def test_commands_and_scales() -> None:
    cartpole = CartPoleBalanceTask(max_force=7.0)
    assert cartpole.commanded == ("slider_to_cart",)
    assert cartpole.command_interface == "effort"
    np.testing.assert_array_equal(cartpole.action_scale, [7.0])
    kuka = KukaReachTask(max_joint_velocity=0.5)
    assert kuka.commanded == kuka.joint_names
    assert kuka.command_interface == "velocity"
    np.testing.assert_array_equal(kuka.action_scale, np.full(7, 0.5))


def test_kuka_constants_match_env() -> None:
    assert KukaReachTask.HOME_POSITIONS == KukaReachEnv.HOME_POSITIONS
    assert KukaReachTask.END_EFFECTOR_LINK == KukaReachEnv.END_EFFECTOR_LINK
    assert KukaReachTask.POSITION_BOUND == KukaReachEnv.WORKSPACE_BOUND
    assert PybulletRobotEnv.MAX_JOINT_SPEED == 100.0


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_start_state_and_goal_equal_env_for_the_same_generator(env_id: str, env: gymnasium.Env,
                                                               seed: int) -> None:
    task = TASK_CLASSES[env_id]()
    observation, _ = env.reset(seed=seed)
    # gymnasium seeds np_random as Generator(PCG64(SeedSequence(seed))), as default_rng does.
    start = task.reset(np.random.default_rng(seed))
    sample = _sample(env, task)
    np.testing.assert_array_equal(start.position, sample.position)
    np.testing.assert_array_equal(start.velocity, sample.velocity)
    if isinstance(task, KukaReachTask):
        np.testing.assert_array_equal(task.target, _robot(env).target_position())
    np.testing.assert_allclose(task.observe(sample), observation, atol=1e-5)


def test_rollouts_match_env(env_id: str, env: gymnasium.Env) -> None:
    """Random actions (some beyond [-1, 1]) for several episodes: the task computes the env's
    observation, reward, termination and success from the joint readings alone."""
    task = TASK_CLASSES[env_id]()
    rng = np.random.default_rng(3)
    task_rng = np.random.default_rng(3)
    steps, episodes = 0, 0
    env.reset(seed=3)
    task.reset(task_rng)
    while steps < 300:
        action = rng.uniform(-1.2, 1.2, size=env.action_space.shape).astype(np.float32)
        observation, reward, terminated, truncated, info = env.step(action)
        steps += 1
        state = _sample(env, task, stamp=steps * task.control_period)
        np.testing.assert_allclose(task.observe(state), observation, atol=1e-5)
        outcome = task.outcome(np.clip(action, -1.0, 1.0), state)
        assert isinstance(outcome, Outcome)
        assert outcome.reward == pytest.approx(reward, abs=1e-6)
        assert outcome.terminated == terminated
        assert outcome.success == info.get("is_success")
        if terminated or truncated:
            episodes += 1
            # Unseeded resets continue both generators in step.
            env.reset()
            start = task.reset(task_rng)
            np.testing.assert_array_equal(start.position, _sample(env, task).position)
    assert episodes >= 2


def test_kuka_success_terminates(kuka_env: gymnasium.Env) -> None:
    env = kuka_env
    task = KukaReachTask()
    env.reset(seed=5)
    task.reset(np.random.default_rng(5))
    home = task.end_effector(_sample(env, task))
    # The same start pose (the draws do not depend on the option), the target at the hand.
    env.reset(seed=5, options={"target_position": home})
    task.set_target(home)
    action = np.zeros(7, dtype=np.float32)
    _, reward, terminated, _, info = env.step(action)
    outcome = task.outcome(action, _sample(env, task))
    assert terminated and info["is_success"]
    assert (outcome.terminated, outcome.success) == (True, True)
    assert outcome.reward == pytest.approx(reward, abs=1e-6)


def test_kuka_end_effector_matches_pybullet(kuka_env: gymnasium.Env) -> None:
    env = kuka_env
    task = KukaReachTask()
    env.reset(seed=11)
    robot = _robot(env)
    for _ in range(5):
        env.step(env.action_space.sample())
        expected = robot.link_world_poses()[task.END_EFFECTOR_LINK][0]
        np.testing.assert_allclose(task.end_effector(_sample(env, task)), expected, atol=1e-6)


def test_kuka_workspace_holds_targets_and_home() -> None:
    task = KukaReachTask()
    assert task.workspace is not None
    low, high = (np.asarray(corner) for corner in task.workspace)
    home = task.model.link_position(task.END_EFFECTOR_LINK, task.HOME_POSITIONS,
                                    task.joint_names)
    margin = 0.1
    for point in (home, task.target_low, task.target_high):
        assert np.all(point - margin >= low) and np.all(point + margin <= high), point
    rng = np.random.default_rng(0)
    for _ in range(20):
        # Every start pose's end effector too (home noise of 0.05 rad).
        start = task.reset(rng)
        sample = JointSample(0.0, start.position, start.velocity, np.zeros(7))
        hand = task.end_effector(sample)
        assert np.all(hand >= low) and np.all(hand <= high)


def test_cartpole_has_no_success() -> None:
    task = CartPoleBalanceTask()
    sample = JointSample(0.0, np.array([0.0, 0.3]), np.zeros(2), np.zeros(2))
    assert task.outcome(np.zeros(1), sample) == Outcome(reward=1.0, terminated=True, success=None)


def test_samples_of_the_wrong_size_are_rejected() -> None:
    sample = JointSample(0.0, np.zeros(3), np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="reads 2 joints"):
        CartPoleBalanceTask().observe(sample)
    with pytest.raises(ValueError, match="reads 7 joints"):
        KukaReachTask().observe(sample)


@pytest.mark.parametrize(("task_class", "kwargs", "match"), [
    (CartPoleBalanceTask, {"max_force": 0.0}, "max_force must be a positive number"),
    (CartPoleBalanceTask, {"angle_limit": float("nan")}, "angle_limit"),
    (CartPoleBalanceTask, {"position_limit": -1.0}, "position_limit"),
    (CartPoleBalanceTask, {"reset_noise": -0.1}, "reset_noise must be a non-negative number"),
    (KukaReachTask, {"max_joint_velocity": 0.0}, "max_joint_velocity"),
    (KukaReachTask, {"success_distance": float("inf")}, "success_distance"),
    (KukaReachTask, {"action_penalty": -1.0}, "action_penalty"),
    (KukaReachTask, {"home_noise": -1.0}, "home_noise"),
    (KukaReachTask, {"target_low": (0.4, 0.0)}, "must be 3-vectors"),
    (KukaReachTask, {"target_low": (0.8, 0.0, 0.5), "target_high": (0.7, 0.1, 0.6)},
     "low <= high"),
    (KukaReachTask, {"target_high": (0.7, 0.3, 1.5)}, "must lie inside the workspace"),
])
def test_constructor_checks(task_class: type[Task], kwargs: dict[str, object],
                            match: str) -> None:
    with pytest.raises(ValueError, match=match):
        task_class(**kwargs)


def test_set_target_checks_the_workspace() -> None:
    task = KukaReachTask()
    task.set_target((0.5, 0.1, 0.4))
    np.testing.assert_array_equal(task.target, [0.5, 0.1, 0.4])
    for bad in ((0.5, 0.1), (0.5, 0.1, -0.2), (3.0, 0.0, 0.5)):
        with pytest.raises(ValueError, match="inside the workspace"):
            task.set_target(bad)


def test_tasks_import_neither_rclpy_nor_pybullet() -> None:
    code = ("import sys, rl_core.robot.tasks; "
            "assert not {'rclpy', 'pybullet'} & set(sys.modules), sorted(sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr


# --- tasks for the by-name tests --------------------------------------------------------------


class TinyTask(Task):
    """One velocity-commanded joint; observes its position."""

    joint_names: ClassVar[tuple[str, ...]] = ("joint",)

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, rng: np.random.Generator) -> JointTarget:
        return JointTarget(position=np.zeros(1), velocity=np.zeros(1))

    def observe(self, state: JointSample) -> np.ndarray:
        return state.position.astype(np.float32)

    def outcome(self, action: np.ndarray, state: JointSample) -> Outcome:
        return Outcome(reward=-float(abs(state.position[0])), terminated=False)


class Nested:
    Task = TinyTask


def make_tiny_task() -> TinyTask:
    return TinyTask()


def make_tiny_task_unannotated():  # type: ignore[no-untyped-def]  # unannotated on purpose
    return TinyTask()


def make_number() -> int:
    return 3


def make_failing_task() -> Task:
    raise RuntimeError("no robot here")


class NeedsArguments(TinyTask):
    def __init__(self, gain: float) -> None:
        super().__init__()


class AbstractTask(Task):
    joint_names: ClassVar[tuple[str, ...]] = ("joint",)


class NoJointsTask(TinyTask):
    joint_names: ClassVar[tuple[str, ...]] = ()


class TorqueTask(TinyTask):
    command_interface: ClassVar[str] = "torque"


class ZeroPeriodTask(TinyTask):
    control_period: ClassVar[float] = 0.0


class NoStepsTask(TinyTask):
    max_episode_steps: ClassVar[int] = 0


class StrangerCommandTask(TinyTask):
    command_joints: ClassVar[tuple[str, ...]] = ("other",)


class WideActionTask(TinyTask):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)


class DiscreteActionTask(TinyTask):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = gymnasium.spaces.Discrete(3)  # type: ignore[assignment]


class NoSpacesTask(TinyTask):
    def __init__(self) -> None:
        pass


class WrongScaleTask(TinyTask):
    @property
    def action_scale(self) -> np.ndarray:
        return np.ones(3)


TINY_TASK_INSTANCE = TinyTask()
NOT_CALLABLE = 42

HERE = __name__


@pytest.mark.parametrize(("task_class", "match"), [
    (NoJointsTask, "names no joints"),
    (TorqueTask, "command_interface must be one of position, velocity, effort, got 'torque'"),
    (ZeroPeriodTask, "control_period must be > 0"),
    (NoStepsTask, "max_episode_steps >= 1"),
    (StrangerCommandTask, r"command_joints \['other'\] are not in joint_names"),
    (WideActionTask, r"action_space must have shape \(1,\)"),
    (DiscreteActionTask, "action_space must be a gymnasium.spaces.Box, got Discrete"),
    (NoSpacesTask, "observation_space must be a gymnasium.spaces.Box, got NoneType"),
    (WrongScaleTask, "action_scale must have one value per commanded joint"),
])
def test_check_rejects_bad_declarations(task_class: type[Task], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        task_class().check()
    # load_task reports the same, naming the entry point.
    with pytest.raises(ValueError, match=f"task '{HERE}:{task_class.__name__}' is declared "
                                         f"wrongly: .*{match}"):
        load_task(f"{HERE}:{task_class.__name__}")


# --- by name --------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", [CARTPOLE_ID, KUKA_REACH_ID])
def test_load_builtin(env_id: str) -> None:
    task = load_task(env_id)
    assert type(task) is TASK_CLASSES[env_id]
    assert is_task_name(env_id)


@pytest.mark.parametrize("attribute", ["TinyTask", "Nested.Task", "make_tiny_task",
                                       "make_tiny_task_unannotated"])
def test_load_entry_point(attribute: str) -> None:
    task = load_task(f"{HERE}:{attribute}")
    assert type(task) is TinyTask
    assert task is not load_task(f"{HERE}:{attribute}")


def test_load_builtin_by_entry_point() -> None:
    name = "rl_core.robot.tasks:KukaReachTask"
    assert type(load_task(name)) is KukaReachTask
    assert is_task_name(name)


@pytest.mark.parametrize(("name", "match"), [
    ("CartPole-v1", "unknown task 'CartPole-v1': the built-in tasks are rl_ros2/CartPole"),
    (":TinyTask", "must be module:Attr"),
    (f"{HERE}:", "must be module:Attr"),
    ("no_such_module_for_rl_ros2:Task", "cannot import module 'no_such_module_for_rl_ros2'.*"
                                        "PYTHONPATH"),
    (f"{HERE}:Missing", "has no attribute 'Missing'"),
    (f"{HERE}:Nested.Missing", "has no attribute 'Missing'"),
    ("rl_core.envs:rl_ros2/CartPoleBalance-v0", "gymnasium's module:EnvId is an environment"),
    ("rl_core.envs.cartpole:CartPoleBalanceEnv", "not a subclass of rl_core.robot.task.Task"),
    (f"{HERE}:NOT_CALLABLE", "is a int, not a Task subclass"),
    (f"{HERE}:TINY_TASK_INSTANCE", "is a Task instance; name its class"),
    (f"{HERE}:make_number", "returned a int, not a Task"),
    (f"{HERE}:make_failing_task", "could not be constructed.*no robot here"),
    (f"{HERE}:NeedsArguments", "could not be constructed without arguments.*gain"),
    (f"{HERE}:AbstractTask", "does not implement observe, outcome, reset"),
])
def test_load_errors(name: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_task(name)


@pytest.mark.parametrize(("name", "expected"), [
    (CARTPOLE_ID, True),
    (f"{HERE}:TinyTask", True),
    (f"{HERE}:Nested.Task", True),
    (f"{HERE}:make_tiny_task", True),
    # A broken declaration is still a task's name: load_task then says what is wrong.
    (f"{HERE}:NoJointsTask", True),
    # Not recognised without calling it; load_task still takes it.
    (f"{HERE}:make_tiny_task_unannotated", False),
    (f"{HERE}:make_number", False),
    (f"{HERE}:TINY_TASK_INSTANCE", False),
    (f"{HERE}:NOT_CALLABLE", False),
    (f"{HERE}:Missing", False),
    # gymnasium's "module:EnvId" and env classes are environments.
    ("rl_core.envs:rl_ros2/CartPoleBalance-v0", False),
    ("gymnasium.envs:CartPole-v1", False),
    ("rl_core.envs.cartpole:CartPoleBalanceEnv", False),
    ("CartPole-v1", False),
    ("no_such_module_for_rl_ros2:Task", False),
    (":", False),
    ("", False),
])
def test_is_task_name(name: str, expected: bool) -> None:
    assert is_task_name(name) is expected
