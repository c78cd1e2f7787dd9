"""Scripted experts: programs that act in a task the way an operator would.

An expert maps a batch of observations to a batch of actions, like a policy (``act(obs)`` with
``obs`` of shape ``(N, obs_dim)`` -> actions ``(N, action_dim)`` in [-1, 1]), but from a model of
the robot instead of learned weights. It stands in for a person where one cannot sit: recording
demonstrations, scripted interventions in tests and benchmarks (docs/human_in_the_loop.md).

:class:`KukaReachExpert` is also the example of how to write one for your own task: read what
the task's observation holds, compute the motion a controller would command from the robot's
URDF, and scale it into the task's action units.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from rl_core.robot.tasks import KukaReachTask
from rl_core.robot.urdf import UrdfModel

__all__ = ["EXPERTS", "Expert", "KukaReachExpert", "make_expert"]


class Expert(Protocol):
    """What an expert offers: actions for a batch of observations."""

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions ``(N, action_dim)`` float32 in [-1, 1] for observations ``(N, obs_dim)``."""
        ...


class KukaReachExpert:
    """Moves the KUKA iiwa's hand straight to the target (``rl_ros2/KukaReach-v0``, on the
    in-process env or through the robot boundary: both observe the same 23 values).

    Resolved-rate control with damped least squares: the hand is to move towards the target at
    ``gain`` times the offset (capped at ``max_hand_speed``); the joint velocities that do it are
    ``J^T (J J^T + damping^2 I)^-1 v``, with ``J`` the hand's position Jacobian from the URDF
    (:meth:`UrdfModel.position_jacobian`). The arm has one joint more than a position needs;
    the spare motion pulls the joints towards the home pose (``home_gain``), so the elbow does
    not drift. Joint velocities are scaled down together where one would exceed
    ``max_joint_velocity`` (the direction of motion is kept), then expressed in the task's
    action units. ``noise`` adds Gaussian noise of that standard deviation to every action, for
    demonstrations that cover more than one path.

    :param max_joint_velocity: the task's rad/s per unit of action (KukaReachTask's default 1).
    :param gain: 1/s, hand speed per m of offset.
    :param max_hand_speed: m/s.
    :param damping: m/s of singular value below which the Jacobian is damped.
    :param home_gain: 1/s, pull of the spare joint motion towards the home pose.
    :param noise: standard deviation of the action noise (0: deterministic).
    :param seed: seed of the noise.
    """

    #: Where the task's observation holds joint positions and the target minus the hand.
    POSITIONS, OFFSET = slice(0, 7), slice(20, 23)

    def __init__(self, *, max_joint_velocity: float = 1.0, gain: float = 4.0,
                 max_hand_speed: float = 0.5, damping: float = 0.05, home_gain: float = 1.0,
                 noise: float = 0.0, seed: int = 0) -> None:
        for name, value in (("max_joint_velocity", max_joint_velocity), ("gain", gain),
                            ("max_hand_speed", max_hand_speed), ("damping", damping)):
            if not value > 0.0:
                raise ValueError(f"{name} must be positive, got {value}")
        if home_gain < 0.0 or noise < 0.0:
            raise ValueError(f"home_gain and noise must not be negative, got {home_gain}, {noise}")
        assert KukaReachTask.urdf_path is not None
        self.model = UrdfModel.from_file(KukaReachTask.urdf_path)
        self.joint_names = KukaReachTask.joint_names
        self.home = np.asarray(KukaReachTask.HOME_POSITIONS)
        self.max_joint_velocity = max_joint_velocity
        self.gain, self.max_hand_speed = gain, max_hand_speed
        self.damping, self.home_gain, self.noise = damping, home_gain, noise
        self.rng = np.random.default_rng(seed)

    def joint_velocities(self, observation: np.ndarray) -> np.ndarray:
        """The joint velocities (rad/s) this controller commands for one observation."""
        positions = np.asarray(observation[self.POSITIONS], dtype=np.float64)
        offset = np.asarray(observation[self.OFFSET], dtype=np.float64)
        hand = self.gain * offset
        speed = float(np.linalg.norm(hand))
        if speed > self.max_hand_speed:
            hand *= self.max_hand_speed / speed
        jacobian = self.model.position_jacobian(KukaReachTask.END_EFFECTOR_LINK, positions,
                                                self.joint_names)
        inverse = jacobian.T @ np.linalg.inv(jacobian @ jacobian.T
                                             + self.damping**2 * np.eye(3))
        spare = np.eye(len(positions)) - inverse @ jacobian
        velocities = inverse @ hand + spare @ (self.home_gain * (self.home - positions))
        fastest = float(np.max(np.abs(velocities)))
        if fastest > self.max_joint_velocity:
            velocities *= self.max_joint_velocity / fastest
        return velocities

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions for observations ``(N, 23)`` (or one ``(23,)``) -> ``(N, 7)`` float32."""
        batch = np.atleast_2d(np.asarray(obs, dtype=np.float64))
        if batch.ndim != 2 or batch.shape[1] != 23:
            raise ValueError(f"KukaReachExpert takes KukaReach observations of 23 values, got "
                             f"shape {np.shape(obs)}")
        actions = np.stack([self.joint_velocities(row) for row in batch]) / self.max_joint_velocity
        if self.noise:
            actions += self.rng.normal(0.0, self.noise, size=actions.shape)
        return np.clip(actions, -1.0, 1.0).astype(np.float32)


#: The scripted experts by the id of the env (task) they solve.
EXPERTS: dict[str, type[KukaReachExpert]] = {"rl_ros2/KukaReach-v0": KukaReachExpert}


def make_expert(env_id: str, **options: Any) -> Expert:
    """The scripted expert of ``env_id``'s task, built with ``options``.

    :raises ValueError: when no expert is written for that task, naming the ones there are.
    """
    try:
        return EXPERTS[env_id](**options)
    except KeyError:
        raise ValueError(f"no scripted expert for {env_id!r}; there is one for "
                         f"{', '.join(sorted(EXPERTS))} (rl_core/acting/experts.py shows how to write "
                         "one)") from None
