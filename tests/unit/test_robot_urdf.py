"""``rl_core.robot.urdf``: parsing, limits, and forward kinematics against pybullet's."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pybullet
import pybullet_data
import pytest
from pybullet_utils.bullet_client import BulletClient

from rl_core.robot.urdf import UrdfModel

pytestmark = pytest.mark.unit

KUKA_URDF = os.path.join(pybullet_data.getDataPath(), "kuka_iiwa", "model.urdf")
CARTPOLE_URDF = os.path.join(pybullet_data.getDataPath(), "cartpole.urdf")
KUKA_JOINTS = tuple(f"lbr_iiwa_joint_{i}" for i in range(1, 8))

#: A three-link arm with every supported joint type, small enough to check by hand.
ARM = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="slide"/>
  <link name="upper"/>
  <link name="tool"/>
  <link name="wheel"/>
  <joint name="rail" type="prismatic">
    <parent link="base"/><child link="slide"/>
    <axis xyz="0 0 2"/>
    <limit lower="-0.5" effort="0" velocity="1.5"/>
  </joint>
  <joint name="shoulder" type="revolute">
    <parent link="slide"/><child link="upper"/>
    <origin xyz="0 0 1"/>
    <axis xyz="0 1 0"/>
    <limit lower="0" upper="0" effort="20" velocity="2"/>
  </joint>
  <joint name="flange" type="fixed">
    <parent link="upper"/><child link="tool"/>
    <origin xyz="1 0 0" rpy="0 0 1.5707963267948966"/>
  </joint>
  <joint name="spin" type="continuous">
    <parent link="tool"/><child link="wheel"/>
    <limit effort="3" velocity="4"/>
  </joint>
  <transmission name="ignored"><joint name="rail"/></transmission>
</robot>
"""


@pytest.fixture(scope="module")
def kuka() -> UrdfModel:
    return UrdfModel.from_file(KUKA_URDF)


@pytest.fixture
def kuka_bullet() -> Iterator[tuple[BulletClient, int]]:
    """Pybullet's iiwa, loaded as rl_core.envs.base loads it (DIRECT, fixed base at 0)."""
    client = BulletClient(connection_mode=pybullet.DIRECT)
    try:
        robot = client.loadURDF(KUKA_URDF, basePosition=[0.0, 0.0, 0.0], useFixedBase=True)
        yield client, robot
    finally:
        client.disconnect()


# --- structure ------------------------------------------------------------------------------


def test_kuka_structure(kuka: UrdfModel) -> None:
    assert kuka.name == "lbr_iiwa"
    assert kuka.root_link == "lbr_iiwa_link_0"
    assert kuka.movable_joint_names() == KUKA_JOINTS
    assert [joint.name for joint in kuka.movable_joints()] == list(KUKA_JOINTS)
    joint = kuka.joint("lbr_iiwa_joint_2")
    assert (joint.type, joint.parent, joint.child) == ("revolute", "lbr_iiwa_link_1",
                                                       "lbr_iiwa_link_2")
    assert joint.origin_xyz == (0.0, 0.0, 0.2025)
    assert joint.origin_rpy == pytest.approx((math.pi / 2, 0.0, math.pi), abs=1e-10)
    assert joint.axis == (0.0, 0.0, 1.0)
    assert [j.name for j in kuka.chain("lbr_iiwa_link_7")] == list(KUKA_JOINTS)
    assert kuka.chain("lbr_iiwa_link_0") == ()


def test_defaults_fixed_joints_and_ignored_tags() -> None:
    arm = UrdfModel.from_string(ARM)
    assert arm.root_link == "base"
    assert arm.movable_joint_names() == ("rail", "shoulder", "spin")
    assert [joint.name for joint in arm.joints] == ["rail", "shoulder", "flange", "spin"]
    spin = arm.joint("spin")
    assert spin.axis == (1.0, 0.0, 0.0)  # the URDF default
    assert spin.origin_xyz == spin.origin_rpy == (0.0, 0.0, 0.0)
    assert arm.joint("rail").axis == (0.0, 0.0, 1.0)  # normalised
    assert not arm.joint("flange").movable


# --- limits ---------------------------------------------------------------------------------


def test_kuka_limits(kuka: UrdfModel) -> None:
    limits = kuka.limits()
    assert limits.names == KUKA_JOINTS
    wide, narrow, last = 2.96705972839, 2.09439510239, 3.05432619099
    np.testing.assert_allclose(limits.upper, [wide, narrow, wide, narrow, wide, narrow, last])
    np.testing.assert_allclose(limits.lower, -limits.upper)
    np.testing.assert_array_equal(limits.velocity, np.full(7, 10.0))
    np.testing.assert_array_equal(limits.effort, np.full(7, 300.0))


def test_cartpole_limits_in_the_order_asked() -> None:
    cartpole = UrdfModel.from_file(CARTPOLE_URDF)
    assert cartpole.movable_joint_names() == ("slider_to_cart", "cart_to_pole")
    limits = cartpole.limits(["cart_to_pole", "slider_to_cart"])
    assert limits.names == ("cart_to_pole", "slider_to_cart")
    # The pole's joint is continuous and gives no <limit>: unbounded everywhere.
    np.testing.assert_array_equal(limits.lower, [-math.inf, -15.0])
    np.testing.assert_array_equal(limits.upper, [math.inf, 15.0])
    np.testing.assert_array_equal(limits.velocity, [math.inf, 5.0])
    np.testing.assert_array_equal(limits.effort, [math.inf, 1000.0])


def test_missing_and_zero_limits_are_infinite() -> None:
    limits = UrdfModel.from_string(ARM).limits()
    # rail: lower only, effort 0; shoulder: lower = upper = 0 (the URDF default, "not given");
    # spin: continuous.
    np.testing.assert_array_equal(limits.lower, [-0.5, -math.inf, -math.inf])
    np.testing.assert_array_equal(limits.upper, [math.inf, math.inf, math.inf])
    np.testing.assert_array_equal(limits.velocity, [1.5, 2.0, 4.0])
    np.testing.assert_array_equal(limits.effort, [math.inf, 20.0, 3.0])


@pytest.mark.parametrize(("names", "match"), [
    (["elbow"], "no joint 'elbow'"),
    (["flange"], "fixed"),
])
def test_limits_reject_unknown_and_fixed_joints(names: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        UrdfModel.from_string(ARM).limits(names)


# --- forward kinematics ---------------------------------------------------------------------


def test_kuka_end_effector_matches_pybullet(kuka: UrdfModel,
                                            kuka_bullet: tuple[BulletClient, int]) -> None:
    client, robot = kuka_bullet
    infos = [client.getJointInfo(robot, i) for i in range(client.getNumJoints(robot))]
    indices = {info[1].decode(): index for index, info in enumerate(infos)}
    link_index = next(index for index, info in enumerate(infos)
                      if info[12].decode() == "lbr_iiwa_link_7")
    limits = kuka.limits()
    rng = np.random.default_rng(7)
    for _ in range(50):
        positions = rng.uniform(limits.lower, limits.upper)
        for name, position in zip(KUKA_JOINTS, positions, strict=True):
            client.resetJointState(robot, indices[name], float(position))
        state = client.getLinkState(robot, link_index, computeForwardKinematics=True)
        # Index 4 is the world position of the URDF link frame (0 is the centre of mass).
        expected = np.asarray(state[4])
        np.testing.assert_allclose(kuka.link_position("lbr_iiwa_link_7", positions), expected,
                                   atol=1e-6)
        by_name = dict(zip(KUKA_JOINTS, positions.tolist(), strict=True))
        transform = kuka.forward_kinematics("lbr_iiwa_link_7", by_name)
        np.testing.assert_allclose(transform[:3, 3], expected, atol=1e-6)
        rotation = np.asarray(client.getMatrixFromQuaternion(state[5])).reshape(3, 3)
        np.testing.assert_allclose(transform[:3, :3], rotation, atol=1e-6)


def test_position_jacobian_is_the_derivative_of_forward_kinematics(kuka: UrdfModel) -> None:
    limits = kuka.limits()
    rng = np.random.default_rng(3)
    step = 1e-6
    for _ in range(20):
        positions = rng.uniform(limits.lower, limits.upper)
        jacobian = kuka.position_jacobian("lbr_iiwa_link_7", positions, KUKA_JOINTS)
        assert jacobian.shape == (3, 7)
        for column in range(7):
            moved = positions.copy()
            moved[column] += step
            change = (kuka.link_position("lbr_iiwa_link_7", moved, KUKA_JOINTS)
                      - kuka.link_position("lbr_iiwa_link_7", positions, KUKA_JOINTS)) / step
            np.testing.assert_allclose(jacobian[:, column], change, atol=1e-5)
    # Joints below the link move it; the hand's own joint turns it about its origin's axis.
    wrist = kuka.position_jacobian("lbr_iiwa_link_4", np.zeros(7), KUKA_JOINTS)
    assert np.all(wrist[:, 4:] == 0.0) and np.abs(wrist[:, :3]).sum() > 0.0


def test_position_jacobian_of_a_prismatic_joint_is_its_axis() -> None:
    model = UrdfModel.from_file(CARTPOLE_URDF)
    names = model.movable_joint_names()
    slider = next(j.name for j in model.movable_joints() if j.type == "prismatic")
    jacobian = model.position_jacobian("cart", [0.3, 0.2], names)
    np.testing.assert_allclose(jacobian[:, names.index(slider)], model.joint(slider).axis)
    assert np.all(jacobian[:, 1 - names.index(slider)] == 0.0)  # the pole's hinge: off the chain
    with pytest.raises(ValueError, match="needs the position"):
        model.position_jacobian("pole", [0.3], [slider])


def test_fk_by_hand() -> None:
    arm = UrdfModel.from_string(ARM)
    # rail up 0.5, shoulder pitched 90 degrees about +y: the 1 m upper arm points down (-z);
    # the tool frame is then yawed 90 degrees; spin turns about the tool's x.
    positions = {"rail": 0.5, "shoulder": math.pi / 2, "spin": 0.3}
    np.testing.assert_allclose(arm.link_position("tool", positions), [0.0, 0.0, 0.5], atol=1e-12)
    np.testing.assert_allclose(arm.link_position("upper", positions), [0.0, 0.0, 1.5])
    np.testing.assert_allclose(arm.link_position("base", {}), [0.0, 0.0, 0.0])
    tool = arm.forward_kinematics("tool", positions)
    np.testing.assert_allclose(tool[:3, 0], [0.0, 1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(tool[3], [0.0, 0.0, 0.0, 1.0])
    # An array goes with joint_names, or defaults to the movable joints' order.
    np.testing.assert_allclose(arm.forward_kinematics("wheel", [0.5, math.pi / 2, 0.3]),
                               arm.forward_kinematics("wheel", positions))
    np.testing.assert_allclose(
        arm.forward_kinematics("wheel", np.array([0.3, 0.5, math.pi / 2]),
                               joint_names=["spin", "rail", "shoulder"]),
        arm.forward_kinematics("wheel", positions))


@pytest.mark.parametrize(("link", "positions", "joint_names", "match"), [
    ("gripper", {}, None, "no link 'gripper'"),
    ("upper", {"rail": 0.0}, None, r"needs the positions of \['shoulder'\]"),
    ("upper", {"rail": 0.0, "shoulder": 0.0, "elbow": 1.0}, None, "no joints.*elbow"),
    ("upper", [0.0, 0.0], None, "expected 3 joint positions"),
    ("upper", [0.0], ["rail", "shoulder"], "expected 2 joint positions"),
    ("upper", [0.0, 0.0], ["rail", "elbow"], "no joints.*elbow"),
])
def test_fk_errors(link: str, positions: object, joint_names: list[str] | None,
                   match: str) -> None:
    with pytest.raises(ValueError, match=match):
        UrdfModel.from_string(ARM).forward_kinematics(link, positions,  # type: ignore[arg-type]
                                                      joint_names)


def test_fk_rejects_floating_joints() -> None:
    text = ARM.replace('type="continuous"', 'type="floating"')
    with pytest.raises(ValueError, match="floating"):
        UrdfModel.from_string(text).forward_kinematics("wheel", {"rail": 0, "shoulder": 0,
                                                                  "spin": 0})


# --- errors ---------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="URDF file not found"):
        UrdfModel.from_file(tmp_path / "absent.urdf")


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.urdf"
    broken.write_text("<robot><link name='a'></robot>", encoding="utf-8")
    with pytest.raises(ValueError, match=r"malformed URDF .*broken\.urdf: not valid XML"):
        UrdfModel.from_file(broken)


def _joint(body: str, extra_links: str = "") -> str:
    return (f'<robot name="r"><link name="a"/><link name="b"/>{extra_links}'
            f'<joint name="j" type="revolute"><parent link="a"/><child link="b"/>{body}</joint>'
            '</robot>')


@pytest.mark.parametrize(("text", "match"), [
    ("not xml at all", "not valid XML"),
    ("<sdf/>", "root element must be <robot>"),
    ('<robot name="r"/>', "no <link>"),
    ('<robot name="r"><link/></robot>', "<link> has no 'name'"),
    ('<robot><link name="a"/><link name="a"/></robot>', "link name 'a' appears twice"),
    ('<robot><link name="a"/><link name="b"/><joint name="j"><parent link="a"/>'
     '<child link="b"/></joint></robot>', "joint 'j' has no 'type'"),
    (_joint("").replace('"revolute"', '"hinge"'), "type must be one of"),
    (_joint("").replace('<parent link="a"/>', ""), "joint 'j' has no <parent>"),
    (_joint("").replace('<child link="b"/>', '<child/>'), "<child> has no 'link'"),
    (_joint("").replace('link="b"', 'link="c"'), "child link 'c' is not a <link>"),
    (_joint('<origin xyz="1 2"/>'), "xyz='1 2' must be three finite numbers"),
    (_joint('<origin rpy="0 0 x"/>'), "rpy='0 0 x' must be three finite numbers"),
    (_joint('<axis xyz="0 0 0"/>'), "axis must not be zero"),
    (_joint('<limit lower="1" upper="-1"/>'), "lower 1.0 is above upper -1.0"),
    (_joint('<limit velocity="fast"/>'), "velocity='fast' must be a finite number"),
    (_joint("", '<link name="c"/>'), "exactly one root link"),
    (_joint("", '<joint name="k" type="fixed"><parent link="a"/><child link="b"/></joint>'),
     "link 'b' is the child of two joints"),
    ('<robot><link name="a"/><link name="b"/><link name="c"/>'
     '<joint name="j" type="fixed"><parent link="b"/><child link="c"/></joint>'
     '<joint name="k" type="fixed"><parent link="c"/><child link="b"/></joint></robot>',
     "form a loop"),
])
def test_malformed_urdf(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        UrdfModel.from_string(text)


def test_unknown_joint_lists_the_joints() -> None:
    with pytest.raises(ValueError, match="no joint 'elbow'; its joints are rail, shoulder"):
        UrdfModel.from_string(ARM).joint("elbow")


def test_imports_neither_rclpy_nor_pybullet() -> None:
    code = ("import sys, rl_core.robot.urdf; "
            "assert not {'rclpy', 'pybullet'} & set(sys.modules), sorted(sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
