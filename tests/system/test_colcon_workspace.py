"""A ROS user's colcon workspace: this repository under ``ws/src/``, ``colcon build``, then
``source install/setup.bash`` and ``ros2 launch``.

The workspaces are copies of the working tree in a temporary folder, built with the venv's
pinned colcon. They build the Python packages only: ``rl_interfaces`` (a rosidl build of about a
minute) comes from the venv, which plays the part of the ROS installation underneath, as
``/opt/ros/kilted`` does on a ROS machine; setup's own colcon build covers it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import REPO, Child

pytestmark = pytest.mark.system

BIN = Path(sys.executable).parent
COLCON = BIN / "colcon"
ROS2 = BIN / "ros2"
LAUNCH_FILES = sorted(path.name for path in (REPO / "launch").glob("*.launch.py"))
CONFIG_FILES = sorted(path.name for pattern in ("*.yaml", "*.rviz", "*.json", "*.xml")
                      for path in (REPO / "config").glob(pattern))
#: The robots' ros2_control blocks and controller file (docs/robots.md), in config/robots.
ROBOT_FILES = sorted(path.name for pattern in ("*.xml", "*.yaml")
                     for path in (REPO / "config" / "robots").glob(pattern))
BUILD_TREES = ("build", "install", "log")


def copy_repository(workspace: Path, packages: tuple[str, ...]) -> Path:
    """``workspace/src/rl_ros2``: the repository's ``packages``, ``launch/``, ``config/`` and
    ``colcon.meta``, symlinks kept (rl_bringup reaches launch/ and config/ through them)."""
    checkout = workspace / "src" / "rl_ros2"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for package in packages:
        shutil.copytree(REPO / "src" / package, checkout / "src" / package, symlinks=True,
                        ignore=ignore)
    for folder in ("launch", "config"):
        shutil.copytree(REPO / folder, checkout / folder, ignore=ignore)
    shutil.copy2(REPO / "colcon.meta", checkout / "colcon.meta")
    return checkout


def colcon_build(workspace: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``colcon build OPTIONS`` in ``workspace``, with the venv underneath."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env["AMENT_PREFIX_PATH"] = sys.prefix
    return subprocess.run([str(COLCON), "build", *options, "--event-handlers", "console_cohesion+"],
                          cwd=workspace, env=env, capture_output=True, text=True, timeout=300)


def tree(root: Path) -> set[str]:
    """Every path under ``root`` outside the build trees (symlinks not followed)."""
    paths = set()
    for folder, directories, files in os.walk(root):
        relative = Path(folder).relative_to(root)
        if relative == Path("."):
            directories[:] = [name for name in directories if name not in BUILD_TREES]
        paths.update(str(relative / name) for name in directories + files)
    return paths


@pytest.mark.parametrize("symlink_install", [False, True], ids=["plain", "symlink-install"])
def test_launch_and_config_files_land_in_share_and_nothing_outside_the_build_trees(
    tmp_path: Path, symlink_install: bool
) -> None:
    workspace = tmp_path / "ws"
    checkout = copy_repository(workspace, ("rl_bringup",))
    before = tree(workspace)
    options = ["--symlink-install"] if symlink_install else []
    build = colcon_build(workspace, *options)
    assert build.returncode == 0, build.stdout + build.stderr

    share = workspace / "install" / "rl_bringup" / "share" / "rl_bringup"
    assert sorted(path.name for path in (share / "launch").iterdir()) == LAUNCH_FILES
    assert sorted(path.name for path in (share / "config").iterdir()) == sorted(
        [*CONFIG_FILES, "robots"])
    assert sorted(path.name for path in (share / "config" / "robots").iterdir()) == ROBOT_FILES
    for folder, names in (("launch", LAUNCH_FILES), ("config", CONFIG_FILES),
                          ("config/robots", ROBOT_FILES)):
        for name in names:
            installed = share / folder / name
            assert installed.read_bytes() == (REPO / folder / name).read_bytes(), installed
            # --symlink-install links back to the sources (edits take effect without a build);
            # a plain build copies.
            assert installed.is_symlink() == symlink_install, installed
            if symlink_install:
                assert installed.resolve() == (checkout / folder / name).resolve()
    # Nothing written into the sources, the workspace root or beside the workspace.
    assert tree(workspace) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ws"]


def test_an_empty_glob_stops_the_build(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    checkout = copy_repository(workspace, ("rl_bringup",))
    for launch_file in (checkout / "launch").glob("*.launch.py"):
        launch_file.unlink()
    build = colcon_build(workspace)
    assert build.returncode != 0
    assert "no file matches 'launch/*.launch.py'" in build.stdout + build.stderr
    assert not (workspace / "install" / "rl_bringup" / "share" / "rl_bringup" / "launch").exists()


@pytest.mark.skipif(not ROS2.is_file(), reason="no ros2 command line in the venv (scripts/setup.sh "
                    "installs it where ../shared/ros2-cli exists)")
def test_ros_user_workflow_symlink_install_source_and_ros2_launch(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    checkout = copy_repository(workspace, ("rl_core", "rl_nodes", "rl_bringup"))
    build = colcon_build(workspace, "--symlink-install")
    assert build.returncode == 0, build.stdout + build.stderr

    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env["AMENT_PREFIX_PATH"] = sys.prefix
    env["ROS_LOG_DIR"] = str(tmp_path / "ros_log")
    script = (
        "source install/setup.bash && "
        "ros2 pkg prefix rl_bringup && ros2 pkg prefix rl_nodes && "
        "python -c 'import rl_bringup.plan.paths as p; print(p.launch_directory())' && "
        f"exec ros2 launch rl_bringup colocated.launch.py total_env_steps:=600 eval_episodes:=1 "
        f"output_dir:={tmp_path / 'run'}"
    )
    run = Child(["bash", "-c", script], env=env, cwd=workspace)
    try:
        code = run.wait(240.0)
    finally:
        run.stop(grace_s=20.0)
    assert code == 0, run.output()[-4000:]
    lines = run.lines
    # The overlay's packages, not the venv's: ros2 and Python both find the workspace first.
    assert lines[:3] == [str(workspace / "install" / "rl_bringup"),
                         str(workspace / "install" / "rl_nodes"),
                         str(checkout / "launch")], run.output()[-4000:]
    output = run.output()
    # total_env_steps:=600 beat the scenario file's replay_buffer block (8000), and the run
    # ended when the buffer said so.
    assert "]: done: 600 transitions" in output
    assert json.loads((tmp_path / "run" / "result.json").read_text())["env_steps"] == 600
    # The caller's ROS_DOMAIN_ID as is, and the line that attaches tools to it.
    domain = env["ROS_DOMAIN_ID"]
    assert f"ROS_DOMAIN_ID={domain} (from your ROS_DOMAIN_ID, as is)" in output
    assert f"export ROS_DOMAIN_ID={domain} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST" in output
