"""rl_core.robot.pybullet_robot and rl_core.robot.description: the pybullet robot behind sim_robot
follows the in-process environments' trajectories exactly, and its descriptions carry the
ros2_control tags a controller manager, Gazebo and pybullet read."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pybullet
import pytest
import yaml

from rl_core.envs.cartpole import CartPoleBalanceEnv
from rl_core.envs.kuka_reach import KukaReachEnv
from rl_core.robot.description import (
    GAZEBO_SYSTEM_PLUGIN,
    HARDWARE_PLUGINS,
    ROBOTS,
    JointInterfaces,
    describe_urdf,
    parse_ros2_control,
    robot_description,
    robots_config_directory,
    ros2_control_joints,
)
from rl_core.robot.pybullet_robot import PybulletRobot

pytestmark = pytest.mark.unit
CARTPOLE, KUKA = ROBOTS["cartpole"], ROBOTS["kuka_iiwa"]
KUKA_JOINTS = tuple(f"lbr_iiwa_joint_{i}" for i in range(1, 8))
STEPS = 100


def cartpole_robot(**kwargs: object) -> PybulletRobot:
    settings = dict(command_joints=["slider_to_cart"], max_motor_force=CARTPOLE.max_motor_force)
    settings.update(kwargs)
    return PybulletRobot(CARTPOLE.urdf_path, ["slider_to_cart", "cart_to_pole"], "effort",
                         CARTPOLE.control_period, CARTPOLE.physics_substeps, **settings)


def kuka_robot(interface: str = "velocity") -> PybulletRobot:
    return PybulletRobot(KUKA.urdf_path, None, interface, KUKA.control_period,
                         KUKA.physics_substeps, max_motor_force=KUKA.max_motor_force)


# --- the same trajectories as the in-process environments ---------------------------------------


@pytest.mark.parametrize("case", ["cartpole", "kuka"])
def test_commands_of_action_times_scale_follow_the_environment_exactly(case: str) -> None:
    if case == "cartpole":
        env, robot, scale = CartPoleBalanceEnv(), cartpole_robot(), np.array([10.0])
    else:
        env, robot, scale = KukaReachEnv(), kuka_robot(), np.ones(7)  # max_joint_velocity 1
    rng = np.random.default_rng(7)
    try:
        env.reset(seed=3)
        robot.reset(env.joint_names(), env.joint_positions(), env.joint_velocities())
        assert robot.joint_names == tuple(env.joint_names())
        worst = 0.0
        for _ in range(STEPS):
            action = rng.uniform(-1.0, 1.0, size=scale.shape)
            env.step(action.astype(np.float32))
            robot.command(action.astype(np.float32).astype(np.float64) * scale)
            robot.step()
            position, velocity, _ = robot.state()
            worst = max(worst, float(np.abs(position - env.joint_positions()).max()),
                        float(np.abs(velocity - env.joint_velocities()).max()))
        assert worst <= 1e-9
        # The trajectory went somewhere: the comparison is not between two resting robots.
        assert np.abs(robot.state()[1]).max() > 0.1
    finally:
        env.close()
        robot.close()


# --- commands, state, reset, time ------------------------------------------------------------------


def test_effort_commands_are_clipped_reported_and_the_pole_is_passive() -> None:
    robot = cartpole_robot()
    try:
        robot.command([25.0])
        robot.step()
        position, velocity, effort = robot.state()
        assert effort.tolist() == [10.0, 0.0]  # clipped at max_motor_force; the pole: no motor
        assert velocity[0] > 0.0 and position[0] > 0.0
        assert robot.command_values.tolist() == [10.0]
    finally:
        robot.close()


def test_a_command_holds_until_replaced_and_time_advances_one_period_per_step() -> None:
    robot = kuka_robot()
    try:
        assert robot.sim_time_ns == 0
        robot.command(np.full(7, 0.5))
        for _ in range(5):
            robot.step()
        assert robot.sim_time_ns == 5 * 50_000_000 and robot.step_count == 5
        np.testing.assert_allclose(robot.state()[1], 0.5, atol=0.05)
    finally:
        robot.close()


def test_position_interface_moves_the_joints_to_the_command() -> None:
    robot = kuka_robot("position")
    try:
        target = np.array([0.3, -0.2, 0.1, -0.5, 0.2, 0.4, -0.1])
        robot.command(target)
        for _ in range(60):
            robot.step()
        np.testing.assert_allclose(robot.state()[0], target, atol=0.02)
    finally:
        robot.close()


def test_reset_places_joints_holds_without_stepping_and_empty_means_home() -> None:
    robot = kuka_robot("position")
    try:
        robot.command(np.full(7, 1.0))
        robot.step()
        robot.reset(["lbr_iiwa_joint_2", "lbr_iiwa_joint_4"], [0.4, -1.2], [0.0, 0.3])
        position, velocity, _ = robot.state()
        assert (position[1], position[3], velocity[3]) == pytest.approx((0.4, -1.2, 0.3))
        assert robot.step_count == 1  # a reset does not step or rewind time
        # Position "hold" = where the joints are now, not the old target nor zero.
        np.testing.assert_allclose(robot.command_values, position)
        robot.reset()
        position, velocity, _ = robot.state()
        assert not position.any() and not velocity.any()
    finally:
        robot.close()


def test_velocity_hold_after_reset_is_zero() -> None:
    robot = kuka_robot()
    try:
        robot.command(np.full(7, 0.8))
        robot.step()
        robot.reset(list(KUKA_JOINTS), [0.1] * 7)
        assert not robot.command_values.any()
        robot.step()
        assert np.abs(robot.state()[1]).max() < 0.05
    finally:
        robot.close()


@pytest.mark.parametrize(("call", "message"), [
    (lambda r: r.command([1.0, 2.0]), r"expected 1 effort command\(s\), one per joint of "
                                      r"\['slider_to_cart'\], got 2"),
    (lambda r: r.command([float("nan")]), r"commands must be finite"),
    (lambda r: r.reset(["elbow"], [0.0]), r"reset names: unknown joint\(s\) \['elbow'\]"),
    (lambda r: r.reset(["slider_to_cart"], [0.0, 1.0]), r"one position and one velocity"),
    (lambda r: r.reset(["slider_to_cart"], [float("inf")]), r"must be finite"),
])
def test_bad_commands_and_resets_raise_with_the_reason_and_change_nothing(call, message) -> None:
    robot = cartpole_robot()
    try:
        robot.command([3.0])
        before = robot.state()
        with pytest.raises(ValueError, match=message):
            call(robot)
        assert robot.command_values.tolist() == [3.0]
        for old, new in zip(before, robot.state()):
            np.testing.assert_array_equal(old, new)
    finally:
        robot.close()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"command_interface": "torque"}, r"unknown command interface 'torque'; one of position"),
    ({"joint_names": ["slider_to_cart", "elbow"]}, r"joint_names: unknown joint\(s\) \['elbow'\]"),
    ({"command_joints": ["cart_to_pole", "slider_to_cart", "slider_to_cart"]},
     r"command_joints: a joint is named twice"),
    ({"joint_names": ["slider_to_cart"], "command_joints": ["cart_to_pole"]},
     r"command_joints: unknown joint\(s\) \['cart_to_pole'\]; the joint_names are"),
    ({"max_motor_force": 0.0}, r"max_motor_force must be a positive number"),
    ({"control_period": -1.0}, r"control_period must be a positive number"),
    ({"urdf_path": "/nonexistent/robot.urdf"}, r"URDF file not found"),
])
def test_bad_construction_raises_with_the_reason(kwargs: dict, message: str) -> None:
    settings = {"urdf_path": CARTPOLE.urdf_path, "joint_names": None, "command_interface": "effort",
                "control_period": 0.02, "physics_substeps": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        PybulletRobot(**settings)


def test_an_unparsable_urdf_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.urdf"
    path.write_text("<robot name='x'><link name='a'></robot>")
    with pytest.raises(ValueError, match="pybullet cannot load"):
        PybulletRobot(path)


# --- descriptions -------------------------------------------------------------------------------


EXPECTED_BLOCKS = {
    "cartpole": {"slider_to_cart": ("effort",), "cart_to_pole": ()},
    "kuka_iiwa": {name: ("velocity", "position") for name in KUKA_JOINTS},
}


@pytest.mark.parametrize("robot", sorted(ROBOTS))
@pytest.mark.parametrize("hardware", ["mock", "gazebo", "my_arm_driver/MyArmHardware"])
def test_descriptions_are_urdf_with_the_ros2_control_block_and_the_chosen_plugin(
        robot: str, hardware: str) -> None:
    text = robot_description(robot, hardware, namespace="/robot_3")
    root = ElementTree.fromstring(text)
    assert root.tag == "robot"
    blocks = root.findall("ros2_control")
    assert len(blocks) == 1 and blocks[0].get("name") == robot
    assert blocks[0].get("type") == "system"
    assert blocks[0].findtext("hardware/plugin") == HARDWARE_PLUGINS.get(hardware, hardware)
    joints = parse_ros2_control(text)
    assert {j.name: j.command for j in joints} == EXPECTED_BLOCKS[robot]
    assert all(j.state == ("position", "velocity") for j in joints)
    gazebo = root.find("gazebo/plugin")
    if hardware == "gazebo":
        assert (gazebo.get("filename"), gazebo.get("name")) == GAZEBO_SYSTEM_PLUGIN
        assert Path(gazebo.findtext("parameters")).is_file()
        assert gazebo.findtext("ros/namespace") == "/robot_3"
    else:
        assert gazebo is None
    # Every mesh is an absolute file URI of an existing file.
    meshes = [element.get("filename") for element in root.iter("mesh")]
    assert all(name.startswith("file:///") and Path(name[7:]).is_file() for name in meshes)
    assert len(meshes) == (16 if robot == "kuka_iiwa" else 0)


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_the_ros2_control_block_names_exactly_the_movable_joints_pybullet_sees(robot: str) -> None:
    names = PybulletRobot(ROBOTS[robot].urdf_path, command_interface="position")
    try:
        assert tuple(j.name for j in ros2_control_joints(robot)) == names.joint_names
    finally:
        names.close()


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_pybullet_loads_the_description_with_absolute_meshes_from_anywhere(
        tmp_path: Path, robot: str) -> None:
    path = tmp_path / f"{robot}.urdf"  # far from pybullet_data: relative meshes would not load
    path.write_text(robot_description(robot, "gazebo"))
    client = pybullet.connect(pybullet.DIRECT)
    try:
        body = pybullet.loadURDF(str(path), physicsClientId=client)
        joints = pybullet.getNumJoints(body, physicsClientId=client)
        assert joints == (7 if robot == "kuka_iiwa" else 2)
        shapes = pybullet.getVisualShapeData(body, physicsClientId=client)
        assert len(shapes) >= joints
    finally:
        pybullet.disconnect(client)


def test_describe_urdf_writes_the_block_from_a_joint_list(tmp_path: Path) -> None:
    text = describe_urdf(KUKA.urdf_path, [JointInterfaces("lbr_iiwa_joint_1", ("effort",)),
                                          JointInterfaces("lbr_iiwa_joint_2", ())])
    root = ElementTree.fromstring(text)
    assert root.find("ros2_control").get("name") == "lbr_iiwa"  # the URDF's robot name
    assert root.findtext("ros2_control/hardware/plugin") == "mock_components/GenericSystem"
    assert parse_ros2_control(text) == (JointInterfaces("lbr_iiwa_joint_1", ("effort",)),
                                        JointInterfaces("lbr_iiwa_joint_2", ()))
    with pytest.raises(ValueError, match="unknown command interface"):
        describe_urdf(KUKA.urdf_path, [JointInterfaces("lbr_iiwa_joint_1", ("torque",))])


@pytest.mark.parametrize("hardware", ["", "two words/X", "<plugin>", "noslash"])
def test_an_invalid_hardware_name_is_refused(hardware: str) -> None:
    with pytest.raises(ValueError, match="hardware must be one of mock, gazebo or a ros2_control"):
        robot_description("cartpole", hardware)


def test_an_unknown_robot_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown robot 'ur5'; known robots: cartpole, kuka_iiwa"):
        robot_description("ur5")


def test_controllers_yaml_matches_the_blocks_and_uses_ros2_control_parameter_names() -> None:
    document = yaml.safe_load((robots_config_directory() / "controllers.yaml").read_text())
    manager = document["/**/controller_manager"]["ros__parameters"]
    assert manager["update_rate"] > 0
    assert manager["joint_state_broadcaster"]["type"] == \
        "joint_state_broadcaster/JointStateBroadcaster"
    for controller, robot, interface in (("velocity_controller", "kuka_iiwa", "velocity"),
                                         ("effort_controller", "cartpole", "effort")):
        assert manager[controller]["type"] == "forward_command_controller/ForwardCommandController"
        parameters = document[f"/**/{controller}"]["ros__parameters"]
        assert parameters["interface_name"] == interface
        # The controller claims exactly the joints whose block offers that command interface.
        assert parameters["joints"] == [j.name for j in ros2_control_joints(robot)
                                        if interface in j.command]
        # ...which is sim_robot's default controller name for the robot's own interface.
        assert ROBOTS[robot].command_interface == interface
