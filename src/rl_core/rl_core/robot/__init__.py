"""The robot boundary in plain Python: joint readings, limits, tasks and the safety layer.

Nothing here imports rclpy. The simulator node (``robot_interface: ros2_control``) turns
``sensor_msgs/JointState`` into :class:`JointSample` and the commands this package computes into
the messages ros2_control's controllers take; ``sim_robot`` is a pybullet robot behind the same
topics. Units follow REP-103: positions in rad (revolute) or m (prismatic), velocities in rad/s
or m/s, efforts in N m or N.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Command interfaces of ros2_control's forward command controllers, as the boundary names them.
COMMAND_INTERFACES = ("position", "velocity", "effort")


@dataclass(frozen=True)
class JointSample:
    """One reading of the robot's joints in the task's joint order.

    :param stamp: seconds on the robot's clock (the message header's stamp).
    :param position: rad or m, one per joint.
    :param velocity: rad/s or m/s, one per joint (zeros when the robot does not report them).
    :param effort: N m or N, one per joint (zeros when the robot does not report them).
    """

    stamp: float
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass(frozen=True)
class JointTarget:
    """Where an episode starts: joint positions and velocities in the task's joint order."""

    position: np.ndarray
    velocity: np.ndarray


@dataclass(frozen=True)
class JointLimits:
    """Per-joint limits of a robot model (from the URDF's ``<limit>`` tags), in joint order.

    A missing or non-positive limit is ``inf`` (``-inf`` for ``lower``): continuous joints have
    no position limit, and a URDF ``velocity="0"`` means "not given".
    """

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
