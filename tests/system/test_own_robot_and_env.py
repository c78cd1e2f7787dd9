"""A user's own robot, task and environments train by launch arguments alone.

Everything user-side lives outside the project's packages, in ``tests/system/user_packages``,
which the tests put on the run's ``PYTHONPATH`` (nothing is installed):

* ``point_reach:PointReach``: a robot task (two velocity-commanded joints, no URDF, no in-process
  twin), trained on ``point_robot.py``, a few lines of rclpy that this test starts as the robot,
  whose limits ``point_robot.urdf`` gives (``limits_urdf:=``);
* ``user_env_module:UserEnv-v0`` and ``user_env_module:Broken-v0``: gymnasium environments
  registered when their module is imported (gymnasium's ``module:Id`` convention).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from tests.learning import report_outcome
from tests.processes import Child
from tests.system.test_training_modes import finish, launch

pytestmark = pytest.mark.system
USER_PACKAGES = Path(__file__).resolve().parent / "user_packages"
#: The trainer's progress line: episodes so far and the mean of the last (up to 20) returns.
PROGRESS = re.compile(r"\[trainer\]: steps .* episodes (\d+) \| return\(last (\d+)\) (\S+) \|")
#: The window of the trainer's "return(last N)" (rl_core.learning.learner.Learner.recent_returns).
RETURN_WINDOW = 20
#: PointReach's returns are minus the summed distance to the goal over at most 50 steps. Measured
#: over 3 runs: about -28 for the first 20 episodes (half of them random actions) and -4 to -5
#: for the last 20, once the point goes straight to the goal and the episode ends there (a margin
#: of 23 to 24). Without init_alpha:=0.1 the margin was 8. The threshold keeps less than half of
#: the measured margin.
LEARNING_MARGIN = 10.0
#: A small entropy temperature: with PointReach's rewards (about 0.5 per step) the default
#: init_alpha 1.0 keeps the policy nearly random for the whole small budget. The networks are
#: config/cartpole.yaml's (hidden_sizes [64, 64]).
POINT_REACH_ARGUMENTS = ("total_env_steps:=3000", "learning_starts:=500", "random_steps:=500",
                         "init_alpha:=0.1")
#: Gymnasium envs: a small budget; the evaluation is what the test checks.
GYM_ARGUMENTS = ("total_env_steps:=2000", "learning_starts:=500", "random_steps:=500",
                 "eval_episodes:=2")


#: A run on point_robot.py: the user's task, no reset service (homed), its URDF's limits.
OWN_ROBOT_ARGUMENTS = ("robot_interface:=ros2_control", "sim_robot:=false",
                       "task:=point_reach:PointReach", "reset:=homing",
                       f"limits_urdf:={USER_PACKAGES / 'point_robot.urdf'}")


def start_point_robot(env: dict[str, str]) -> Child:
    """point_robot.py in /robot_0, once it is ready (stopped by PID if it is not)."""
    robot = Child([sys.executable, str(USER_PACKAGES / "point_robot.py"), "/robot_0"], env=env)
    if robot.wait_for_line(lambda line: "point robot ready" in line, 60.0) is None:
        robot.stop(grace_s=10.0)
        pytest.fail(f"point_robot.py did not come up:\n{robot.output()}")
    return robot


def user_env(ros_env: dict[str, str]) -> dict[str, str]:
    """The fixture's environment (loopback discovery, the test's domain) with the user's
    packages importable."""
    path = os.pathsep.join(filter(None, (str(USER_PACKAGES), ros_env.get("PYTHONPATH", ""))))
    return {**ros_env, "PYTHONPATH": path}


def progress(lines: list[str]) -> list[tuple[int, int, float]]:
    """``(episodes, window, mean return of the window)`` of every trainer progress line."""
    found = []
    for line in lines:
        match = PROGRESS.search(line)
        if match:
            found.append((int(match[1]), int(match[2]), float(match[3])))
    return found


def assert_no_crash(output: str) -> None:
    assert "Traceback (most recent call last)" not in output, output[-4000:]
    assert "has no attribute 'urdf_path'" not in output, output[-4000:]


def test_own_robot_and_task_train_by_launch_arguments(tmp_path: Path, ros_env) -> None:
    """A robot that is not sim_robot (point_robot.py, no reset service: the boundary homes it)
    and a task module outside src/ train a run end to end."""
    env = user_env(ros_env)
    robot = start_point_robot(env)
    try:
        run = launch("colocated", tmp_path, env, *OWN_ROBOT_ARGUMENTS, *POINT_REACH_ARGUMENTS)
        code = finish(run, 600.0)
    finally:
        robot.stop(grace_s=10.0)
    output = run.output()
    assert code == 0, output[-4000:]
    assert_no_crash(output)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["env_steps"] >= 3000, result
    assert result["updates"] > 0 and result["episodes"] > 0, result
    # No in-process twin (env_id None): the final evaluation is skipped, not failed.
    assert result["eval_returns"] == [], result
    assert len(result["train_returns_recent"]) == RETURN_WINDOW, result  # what it is judged by
    figures = result["robots"]["/robot_0"]
    assert 0.0 < float(figures["command latency p50 ms"]) <= float(
        figures["command latency p99 ms"]), figures
    assert float(figures["control rate hz"]) > 0.0, figures
    # The test's robot is the one that was driven: homing and acting commands, one per period.
    stopped = next(line for line in robot.lines if "point robot stopping after" in line)
    assert int(stopped.split("after ")[1].split()[0]) >= result["env_steps"], stopped
    # What the robot saw at the edges of the run: no change beyond the limit at any time
    # (max_command_change 1.0 x 1 m/s, episode starts included), and a hold once acting ended,
    # within one control period (0.05 s) of the last moving command.
    figures_line = next(line for line in robot.lines if "point robot: largest change" in line)
    match = re.search(r"largest change (\S+), last command \[(.*)\], held after (\S+) s",
                      figures_line)
    assert match, figures_line
    assert float(match[1]) <= 1.0 + 1e-9, figures_line
    assert all(float(value) == 0.0 for value in match[2].split(",")), figures_line
    assert match[3] != "never" and float(match[3]) <= 0.05, figures_line

    returns = progress(run.lines)
    full = [mean for _, window, mean in returns if window == RETURN_WINDOW]
    assert full, f"fewer than {RETURN_WINDOW} episodes reported: {returns}"
    first, last = full[0], full[-1]
    report_outcome("last 20 episodes' mean return - first 20's", last - first, LEARNING_MARGIN)
    assert last >= first + LEARNING_MARGIN, (
        f"mean return of the first {RETURN_WINDOW} episodes {first:.1f}, of the last "
        f"{RETURN_WINDOW} {last:.1f}: no learning beyond a margin of {LEARNING_MARGIN}")


@pytest.mark.parametrize(("mode", "task"), [
    ("colocated", "Pendulum-v1"),
    ("decoupled", "Pendulum-v1"),
    ("colocated", "user_env_module:UserEnv-v0"),
])
def test_any_gymnasium_env_trains_in_process(tmp_path: Path, ros_env, mode: str,
                                             task: str) -> None:
    """Any registered id (module:Id included) trains with the in-process backend; an env
    without a URDF only goes without rviz. Pendulum's actions span [-2, 2] and the policy's
    [-1, 1]: it trains all the same (on half the torque)."""
    run = launch(mode, tmp_path, user_env(ros_env), f"task:={task}", *GYM_ARGUMENTS)
    code = finish(run, 600.0)
    output = run.output()
    assert code == 0, output[-4000:]
    assert_no_crash(output)
    assert "has no robot model (URDF)" in output, output[-4000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["env_steps"] >= 2000 and result["updates"] > 0, result
    assert len(result["eval_returns"]) == 2, result
    assert all(math.isfinite(value) for value in result["eval_returns"]), result
    if task.startswith("user_env_module:"):
        assert result["eval_success_rate"] is not None, result  # from its info["is_success"]


def test_a_run_whose_every_robot_gave_up_ends_with_the_reason(tmp_path: Path, ros_env) -> None:
    """Broken-v0's reset raises, so the simulator crashes at every start: after the
    supervisor's 5 restarts (here ``--respawn-delay 0.5``: delays 0.5, 1, 2, 4, 8 s, about 16 s
    plus six starts, instead of the default's 60 s) the run ends with an error, not a learner
    waiting for experience forever."""
    run = launch("decoupled", tmp_path, user_env(ros_env), "task:=user_env_module:Broken-v0",
                 *GYM_ARGUMENTS, options=("--respawn-delay", "0.5"))
    code = finish(run, 420.0)
    output = run.output()
    assert code is not None, f"the run did not end: {output[-4000:]}"
    assert code != 0, output[-4000:]
    assert "simulator_robot_0 exited with code 1; giving up after 5 restarts" in output, \
        output[-4000:]
    assert ("every robot process (simulator_robot_0) has been given up" in output), \
        output[-4000:]
    # The reason is in the run's output, as the supervisor's message promises.
    assert "BrokenEnv.reset: this environment is broken on purpose" in output


#: A hold must be sent within one control period of the last moving command (PointReach's
#: period) at every end of acting, plus the scheduling of the run's process on a busy 2-core
#: machine. point_robot.py measures between the two commands' DDS source timestamps.
HOLD_WITHIN_S = 0.05 + 0.01
HELD = re.compile(r"point robot: held (\S+) s after the last moving command \(step (\d+);")
MOVING = re.compile(r"point robot: moving again after (\S+) s held")
PAUSED = "acting paused until it reports again"


def longest_hold(robot: Child, start: int) -> tuple[float, float]:
    """``(how long, how late)`` of the longest hold the point robot reported ending from line
    ``start`` on (it may have begun before: a pause of the rate limiter): how long the robot
    stayed held, and how long after the last moving command the hold was sent. Acting that
    pauses holds the robot for seconds; a stall of the loop under load holds it for one command
    (``the loop has not taken the robot's newest joint state``), then it moves again."""
    holds, late = [], None
    for index, line in enumerate(robot.lines):
        if match := HELD.search(line):
            late = float(match[1])
        elif (match := MOVING.search(line)) and late is not None and index >= start:
            holds.append((float(match[1]), late))
    return max(holds, default=(0.0, float("inf")))


# One rerun, its bound kept (docs/testing.md): in the suite's two lanes a learner's kill was
# once held 0.35 s late (1 of 2 suites, 2026-12-07); alone 3 of 3 held within 1.2 ms.
@pytest.mark.flaky(reruns=1, reruns_delay=2)
def test_own_robot_is_held_at_every_end_of_acting(tmp_path: Path, ros_env) -> None:
    """The user's robot (point_robot.py, hybrid, learner in its own process) is held within one
    control period of its last moving command when the learner is SIGKILLed (acting goes on
    until the replay buffer is found silent, then pauses until the respawned learner reports)
    and when the run is stopped with SIGINT; between them the change per period never exceeds
    the limit. About 20 s."""
    env = user_env(ros_env)
    robot = start_point_robot(env)
    run = None
    try:
        run = launch("hybrid", tmp_path, env, *OWN_ROBOT_ARGUMENTS, "total_env_steps:=1000000",
                     "learning_starts:=200", "random_steps:=200")
        assert run.wait_for_line(lambda line: "[trainer]: steps" in line
                                 and " updates 0 " not in line, 240.0), run.output()[-4000:]
        learner = re.compile(r"started learner \(pid (\d+)\)")
        pid = next(int(m[1]) for line in run.lines if (m := learner.search(line)))
        mark, run_mark = len(robot.lines), len(run.lines)
        os.kill(pid, signal.SIGKILL)  # a process this test's run started, by its PID
        assert run.wait_for_line(lambda line: PAUSED in line
                                 and run.lines.index(line) >= run_mark, 60.0), \
            run.output()[-4000:]
        # The respawned learner lets acting go on; SIGINT while the robot moves.
        paused = len(robot.lines)
        assert robot.wait_for_line(lambda line: MOVING.search(line) is not None
                                   and robot.lines.index(line) >= paused, 120.0), \
            run.output()[-4000:]
        killed = longest_hold(robot, mark)
        run.process.send_signal(signal.SIGINT)
        assert run.wait(60.0) is not None, run.output()[-4000:]
    finally:
        if run is not None:
            run.stop(grace_s=20.0)
        robot.stop(grace_s=10.0)
    figures = next(line for line in robot.lines if "point robot: largest change" in line)
    ended = re.search(r"held after (\S+) s", figures)[1]
    print(f"after a killed learner: held {killed[1]} s after the last moving command, for "
          f"{killed[0]} s; after SIGINT: held {ended} s after it")
    # A killed learner: 0.002-0.63 s while homing waited for the state after an episode's end
    # (a lockstep robot answers only commands); 3-4 ms since homing starts from that state.
    assert killed[1] <= HOLD_WITHIN_S, (killed, robot.output()[-3000:])
    # SIGINT: the last hold, which ended acting for good.
    assert ended != "never" and float(ended) <= HOLD_WITHIN_S, (figures, run.output()[-3000:])
    figures = next(line for line in robot.lines if "point robot: largest change" in line)
    assert float(re.search(r"largest change (\S+),", figures)[1]) <= 1.0 + 1e-9, figures
    assert re.search(r"last command \[0\.0, 0\.0\]", figures), figures
