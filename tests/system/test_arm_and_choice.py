"""A user's env whose action is a ``Dict`` of a motion (``Box``) and a gripper (``Discrete(3)``:
close, stay, open) learns through the nodes in every mode (issue 43): the plan takes the task,
the action travels as the arm's values then the gripper's index, and the trainer learns it with
SAC for the arm and a choice critic for the gripper (rl_core.algorithms.hybrid_sac). The env,
``user_env_module:PointGrip-v0``, lives outside the project (tests/system/user_packages).

Each run stops at its first periodic evaluation whose mean return meets :data:`TARGET` within
:data:`BUDGET` transitions. Over 200 episodes of a proportional motion, a gripper left open
scores -48 on average, one kept closed all the way -7.8, one opened until the goal -3.8; random
play -53. About 30 s per mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.test_own_robot_and_env import user_env
from tests.system.test_training_modes import train_to_target

pytestmark = pytest.mark.system
#: A mean evaluation return that needs the point brought to its goal and the gripper closed there
#: (at -6, 1 of 5 runs of the three modes missed it within the budget: one mode's first
#: evaluation to meet it came at 16,044).
TARGET = -10.0
#: Transitions a run may take to meet it (measured: docs/results.md#learning-test-failure-rates).
BUDGET = 16000
ARGUMENTS = ("task:=user_env_module:PointGrip-v0", f"total_env_steps:={BUDGET}",
             "learning_starts:=500", "random_steps:=500", "num_envs:=2", "eval_period:=1000",
             "eval_episodes:=10", f"target_return:={TARGET:g}", "stop_at_target:=true")


@pytest.mark.parametrize("mode", ["colocated", "decoupled", "hybrid"])
def test_an_arm_and_a_gripper_learn_through_the_nodes(mode: str, tmp_path: Path, ros_env
                                                      ) -> None:
    meta = train_to_target(mode, tmp_path, user_env(ros_env), BUDGET, *ARGUMENTS)
    assert meta["algorithm"] == "hybrid_sac" and meta["choices"] == 3, meta
