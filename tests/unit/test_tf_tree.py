"""The robot's TF tree (rl_core.robot.tf_tree): static vs moving joints, one parent per link,
the frame prefix, and the transform of a joint at a known position."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rl_core.robot.description import ROBOTS
from rl_core.robot.tf_tree import (
    FrameTransform,
    TfTree,
    matrix_from_quaternion,
    parents_of,
    quaternion_from_matrix,
)
from rl_core.robot.urdf import UrdfModel

pytestmark = pytest.mark.unit

#: base -(fixed, +0.1 z)-> mount -(revolute about z, +0.2 x)-> arm -(prismatic along x, +0.5 x)->
#: slider -(fixed, yaw 90 deg)-> tool; the base's centre of mass sits 0.3 m above its frame.
URDF = """<robot name="toy">
  <link name="base"><inertial><origin xyz="0 0 0.3"/><mass value="1"/></inertial></link>
  <link name="mount"/> <link name="arm"/> <link name="slider"/> <link name="tool"/>
  <joint name="base_to_mount" type="fixed">
    <parent link="base"/><child link="mount"/><origin xyz="0 0 0.1"/>
  </joint>
  <joint name="shoulder" type="revolute">
    <parent link="mount"/><child link="arm"/><origin xyz="0.2 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/>
  </joint>
  <joint name="extend" type="prismatic">
    <parent link="arm"/><child link="slider"/><origin xyz="0.5 0 0"/><axis xyz="1 0 0"/>
    <limit lower="0" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="slider_to_tool" type="fixed">
    <parent link="slider"/><child link="tool"/><origin rpy="0 0 1.5707963267948966"/>
  </joint>
</robot>"""


def tree(prefix: str = "robot_2/") -> TfTree:
    return TfTree.from_urdf(URDF, prefix)


def test_fixed_joints_are_static_and_movable_ones_move() -> None:
    toy = tree()
    assert [j.name for j in toy.static_joints] == ["base_to_mount", "slider_to_tool"]
    assert [j.name for j in toy.moving_joints] == ["shoulder", "extend"]
    static = toy.static_transforms()
    assert [(t.parent, t.child) for t in static] == [("robot_2/base", "robot_2/mount"),
                                                     ("robot_2/slider", "robot_2/tool")]
    moving = toy.moving_transforms(["shoulder", "extend"], [0.0, 0.0])
    assert [(t.parent, t.child) for t in moving] == [("robot_2/mount", "robot_2/arm"),
                                                     ("robot_2/arm", "robot_2/slider")]
    # No joint is on both: a fixed joint never reaches /tf.
    assert not {t.child for t in static} & {t.child for t in moving}


def test_every_link_has_exactly_one_parent_and_the_root_hangs_from_world() -> None:
    toy = tree()
    everything = [toy.root_transform((0.0, 3.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
                  *toy.static_transforms(), *toy.moving_transforms(["shoulder", "extend"],
                                                                   [0.1, 0.2])]
    parents = parents_of(everything)
    assert set(parents) == {f"robot_2/{link}" for link in toy.model.links}
    assert parents["robot_2/base"] == "world"
    with pytest.raises(ValueError, match="two parents"):
        parents_of([*everything, FrameTransform("world", "robot_2/arm", (0, 0, 0), (0, 0, 0, 1))])


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_our_robots_trees_cover_every_link_once(robot: str) -> None:
    model = TfTree.from_file(ROBOTS[robot].urdf_path, "robot_0/")
    names = [joint.name for joint in model.moving_joints]
    transforms = [model.root_transform((0, 0, 0), (0, 0, 0, 1)), *model.static_transforms(),
                  *model.moving_transforms(names, np.zeros(len(names)))]
    assert sorted(parents_of(transforms)) == sorted(f"robot_0/{link}"
                                                    for link in model.model.links)


def test_the_frame_prefix_names_every_frame_but_world() -> None:
    bare, prefixed = tree(""), tree("robot_7/")
    assert bare.root_frame == "base" and prefixed.root_frame == "robot_7/base"
    assert {t.child for t in bare.static_transforms()} == {"mount", "tool"}
    assert prefixed.root_transform((0, 0, 0), (0, 0, 0, 1)).parent == "world"
    with pytest.raises(ValueError, match="is the world frame"):
        TfTree(UrdfModel("w", ["world"], []), "")


def test_a_revolute_joint_at_a_known_angle() -> None:
    arm = tree().moving_transforms(["shoulder"], [math.pi / 2])
    assert len(arm) == 1
    # origin (0.2, 0, 0), then a quarter turn about z: quaternion (0, 0, sin 45, cos 45).
    assert arm[0].translation == pytest.approx((0.2, 0.0, 0.0))
    half = math.sqrt(0.5)
    assert arm[0].rotation == pytest.approx((0.0, 0.0, half, half))
    expected = np.array([[0, -1, 0, 0.2], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], float)
    np.testing.assert_allclose(arm[0].matrix(), expected, atol=1e-12)


def test_a_prismatic_joint_at_a_known_extension() -> None:
    (slider,) = tree().moving_transforms(["extend"], [0.25])
    assert slider.translation == pytest.approx((0.75, 0.0, 0.0))
    assert slider.rotation == pytest.approx((0.0, 0.0, 0.0, 1.0))


def test_the_moving_transforms_compose_to_forward_kinematics() -> None:
    toy = tree("")
    positions = {"shoulder": 0.7, "extend": 0.4}
    frames = {"base": np.eye(4)}
    transforms = toy.static_transforms() + toy.moving_transforms(list(positions),
                                                                 list(positions.values()))
    while len(frames) < len(toy.model.links):
        for t in transforms:
            if t.parent in frames:
                frames[t.child] = frames[t.parent] @ t.matrix()
    for link in toy.model.links:
        np.testing.assert_allclose(frames[link], toy.model.forward_kinematics(link, positions),
                                   atol=1e-12)


def test_names_joint_states_carry_that_are_not_moving_joints_are_ignored() -> None:
    moving = tree().moving_transforms(["gripper", "base_to_mount", "extend"], [1.0, 2.0, 0.0])
    assert [t.child for t in moving] == ["robot_2/slider"]
    with pytest.raises(ValueError, match="2 joint names but 1 positions"):
        tree().moving_transforms(["shoulder", "extend"], [0.0])
    with pytest.raises(ValueError, match="not finite"):
        tree().moving_transforms(["shoulder"], [math.nan])


def test_a_base_pose_of_the_centre_of_mass_puts_the_root_link_frame_below_it() -> None:
    toy = tree()
    quarter = (0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5))
    link_frame = toy.root_transform((1.0, 2.0, 0.5), quarter)
    assert link_frame.translation == pytest.approx((1.0, 2.0, 0.5))
    com = toy.root_transform((1.0, 2.0, 0.5), quarter, of_inertial_frame=True)
    assert com.translation == pytest.approx((1.0, 2.0, 0.2))  # 0.3 m lower, rotation about z
    assert com.rotation == pytest.approx(quarter)


@pytest.mark.parametrize("rpy", [(0.0, 0.0, 0.0), (math.pi, 0.0, 0.0), (0.0, math.pi, 0.0),
                                 (0.0, 0.0, math.pi), (0.3, -1.2, 2.9), (3.0, 0.1, -0.2)])
def test_quaternions_round_trip_through_matrices(rpy: tuple[float, float, float]) -> None:
    model = UrdfModel.from_string(
        f'<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="fixed">'
        f'<parent link="a"/><child link="b"/><origin rpy="{rpy[0]} {rpy[1]} {rpy[2]}"/>'
        f'</joint></robot>')
    rotation = model.forward_kinematics("b", {})[:3, :3]
    quaternion = quaternion_from_matrix(rotation)
    assert math.isclose(sum(v * v for v in quaternion), 1.0) and quaternion[3] >= 0.0
    np.testing.assert_allclose(matrix_from_quaternion(quaternion), rotation, atol=1e-12)
