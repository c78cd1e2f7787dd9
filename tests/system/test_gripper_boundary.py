"""A task with a gripper trained through the ros2_control boundary: ``rl-bringup launch colocated
robot_interface:=ros2_control task:=panda_grip:PandaGrip`` (pybullet_data's Franka Panda under
sim_robot, lockstep; the task in tests/system/user_packages), probed over DDS by this process, a
second participant: the policy's choices reach the fingers on their own controller topic inside
their limits, the fingers follow, the learner updates on the arm-and-choice rows, and an e-stop
holds the fingers with the arm while a plain ``false`` (no signature) releases nothing.

11-18 s (15 runs, the last 3 with the policy acting after 300 random steps; 1 of the first 6
failed before a target already on its way at the e-stop was allowed). Every process on the
loopback in this pytest run's ROS_DOMAIN_ID (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray

from rl_nodes import graph
from tests.processes import Child

pytestmark = pytest.mark.system

USER_PACKAGES = Path(__file__).resolve().parent / "user_packages"
sys.path.insert(0, str(USER_PACKAGES))  # for this import only: other tests must not find it
from panda_grip import CLOSED, OPEN, PandaGrip  # noqa: E402

sys.path.remove(str(USER_PACKAGES))

NAMESPACE = graph.robot_namespace(0)
GRIPPER_COMMANDS = graph.resolve(graph.command_topic(PandaGrip.gripper.controller).name, NAMESPACE)
JOINT_STATES = graph.resolve(graph.ROBOT_JOINT_STATES.name, NAMESPACE)
ESTOP = graph.resolve(graph.ESTOP.name, NAMESPACE)
RUN = ("robot_interface:=ros2_control", "task:=panda_grip:PandaGrip",
       "total_env_steps:=1000000000", "learning_starts:=200", "random_steps:=300",
       "command_timeout:=0.3")
#: Gripper commands seen before the e-stop: the first 300 steps act at random (both ends of the
#: fingers' travel chosen), the rest with the learner's arm-and-choice policy.
COMMANDS_BEFORE_ESTOP = 600
START_TIMEOUT_S = 150.0
#: How long the held fingers are watched.
ENGAGED_WINDOW_S = 1.0


class Probe:
    """This process' participant: the gripper's commands and the fingers' positions as they
    arrive, and the e-stop topic."""

    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("gripper_probe", context=self.context)
        self.commands: list[tuple[float, tuple[float, ...]]] = []
        self.fingers: list[tuple[float, tuple[float, ...]]] = []
        self.node.create_subscription(Float64MultiArray, GRIPPER_COMMANDS, self._on_command, 100)
        self.node.create_subscription(JointState, JOINT_STATES, self._on_state, 100)
        self.estop = self.node.create_publisher(Bool, ESTOP, 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def _on_command(self, msg: Float64MultiArray) -> None:
        self.commands.append((time.monotonic(), tuple(msg.data)))

    def _on_state(self, msg: JointState) -> None:
        position = dict(zip(msg.name, msg.position))
        self.fingers.append((time.monotonic(), tuple(position[name]
                                                     for name in PandaGrip.gripper.joints)))

    def since(self, series: list[tuple[float, tuple[float, ...]]], start: float
              ) -> list[tuple[float, ...]]:
        return [values for at, values in list(series) if at >= start]

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def wait_for(condition, timeout_s: float, run: Child, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert run.process.poll() is None, f"the run ended before {what}:\n{run.output()[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s:\n" \
                                            f"{run.output()[-4000:]}"
        time.sleep(0.05)


def test_the_fingers_obey_their_limits_and_the_estop_holds_them(tmp_path: Path, ros_env) -> None:
    env = dict(ros_env)
    assert env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST", "network-safety rule"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(USER_PACKAGES), env.get("PYTHONPATH"))))
    probe = Probe()
    run = Child([str(Path(sys.executable).parent / "rl-bringup"), "launch", "colocated", *RUN,
                 f"output_dir:={tmp_path / 'run'}", f"domain_id:={env['ROS_DOMAIN_ID']}"],
                env=env)
    try:
        wait_for(lambda: len(probe.commands) >= COMMANDS_BEFORE_ESTOP, START_TIMEOUT_S, run,
                 f"{COMMANDS_BEFORE_ESTOP} gripper commands")
        assert run.wait_for_line(lambda line: re.search(r"updates [1-9]", line) is not None,
                                 60.0), f"no gradient step:\n{run.output()[-4000:]}"
        targets = [value for _, values in probe.commands for value in values]
        assert all(CLOSED - 1e-9 <= value <= OPEN + 1e-9 for value in targets), (
            min(targets), max(targets))
        # The choices reached the fingers, both ways, and the physics followed.
        assert min(targets) < 0.01 and max(targets) > 0.03, (min(targets), max(targets))
        fingers = [value for _, values in probe.fingers for value in values]
        assert min(fingers) < 0.015 and max(fingers) > 0.03, (min(fingers), max(fingers))

        engaged_at = time.monotonic()
        probe.estop.publish(Bool(data=True))
        time.sleep(0.3)  # the hold crosses DDS, the fingers settle where they were stopped
        settled = time.monotonic()
        for _ in range(3):  # a second participant's plain false: no signature, no release
            probe.estop.publish(Bool(data=False))
        time.sleep(ENGAGED_WINDOW_S)
        # The hold (after any target already on its way), then nothing.
        assert probe.since(probe.commands, engaged_at), "no hold of the fingers"
        positions = probe.since(probe.fingers, settled)
        if positions:  # a lockstep robot publishes states only when commanded
            spread = max(max(v) - min(v) for v in zip(*positions))
            assert spread < 1e-3, f"the fingers moved by {spread} m while held"
        assert probe.since(probe.commands, settled) == [], "released by an unsigned false"
    finally:
        probe.close()
        code = run.stop(grace_s=20.0)
    assert code in (0, 130), run.output()[-4000:]
    assert "Traceback" not in run.output() and "rejected actions" not in run.output(), \
        run.output()[-4000:]
