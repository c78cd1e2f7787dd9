"""A gripper beside the arm at the ros2_control boundary (rl_core.robot.gripper): its
declaration, its limited commands, and the driver sending and holding it with the arm, against
the driver tests' recording host; no ROS, no physics (under a second)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from rl_core.config import BoundaryConfig
from rl_core.robot import JointLimits, JointSample, estop
from rl_core.robot.boundary import ACTING
from rl_core.robot.driver import RobotDriver
from rl_core.robot.gripper import CLOSE, OPEN, STAY, Gripper, GripperSpec
from rl_core.robot.safety import ESTOP, TIMEOUT
from rl_core.security.weights_auth import SigningKey
from tests.unit.test_robot_driver import RUN_KEY, Clock, Host, answer

pytestmark = pytest.mark.unit

USER_PACKAGES = str(Path(__file__).resolve().parents[1] / "system" / "user_packages")
sys.path.insert(0, USER_PACKAGES)  # for this import only: other tests must not find user code
from panda_grip import FINGERS, PandaGrip  # noqa: E402

sys.path.remove(USER_PACKAGES)

JOINTS = [f"panda_joint{k}" for k in range(1, 8)] + list(FINGERS)
PERIOD = PandaGrip.control_period
STEP = 0.1 * PERIOD  # the fingers' change limit: speed 0.1 m/s


def sample(fingers: float, stamp: float = 0.0) -> JointSample:
    position = np.concatenate((np.zeros(7), [fingers, fingers]))
    return JointSample(stamp, position, np.zeros(9), np.zeros(9))


def gripper() -> Gripper:
    limits = JointLimits(FINGERS, np.zeros(2), np.full(2, 0.04), np.full(2, 0.2), np.full(2, 20.0))
    return Gripper(PandaGrip.gripper, limits, np.array([7, 8]), PERIOD)


def test_the_fingers_head_for_the_choice_no_faster_than_their_speed() -> None:
    fingers = gripper()
    first = fingers.command(CLOSE, sample(0.04))
    np.testing.assert_allclose(first, [0.04 - STEP] * 2)  # from where they are, one step
    np.testing.assert_allclose(fingers.command(STAY, sample(0.035)), [0.04 - 2 * STEP] * 2)
    np.testing.assert_allclose(fingers.command(OPEN, sample(0.03)), [0.04 - STEP] * 2)
    held = fingers.hold(sample(0.031))
    np.testing.assert_allclose(held, [0.031, 0.031])  # stopped where they are
    np.testing.assert_allclose(fingers.command(STAY, sample(0.031)), held)  # and stay there
    with pytest.raises(ValueError, match="0 \\(close\\), 1 \\(stay\\) or 2 \\(open\\), got 3"):
        fingers.command(3, sample(0.03))
    # A reset put the fingers open: the next episode's targets start there, not where the last
    # episode's ended.
    fingers.command(CLOSE, sample(0.0))
    fingers.begin_episode()
    np.testing.assert_allclose(fingers.command(STAY, sample(0.04)), [0.04, 0.04])


def test_a_gripper_is_declared_within_its_limits_and_with_its_action() -> None:
    limits = JointLimits(FINGERS, np.zeros(2), np.full(2, 0.04), np.ones(2), np.ones(2))
    wide = GripperSpec(FINGERS, (0.0, 0.0), (0.08, 0.08))
    with pytest.raises(ValueError, match="opened positions \\[0.08, 0.08\\] lie outside"):
        Gripper(wide, limits, np.array([7, 8]), PERIOD)
    PandaGrip().check()

    class ArmOnly(PandaGrip):
        def __init__(self) -> None:
            super().__init__()
            self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (7,))

    with pytest.raises(ValueError, match="has a gripper: action_space must be Dict\\(arm=Box"):
        ArmOnly().check()

    class CommandedFingers(PandaGrip):
        command_joints = tuple(JOINTS)

    with pytest.raises(ValueError, match="must be among joint_names and not among the arm's"):
        CommandedFingers().check()
    assert PandaGrip().action_row_shape == (8,) and PandaGrip().choices == 3


def make(**config: Any) -> tuple[RobotDriver, Host, Clock]:
    host, clock = Host(), Clock()
    driver = RobotDriver(PandaGrip(), BoundaryConfig(ramp_in_time=0.0, **config), 0, host, clock,
                         release=estop.ReleaseCheck("/robot_0", RUN_KEY.public))
    driver.start()
    return driver, host, clock


def state(driver: RobotDriver, stamp: float, fingers: float = 0.04) -> None:
    driver.on_joint_state(stamp, JOINTS, list(sample(fingers).position), [0.0] * 9, [])


def started() -> tuple[RobotDriver, Host, Clock]:
    """A driver of PandaGrip whose first observation is out (reset by service)."""
    driver, host, clock = make()
    state(driver, 0.0)
    driver.reset_answered(answer(host))
    assert driver.loop.phase == ACTING
    host.events.clear()
    return driver, host, clock


def test_homing_opens_the_gripper_as_it_moves_the_arm() -> None:
    driver, host, _ = make(reset="homing")
    state(driver, 0.0, fingers=0.0)  # the arm away from the ready pose, the gripper closed
    assert host.kinds() == ["grip", "send"]
    np.testing.assert_allclose(host.of("grip")[0], [STEP, STEP])  # opening, one step


def test_each_action_sends_the_fingers_before_the_arm_and_stores_the_choice() -> None:
    driver, host, _ = started()
    driver.on_action(np.append(np.full(7, 0.5), CLOSE))
    assert host.kinds() == ["grip", "send"]
    np.testing.assert_allclose(host.of("grip")[0], [0.04 - STEP] * 2)
    assert driver.interventions["gripper change per period limited"] == 1  # reported, not silent
    latest = driver.loop.latest
    assert latest is not None
    driver.on_joint_state(latest.stamp + 0.05, JOINTS, list(latest.position), [0.0] * 9, [])
    driver.on_action(np.append(np.zeros(7), STAY))  # the transition goes out after its command
    [transition] = host.of("transition")
    assert transition.action.shape == (8,) and transition.action[-1] == CLOSE


def test_every_hold_holds_the_fingers_too_and_a_forged_release_moves_nothing() -> None:
    driver, host, clock = started()
    driver.on_estop(True)
    assert host.kinds()[:2] == ["grip", "send"] and driver.safety.interventions[ESTOP] == 1
    held = host.of("grip")[0]
    host.events.clear()
    # An attacker: actions while engaged move nothing; a release not signed with the run's key
    # releases nothing.
    driver.on_action(np.append(np.ones(7), OPEN))
    challenge = driver.release_check.challenge
    forged = estop.release_text(SigningKey(bytes(32)), "/robot_0", challenge)
    assert not driver.release(forged) and not driver.on_estop(False)
    assert "grip" not in host.kinds() and "send" not in host.kinds()
    assert driver.release(estop.release_text(RUN_KEY, "/robot_0", challenge))
    driver.resume()
    driver.on_action(np.append(np.zeros(7), STAY))
    np.testing.assert_allclose(host.of("grip")[-1], held)  # stay: still where they were held
    # No joint state after that command within the deadline: arm and fingers held.
    host.events.clear()
    clock.now += 1.0
    driver.check_deadline()
    assert host.kinds()[:2] == ["grip", "send"] and driver.safety.interventions[TIMEOUT] == 1
    host.events.clear()
    driver.close()
    assert host.kinds() == ["grip", "send"]


def test_the_boundary_declares_the_gripper_to_sim_robot() -> None:
    from rl_bringup.plan.robot_plan import sim_robot_parameters

    parameters: dict[str, Any] = sim_robot_parameters("panda_grip:PandaGrip", 0, False)
    assert parameters["gripper_joints"] == list(FINGERS)
    assert parameters["gripper_controller"] == "gripper_controller"
    assert parameters["command_joints"] == JOINTS[:7]


def test_random_first_actions_choose_a_gripper_choice() -> None:
    from rl_core.acting.stepping import Stepper

    stepper = Stepper([], random_steps=10, rng=np.random.default_rng(0))
    rows = [stepper.boundary_actions(np.zeros((1, 8), np.float32), 0, None, 3)[0]
            for _ in range(30)]
    assert {float(row[-1]) for row in rows} == {0.0, 1.0, 2.0}
    assert all(np.all(np.abs(row[:-1]) <= 1.0) for row in rows)
