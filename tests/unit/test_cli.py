"""Tests of the rl-bringup command line: plan output, errors and exit codes, the launch path."""

from __future__ import annotations

from collections.abc import Callable

from collections.abc import Iterator
import os
from pathlib import Path
import re
import signal
import sys
import textwrap
from typing import Any

import psutil
import pytest
import yaml

from rl_bringup import cli, paths
from rl_bringup.plan import make_plan

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
    assert re.search(r"^\s+learner\s+yes\s+yes\s+replay_buffer@/, trainer@/$", out, re.MULTILINE)
    assert f"$ container --node replay_buffer@/ --node trainer@/ --ros-args --params-file {CARTPOLE}" in out
    assert "export ROS_DOMAIN_ID=5" in out


@pytest.mark.unit
def test_plan_yaml_equals_the_plan(run_cli: RunCli) -> None:
    # Options and key:=value arguments may interleave.
    code, out, _ = run_cli("plan", "decoupled", "--format", "yaml", "robots:=3", "domain_id:=9")
    assert code == 0
    assert yaml.safe_load(out) == make_plan("decoupled", 3, domain_id=9, environ={}).to_dict()


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
            r"config 'nope' not found .*available configs in .*: cartpole, kuka_reach",
        ),
        (["plan", "hybrid", "domain_id:=500"], r"domain_id must be an integer from 0 to 101, got '500'"),
        (
            ["plan", "hybrid", "discovery:=everywhere"],
            r"bad discovery 'everywhere'; valid: localhost, subnet, server:HOST:PORT",
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
def test_unknown_subcommand_exits_2_listing_the_subcommands(run_cli: RunCli) -> None:
    code, _, err = run_cli("fly")
    assert code == 2
    assert "invalid choice: 'fly'" in err and "launch" in err and "plan" in err and "train" in err


@pytest.mark.unit
def test_subcommands_are_argparse_subparsers_with_handlers() -> None:
    parser = cli.build_parser()
    for name in ("launch", "train", "plan"):
        arguments, leftovers = parser.parse_known_args([name, "colocated", "robots:=2"])
        assert arguments.command == name and callable(arguments.handler)
        assert arguments.arguments + leftovers == ["colocated", "robots:=2"]
    names = set(parser._subparsers._group_actions[0].choices)  # the registered subcommands
    assert {"launch", "train", "plan", "advise", "eval", "export", "record", "status", "doctor"} <= names


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
    assert container.parameters == {"output_dir": "/tmp/rl-train", "deployment_robots": 1}
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
    missing = "policy (rl_nodes), replay_buffer (rl_nodes), simulator (rl_nodes), trainer (rl_nodes)"
    assert f"executables not found: {missing}" in err
    assert "scripts/setup.sh" in err


# A stand-in for the rl_nodes executables: robot nodes run until SIGINT; the trainer reports its
# command line and domain, then finishes (exit 0) once every other node has announced itself.
FAKE_NODE = textwrap.dedent(
    """\
    #!{python} -S
    import os, signal, sys, time
    name = os.path.basename(sys.argv[0])
    marker_dir = {marker_dir!r}
    print(name, "argv", " ".join(sys.argv[1:]), "domain", os.environ.get("ROS_DOMAIN_ID"),
          "range", os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE"), flush=True)
    if name == "trainer":
        deadline = time.monotonic() + 20
        while len(os.listdir(marker_dir)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        sys.exit(0 if len(os.listdir(marker_dir)) >= 3 else 9)
    signal.signal(signal.SIGINT, lambda signum, frame: sys.exit(0))
    open(os.path.join(marker_dir, "%s-%d" % (name, os.getpid())), "w").close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)
    """
)


@pytest.fixture
def fake_rl_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An ament prefix whose lib/rl_nodes holds fake node executables."""
    bin_dir = tmp_path / "prefix" / "lib" / "rl_nodes"
    bin_dir.mkdir(parents=True)
    marker_dir = tmp_path / "markers"
    marker_dir.mkdir()
    for name in ("simulator", "policy", "replay_buffer", "trainer", "container"):
        script = bin_dir / name
        script.write_text(FAKE_NODE.format(python=sys.executable, marker_dir=str(marker_dir)))
        script.chmod(0o755)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "prefix"))
    yield bin_dir


@pytest.mark.integration
def test_launch_runs_the_plan_until_the_trainer_finishes(
    run_cli: RunCli, fake_rl_nodes: Path
) -> None:
    started: list[int] = []
    try:
        code, out, _ = run_cli("launch", "decoupled", "domain_id:=23", "--grace-period", "3")
        started = [int(pid) for pid in re.findall(r"\(pid (\d+)\)", out)]
        assert code == 0, out
        assert len(started) == 4
        # The trainer gets the scenario file, then its overrides file (deployment_robots).
        trainer_line = re.search(
            rf"\[trainer\] trainer argv --ros-args --params-file {re.escape(CARTPOLE)} "
            r"--params-file (\S+) domain 23 range LOCALHOST\n",
            out,
        )
        assert trainer_line, out
        assert yaml.safe_load(Path(trainer_line.group(1)).read_text()) == {
            "/**/trainer": {"ros__parameters": {"deployment_robots": 1}}
        }
        simulator_line = f"simulator argv --ros-args -r __ns:=/robot_0 --params-file {CARTPOLE}"
        assert f"[simulator_robot_0] {simulator_line}" in out
        assert "trainer exited with code 0; it is required, stopping everything" in out
        assert "[rl-bringup] exit code 0" in out
    finally:
        # Kill by PID whatever is still running of what this test started (fake nodes only).
        for pid in started:
            try:
                process = psutil.Process(pid)
                if str(fake_rl_nodes) in " ".join(process.cmdline()):
                    process.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
    for pid in started:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
    assert os.environ.get("ROS_DOMAIN_ID") is None  # the plan's environment went to the children only
