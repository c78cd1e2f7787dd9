"""``rl-bringup launch`` end to end with stand-ins for the rl_nodes executables: the plan's
processes start with their command lines and environment, and the run ends with the trainer."""

from __future__ import annotations

import os
import re
import signal
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import yaml

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(REPO_ROOT / "config" / "cartpole.yaml")

# A stand-in for the rl_nodes executables: robot nodes run until SIGINT; the trainer reports its
# command line and domain, then finishes (exit 0, with result.json in its output_dir, as a real
# trainer's end leaves: rl-bringup takes a clean exit without it for a stop from outside) once
# every other node has announced itself.
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
        for line in open(sys.argv[sys.argv.index("--params-file", 3) + 1]):
            if line.strip().startswith("output_dir:"):
                output_dir = line.split(":", 1)[1].strip().strip(chr(39) + chr(34))
                os.makedirs(output_dir, exist_ok=True)
                open(os.path.join(output_dir, "result.json"), "w").write("{{}}")
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
    for name in ("simulator", "policy", "replay_buffer", "trainer", "diagnostics_aggregator",
                 "container"):
        script = bin_dir / name
        script.write_text(FAKE_NODE.format(python=sys.executable, marker_dir=str(marker_dir)))
        script.chmod(0o755)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "prefix"))
    yield bin_dir


def test_launch_runs_the_plan_until_the_trainer_finishes(
    run_cli: Callable[..., tuple[int, str, str]], fake_rl_nodes: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plan's environment must reach the children only, not this process.
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    monkeypatch.delenv("ROS_DISCOVERY_SERVER", raising=False)
    started: list[int] = []
    try:
        code, out, _ = run_cli("launch", "decoupled", "domain_id:=23", "--grace-period", "3")
        started = [int(pid) for pid in re.findall(r"\(pid (\d+)\)", out)]
        assert code == 0, out
        assert len(started) == 5  # simulator, policy, replay_buffer, trainer, aggregator
        # The trainer gets the scenario file, then its overrides file (deployment_robots).
        trainer_line = re.search(
            rf"\[trainer\] trainer argv --ros-args --params-file {re.escape(CARTPOLE)} "
            r"--params-file (\S+) domain 23 range LOCALHOST\n",
            out,
        )
        assert trainer_line, out
        trainer = yaml.safe_load(Path(trainer_line.group(1)).read_text())["/**/trainer"]
        # No output_dir given: the launch's own run directory (checkpoints are never off).
        output_dir = trainer["ros__parameters"].pop("output_dir")
        assert re.fullmatch(r"runs/decoupled-\d{8}-\d{6}-\d+", os.path.relpath(output_dir))
        assert trainer == {"ros__parameters": {"deployment_robots": 1}}
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
