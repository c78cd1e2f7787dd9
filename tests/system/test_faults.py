"""Fault injection during a decoupled robots:=2 run with the shipped snapshot settings (the
scenario of ``benchmarks/faults.py``): every topic, service and parameter sent bad input,
services and parameters fuzzed at random, every node kind SIGKILLed twice and one node of a
random kind hung (SIGSTOP) at random points.

Training must still complete and solve cart-pole: once the last fault is over, the trainer is
told to stop at its target (``stop_at_target`` set live), and the run must end at a periodic
evaluation >= 180 of the trainer then running, within its budget (issue 42: a run that asserts
an outcome stops at it; its failure rate: docs/results.md#learning-test-failure-rates). The
replay buffer must come back with at least 90 % of what it held before each kill, nothing
non-finite may be stored, every bad input must be counted by the node that refused it, every fuzzed
call answered and every fuzzed parameter change refused, every managed node must refuse
lifecycle transitions its state does not offer and stay in its state, the replay buffer's
counters must never go back over a save or load (two saves in a row and a load while the run is
active are refused), no process may die of the fuzzing, and the hung node must be killed by the
supervisor and respawned. The schedule's seed is random and printed; set ``RL_FAULTS_SEED`` to
replay one. (Composition is fuzzed only where a container serves load_node: decoupled runs have
none. The robot boundary's probes, forged e-stop releases and joint states, need
robot_interface:=ros2_control: benchmarks/soak.py runs them.)"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from benchmarks.faults import KINDS, REPLAY, TOTAL_ENV_STEPS, TRAINER, print_tables, run_scenario
from rl_core.replay import ReplayBuffer
from tests.learning import report_outcome, seed_arguments

pytestmark = pytest.mark.system
SOLVED = 180.0
KILLS_PER_KIND = 2


def test_training_survives_kills_and_hostile_input(tmp_path: Path, ros_env) -> None:
    seed = int(os.environ.get("RL_FAULTS_SEED") or random.SystemRandom().randrange(10**6))
    output = tmp_path / "run"
    print(f"fault schedule: seed {seed} (RL_FAULTS_SEED={seed} replays it)")  # even if it raises
    report = run_scenario(output, ros_env, seed, KILLS_PER_KIND, stop_at_return=SOLVED,
                          arguments=seed_arguments())
    print_tables(report)
    context = f"seed {seed} (RL_FAULTS_SEED={seed} replays it):\n" + "\n".join(report.lines[-60:])

    assert report.exit_code == 0, context
    met = report.result["target_env_steps"]
    report_outcome("transitions of the budget left at the criterion",
                   TOTAL_ENV_STEPS - (TOTAL_ENV_STEPS if met is None else met), 1)
    assert met is not None, (report.result, context)
    assert met <= report.result["env_steps"] <= TOTAL_ENV_STEPS, (report.result, context)
    assert sorted(kill.kind for kill in report.kills if kill.signal == "SIGKILL") == \
        sorted(KINDS * KILLS_PER_KIND)
    hung = [kill for kill in report.kills if kill.signal == "SIGSTOP"]
    assert len(hung) == 1 and any(f"{hung[0].process} is hung: no heartbeat" in line
                                  for line in report.lines), context
    for kill in report.kills:
        if kill.kind == "replay_buffer":
            assert kill.restored is not None and kill.restored >= 0.9 * kill.held_before, \
                (kill, context)
    assert report.probes and all(probe.counted >= 1 for probe in report.probes)
    fuzzed = report.fuzz
    assert fuzzed is not None and fuzzed.service_calls > 0 and fuzzed.parameter_changes > 0
    assert not fuzzed.unanswered and not fuzzed.accepted, (fuzzed, context)
    assert fuzzed.refused_changes == fuzzed.parameter_changes and not report.died_of_fuzzing
    # Every node of the deployment is managed: learner, and a simulator and policy per robot.
    assert {REPLAY, TRAINER, "/robot_0/simulator", "/robot_1/policy"} <= \
        set(fuzzed.managed_nodes) and fuzzed.lifecycle_calls > 0, fuzzed.managed_nodes
    assert fuzzed.file_calls > 0 and not fuzzed.counter_regressions, (fuzzed, context)
    for probe in report.probes:  # services and parameters answered with a refusal
        if probe.answer and probe.refusal_answer:
            assert "success=False" in probe.answer or "successful=False" in probe.answer, probe

    buffer = ReplayBuffer.from_file(output / "replay" / "snapshot.npz")
    state = buffer.state_dict()
    for name in ("obs", "actions", "rewards", "next_obs"):
        values = np.asarray(state[name])
        assert np.all(np.isfinite(values)) and np.all(np.abs(values) <= 1e6), name
