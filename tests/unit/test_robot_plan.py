"""Plans with robot_interface:=ros2_control: a sim_robot per robot, set up from the task."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rl_bringup.plan.arguments import plan_from_arguments
from rl_bringup.plan.deployment import PlanError, make_plan
from rl_bringup.plan.layouts import MODES

pytestmark = pytest.mark.unit


def _sim_robots(plan) -> list:
    return [process for process in plan.processes if process.executable == "sim_robot"]


@pytest.mark.parametrize("mode", MODES)
def test_ros2_control_adds_one_sim_robot_per_robot_in_its_namespace(mode: str) -> None:
    plan = make_plan(mode, 2, domain_id=5, robot_interface="ros2_control")
    robots = _sim_robots(plan)
    assert [process.namespace for process in robots] == ["/robot_0", "/robot_1"]
    assert all(process.respawn and not process.required for process in robots)
    first = robots[0].parameters
    assert first["robot"] == "cartpole" and first["command_interface"] == "effort"
    assert first["controller"] == "effort_controller" and first["control_period"] == 0.02
    assert first["command_joints"] == ["slider_to_cart"] and first["mode"] == "lockstep"
    # One clock per graph, as one Gazebo world has one.
    assert [process.parameters["publish_clock"] for process in robots] == [True, False]
    assert all(process.env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" for process in robots)
    # Every learning-side process is told to drive its robot through the boundary.
    simulators = [process for process in plan.processes
                  if any(kind == "simulator" for kind, _ in process.hosted_nodes())]
    assert simulators and all(process.parameters["robot_interface"] == "ros2_control"
                              for process in simulators)


def test_kuka_reach_robots_take_velocity_commands() -> None:
    plan = make_plan("hybrid", 1, config="kuka_reach", domain_id=5,
                     robot_interface="ros2_control")
    parameters = _sim_robots(plan)[0].parameters
    assert parameters["robot"] == "kuka_iiwa" and parameters["command_interface"] == "velocity"
    assert parameters["controller"] == "velocity_controller"
    assert len(parameters["joints"]) == 7


def test_in_process_and_bring_your_own_robot_start_no_sim_robot() -> None:
    assert not _sim_robots(make_plan("colocated", 1, domain_id=5))
    plan = make_plan("colocated", 1, domain_id=5, robot_interface="ros2_control",
                     sim_robot="false", extra_parameters={"reset": "homing"})
    assert not _sim_robots(plan)
    assert plan.processes[0].parameters["robot_interface"] == "ros2_control"


def test_your_own_robot_must_say_how_it_resets_and_give_limits_before_anything_starts(
        ) -> None:
    """The default reset service is sim_robot's: a robot of your own would wait for it at
    "steps 0" for good. A task without a URDF has no limits for the safety layer."""
    with pytest.raises(PlanError, match="reset:=homing .* or reset_service:=NAME"):
        make_plan("colocated", 1, domain_id=5, robot_interface="ros2_control", sim_robot="false")
    make_plan("colocated", 1, domain_id=5, robot_interface="ros2_control", sim_robot="false",
              extra_parameters={"reset_service": "my_driver/reset"})
    user_packages = str(Path(__file__).parents[1] / "system" / "user_packages")
    sys.path.insert(0, user_packages)
    try:
        with pytest.raises(PlanError, match="limits_urdf:=FILE"):
            make_plan("colocated", 1, domain_id=5, robot_interface="ros2_control",
                      sim_robot="false", task="point_reach:PointReach",
                      extra_parameters={"reset": "homing"})
        make_plan("colocated", 1, domain_id=5, robot_interface="ros2_control",
                  sim_robot="false", task="point_reach:PointReach",
                  extra_parameters={"reset": "homing", "limits_urdf": "robot.urdf"})
    finally:
        sys.path.remove(user_packages)


def test_a_simulator_keeps_its_estop_state_in_the_run_directory(tmp_path: Path) -> None:
    plan = make_plan("decoupled", 1, domain_id=5, output_dir=tmp_path,
                     robot_interface="ros2_control")
    simulator = next(process for process in plan.processes if "simulator" in process.name)
    assert simulator.parameters["estop_dir"] == str(tmp_path / "estop")


def test_deployment_arguments_reach_the_plan() -> None:
    plan = plan_from_arguments("colocated", {"robot_interface": "ros2_control",
                                             "use_sim_time": "true", "domain_id": "5",
                                             "task": "rl_ros2/KukaReach-v0"})
    container = plan.processes[0]
    assert container.parameters["use_sim_time"] is True
    assert container.parameters["env_id"] == "rl_ros2/KukaReach-v0"
    assert _sim_robots(plan)[0].parameters["robot"] == "kuka_iiwa"
    assert "use_sim_time" not in _sim_robots(plan)[0].parameters  # it makes the clock


@pytest.mark.parametrize("arguments, message", [
    ({"robot_interface": "gazebo"}, "unknown robot_interface"),
    ({"robot_interface": "ros2_control", "sim_robot": "maybe"}, "sim_robot must be true or false"),
    ({"robot_interface": "ros2_control", "task": "Pendulum-v1"}, "needs a task"),
])
def test_bad_deployment_arguments_say_what_to_fix(arguments: dict, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        plan_from_arguments("colocated", {"domain_id": "5", **arguments})


def test_list_overrides_reach_every_node_of_a_container_without_yaml_aliases() -> None:
    """Rcl refuses parameter files with YAML aliases ("Will not support aliasing")."""
    plan = plan_from_arguments("colocated", {"hidden_sizes": "[64, 64]", "domain_id": "5"})
    document = plan.processes[0].overrides_document()
    assert "&" not in document and "*id" not in document
    assert document.count("- 64") == 2 * 2  # policy and trainer (their networks), two widths each
