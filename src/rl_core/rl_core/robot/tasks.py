"""The built-in tasks, and finding a task by name.

:class:`CartPoleBalanceTask` and :class:`KukaReachTask` are the in-process environments
``rl_ros2/CartPoleBalance-v0`` (:class:`rl_core.envs.CartPoleBalanceEnv`) and
``rl_ros2/KukaReach-v0`` (:class:`rl_core.envs.KukaReachEnv`) computed from joint readings: for the
same joint states they give the same observations, rewards and episode ends, and for the same
random generator the same start states and goals (tests/unit/test_robot_tasks.py holds them to
that). :func:`load_task` turns a name (a built-in env id or an entry point ``module:Attr``) into a
checked :class:`~rl_core.robot.task.Task`.

This module does not import :mod:`rl_core.envs` (only :func:`space_shapes` does, when called):
that imports pybullet, which the robot side does not need (and which prints its build time on
import). The few names and numbers the two share are therefore written here again; the unit
tests compare them with the envs'.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import os
import typing
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium
import numpy as np
import pybullet_data

from rl_core.robot import JointSample, JointTarget
from rl_core.robot.task import Outcome, Task
from rl_core.robot.urdf import UrdfModel

__all__ = ["TASKS", "CartPoleBalanceTask", "KukaReachTask", "is_task_name", "load_task",
           "space_shapes"]

#: The joint speed limit of the envs (rl_core.envs.base.PybulletRobotEnv.MAX_JOINT_SPEED, rad/s
#: or m/s), the bound of the velocities in their observation spaces.
MAX_JOINT_SPEED = 100.0


def _require_positive(**values: float) -> None:
    for name, value in values.items():
        if not (math.isfinite(value) and value > 0.0):
            raise ValueError(f"{name} must be a positive number, got {value}")


def _require_non_negative(**values: float) -> None:
    for name, value in values.items():
        if not (math.isfinite(value) and value >= 0.0):
            raise ValueError(f"{name} must be a non-negative number, got {value}")


class _JointTask(Task):
    """Shared by the built-in tasks: the check that a reading matches :attr:`joint_names`."""

    def _require_sample(self, state: JointSample) -> None:
        expected = (len(self.joint_names),)
        if np.shape(state.position) != expected or np.shape(state.velocity) != expected:
            raise ValueError(f"{type(self).__name__} reads {len(self.joint_names)} joints "
                             f"{self.joint_names}: got positions of shape "
                             f"{np.shape(state.position)} and velocities of shape "
                             f"{np.shape(state.velocity)}")


class CartPoleBalanceTask(_JointTask):
    """Keep a pole upright by pushing its cart: ``rl_ros2/CartPoleBalance-v0`` on joints.

    * Action: ``Box(-1, 1, (1,))``, the force on the cart as a fraction of ``max_force`` (an
      ``effort`` command on ``slider_to_cart``).
    * Observation (float32): cart position, cart velocity, pole angle (0 = upright), pole angular
      velocity.
    * Reward: +1 for every control period, including the last. Episode end: ``|angle| >
      angle_limit`` or ``|x| > position_limit``; the task has no notion of success.
    * Start: every state variable uniform in ``[-reset_noise, reset_noise]``.

    :param max_force: N for an action of magnitude 1.
    :param angle_limit: pole angle (rad) beyond which the episode terminates.
    :param position_limit: cart position (m) beyond which the episode terminates.
    :param reset_noise: half-width of the uniform noise on every state variable at reset.
    :raises ValueError: when a limit or the force is not positive, or the noise is negative.
    """

    joint_names: ClassVar[tuple[str, ...]] = ("slider_to_cart", "cart_to_pole")
    command_joints: ClassVar[tuple[str, ...]] = ("slider_to_cart",)
    command_interface: ClassVar[str] = "effort"
    control_period: ClassVar[float] = 0.02
    max_episode_steps: ClassVar[int] = 200
    urdf_path: ClassVar[str | None] = os.path.join(pybullet_data.getDataPath(), "cartpole.urdf")
    env_id: ClassVar[str | None] = "rl_ros2/CartPoleBalance-v0"

    def __init__(self, *, max_force: float = 10.0, angle_limit: float = 0.2,
                 position_limit: float = 2.4, reset_noise: float = 0.05) -> None:
        _require_positive(max_force=max_force, angle_limit=angle_limit,
                          position_limit=position_limit)
        _require_non_negative(reset_noise=reset_noise)
        self.max_force = float(max_force)
        self.angle_limit = float(angle_limit)
        self.position_limit = float(position_limit)
        self.reset_noise = float(reset_noise)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        # As the env: positions at twice the termination limits, velocities at the speed limit.
        high = np.array([2.0 * self.position_limit, MAX_JOINT_SPEED, 2.0 * self.angle_limit,
                         MAX_JOINT_SPEED], dtype=np.float32)
        self.observation_space = gymnasium.spaces.Box(-high, high, dtype=np.float32)

    @property
    def action_scale(self) -> np.ndarray:
        """``[max_force]`` (N per unit of action)."""
        return np.array([self.max_force])

    def reset(self, rng: np.random.Generator) -> JointTarget:
        """Draw the start state as the env does: one call for ``(x, x_dot, theta, theta_dot)``."""
        x, x_dot, theta, theta_dot = rng.uniform(-self.reset_noise, self.reset_noise, size=4)
        return JointTarget(position=np.array([x, theta]), velocity=np.array([x_dot, theta_dot]))

    def observe(self, state: JointSample) -> np.ndarray:
        """``[x, x_dot, theta, theta_dot]`` as float32."""
        self._require_sample(state)
        return np.array([state.position[0], state.velocity[0], state.position[1],
                         state.velocity[1]], dtype=np.float32)

    def outcome(self, action: np.ndarray, state: JointSample) -> Outcome:
        """+1, terminated when the cart or the pole is past its limit."""
        observation = self.observe(state)
        # Compared in float32, as the env compares its observation, so that both end an
        # episode on the same step even at the limit.
        terminated = bool(abs(observation[0]) > self.position_limit
                          or abs(observation[2]) > self.angle_limit)
        return Outcome(reward=1.0, terminated=terminated, success=None)


class KukaReachTask(_JointTask):
    """Move the KUKA iiwa's end effector to a random target: ``rl_ros2/KukaReach-v0`` on joints.

    * Action: ``Box(-1, 1, (7,))``, joint velocities as a fraction of ``max_joint_velocity``.
    * Observation (float32, 23): joint positions (7), joint velocities (7), end-effector position
      (3), target (3), target minus end-effector position (3); the end effector (the frame of
      ``lbr_iiwa_link_7``) comes from the URDF's forward kinematics, with the base at the world
      origin as the env places it.
    * Reward: ``-distance - action_penalty * mean(action**2)``. Episode end: distance below
      ``success_distance``, a success; otherwise ``success`` is False.
    * Start: the home pose plus uniform noise of ``home_noise`` rad, at rest; then the target,
      uniform in ``target_low`` .. ``target_high`` (drawn in that order, as the env draws them).

    :param max_joint_velocity: rad/s for an action of magnitude 1.
    :param success_distance: m below which the target counts as reached.
    :param action_penalty: weight of the mean squared action in the reward.
    :param home_noise: half-width (rad) of the uniform noise on the home pose.
    :param target_low: lower corner (x, y, z, m) of the target box.
    :param target_high: upper corner (x, y, z, m) of the target box.
    :raises ValueError: when an argument is out of range or the target box is not inside
        :attr:`workspace`.
    """

    joint_names: ClassVar[tuple[str, ...]] = tuple(f"lbr_iiwa_joint_{i}" for i in range(1, 8))
    command_interface: ClassVar[str] = "velocity"
    control_period: ClassVar[float] = 0.05
    max_episode_steps: ClassVar[int] = 100
    urdf_path: ClassVar[str | None] = os.path.join(pybullet_data.getDataPath(), "kuka_iiwa",
                                                   "model.urdf")
    env_id: ClassVar[str | None] = "rl_ros2/KukaReach-v0"
    # The safety layer holds the arm where a command would take the hand out of this box, and
    # the in-process env knows no such box, so it is generous: it holds the default target box,
    # (0.35, -0.3, 0.2) .. (0.7, 0.3, 0.7), and the home pose's hand, about (0.58, 0, 0.48),
    # with 0.3 m to spare forwards, backwards, sideways and upwards, room for a policy to
    # overshoot a target. The two faces that protect something are tighter: x >= 0.05 m keeps
    # the hand in front of the base column (no target needs it behind the robot) and
    # z >= 0.05 m keeps it off the floor the base stands on.
    workspace: ClassVar[tuple[tuple[float, float, float], tuple[float, float, float]] | None] = (
        (0.05, -0.6, 0.05), (1.0, 0.6, 1.0))

    #: The env's home pose (rad): end effector at about (0.58, 0, 0.48) m.
    HOME_POSITIONS: ClassVar[tuple[float, ...]] = (0.0, 0.5, 0.0, -1.5, 0.0, 1.0, 0.0)
    END_EFFECTOR_LINK: ClassVar[str] = "lbr_iiwa_link_7"
    #: The env's WORKSPACE_BOUND: half-width (m) of the cube that bounds the positions in the
    #: observation space.
    POSITION_BOUND: ClassVar[float] = 2.0

    def __init__(self, *, max_joint_velocity: float = 1.0, success_distance: float = 0.05,
                 action_penalty: float = 0.01, home_noise: float = 0.05,
                 target_low: Sequence[float] = (0.35, -0.3, 0.2),
                 target_high: Sequence[float] = (0.7, 0.3, 0.7)) -> None:
        _require_positive(max_joint_velocity=max_joint_velocity,
                          success_distance=success_distance)
        _require_non_negative(action_penalty=action_penalty, home_noise=home_noise)
        low = np.asarray(target_low, dtype=np.float64)
        high = np.asarray(target_high, dtype=np.float64)
        if (low.shape != (3,) or high.shape != (3,) or not np.all(low <= high)
                or not np.all(np.abs(np.concatenate((low, high))) <= self.POSITION_BOUND)):
            raise ValueError(f"target_low and target_high must be 3-vectors with low <= high "
                             f"within +-{self.POSITION_BOUND} m, got {target_low} and "
                             f"{target_high}")
        # A target outside the box the end effector must stay in could never be reached.
        if not (self._in_workspace(low) and self._in_workspace(high)):
            raise ValueError(f"the target box {target_low} .. {target_high} must lie inside the "
                             f"workspace {self.workspace}")
        self.max_joint_velocity = float(max_joint_velocity)
        self.success_distance = float(success_distance)
        self.action_penalty = float(action_penalty)
        self.home_noise = float(home_noise)
        self.target_low = low
        self.target_high = high
        if self.urdf_path is None:
            raise ValueError(f"{type(self).__name__} needs urdf_path for its kinematics")
        self.model = UrdfModel.from_file(self.urdf_path)
        self._target = np.zeros(3)

        n_joints = len(self.joint_names)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(n_joints,), dtype=np.float32)
        # The env's bounds: joint limits within 2 pi, pybullet's speed cap, positions in the cube.
        bound = self.POSITION_BOUND
        observation_high = np.concatenate((np.full(n_joints, 2.0 * math.pi),
                                           np.full(n_joints, MAX_JOINT_SPEED),
                                           np.full(6, bound), np.full(3, 2.0 * bound)))
        observation_high = observation_high.astype(np.float32)
        self.observation_space = gymnasium.spaces.Box(-observation_high, observation_high,
                                                      dtype=np.float32)

    @property
    def action_scale(self) -> np.ndarray:
        """``max_joint_velocity`` (rad/s per unit of action) for every joint."""
        return np.full(len(self.joint_names), self.max_joint_velocity)

    @property
    def target(self) -> np.ndarray:
        """The episode's target (m, world frame)."""
        return self._target.copy()

    def set_target(self, position: Sequence[float] | np.ndarray) -> None:
        """Place the target instead of the one :meth:`reset` drew (the env's
        ``options["target_position"]``).

        :raises ValueError: unless ``position`` is 3 numbers inside :attr:`workspace`.
        """
        target = np.asarray(position, dtype=np.float64)
        if target.shape != (3,) or not self._in_workspace(target):
            raise ValueError(f"the target must be 3 numbers inside the workspace "
                             f"{self.workspace}, got {position!r}")
        self._target = target

    def _in_workspace(self, point: np.ndarray) -> bool:
        """Whether ``point`` lies in :attr:`workspace` (in the observation's cube without one)."""
        if self.workspace is None:
            return bool(np.all(np.abs(point) <= self.POSITION_BOUND))
        low, high = (np.asarray(corner) for corner in self.workspace)
        return bool(np.all((low <= point) & (point <= high)))

    def reset(self, rng: np.random.Generator) -> JointTarget:
        """Draw the home-pose noise, then the target (the env's order), and start at rest."""
        noise = rng.uniform(-self.home_noise, self.home_noise, size=len(self.HOME_POSITIONS))
        self._target = rng.uniform(self.target_low, self.target_high)
        return JointTarget(position=np.asarray(self.HOME_POSITIONS) + noise,
                           velocity=np.zeros(len(self.HOME_POSITIONS)))

    def end_effector(self, state: JointSample) -> np.ndarray:
        """The frame origin of ``lbr_iiwa_link_7`` (m); the base is at the world origin."""
        self._require_sample(state)
        return self.model.link_position(self.END_EFFECTOR_LINK, state.position, self.joint_names)

    def observe(self, state: JointSample) -> np.ndarray:
        """Joint positions, velocities, end effector, target and their difference, float32."""
        end_effector = self.end_effector(state)
        return np.concatenate((state.position, state.velocity, end_effector, self._target,
                               self._target - end_effector)).astype(np.float32)

    def outcome(self, action: np.ndarray, state: JointSample) -> Outcome:
        """Minus the distance and the action penalty; terminated and a success within
        ``success_distance``."""
        command = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
        distance = float(np.linalg.norm(self._target - self.end_effector(state)))
        reward = -distance - self.action_penalty * float(np.mean(command**2))
        success = distance < self.success_distance
        return Outcome(reward=reward, terminated=success, success=success)


#: The built-in tasks by the id of the env that simulates them.
TASKS: dict[str, type[Task]] = {
    task.env_id: task for task in (CartPoleBalanceTask, KukaReachTask) if task.env_id is not None
}


# ----------------------------------------------------------------------------- by name


def load_task(name: str) -> Task:
    """The task called ``name``, constructed and checked.

    :param name: a built-in task's env id (a key of :data:`TASKS`), or an entry point
        ``module:Attr`` (``Attr`` may be dotted) naming a :class:`Task` subclass, constructed
        without arguments, or a callable returning a :class:`Task`.
    :raises ValueError: when the name is neither, the module cannot be imported, the attribute
        is missing or does not give a Task, constructing it fails, or :meth:`Task.check`
        rejects it; the message says what to change.
    """
    if name in TASKS:
        task: Task = TASKS[name]()
    else:
        task = _construct(name, _resolve(name))
    try:
        task.check()
    except ValueError as error:
        raise ValueError(f"task {name!r} is declared wrongly: {error}") from error
    return task


def is_task_name(name: str) -> bool:
    """Whether ``name`` names a task rather than a gymnasium environment; never raises.

    True for a built-in task's env id, and for an entry point ``module:Attr`` whose ``Attr`` is a
    :class:`Task` subclass or a callable annotated to return one (``def make() -> Task``);
    nothing is constructed or called to decide. False otherwise, in particular for gymnasium's
    ``module:EnvId`` ("import module, then make the env it registers") and for entry points of
    env classes. An unannotated factory is not recognised here, though :func:`load_task` takes
    it.
    """
    if name in TASKS:
        return True
    try:
        return _gives_task(_resolve(name))
    except Exception:  # noqa: BLE001 - a predicate: any failure to resolve means "not a task"
        return False


def task_spaces(env_id: str) -> tuple[gymnasium.Space, gymnasium.Space]:
    """``(observation space, action space)`` of a task: a gymnasium id (registered, or
    ``module:Id``) or a robot task's entry point (``module:TaskClass``, rl_core.robot.tasks);
    observations as every node sees them (a ``Dict`` of vector ``Box``es flattened).

    :raises ValueError: when ``env_id`` names neither; the message lists the built-in ids.
    """
    from rl_core.envs import register_envs

    register_envs()
    if not _registered(env_id):
        if is_task_name(env_id):
            from rl_core.envs.spaces import learned_action_space

            task = load_task(env_id)  # a gripper's Dict action as its arm-and-choice row
            return task.observation_space, learned_action_space(task.action_space)
        known = ", ".join(sorted(k for k in gymnasium.registry if k.startswith("rl_ros2/")))
        raise ValueError(f"unknown env_id {env_id!r}: neither a registered gymnasium id, nor "
                         f"'module:Id' whose module registers Id, nor 'module:Task' naming a "
                         f"rl_core.robot.tasks.Task; rl_ros2 provides: {known}")
    from rl_core.envs.spaces import with_rl_spaces

    env = with_rl_spaces(gymnasium.make(env_id, disable_env_checker=True))
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def space_shapes(env_id: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(observation shape, action row shape)`` of a task (:func:`task_spaces`; a Discrete
    action's row is its index, ``(1,)``, an arm-and-choice one's the arm's values and then it)."""
    from rl_core.envs.spaces import action_row_shape

    observation_space, action_space = task_spaces(env_id)
    return tuple(observation_space.shape or ()), action_row_shape(action_space)


def task_choices(env_id: str) -> int:
    """The number of choices of a task's ``Discrete`` or arm-and-choice action (the last value
    of its rows); 0 for a ``Box`` action."""
    from rl_core.envs.spaces import action_choices

    return action_choices(task_spaces(env_id)[1])


@functools.lru_cache(maxsize=64)
def check_spaces(env_id: str) -> None:
    """Refuse a task rl_ros2 cannot learn (made once per id and process: a plan is made often,
    the task's spaces do not change).

    :raises ValueError: naming the unknown task, or its spaces and what is supported.
    """
    from rl_core.envs.spaces import unsupported_spaces

    refusal = unsupported_spaces(env_id, *task_spaces(env_id))
    if refusal is not None:
        raise ValueError(refusal)


def _registered(env_id: str) -> bool:
    """Whether gymnasium can make ``env_id``: a registered id, or ``module:Id`` whose module
    registers ``Id`` when imported (gymnasium's own convention for third-party envs)."""
    if env_id in gymnasium.registry:
        return True
    module, _, name = env_id.rpartition(":")
    if not module:
        return False
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return name in gymnasium.registry


def _resolve(name: str) -> Any:
    """The object the entry point ``name`` names (the module is imported)."""
    module_name, colon, attribute = name.partition(":")
    if not colon:
        raise ValueError(f"unknown task {name!r}: the built-in tasks are "
                         f"{', '.join(sorted(TASKS))}; name your own as module:Attr, a Task "
                         "subclass or a function returning a Task")
    if not module_name or not attribute:
        raise ValueError(f"task entry point {name!r} must be module:Attr, e.g. "
                         "my_package.tasks:Reach")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - the user's module may fail in any way
        raise ValueError(f"task {name!r}: cannot import module {module_name!r} ({error!r}); "
                         "install its package or put it on PYTHONPATH") from error
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"task {name!r}: {getattr(target, '__name__', target)!r} has no "
                             f"attribute {part!r}; name a Task subclass or a function returning "
                             "a Task (gymnasium's module:EnvId is an environment, not a task: "
                             "give it as env_id instead)")
        target = getattr(target, part)
    return target


def _construct(name: str, factory: Any) -> Task:
    """Call ``factory`` (a Task subclass or a factory) and check that it gave a Task."""
    if isinstance(factory, Task):
        raise ValueError(f"task {name!r} is a Task instance; name its class or a function that "
                         "returns a new one, so that every load gets its own")
    if isinstance(factory, type) and not issubclass(factory, Task):
        raise ValueError(f"task {name!r} is the class {factory.__qualname__}, which is not a "
                         "subclass of rl_core.robot.task.Task")
    if not callable(factory):
        raise ValueError(f"task {name!r} is a {type(factory).__name__}, not a Task subclass or "
                         "a function returning a Task")
    if inspect.isabstract(factory):
        raise ValueError(f"task {name!r} does not implement "
                         f"{', '.join(sorted(factory.__abstractmethods__))}")
    try:
        task = factory()
    except Exception as error:  # noqa: BLE001 - the user's code may fail in any way
        raise ValueError(f"task {name!r} could not be constructed without arguments "
                         f"({error!r}); give defaults to its parameters or name a function "
                         "that builds it") from error
    if not isinstance(task, Task):
        raise ValueError(f"task {name!r} returned a {type(task).__name__}, not a Task")
    return task


def _gives_task(target: Any) -> bool:
    if isinstance(target, type):
        return issubclass(target, Task)
    if not callable(target):
        return False
    returned = typing.get_type_hints(target).get("return")
    return isinstance(returned, type) and issubclass(returned, Task)

