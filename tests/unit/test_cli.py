"""Tests of the rl-bringup command line: plan output, subcommands, errors and exit codes, what
launch and train hand to the supervisor (tests/integration/test_cli_launch.py runs a launch)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rl_bringup import cli
from rl_bringup.plan import paths
from rl_bringup.plan.deployment import make_plan

REPO_ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(REPO_ROOT / "config" / "cartpole.yaml")


@pytest.fixture(autouse=True)
def _no_inherited_ros_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans must not depend on the developer's shell."""
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    monkeypatch.delenv("ROS_DISCOVERY_SERVER", raising=False)


RunCli = Callable[..., tuple[int, str, str]]


@pytest.mark.unit
def test_plan_table_lists_processes_command_lines_and_environment(
    run_cli: RunCli,
) -> None:
    code, out, err = run_cli("plan", "hybrid", "robots:=2", "domain_id:=5")
    assert (code, err) == (0, "")
    assert re.search(r"^mode\s+hybrid \(2 robots\)$", out, re.MULTILINE)
    assert re.search(r"^domain id\s+5 \(argument\)$", out, re.MULTILINE)
    assert "  ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST" in out.splitlines()
    assert "  ROS_DOMAIN_ID=5" in out.splitlines()
    assert re.search(r"^\s+robot_1\s+yes\s+no\s+simulator@/robot_1, policy@/robot_1$", out, re.MULTILINE)
    assert re.search(r"^\s+learner\s+yes\s+yes\s+replay_buffer@/, trainer@/, "
                     r"diagnostics_aggregator@/$", out, re.MULTILINE)
    assert ("$ container --node replay_buffer@/ --node trainer@/ --node diagnostics_aggregator@/ "
            f"--ros-args --params-file {CARTPOLE}") in out
    assert "export ROS_DOMAIN_ID=5" in out


@pytest.mark.unit
def test_plan_yaml_equals_the_plan(run_cli: RunCli) -> None:
    # Options and key:=value arguments may interleave.
    code, out, _ = run_cli("plan", "decoupled", "--format", "yaml", "robots:=3", "domain_id:=9")
    assert code == 0
    plan = yaml.safe_load(out)
    # No output_dir given: the launch gets a run directory of its own (crash safety is never off).
    (output_dir,) = {process["parameters"]["output_dir"] for process in plan["processes"]
                     if "output_dir" in process["parameters"]}
    assert re.fullmatch(r"runs/decoupled-\d{8}-\d{6}-\d+",
                        os.path.relpath(output_dir)), output_dir
    # The CLI plans in this process's environment (the caller's discovery variables count).
    assert plan == make_plan("decoupled", 3, output_dir=output_dir, domain_id=9).to_dict()


@pytest.mark.unit
def test_plan_accepts_mode_as_a_key(run_cli: RunCli) -> None:
    code, out, _ = run_cli("plan", "mode:=colocated", "domain_id:=1", "--format", "yaml")
    assert code == 0
    assert yaml.safe_load(out)["mode"] == "colocated"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["plan", "colocated", "robot:=2"],
            r"unknown argument 'robot' \(in 'robot:=2'\); "
            r"valid keys: robots, config, output_dir, domain_id, discovery",
        ),
        (["plan", "sideways"], r"unknown mode 'sideways'; valid modes: colocated, decoupled, hybrid"),
        (["plan"], r"missing MODE; valid modes: colocated, decoupled, hybrid"),
        (["launch", "robots:=2"], r"missing MODE; valid modes: colocated, decoupled, hybrid"),
        (["plan", "hybrid", "robots:=0"], r"robots must be an integer from 1 to 64, got '0'"),
        (
            ["plan", "hybrid", "config:=nope"],
            r"config 'nope' not found .*available configs in .*: "
            r"cartpole, cartpole_discrete, cartpole_dqn, cartpole_pixels, kuka_reach",
        ),
        (["plan", "hybrid", "domain_id:=500"], r"domain_id must be an integer from 0 to 101, got '500'"),
        (
            ["plan", "hybrid", "discovery:=everywhere"],
            r"bad discovery 'everywhere'; valid: environment, localhost, subnet, server:HOST:PORT",
        ),
        (["plan", "hybrid", "colocated"], r"unexpected argument 'colocated'; arguments are key:=value"),
        (["plan", "hybrid", "robots:=1", "robots:=2"], r"argument 'robots' is given twice"),
        (["plan", "hybrid", "--robots", "2"], r"unknown option '--robots'"),
        (["train", "robots:=x"], r"robots must be an integer"),
    ],
)
def test_bad_input_exits_2_naming_the_valid_choices(
    run_cli: RunCli, argv: list[str], message: str
) -> None:
    code, out, err = run_cli(*argv)
    assert code == 2
    assert re.search(message, err), err
    assert err.startswith(f"rl-bringup {argv[0]}: error: ")
    assert out == ""


@pytest.mark.unit
@pytest.mark.parametrize(("option", "message"), [
    (["--respawn-delay", "0"], "argument --respawn-delay: 0: give from 0.1 to 30 seconds"),
    (["--heartbeat-timeout", "5"], "argument --heartbeat-timeout: 5: give 0 (off) or at least 10"),
])
def test_bad_supervisor_options_exit_2_with_the_range(run_cli: RunCli, option: list[str],
                                                      message: str) -> None:
    code, out, err = run_cli("launch", *option, "hybrid")
    assert code == 2 and out == ""
    assert f"rl-bringup launch: error: {message}" in err, err


@pytest.mark.unit
def test_unknown_subcommand_exits_2_listing_the_subcommands(run_cli: RunCli) -> None:
    code, _, err = run_cli("fly")
    assert code == 2
    assert "invalid choice: 'fly'" in err and "launch" in err and "plan" in err and "train" in err


TOOLS = ("advise", "eval", "export", "record", "status", "doctor", "compare")
#: Tools that also run on their own as ``python -m rl_bringup.tools.operate.<module>``.
STANDALONE_TOOLS = ("record", "status", "doctor")


@pytest.mark.unit
def test_help_lists_every_subcommand(run_cli: RunCli) -> None:
    code, out, _ = run_cli("--help")
    assert code == 0
    listed = set(re.findall(r"^    ([a-z]+)\s", out, re.MULTILINE))
    assert {"launch", "train", "plan", *TOOLS} <= listed


@pytest.mark.unit
@pytest.mark.parametrize("command", ["launch", "train", "plan", *TOOLS])
def test_each_subcommand_has_help(run_cli: RunCli, command: str) -> None:
    code, out, err = run_cli(command, "--help")
    assert (code, err) == (0, "")
    assert out.startswith(f"usage: rl-bringup {command} ")


@pytest.mark.unit
@pytest.mark.parametrize("command", TOOLS)
def test_tools_refuse_unknown_keys_before_doing_anything(run_cli: RunCli, command: str) -> None:
    code, out, err = run_cli(command, "colour:=red")
    assert (code, out) == (2, "")
    assert err.startswith(f"rl-bringup {command}: error: unknown argument 'colour'"), err


@pytest.mark.unit
@pytest.mark.parametrize("command", STANDALONE_TOOLS)
def test_a_tool_run_on_its_own_answers_like_the_cli(run_cli: RunCli, command: str) -> None:
    _, _, cli_err = run_cli(command, "colour:=red")
    alone = subprocess.run([sys.executable, "-m", f"rl_bringup.tools.operate.{command}", "colour:=red"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert (alone.returncode, alone.stdout, alone.stderr) == (2, "", cli_err)


class RecordingSupervisor:
    """Stands in for the Supervisor: records what it was asked to run."""

    instances: list[RecordingSupervisor] = []

    def __init__(self, processes: list[Any], **options: Any) -> None:
        self.processes = processes
        self.options = options
        RecordingSupervisor.instances.append(self)

    def run(self) -> int:
        return 0


@pytest.mark.unit
def test_train_defaults_to_colocated_cartpole_and_prints_how_to_attach(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    RecordingSupervisor.instances.clear()
    monkeypatch.setattr(cli, "Supervisor", RecordingSupervisor)
    installed = Path("/opt/rl/lib/rl_nodes")
    monkeypatch.setattr(paths, "find_executable", lambda name, package: installed / name)
    code, out, _ = run_cli("train", "domain_id:=17", "output_dir:=/tmp/rl-train")
    assert code == 0
    (supervisor,) = RecordingSupervisor.instances
    (container,) = supervisor.processes
    assert container.argv()[:2] == ["/opt/rl/lib/rl_nodes/container", "--node"]
    assert container.params_file == CARTPOLE
    assert container.parameters == {"output_dir": "/tmp/rl-train", "deployment_robots": 1,
                                    "await_replay_status": True}
    assert supervisor.options["environment"]["ROS_DOMAIN_ID"] == "17"
    assert "ROS_DOMAIN_ID=17 (given)" in out
    assert "export ROS_DOMAIN_ID=17 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST" in out


@pytest.mark.unit
def test_launch_without_installed_nodes_says_how_to_install(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paths, "find_executable", lambda name, package: None)
    code, _, err = run_cli("launch", "decoupled", "domain_id:=3")
    assert code == 1
    missing = ("diagnostics_aggregator (rl_nodes), policy (rl_nodes), replay_buffer (rl_nodes), "
               "simulator (rl_nodes), trainer (rl_nodes)")
    assert f"executables not found: {missing}" in err
    assert "scripts/setup.sh" in err
