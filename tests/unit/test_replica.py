"""Unit tests of rl_bringup.run.replica: how each replica of a scaled robot service becomes
``/robot_k`` (Kubernetes: the StatefulSet ordinal of its pod name; compose: a claimed index)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rl_bringup.run import replica

pytestmark = pytest.mark.unit

GRACE_S = 5.0
# Prints the namespace it was given and the index variable, then holds its claim until stdin closes.
HOLDER = ("import os, sys; print(sys.argv[1], os.environ['RL_ROS2_ROBOT_INDEX'], flush=True); "
          "sys.stdin.read()")


def start_replica(options: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m rl_bringup.run.replica OPTIONS -- python -c HOLDER {robot_namespace}``."""
    command = [sys.executable, "-m", "rl_bringup.run.replica", *options, "--",
               sys.executable, "-c", HOLDER, replica.PLACEHOLDER]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def first_line(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    return child.stdout.readline().strip()


def stop(children: list[subprocess.Popen[str]]) -> None:
    """End the replicas started by a test, by PID: close stdin, then kill after a grace period."""
    for child in children:
        if child.poll() is None and child.stdin is not None:
            child.stdin.close()
    for child in children:
        try:
            child.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@pytest.mark.parametrize(("pod_name", "ordinal"), [("rl-robots-0", 0), ("rl-robots-12", 12),
                                                   ("a-b-c-3", 3)])
def test_the_ordinal_is_the_number_after_the_last_dash(pod_name: str, ordinal: int) -> None:
    assert replica.ordinal_of(pod_name) == ordinal


@pytest.mark.parametrize("pod_name", ["rl-robots", "rl-robots-x", "robots3", ""])
def test_a_pod_name_without_ordinal_is_refused(pod_name: str) -> None:
    with pytest.raises(replica.ReplicaError, match="StatefulSet"):
        replica.ordinal_of(pod_name)


def test_the_placeholder_becomes_the_robot_namespace_in_every_argument() -> None:
    command = ["container", "--node", f"simulator@{replica.PLACEHOLDER}", "--ros-args", "-r",
               f"__ns:={replica.PLACEHOLDER}", "--params-file", "/etc/x.yaml"]
    assert replica.substitute(command, 7) == [
        "container", "--node", "simulator@/robot_7", "--ros-args", "-r", "__ns:=/robot_7",
        "--params-file", "/etc/x.yaml"]


def test_claims_take_the_lowest_free_index_and_free_it_with_the_holder(tmp_path: Path) -> None:
    first, first_lock = replica.claim_index(tmp_path, 3)
    second, second_lock = replica.claim_index(tmp_path, 3)
    assert (first, second) == (0, 1)
    os.close(first_lock)  # the replica holding index 0 ends
    again, again_lock = replica.claim_index(tmp_path, 3)
    third, third_lock = replica.claim_index(tmp_path, 3)
    assert (again, third) == (0, 2)
    with pytest.raises(replica.ReplicaError, match="all 3 robot indexes"):
        replica.claim_index(tmp_path, 3)
    for lock in (second_lock, again_lock, third_lock):
        os.close(lock)


def test_an_index_at_or_above_max_robots_is_refused() -> None:
    arguments = argparse.Namespace(pod_name_variable="POD", claim_dir=None, max_robots=4)
    assert replica.robot_index(arguments, {"POD": "rl-robots-3"}) == 3
    with pytest.raises(replica.ReplicaError, match="not below max_robots 4"):
        replica.robot_index(arguments, {"POD": "rl-robots-4"})
    with pytest.raises(replica.ReplicaError, match="POD is not set"):
        replica.robot_index(arguments, {})


def test_a_pod_runs_its_command_as_the_robot_of_its_ordinal() -> None:
    child = start_replica(["--pod-name-variable", replica.POD_NAME_VARIABLE, "--max-robots", "8"],
                          {replica.POD_NAME_VARIABLE: "rl-robots-5"})
    try:
        assert first_line(child) == "/robot_5 5"
    finally:
        stop([child])


def test_a_pod_past_max_robots_exits_2_with_the_reason() -> None:
    child = start_replica(["--pod-name-variable", replica.POD_NAME_VARIABLE, "--max-robots", "2"],
                          {replica.POD_NAME_VARIABLE: "rl-robots-2"})
    try:
        _, err = child.communicate(timeout=60)
        assert child.returncode == replica.EXIT_USAGE
        assert "max_robots 2" in err
    finally:
        stop([child])


def test_compose_replicas_claim_distinct_indexes_held_across_exec(tmp_path: Path) -> None:
    options = ["--claim-dir", str(tmp_path / "robot"), "--max-robots", "4"]
    children: list[subprocess.Popen[str]] = []
    try:
        children.append(start_replica(options))
        assert first_line(children[0]) == "/robot_0 0"
        children.append(start_replica(options))
        assert first_line(children[1]) == "/robot_1 1"
        stop(children[:1])  # replica 0 stops (scale down, or a crash before its restart)
        children.append(start_replica(options))
        assert first_line(children[2]) == "/robot_0 0"
    finally:
        stop(children)
