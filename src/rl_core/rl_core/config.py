"""Typed configuration of a training run, mirroring the nodes' ROS parameters.

One YAML file per scenario in ``config/`` holds per-node ``ros__parameters`` blocks, exactly as
ROS 2 loads them (``/**`` applies to every node, ``/**/trainer`` to every node named trainer).
The ROS nodes declare their parameters from the dataclasses below (description and range come
from each field's metadata), and the bare loop reads the same file through
:func:`load_run_config`, so one file configures every mode.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rl_core.names import node_kinds
from rl_core.names.codecs import OBSERVATION_CODECS


def param(default: Any, description: str, low: float | None = None, high: float | None = None,
          step: float | None = None, read_only: bool = False, renamed_from: str = "") -> Any:
    """A dataclass field carrying what a ROS ``ParameterDescriptor`` needs.

    :param default: default value (lists/tuples become tuples).
    :param description: one sentence shown by ``ros2 param describe`` and rqt_reconfigure.
    :param low: inclusive lower bound of a numeric parameter.
    :param high: inclusive upper bound of a numeric parameter.
    :param step: slider step for integer/float ranges (0 = continuous).
    :param read_only: true for parameters that cannot change after start.
    :param renamed_from: the parameter's former name, which keeps working for a release with a
        deprecation warning (:func:`renamed`).
    """
    metadata = {"description": description, "low": low, "high": high, "step": step,
                "read_only": read_only, "renamed_from": renamed_from}
    if isinstance(default, (list, tuple)):
        value = tuple(default)
        return dataclasses.field(default_factory=lambda: value, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def n_step_param(description: str) -> Any:
    """``n_step``, of the trainer (which discounts the bootstrapped value) and the simulator
    (which sums the rewards): rl_core.replay.n_step."""
    return param(1, description, 1, 100, 1, read_only=True)


class ConfigError(ValueError):
    """A configuration value or file is invalid; the message says which and how to fix it."""


def _check_ranges(config: Any) -> None:
    """Check types and ranges of every field of ``config`` against its metadata."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.default is not dataclasses.MISSING:
            default = field.default
        else:
            default = field.default_factory()  # type: ignore[operator]  # set when default is not
        where = f"{type(config).__name__}.{field.name}"
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{where} must be true or false, got {value!r}")
            continue
        if isinstance(default, tuple):
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and v > 0 for v in value):
                raise ConfigError(f"{where} must be a list of positive integers, got {value!r}")
            object.__setattr__(config, field.name, tuple(value))
            continue
        if isinstance(default, str):
            if not isinstance(value, str):
                raise ConfigError(f"{where} must be a string, got {value!r}")
            continue
        if isinstance(default, int) and not (isinstance(value, int) and not isinstance(value, bool)):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        if isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"{where} must be a finite number, got {value!r}")
            object.__setattr__(config, field.name, float(value))
        low, high = field.metadata.get("low"), field.metadata.get("high")
        if low is not None and value < low or high is not None and value > high:
            raise ConfigError(f"{where} = {value!r} is outside its range [{low}, {high}]")


#: The lowest capped control rate: a step waits at most 1 / MIN_RATE_HZ s on the simulator's
#: only thread, which also serves its parameter and diagnostics endpoints.
MIN_RATE_HZ = 1.0
#: The most evaluation episodes: each one blocks the end of the run (final evaluation).
MAX_EVAL_EPISODES = 100

#: Values of the ``device`` parameter (resolved to a torch device by :mod:`rl_core.learning.device`).
DEVICES = ("auto", "cpu", "cuda")
#: Values of the ``update_precision`` parameter (the gradient step's matrix products).
UPDATE_PRECISIONS = ("float32", "bfloat16")
#: Values of the ``algorithm`` parameter: SAC (any action), DQN (a ``Discrete`` action).
ALGORITHMS = ("sac", "dqn")


def action_words(choices: int, width: int) -> str:
    """A task's action in words, from its choices and its row's width."""
    if choices and width > 1:
        return f"an arm of {width - 1} values and a choice of {choices}"
    return f"a Discrete({choices}) action" if choices else f"a continuous (Box) action of {width}"


def algorithm_refusal(algorithm: str, choices: int, width: int) -> str | None:
    """Why ``algorithm`` cannot learn an action of ``choices`` and row ``width`` (None: it can):
    DQN learns one ``Discrete`` action only."""
    if algorithm == "dqn" and (not choices or width > 1):
        return (f"algorithm dqn learns a Discrete action; this task has "
                f"{action_words(choices, width)}; set algorithm: sac")
    return None


def device_param(what: str) -> Any:
    """The ``device`` parameter of a node whose ``what`` runs on torch."""
    return param("auto", f"torch device of {what}: 'auto' (CUDA when torch sees a GPU, else "
                 "CPU), 'cpu', or 'cuda' (a GPU is required; choose one with "
                 "CUDA_VISIBLE_DEVICES).", read_only=True)


def feature_dim_param() -> Any:
    return param(50, "Features of the convolutional encoder that image observations get (ignored "
                 "for state vectors).", 1, 4096, 1, read_only=True)


def algorithm_param() -> Any:
    """``algorithm``, of the trainer (what learns) and the policy (what acts on its weights)."""
    return param("sac", "The learner: sac (SAC for any action; for a Discrete one, discrete SAC) "
                 "or dqn (double DQN, a Discrete action only: one Q network, a cheaper update; "
                 "the policies act epsilon-greedily, exploration_epsilon).", read_only=True)


def encoder_channels_param() -> Any:
    return param(32, "Filters of every convolution of that encoder (ignored for state vectors).",
                 1, 1024, 1, read_only=True)


def _check_choice(config: Any, name: str, valid: tuple[str, ...]) -> None:
    """Refuse a value of ``config.<name>`` that is not one of ``valid``, naming them."""
    value = getattr(config, name)
    if value not in valid:
        raise ConfigError(f"{type(config).__name__}.{name} must be one of {', '.join(valid)}, "
                          f"got {value!r}")


@dataclasses.dataclass
class SimulatorConfig:
    """Parameters of a simulator (one robot's vectorised environments)."""

    env_id: str = param("rl_ros2/CartPoleBalance-v0", "Gymnasium id of the task.", read_only=True)
    num_envs: int = param(1, "Environments stepped together by this simulator.", 1, 1024, 1,
                          read_only=True)
    seed: int = param(0, "Base seed; environment i of robot k is seeded with seed + 1000 k + i.",
                      0, 2**31 - 1, 1, read_only=True)
    random_steps: int = param(1000, "Environment steps (per simulator) with uniform random actions "
                              "before the policy acts.", 0, 10**9, 1)
    max_rate_hz: float = param(0.0, "Upper bound of control steps per second, like a real robot's "
                               f"control rate (0 = as fast as possible, else at least "
                               f"{MIN_RATE_HZ:g}).", 0.0, 100000.0, 0.0)
    visualization_rate_hz: float = param(10.0, "Rate of joint_states, markers and TF for rviz "
                                         "(environment 0; 0 = off).", 0.0, 100.0, 0.0)
    publish_tf: bool = param(True, "Publish the robot's TF as robot_state_publisher would: fixed "
                             "joints and world -> robot_k/<root link> once on /tf_static, moving "
                             "joints from the joint_states values on /tf (frame prefix "
                             "robot_k/). false: no TF at all, for a robot_state_publisher "
                             "(frame_prefix robot_k/) fed with robot_description and "
                             "joint_states (docs/graph.md).", read_only=True)
    pipeline: bool = param(False, "Keep two halves of the environments in flight (double-buffered "
                           "sampling): one half steps while the other waits for its actions, so "
                           "physics overlaps transport and inference. Needs num_envs >= 2; pays "
                           "off when the policy runs in another process.", read_only=True)
    observation_codec: str = param("raw", "How image observations cross DDS (state vectors "
                                   "always travel as they are; colocated hand-offs never "
                                   "encode): 'raw' (sensor_msgs/Image), 'png' or 'jpeg' "
                                   "(sensor_msgs/CompressedImage), or 'latent' (the trainer's "
                                   "encoder runs here and only its features reach the policy; "
                                   "experience travels as png).", read_only=True)
    jpeg_quality: int = param(90, "JPEG quality of observation_codec 'jpeg' (1-100).", 1, 100, 1)
    await_replay_status: bool = param(False, "Act only once the replay buffer's first "
                                      "/replay_status arrived (its rate limiter then holds "
                                      "acting from the first step). rl-bringup and the launch "
                                      "files set it for every robot of a deployment; false: act "
                                      "at once (a simulator the gym bridge drives, or none "
                                      "listening).", read_only=True)
    allow_unsigned: bool = param(False, "Obey /replay_status (and a latent encoder's "
                                 "/policy_weights) without the learner's signature when no "
                                 "public key is configured (RL_ROS2_WEIGHTS_PUBLIC_KEY), and "
                                 "step with actions from any process when no action key is "
                                 "(RL_ROS2_ACTION_KEY, RL_ROS2_ROBOT_ACTION_KEYS); development "
                                 "only: anyone on the domain could then pause, resume or drive "
                                 "this robot.", read_only=True)
    teleop: bool = param(False, "Take an operator's commands (interventions, docs/"
                         "human_in_the_loop.md): teleop_command (std_msgs/Float64MultiArray, "
                         "actions in [-1, 1]) and, with teleop_mapping, joy (sensor_msgs/Joy). "
                         "While one counts it drives instead of the policy and its steps join the "
                         "demonstrations. Anyone on the domain can then drive this robot: use it "
                         "on a trusted network or with SROS2.", read_only=True)
    teleop_mapping: str = param("", "With teleop: a YAML file mapping Joy axes to actions with a "
                                "deadman button (rl_core/acting/teleop.py); '' = no Joy input.",
                                read_only=True)
    teleop_timeout: float = param(0.5, "With teleop: seconds an operator's command counts after "
                                  "it arrived (a silent gamepad hands the robot back).",
                                  0.01, 60.0, 0.0, read_only=True)
    expert_interventions: float = param(0.0, "Share of the episodes the task's scripted expert "
                                        "(rl_core/acting/experts.py) takes over as an operator would, "
                                        "from their first step to their end; its steps are "
                                        "interventions (flagged, stored among the "
                                        "demonstrations). A stand-in operator for tests and "
                                        "benchmarks; 0 = none.", 0.0, 1.0, 0.0, read_only=True)
    expert_interventions_steps: int = param(0, "With expert_interventions: only episodes that "
                                            "start in this simulator's first this many steps "
                                            "(summed over its environments) are taken (0 = "
                                            "all).", 0, 10**12, 1, read_only=True)
    n_step: int = n_step_param("The trainer's n_step: rewards summed into each transition. "
                               "rl-bringup and the launch files pass the trainer's n_step and "
                               "gamma on; set them like the trainer's when starting nodes "
                               "yourself.")
    gamma: float = param(0.99, "The trainer's gamma: with n_step > 1, the discount of the "
                         "rewards summed into a transition (passed on as n_step is).",
                         0.0, 1.0, 0.0, read_only=True)

    def __post_init__(self) -> None:
        _check_ranges(self)
        if self.teleop and self.expert_interventions:
            raise ConfigError("SimulatorConfig: teleop (a person's commands) and "
                              "expert_interventions (a scripted operator) both want to drive; "
                              "choose one")
        if 0.0 < self.max_rate_hz < MIN_RATE_HZ:
            raise ConfigError(f"SimulatorConfig.max_rate_hz must be 0 (uncapped) or at least "
                              f"{MIN_RATE_HZ:g} Hz (each step would wait longer than "
                              f"{1 / MIN_RATE_HZ:g} s on the node's only thread), got "
                              f"{self.max_rate_hz!r}")
        _check_choice(self, "observation_codec", OBSERVATION_CODECS)


#: Values of ``robot_interface``: the simulator steps its envs itself, or talks to a robot
#: through ros2_control's topics (rl_core.robot.boundary).
ROBOT_INTERFACES = ("in_process", "ros2_control")


@dataclasses.dataclass
class BoundaryConfig:
    """Parameters of a simulator that drives a robot through ros2_control's topics
    (``robot_interface: ros2_control``; docs/robots.md). ``env_id`` then names the task: a
    built-in env's id, or a task's entry point ``module:TaskClass``."""

    robot_interface: str = param("in_process", "'in_process': step num_envs gymnasium envs in "
                                 "this node (the fastest path); 'ros2_control': drive the robot "
                                 "in this namespace through joint_states and a ros2_control "
                                 "controller's command topic (docs/robots.md).", read_only=True)
    controller: str = param("", "ros2_control controller that takes the commands ('' = "
                            "<command_interface>_controller).", read_only=True)
    command_topic: str = param("commands", "'commands' (forward_command_controller, "
                               "std_msgs/Float64MultiArray) or 'joint_trajectory' "
                               "(joint_trajectory_controller, trajectory_msgs/JointTrajectory).",
                               read_only=True)
    command_interface: str = param("", "position, velocity or effort ('' = the task's).",
                                   read_only=True)
    joints: str = param("", "Comma-separated names the robot gives the task's joints, in the "
                        "task's order ('' = the task's own names).", read_only=True)
    action_scale: float = param(0.0, "Command in physical units (REP-103: rad, m, rad/s, m/s, "
                                "N m, N) for a normalised action of 1, every commanded joint "
                                "(0 = the task's per-joint scale).", 0.0, 1e6, 0.0,
                                read_only=True)
    control_rate_hz: float = param(0.0, "Control rate the boundary expects and reports against "
                                   "(0 = the task's, 1 / control period).", 0.0, 10000.0, 0.0,
                                   read_only=True)
    command_timeout: float = param(0.5, "Seconds without a fresh action after which the robot "
                                   "is held (position: where it is; velocity, effort: zero).",
                                   0.001, 10.0, 0.0)
    max_command_change: float = param(1.0, "Largest change of a command from one control "
                                      "period to the next, as a fraction of the action scale.",
                                      0.01, 2.0, 0.0)
    reset: str = param("service", "How an episode's start state is set: 'service' (the robot's "
                       "reset service, reset_service) or 'homing' (position or velocity "
                       "commands towards it).", read_only=True)
    reset_service: str = param("sim_robot/reset", "rl_interfaces/srv/ResetRobot service of the "
                               "robot (relative to the namespace).", read_only=True)
    operator_success: bool = param(False, "Listen on operator_success (std_msgs/Bool, in the "
                                   "robot's namespace): true ends the episode in flight as a "
                                   "success with the task's success_reward, for tasks whose "
                                   "success a program cannot see. Anyone on the domain can then "
                                   "end episodes: use it on a trusted network or with SROS2.",
                                   read_only=True)
    limits_urdf: str = param("", "URDF file whose joint limits the safety layer enforces ('' = "
                             "the task's urdf_path; a task without one is refused unless this "
                             "names the robot's).", read_only=True)
    ramp_in_time: float = param(0.1, "Seconds over which commands blend in from the hold when "
                                "acting starts or resumes (after an e-stop, a pause or a "
                                "deadline; 0 = at once).", 0.0, 10.0, 0.0, read_only=True)
    velocity_envelope: float = param(1.5, "A commanded joint faster than this multiple of its "
                                     "URDF velocity limit engages the e-stop (0 = no check).",
                                     0.0, 100.0, 0.0, read_only=True)
    estop_dir: str = param("", "Directory where the e-stop's state is kept, so that it "
                           "survives a restart of the simulator (rl-bringup gives "
                           "<output_dir>/estop; '' = memory only).", read_only=True)

    def __post_init__(self) -> None:
        _check_ranges(self)
        choices = {"robot_interface": ROBOT_INTERFACES,
                   "command_topic": ("commands", "joint_trajectory"),
                   "command_interface": ("", "position", "velocity", "effort"),
                   "reset": ("service", "homing")}
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise ConfigError(f"BoundaryConfig.{name} must be one of "
                                  f"{', '.join(repr(v) for v in valid)}, got "
                                  f"{getattr(self, name)!r}")

    def joint_names(self, task_joints: tuple[str, ...]) -> tuple[str, ...]:
        """The robot's names of the task's joints."""
        if not self.joints.strip():
            return task_joints
        names = tuple(name.strip() for name in self.joints.split(","))
        if len(names) != len(task_joints) or not all(names):
            raise ConfigError(f"joints must name the task's {len(task_joints)} joints "
                              f"({', '.join(task_joints)}) in order, got {self.joints!r}")
        return names


@dataclasses.dataclass
class PolicyConfig:
    """Parameters of the policy (inference) node."""

    env_id: str = param("rl_ros2/CartPoleBalance-v0", "Gymnasium id of the task (sizes the actor).",
                        read_only=True)
    hidden_sizes: tuple[int, ...] = param((256, 256), "Hidden layer widths of the actor.",
                                          read_only=True)
    algorithm: str = algorithm_param()
    deterministic: bool = param(False, "Act with the mean action instead of sampling "
                                "(exploration off).")
    exploration_epsilon: float = param(0.05, "algorithm dqn: the chance of a random choice "
                                       "instead of the most valuable one (after the simulators' "
                                       "random_steps).", 0.0, 1.0, 0.0)
    seed: int = param(0, "Seed of the exploration noise.", 0, 2**31 - 1, 1, read_only=True)
    checkpoint: str = param("", "Start from this checkpoint's actor: a checkpoint directory, "
                            "RUN/best, RUN/final, or a run's output directory RUN (its best "
                            "checkpoint where it has one). Newer /policy_weights still replace "
                            "it. '' = initial random weights until the learner's first "
                            "weights.", read_only=True)
    onnx_model: str = param("", "Act with this exported ONNX model through onnxruntime (a fixed, "
                            "deterministic robot-side policy; /policy_weights are ignored). '' = "
                            "torch actor following /policy_weights.", read_only=True)
    expert: bool = param(False, "Act with the scripted expert of env_id (rl_core.acting.experts) "
                         "instead of a learned policy, e.g. to record demonstrations with "
                         "rl-bringup record topics:=/experience; /policy_weights are ignored.",
                         read_only=True)
    expert_noise: float = param(0.0, "With expert: standard deviation of the Gaussian noise "
                                "added to its actions, for demonstrations that take more than "
                                "one path.", 0.0, 1.0, 0.0, read_only=True)
    allow_unsigned: bool = param(False, "Obey /policy_weights without the learner's "
                                 "signature when no public key is configured "
                                 "(RL_ROS2_WEIGHTS_PUBLIC_KEY); development only: anyone on the "
                                 "domain could then reprogram this robot's policy.",
                                 read_only=True)
    # 64 = rl_bringup.plan.deployment.MAX_ROBOTS (rl_core imports nothing from the bringup package).
    robots: int = param(0, "0 = serve the observations of this node's own namespace; N >= 1 = "
                        "central policy serving /robot_0 .. /robot_{N-1}, one forward pass over "
                        "the robots' batches (SEED RL style).", 0, 64, 1, read_only=True)
    batch_window_ms: float = param(2.0, "Central policy (robots >= 1): longest time an "
                                   "observation batch waits for the other robots' batches before "
                                   "the forward pass runs without them (0 = answer each batch at "
                                   "once).", 0.0, 1000.0, 0.0)
    device: str = device_param("the torch actor's inference (an onnx_model always runs on the "
                               "CPU)")
    feature_dim: int = feature_dim_param()
    encoder_channels: int = encoder_channels_param()

    def __post_init__(self) -> None:
        _check_ranges(self)
        _check_choice(self, "device", DEVICES)
        _check_choice(self, "algorithm", ALGORITHMS)


def deployment_robots_param(what: str) -> Any:
    """The ``deployment_robots`` parameter of a node that takes ``what`` from every robot."""
    return param(0, f"Robots of the deployment (robot ids 0 .. n-1); {what} from other robot ids "
                 "is refused (0 = accept any id). Raised at run time when a robot joins a running "
                 "container (ros2 component load).", 0, 4096, 1)


@dataclasses.dataclass
class ReplayConfig:
    """Parameters of the replay buffer."""

    env_id: str = param("rl_ros2/CartPoleBalance-v0", "Gymnasium id of the task (sizes the "
                        "stored observations and actions).", read_only=True)
    capacity: int = param(100_000, "Maximum number of stored transitions.", 1, 10**8, 1,
                          read_only=True)
    prioritized: bool = param(False, "Prioritised (sum-tree) sampling instead of uniform.",
                              read_only=True)
    priority_alpha: float = param(0.6, "Priority exponent of prioritised sampling (fixed at "
                                  "start: stored priorities carry it).", 0.0, 1.0, 0.0,
                                  read_only=True)
    priority_beta: float = param(0.4, "Importance-sampling exponent of prioritised sampling.",
                                 0.0, 1.0, 0.0)
    seed: int = param(0, "Seed of the sampler.", 0, 2**31 - 1, 1, read_only=True)
    learning_starts: int = param(1000, "Stored transitions needed before the first gradient "
                                 "update (the rate limiter's minimum size to sample).",
                                 1, 10**9, 1, read_only=True)
    updates_per_transition: float = param(
        1.0, "Gradient steps (batches sampled) per inserted transition: the update-to-data "
        "ratio the rate limiter keeps.", 0.0, 64.0, 0.0, read_only=True,
        renamed_from="updates_per_step")
    rate_limit: bool = param(True, "Pause acting (simulators stop stepping) while it is more "
                             "than error_buffer transitions ahead of learning. false: acting "
                             "runs free (real robots that cannot pause); the achieved ratio is "
                             "reported on /replay_status.", read_only=True)
    error_buffer: int = param(100, "Transitions acting may run ahead of learning before it is "
                              "paused (the rate limiter's error buffer).", 1, 10**9, 1,
                              read_only=True)
    total_env_steps: int = param(20_000, "The run's budget: transitions of all robots. The "
                                 "buffer grants only the updates they pay for, then reports the "
                                 "run done on /replay_status (the trainer finishes, the robots "
                                 "stop acting).", 1, 10**12, 1, read_only=True)
    deployment_robots: int = deployment_robots_param("experience")
    output_dir: str = param("", "Run directory: snapshots go to output_dir/replay and the "
                            "save/load services read and write only there ('' = no snapshots, "
                            "save/load refused).", read_only=True)
    snapshot_period: float = param(30.0, "Seconds between snapshots of the buffer to "
                                   "output_dir/replay/snapshot.npz (also written on shutdown and "
                                   "loaded on start; 0 = only on shutdown). Between snapshots an "
                                   "insert log keeps what was stored (written every 0.5 s), so a "
                                   "kill loses at most about that; each snapshot compacts the "
                                   "log, which grows until the next one.", 0.0, 86400.0, 0.0,
                                   read_only=True)
    save_interval: float = param(60.0, "Least seconds between two writes of the save service: "
                                 "one asked sooner is refused and counted (a save writes the "
                                 "whole buffer, up to ~300 MB for a pixel task, and holds up "
                                 "inserts meanwhile). 0 = no limit.", 0.0, 86400.0, 0.0,
                                 read_only=True)
    value_bound: float = param(1e6, "Largest absolute value accepted in stored observations, "
                               "actions and rewards; batches beyond it are rejected (a reward of "
                               "1e20 would make every critic loss infinite). Also the largest "
                               "priority a learner may set (larger ones are clipped and counted).",
                               1.0, 1e30, 0.0,
                               read_only=True)
    demos: str = param("", "Demonstrations: MCAP files or folders of them, comma-separated, as "
                       "rl-bringup record topics:=/experience writes them; loaded into a buffer "
                       "of their own that every batch samples beside online data (demo_ratio). "
                       "'' = none.", read_only=True)
    demo_ratio: float = param(0.5, "With demos: the share of every batch drawn from the "
                              "demonstrations (RLPD's symmetric sampling: 0.5).", 0.0, 1.0, 0.0,
                              read_only=True)
    her_k: int = param(0, "Hindsight relabelling (HER, 'future' strategy) for a goal-conditioned "
                       "env (Dict observations with achieved_goal and desired_goal, and "
                       "compute_reward): k relabelled goals per real one, so k/(k+1) of the "
                       "sampled rows of ended episodes get a goal achieved later in their "
                       "episode. 0 = off.", 0, 64, 1, read_only=True)

    def __post_init__(self) -> None:
        _check_ranges(self)


@dataclasses.dataclass
class SACConfig:
    """Hyperparameters of Soft Actor-Critic (twin critics, target networks, entropy tuning)."""

    hidden_sizes: tuple[int, ...] = param((256, 256), "Hidden layer widths of actor and critics.",
                                          read_only=True)
    algorithm: str = algorithm_param()
    gamma: float = param(0.99, "Discount factor.", 0.0, 1.0, 0.0)
    n_step: int = n_step_param(
        "Rewards summed into each stored transition (n-step returns): the simulators sum n_step "
        "rewards discounted by gamma, the critics bootstrap with gamma ** n_step (1 = one-step). "
        "Not with her_k or demos, which store one-step rewards.")
    tau: float = param(0.005, "Polyak factor of the target critics.", 0.0, 1.0, 0.0)
    actor_lr: float = param(3e-4, "Actor learning rate.", 0.0, 1.0, 0.0)
    critic_lr: float = param(3e-4, "Critic learning rate.", 0.0, 1.0, 0.0)
    alpha_lr: float = param(3e-4, "Entropy temperature learning rate.", 0.0, 1.0, 0.0)
    init_alpha: float = param(1.0, "Initial entropy temperature.", 1e-6, 100.0, 0.0)
    autotune_alpha: bool = param(True, "Tune the entropy temperature towards the target entropy.")
    target_entropy_scale: float = param(1.0, "Target entropy = -scale * action size.", 0.0, 10.0,
                                        0.0)
    critics: int = param(2, "Critics in the ensemble. 2 = SAC's twin critics (targets and the "
                         "actor take their minimum); more = the ensemble of REDQ and RLPD: the "
                         "target takes the minimum of a random pair, the actor the mean of all.",
                         2, 20, 1, read_only=True)
    critic_layer_norm: bool = param(False, "Layer normalisation in every hidden layer of the "
                                    "critics (RLPD, DroQ): keeps the values of actions the data "
                                    "holds few of from running away, with demonstrations and "
                                    "high update ratios.", read_only=True)
    demo_bc_weight: float = param(0.0, "With demos: weight of behaviour cloning in the actor's "
                                  "loss on the demonstration rows of every batch, where the "
                                  "critics value the demonstrated action above the policy's (a Q "
                                  "filter), relative to the batch's mean |Q| (0 = none, RLPD's "
                                  "rule; docs/human_in_the_loop.md).", 0.0, 100.0, 0.0)
    compile_update: bool = param(False, "Compile every gradient step into one graph with "
                                 "torch.compile (needs a C++ compiler; state-vector "
                                 "observations): the first update compiles, about 15-40 s, "
                                 "then small networks (64x64) update about 3x faster and "
                                 "large ones (256x256) about 1.4x; it pays for runs of more "
                                 "than about 10,000 updates (docs/results.md#update-speed).",
                                 read_only=True)
    update_precision: str = param("float32", "Precision of the gradient step's matrix "
                                  "products: float32, or bfloat16 (mixed precision: "
                                  "torch.autocast; parameters, optimizer state, the networks' "
                                  "outputs and the losses stay float32). bfloat16 pays for "
                                  "large networks on processors with bfloat16 matrix units "
                                  "(AMX, AVX-512 BF16) or recent GPUs; slower for small ones "
                                  "(docs/results.md#update-speed).", read_only=True)
    feature_dim: int = feature_dim_param()
    encoder_channels: int = encoder_channels_param()
    image_shift: int = param(4, "Largest random shift in pixels of the DrQ augmentation of image "
                             "observations (0 = none; ignored for state vectors).", 0, 64, 1)

    def __post_init__(self) -> None:
        _check_ranges(self)
        _check_choice(self, "update_precision", UPDATE_PRECISIONS)
        _check_choice(self, "algorithm", ALGORITHMS)

    @property
    def bootstrap_discount(self) -> float:
        """The discount of a stored row's bootstrapped value: ``gamma ** n_step``."""
        return self.gamma ** self.n_step


@dataclasses.dataclass
class TrainerConfig:
    """Parameters of the training schedule (trainer node and bare loop)."""

    env_id: str = param("rl_ros2/CartPoleBalance-v0", "Gymnasium id of the task (network sizes, "
                        "final evaluation).", read_only=True)
    deployment_robots: int = deployment_robots_param("episode statistics")
    update_mode: str = param("auto", "Where gradient steps run: 'interleaved' (on the dispatch "
                             "thread, right after each insert; needs the replay buffer in the "
                             "same process), 'thread' (the trainer's own learner thread, with "
                             "batches prefetched over DDS when the buffer is elsewhere), 'auto' "
                             "(interleaved when the buffer is local, else thread). Either way the "
                             "replay buffer's rate limiter grants the batches.", read_only=True)
    batch_size: int = param(256, "Transitions per gradient step (fixed at start: it sizes the "
                            "sample requests and the memory they take).", 1, 65536, 1,
                            read_only=True)
    weights_period: float = param(0.5, "Seconds between /policy_weights publications.",
                                  0.01, 60.0, 0.0)
    checkpoint_period: float = param(60.0, "Seconds between checkpoints (0 = only at the end).",
                                     0.0, 86400.0, 0.0, read_only=True)
    eval_episodes: int = param(10, "Deterministic episodes of the final evaluation and of "
                               "each periodic one.", 0, MAX_EVAL_EPISODES, 1)
    eval_period: int = param(5000, "Transitions between two periodic evaluations of the "
                             "learner (on a thread of their own: acting and learning go on); "
                             "the best evaluated weights are kept in output_dir/best beside the "
                             "final output_dir/checkpoint (0 = final evaluation only).",
                             0, 10**12, 1)
    solve_return: float = param(0.0, "Mean return of the last 10 training episodes at which the "
                                "task counts as solved (reported as solved_at_s in result.json; "
                                "0 = not tracked).", -1e9, 1e9, 0.0)
    target_success_rate: float = param(0.0, "Success rate of a periodic evaluation that meets the "
                                       "task's criterion: result.json reports the transitions "
                                       "and seconds of the first that did (target_env_steps, "
                                       "target_wall_time_s); 0 = not tracked.", 0.0, 1.0, 0.0,
                                       read_only=True)
    target_return: float = param(0.0, "Mean return of a periodic evaluation that meets the "
                                 "task's criterion, for tasks judged by return (used where "
                                 "target_success_rate is 0): reported and stopped at like it; "
                                 "0 = not tracked.", -1e9, 1e9, 0.0, read_only=True)
    stop_at_target: bool = param(False, "End the run at the first periodic evaluation that meets "
                                 "target_success_rate or target_return (Stable-Baselines3's "
                                 "StopTrainingOnRewardThreshold) instead of at total_env_steps. "
                                 "Live: set true during a run, it ends the run at the next "
                                 "round if an evaluation of this learner met it already.")
    torch_threads: int = param(0, "torch intra-op threads for updates (0 = leave the process "
                               "default: 1 in node processes, torch's own in the bare loop).",
                               0, 256, 1, read_only=True)
    seed: int = param(0, "Seed of network initialisation and update noise.", 0, 2**31 - 1, 1,
                      read_only=True)
    output_dir: str = param("", "Directory for checkpoints and results ('' = runs/<time>).",
                            read_only=True)
    resume: str = param("", "Checkpoint to resume the learner from: a checkpoint directory, "
                        "RUN/best, RUN/final, or a run's output directory RUN (its final "
                        "checkpoint). '' = the newest valid checkpoint in output_dir/checkpoints "
                        "when there is one, else start fresh.", read_only=True)
    keep_checkpoints: int = param(3, "Periodic checkpoints kept in output_dir/checkpoints (the "
                                  "final one also goes to output_dir/checkpoint).", 1, 1000, 1,
                                  read_only=True)
    device: str = device_param("the learner's networks and gradient steps")

    def __post_init__(self) -> None:
        _check_ranges(self)
        _check_choice(self, "device", DEVICES)
        _check_choice(self, "update_mode", UPDATE_MODES)
        if self.stop_at_target and not ((self.target_success_rate or self.target_return)
                                        and self.eval_period):
            raise ConfigError("TrainerConfig.stop_at_target needs a target_success_rate above 0 "
                              "or a target_return, and periodic evaluations (eval_period > 0) "
                              "to stop at; set them, or stop_at_target: false")


UPDATE_MODES = ("auto", "interleaved", "thread")

#: A parameter that moved from one node to another: ``{(old node, name): new node}``. Set on the
#: old node it is refused, before anything starts, saying where it lives now
#: (:func:`moved_notice`; it was passed on with a warning for a release).
MOVED_PARAMETERS: dict[tuple[str, str], str] = {
    (node_kinds.TRAINER, "total_env_steps"): node_kinds.REPLAY_BUFFER,
}


def parameters_for(node: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides of ``parameters`` that concern ``node``: its own and those no node of this
    project declares (ROS's own, such as ``use_sim_time``). So ``total_env_steps:=N`` reaches the
    replay buffer, not the trainer it left. A node kind this project does not know gets all;
    the diagnostics aggregator, a ROS tool node with no block here, only ROS's own."""
    if node not in NODE_CONFIGS and node != node_kinds.DIAGNOSTICS_AGGREGATOR:
        return dict(parameters)
    own = {f.name for cls in NODE_CONFIGS.get(node, ()) for f in dataclasses.fields(cls)}
    everyone = {f.name for classes in NODE_CONFIGS.values() for cls in classes
                for f in dataclasses.fields(cls)}
    return {name: value for name, value in parameters.items()
            if name in own or RENAMED_PARAMETERS.get(name, name) in own
            or RENAMED_PARAMETERS.get(name, name) not in everyone}


def moved_notice(node: str, name: str) -> str:
    """What a user who set ``name`` on ``node``, where it no longer lives, is told."""
    new_node = MOVED_PARAMETERS[(node, name)]
    return (f"parameter {name!r} is the {new_node}'s (it owns the run's schedule), not the "
            f"{node}'s: move it to the {new_node}'s block (/**/{new_node}: ros__parameters:) or "
            f"the shared one (/**:), or pass {name}:=N to rl-bringup or the launch")


# Which dataclasses each node's parameter block fills. The trainer owns SAC; the replay buffer
# owns the schedule (learning_starts, updates_per_transition, total_env_steps).
NODE_CONFIGS: dict[str, tuple[type, ...]] = {
    node_kinds.SIMULATOR: (SimulatorConfig, BoundaryConfig),
    node_kinds.POLICY: (PolicyConfig,),
    node_kinds.REPLAY_BUFFER: (ReplayConfig,),
    node_kinds.TRAINER: (SACConfig, TrainerConfig),
}


@dataclasses.dataclass
class RunConfig:
    """Everything one training run needs, read from one scenario YAML."""

    simulator: SimulatorConfig = dataclasses.field(default_factory=SimulatorConfig)
    policy: PolicyConfig = dataclasses.field(default_factory=PolicyConfig)
    replay: ReplayConfig = dataclasses.field(default_factory=ReplayConfig)
    sac: SACConfig = dataclasses.field(default_factory=SACConfig)
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)

    def __post_init__(self) -> None:
        if len({self.simulator.env_id, self.policy.env_id, self.replay.env_id,
                self.trainer.env_id}) > 1:
            raise ConfigError("simulator, policy, replay_buffer and trainer must use the same "
                              "env_id; set it once "
                              "in the '/**' block")
        self._check_n_step()
        for name in ("hidden_sizes", "algorithm"):
            if (mine := getattr(self.policy, name)) != (theirs := getattr(self.sac, name)):
                raise ConfigError(f"policy.{name} {mine} differs from the trainer's {theirs}; set "
                                  f"{name} once in the '/**' block")


    def _check_n_step(self) -> None:
        refusal = n_step_refusal(self.sac.n_step, self.replay.her_k, self.replay.demos)
        if refusal is not None:
            raise ConfigError(refusal)


def n_step_refusal(n_step: int, her_k: int, demos: str) -> str | None:
    """Why n-step rows cannot go where replay stores one-step ones (None: they can)."""
    if n_step > 1 and (her_k or demos):
        what, why = ("her_k", "relabelling recomputes") if her_k else \
            ("demos", "demonstrations hold")
        return (f"n_step {n_step} cannot be combined with {what}: {why} one-step rewards; set "
                "n_step to 1 or leave it out")
    return None


def _renamed_parameters() -> dict[str, str]:
    return {field.metadata["renamed_from"]: field.name
            for classes in NODE_CONFIGS.values() for cls in classes
            for field in dataclasses.fields(cls) if field.metadata.get("renamed_from")}


#: Former parameter names and their new names (each works for a release, with a warning).
RENAMED_PARAMETERS: dict[str, str] = _renamed_parameters()


def deprecation_notice(old: str) -> str:
    """What a user who set the former name ``old`` is told."""
    return (f"parameter {old!r} is deprecated: it was renamed to {RENAMED_PARAMETERS[old]!r}, "
            f"and the old name stops working in the next release")


def renamed(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with former names replaced by the new ones, each with a ``FutureWarning``
    (shown to users by default); where both are given, the new name wins."""
    upgraded = dict(params)
    for old, new in RENAMED_PARAMETERS.items():
        if old in upgraded:
            warnings.warn(deprecation_notice(old), FutureWarning, stacklevel=2)
            value = upgraded.pop(old)
            upgraded.setdefault(new, value)
    return upgraded


#: Node name of the scenario file's ``/rl_bringup`` block: settings of the deployment plan
#: (``cpus``), not of a node. No node has this name, so ROS 2 loads the block into nothing and
#: the node configs skip it; ``rl_bringup.plan`` reads it.
LAUNCHER_NODE = "rl_bringup"


def _node_name_of(key: str) -> str | None:
    """Node a YAML top-level key applies to: ``None`` for every node (``/**``, ``/*``)."""
    name = key.strip("/").split("/")[-1] if key.strip("/") else "**"
    return None if name in ("**", "*") else name


def node_parameters(document: Mapping[str, Any], node: str) -> dict[str, Any]:
    """Merge the ``ros__parameters`` that apply to ``node`` (wildcards first, then its own block).

    The ``/rl_bringup`` block (:data:`LAUNCHER_NODE`) holds deployment settings and is skipped.

    :raises ConfigError: when a block is malformed or names a node this project does not have.
    """
    merged: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    for key, block in document.items():
        if not isinstance(block, Mapping) or not isinstance(block.get("ros__parameters"), Mapping):
            raise ConfigError(f"block {key!r} must contain a 'ros__parameters' mapping")
        target = _node_name_of(str(key))
        if target == LAUNCHER_NODE:
            continue
        if target is not None and target not in NODE_CONFIGS:
            raise ConfigError(f"block {key!r} names unknown node {target!r}; valid nodes: "
                              f"{', '.join(sorted(NODE_CONFIGS))} (and /{LAUNCHER_NODE} for the "
                              f"deployment plan)")
        if target is None:
            merged.update(block["ros__parameters"])
        elif target == node:
            specific.update(block["ros__parameters"])
    merged.update(specific)
    return merged


def build_node_configs(node: str, params: Mapping[str, Any], *, strict: bool = True) -> list[Any]:
    """Instantiate the dataclasses of ``node`` from a flat parameter mapping.

    :param strict: raise on parameters no dataclass of the node knows (typos) when true.
    :raises ConfigError: on unknown parameters (listing the valid names) or invalid values.
    """
    classes = NODE_CONFIGS[node]
    params = renamed(params)
    known = {f.name for cls in classes for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - known)
    if strict and unknown:
        raise ConfigError(f"unknown parameter(s) {unknown} for node {node!r}; "
                          f"valid: {', '.join(sorted(known))}")
    configs = []
    for cls in classes:
        names = {f.name for f in dataclasses.fields(cls)}
        try:
            configs.append(cls(**{k: v for k, v in params.items() if k in names}))
        except TypeError as error:
            raise ConfigError(f"node {node!r}: {error}") from error
    return configs


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a scenario YAML file with a clear error when it is missing or malformed."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; pass an existing YAML file "
                          "(see config/ for the shipped scenarios)")
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {error}") from error
    if not isinstance(document, dict):
        raise ConfigError(f"config file {str(path)!r} must map node names to parameter blocks")
    return document


def load_run_config(path: str | Path, overrides: Mapping[str, Mapping[str, Any]] | None = None
                    ) -> RunConfig:
    """Build a :class:`RunConfig` from a scenario YAML file.

    :param path: YAML file with per-node ``ros__parameters`` blocks.
    :param overrides: optional ``{node: {parameter: value}}`` applied after the file.
    :raises ConfigError: when the file is missing, malformed or holds invalid values.
    """
    document = load_yaml(path)
    shared: Mapping[str, Any] = renamed(next((
        b["ros__parameters"] for k, b in document.items()
        if _node_name_of(str(k)) is None and isinstance(b, Mapping)
        and isinstance(b.get("ros__parameters"), Mapping)), {}))
    every_field = {f.name for classes in NODE_CONFIGS.values() for cls in classes
                   for f in dataclasses.fields(cls)}
    if unknown := sorted(set(shared) - every_field):
        raise ConfigError(f"unknown shared parameter(s) {unknown} in {str(path)!r}; "
                          f"valid: {', '.join(sorted(every_field))}")
    blocks: dict[str, dict[str, Any]] = {}
    for node in NODE_CONFIGS:
        params = renamed(node_parameters(document, node))
        # Shared ('/**') parameters reach every node; each node keeps only what it knows.
        own = {k: v for k, v in params.items()
               if k not in shared or k in {f.name for c in NODE_CONFIGS[node] for f in dataclasses.fields(c)}}
        own.update(renamed((overrides or {}).get(node, {})))
        blocks[node] = own
    for (old_node, name), new_node in MOVED_PARAMETERS.items():
        if name in blocks[old_node]:  # set on the node it left
            raise ConfigError(moved_notice(old_node, name))
    built = {node: build_node_configs(node, params) for node, params in blocks.items()}
    return RunConfig(simulator=built["simulator"][0], policy=built["policy"][0],
                     replay=built["replay_buffer"][0], sac=built["trainer"][0],
                     trainer=built["trainer"][1])
