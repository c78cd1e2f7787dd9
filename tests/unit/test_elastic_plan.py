"""``robots:=auto``: the elastic plan (rl_bringup.plan) and what the CLI prints of it. No ROS."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import yaml

from rl_bringup.plan.deployment import Plan, PlanError, make_plan

pytestmark = pytest.mark.unit


def elastic(**autoscale: Any) -> Plan:
    return make_plan("hybrid", "auto", domain_id=7, environ={}, machine_cpus={0, 1},
                     autoscale=autoscale or None)


def test_auto_plans_max_robots_processes_and_starts_min_robots() -> None:
    plan = elastic(min_robots="2", max_robots="4", autoscale_window_s="4")
    assert plan.robots == 4
    assert [process.name for process in plan.processes] == [
        "robot_0", "robot_1", "robot_2", "robot_3", "learner"]
    assert plan.elastic_robot_processes() == ["robot_0", "robot_1", "robot_2", "robot_3"]
    assert plan.standby_processes() == ["robot_2", "robot_3"]
    assert plan.autoscale is not None and plan.autoscale.window_s == 4.0
    learner = plan.processes[-1]
    # The learning side accepts experience from every robot the autoscaler may start.
    assert learner.parameters["deployment_robots"] == 4 and learner.required


def test_auto_robots_default_to_one_and_the_cpu_count() -> None:
    plan = elastic()
    assert plan.autoscale is not None
    assert (plan.autoscale.min_robots, plan.autoscale.max_robots) == (1, 2)
    assert plan.standby_processes() == ["robot_1"]


def test_fixed_plans_have_no_standby_processes() -> None:
    plan = make_plan("hybrid", 3, domain_id=7, environ={})
    assert plan.autoscale is None
    assert plan.elastic_robot_processes() == [] and plan.standby_processes() == []


@pytest.mark.parametrize(("mode", "robots", "policy_layout", "autoscale", "match"), [
    ("decoupled", "auto", "per_robot", None, "scales hybrid deployments"),
    ("colocated", "auto", "per_robot", None, "scales hybrid deployments"),
    ("hybrid", "auto", "central", None, "policy in each robot process"),
    ("hybrid", "2", "per_robot", {"max_robots": "3"}, "need robots:=auto"),
    ("hybrid", "auto", "per_robot", {"max_robots": "2", "min_robots": "3"}, "min_robots <="),
    ("hybrid", "auto", "per_robot", {"max_robots": "65"}, "at most 64"),
    ("hybrid", "auto", "per_robot", {"autoscale_window": "3"}, "unknown autoscale setting"),
    ("hybrid", "auto", "per_robot", {"autoscale_min_gain": "lots"}, "must be a number"),
])
def test_bad_elastic_input_raises_plan_error(mode: str, robots: str, policy_layout: str,
                                             autoscale: dict[str, str] | None,
                                             match: str) -> None:
    with pytest.raises(PlanError, match=match):
        make_plan(mode, robots, domain_id=7, environ={}, policy_layout=policy_layout,
                  autoscale=autoscale, machine_cpus={0, 1})


def test_cli_plan_shows_the_range_and_the_standby_robots(
        capsys: pytest.CaptureFixture[str]) -> None:
    from rl_bringup.cli import main

    assert main(["plan", "hybrid", "robots:=auto", "max_robots:=3", "autoscale_min_gain:=0.2",
                 "domain_id:=3"]) == 0
    table = capsys.readouterr().out
    assert "mode         hybrid (robots auto (1..3))" in table
    assert "a robot must add 20% env steps/s" in table
    assert table.count("standby: started when the autoscaler adds it") == 2
    assert main(["plan", "hybrid", "robots:=auto", "max_robots:=3", "domain_id:=3",
                 "--format", "yaml"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["robots"] == 3 and printed["autoscale"]["max_robots"] == 3
    assert main(["plan", "decoupled", "robots:=auto", "domain_id:=3"]) == 2
    assert "scales hybrid deployments" in capsys.readouterr().err


def test_planning_an_elastic_run_loads_no_rclpy() -> None:
    check = ("import sys; from rl_bringup.cli import main; "
             "main(['plan', 'hybrid', 'robots:=auto', 'max_robots:=3', 'domain_id:=3']); "
             "print(sorted({'rclpy', 'psutil'} & set(sys.modules)))")
    output = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    assert output.strip().splitlines()[-1] == "[]"
