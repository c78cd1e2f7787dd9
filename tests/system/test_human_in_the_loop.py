"""People in the loop at the robot boundary (docs/human_in_the_loop.md).

* Demonstrations: the scripted KukaReach expert drives a ros2_control robot (the policy's
  ``expert:=true``), ``rl-bringup record`` keeps its ``/experience``, and a second run trains
  with ``demos:=`` the recording, every batch half from it.
* An operator's verdict: with ``operator_success:=true`` a ``std_msgs/Bool`` on the robot's
  ``operator_success`` ends the episode in flight as a success.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import rclpy
from std_msgs.msg import Bool

from rl_core.demos import load_demonstrations
from tests.integration.deployments import tool_argv
from tests.processes import Child
from tests.system.test_training_modes import finish, launch

pytestmark = pytest.mark.system
KUKA = ("config:=kuka_reach", "robot_interface:=ros2_control")
#: The expert's run: one robot, no random actions, 400 steps (about 38 reached targets).
EXPERT_STEPS = 400


def test_expert_demonstrations_recorded_at_the_boundary_train_a_run(tmp_path: Path,
                                                                    ros_env) -> None:
    recording = tmp_path / "demos.mcap"
    recorder = Child([*tool_argv("record"), "topics:=/experience", f"output:={recording}",
                      f"domain_id:={ros_env['ROS_DOMAIN_ID']}", "wait:=120"], env=ros_env)
    try:
        expert = launch("colocated", tmp_path / "expert", ros_env, *KUKA, "expert:=true",
                        "expert_noise:=0.1", "random_steps:=0", f"total_env_steps:={EXPERT_STEPS}",
                        "learning_starts:=100", "eval_episodes:=2")
        assert finish(expert, 300.0) == 0, expert.output()[-4000:]
    finally:
        recorded = recorder.stop(grace_s=20.0)
    assert recorded == 0, recorder.output()
    assert any("acting with the scripted expert of rl_ros2/KukaReach-v0" in line
               for line in expert.lines), expert.output()[-3000:]

    demos = load_demonstrations(str(recording), (23,), (7,))
    # The recorder subscribed before the robot stepped: it kept (nearly) every transition, and
    # the expert reached every target it was given well within an episode's 100 steps.
    assert len(demos) >= 0.9 * EXPERT_STEPS, recorder.output()
    assert demos.episodes >= 20 and not demos.truncated.any()
    assert demos.terminated.sum() == demos.episodes

    run = launch("colocated", tmp_path / "train", ros_env, *KUKA, f"demos:={recording}",
                 "total_env_steps:=1500", "learning_starts:=500", "random_steps:=500",
                 "eval_episodes:=2")
    assert finish(run, 300.0) == 0, run.output()[-4000:]
    loaded = f"demonstrations: {len(demos)} transitions ({demos.episodes} episodes) from " \
             f"{recording}; 50% of every batch is drawn from them"
    assert any(loaded in line for line in run.lines), run.output()[-3000:]
    result = json.loads((tmp_path / "train" / "run" / "result.json").read_text())
    assert result["env_steps"] >= 1500 and result["updates"] > 0, result


def test_an_operator_ends_episodes_as_successes(tmp_path: Path, ros_env) -> None:
    run = launch("colocated", tmp_path, ros_env, "robot_interface:=ros2_control",
                 "operator_success:=true", "total_env_steps:=1500", "eval_episodes:=2")
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("operator", context=context)
    verdict = node.create_publisher(Bool, "/robot_0/operator_success", 10)
    stop = threading.Event()

    def press() -> None:  # the operator presses "success" twice a second
        while not stop.wait(0.5):
            verdict.publish(Bool(data=True))

    presser = threading.Thread(target=press, daemon=True)
    presser.start()
    try:
        assert run.wait_for_line(lambda line: "counts as a success" in line, 120.0), \
            run.output()[-3000:]
    finally:
        stop.set()
        presser.join()
        node.destroy_node()
        rclpy.shutdown(context=context)
    assert finish(run, 300.0) == 0, run.output()[-4000:]
    said = [line for line in run.lines if "operator: episode" in line]
    assert said and all("counts as a success" in line for line in said), said
