"""Reading the node command lines of generated deployments (compose services, Kubernetes
containers): the optional replica step, then ``ros2 run PACKAGE EXECUTABLE ARGS...``."""

from __future__ import annotations

import runpy
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from unittest import mock

REPO_ROOT = Path(__file__).resolve().parents[2]
REPLICA_PREFIX = ["python3", "-m", "rl_bringup.run.replica"]
#: Where docker/Dockerfile builds the workspace (``WORKDIR /ws``, ``colcon build``).
IMAGE_INSTALL = "/ws/install"


@dataclass
class NodeCommand:
    """A parsed node command line.

    :param replica: the replica step's options (``{"--claim-dir": DIR, "--max-robots": "64"}``);
        empty when the command does not run through it.
    """

    package: str
    executable: str
    arguments: list[str]
    replica: dict[str, str] = field(default_factory=dict)

    @property
    def nodes(self) -> list[str]:
        """``KIND@NAMESPACE`` of a container's ``--node`` arguments."""
        return [self.arguments[index + 1] for index, token in enumerate(self.arguments)
                if token == "--node"]

    @property
    def params_files(self) -> list[str]:
        """The ``--params-file`` paths, in order."""
        return [self.arguments[index + 1] for index, token in enumerate(self.arguments)
                if token == "--params-file"]


def without_params_files(arguments: list[str]) -> list[str]:
    """``arguments`` without their ``--params-file PATH`` pairs (paths differ between a plan on
    this machine and a container's command)."""
    paths = {index + 1 for index, token in enumerate(arguments) if token == "--params-file"}
    return [argument for index, argument in enumerate(arguments)
            if argument != "--params-file" and index not in paths]


def parse_node_command(command: list[str]) -> NodeCommand:
    """Split ``[python3 -m rl_bringup.run.replica OPTIONS --] /ws/install/PACKAGE/lib/PACKAGE/EXE
    ARGS...`` (an executable of the image's colcon install, run directly)."""
    replica: dict[str, str] = {}
    if command[:len(REPLICA_PREFIX)] == REPLICA_PREFIX:
        separator = command.index("--")
        options = command[len(REPLICA_PREFIX):separator]
        assert len(options) % 2 == 0, options
        replica = dict(zip(options[::2], options[1::2]))
        command = command[separator + 1:]
    program = PurePosixPath(command[0])
    package = program.parent.name
    assert program.parent == PurePosixPath(IMAGE_INSTALL, package, "lib", package), command
    return NodeCommand(package=package, executable=program.name, arguments=command[1:],
                       replica=replica)


def console_scripts(setup_py: Path) -> set[str]:
    """Names of the console_scripts a setup.py declares: the file runs with setuptools' setup
    replaced by a recorder, so nothing is built."""
    declared: dict[str, Any] = {}
    with mock.patch("setuptools.setup", lambda **kwargs: declared.update(kwargs)), \
            mock.patch("setuptools.find_packages", lambda **kwargs: []):
        runpy.run_path(str(setup_py))
    entries = declared.get("entry_points", {}).get("console_scripts")
    assert entries, f"no console_scripts in {setup_py}"
    return {entry.split("=", 1)[0].strip() for entry in entries}


def node_executables() -> set[str]:
    """The executables rl_nodes installs."""
    return console_scripts(REPO_ROOT / "src" / "rl_nodes" / "setup.py")
