"""What one process of a deployment is: :class:`ProcessSpec`, and :class:`PlanError`.

Leaf module of the plan: the layouts (:mod:`.layouts`), the discovery settings
(:mod:`.discovery`), the CPU sets (:mod:`.cpu_sets`) and the parameter overrides
(:mod:`.parameter_overrides`) build and fill in process specs and raise plan errors, and
:mod:`.deployment` puts them together. Those modules import both names from here (importing
:mod:`.deployment` would be circular); everything else imports them from
:mod:`rl_bringup.plan.deployment`.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shlex
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rl_bringup.plan import paths
from rl_core.config import parameters_for
from rl_core.learning.cpus import format_cpu_list

NODES_PACKAGE = paths.NODES_PACKAGE


class PlanError(ValueError):
    """Invalid deployment input; the message names the valid choices."""


def private_directory() -> Path:
    """This user's folder for parameter files, ``<tmp>/rl_bringup-<uid>``: created mode 0700
    and used only while it is a real folder of this user that nobody else may enter, so that
    the files it holds can be neither planted nor read by other users of the machine (fixed
    names in the shared temporary folder could be). Anything else there: a fresh ``mkdtemp``
    folder instead."""
    path = Path(tempfile.gettempdir()) / f"rl_bringup-{os.getuid()}"
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
        return path
    return Path(tempfile.mkdtemp(prefix="rl_bringup_"))


@dataclass
class ProcessSpec:
    """One operating-system process of a deployment.

    :param name: label of the process in logs and plans (``simulator_robot_0``, ``learner``).
    :param executable: console script of ``package`` (``simulator``, ``container``, ...).
    :param package: package that installs the executable (for ``ros2 run`` / launch_ros).
    :param arguments: program arguments before ``--ros-args`` (the container's ``--node``s).
    :param namespace: ROS namespace of a single-node process; empty for containers, whose nodes
        carry their own namespaces (a ``__ns`` remap would move every node in the process).
    :param params_file: parameter file passed with ``--params-file``.
    :param user_params_file: the caller's parameter file (``params_file:=``), layered over
        :attr:`params_file`; empty for none.
    :param parameters: parameter overrides, passed as a parameter file for each node of the
        process (:meth:`overrides_file`).
    :param env: environment variables the process needs on top of the caller's environment.
    :param respawn: restart the process when it exits.
    :param required: end the whole run when the process exits.
    :param nodes: ``(kind, namespace)`` of each node a container hosts; empty for single nodes.
    :param cpus: CPUs the process may run on; ``None`` when it is not pinned.
    :param learner_cpus: CPUs of the trainer's learner thread where they differ from
        :attr:`cpus` (a process hosting acting and learning nodes); ``None`` otherwise.
    :param torch_threads: torch intra-op threads of the process; ``None`` when the plan sets
        none (no CPU sets).
    :param remaps: ``(from, to)`` name remappings of every node in the process
        (``namespace:=``).
    :param log_level: rcl's ``--log-level`` of the process (``log_level:=``); empty: rcl's.
    """

    name: str
    executable: str
    package: str = NODES_PACKAGE
    arguments: list[str] = field(default_factory=list)
    namespace: str = ""
    params_file: str = ""
    user_params_file: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    respawn: bool = False
    required: bool = False
    nodes: list[tuple[str, str]] = field(default_factory=list)
    cpus: frozenset[int] | None = None
    learner_cpus: frozenset[int] | None = None
    torch_threads: int | None = None
    remaps: list[tuple[str, str]] = field(default_factory=list)
    log_level: str = ""

    @property
    def is_container(self) -> bool:
        """Whether the process hosts several nodes given by ``--node`` arguments."""
        return bool(self.nodes)

    def hosted_nodes(self) -> list[tuple[str, str]]:
        """``(kind, namespace)`` of every node in this process (containers and single nodes)."""
        if self.nodes:
            return list(self.nodes)
        return [(os.path.basename(self.executable), self.namespace or "/")]

    def ros_arguments(self, overrides_path: str | None = None) -> list[str]:
        """The arguments after ``--ros-args``: namespace and name remaps, log level, the
        scenario's parameter file, the caller's, then the overrides (later files win).

        :param overrides_path: where the process finds :meth:`overrides_document` (a file
            mounted into a container); ``None`` writes it here (:meth:`overrides_file`).
        """
        arguments: list[str] = []
        if self.namespace not in ("", "/") and not self.is_container:
            arguments += ["-r", f"__ns:={self.namespace}"]
        for source, target in self.remaps:
            arguments += ["-r", f"{source}:={target}"]
        if self.log_level:
            arguments += ["--log-level", self.log_level]
        for path in (self.params_file, self.user_params_file):
            if path:
                arguments += ["--params-file", path]
        if self.has_overrides:
            arguments += ["--params-file", overrides_path or self.overrides_file()]
        return arguments

    def overrides_document(self) -> str:
        """:attr:`parameters` as a parameter file (YAML text) with a block for each node kind of
        this process, holding what concerns that kind (:func:`rl_core.config.parameters_for`).

        ``-p name:=value`` cannot be used: rcl files it under ``/**``, and a node-specific block
        of the scenario file (``/**/trainer``) would beat it. A later file with the same
        node-specific keys wins instead.
        """
        return yaml.safe_dump(self._override_blocks(), sort_keys=True)

    @property
    def has_overrides(self) -> bool:
        """Whether any of :attr:`parameters` concerns a node of this process."""
        return bool(self._override_blocks())

    def _override_blocks(self) -> dict[str, Any]:
        # A copy per block: one shared list would be dumped as a YAML alias, which rcl refuses.
        blocks = {f"/**/{kind}": parameters_for(kind, self.parameters)
                  for kind in sorted({kind for kind, _ in self.hosted_nodes()})}
        return {key: {"ros__parameters": copy.deepcopy(values)}
                for key, values in blocks.items() if values}

    def overrides_file(self) -> str:
        """:meth:`overrides_document` written to a file of :func:`private_directory`; its path.

        The file is named by its content, so writing it again is harmless.
        """
        text = self.overrides_document()
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = private_directory() / f"overrides_{digest}.yaml"
        if not path.is_file():
            descriptor, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            with os.fdopen(descriptor, "w") as handle:
                handle.write(text)
            os.replace(staging, path)
        return str(path)

    def argv(self, python_bin_dir: str | os.PathLike[str] | None = None, *,
             overrides_path: str | None = None) -> list[str]:
        """The full command line of the process.

        :param python_bin_dir: folder holding the executable (a virtualenv's ``bin`` or a colcon
            ``lib/rl_nodes``); the bare executable name, found on ``PATH``, when ``None``.
        :param overrides_path: see :meth:`ros_arguments`.
        :return: ``[program, *arguments, "--ros-args", ...]``.
        """
        program = self.executable
        if python_bin_dir is not None and not os.path.isabs(program):
            program = os.path.join(os.fspath(python_bin_dir), program)
        ros_arguments = self.ros_arguments(overrides_path)
        if not ros_arguments:
            return [program, *self.arguments]
        return [program, *self.arguments, "--ros-args", *ros_arguments]

    def command_line(self, python_bin_dir: str | os.PathLike[str] | None = None) -> str:
        """:meth:`argv` quoted for a POSIX shell (for printing plans)."""
        return shlex.join(self.argv(python_bin_dir))

    def to_dict(self) -> dict[str, Any]:
        """A plain, YAML-friendly description of the process."""
        return {
            "name": self.name,
            "package": self.package,
            "executable": self.executable,
            "namespace": self.namespace,
            "nodes": [f"{kind}@{namespace}" for kind, namespace in self.hosted_nodes()],
            "respawn": self.respawn,
            "required": self.required,
            "params_file": self.params_file,
            "user_params_file": self.user_params_file,
            "remaps": [f"{source}:={target}" for source, target in self.remaps],
            "log_level": self.log_level,
            "parameters": dict(self.parameters),
            "cpus": _cpu_text(self.cpus),
            "learner_cpus": _cpu_text(self.learner_cpus),
            "torch_threads": self.torch_threads,
            "argv": self.argv(),
        }


def _cpu_text(cpus: frozenset[int] | None) -> str | None:
    """A CPU set as a CPU list (``"0-1"``), ``None`` for "not pinned"."""
    return None if cpus is None else format_cpu_list(cpus)
