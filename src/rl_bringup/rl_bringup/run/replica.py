"""The robot index of one replica of a scaled robot service, put into its command line.

Kubernetes (a StatefulSet) and docker compose (``--scale robot=N``) start N identical copies of
one robot container; each must become a different robot ``/robot_k``, because the simulator and
the policy take their robot id from their namespace (``rl_nodes.base.robot_id_from_namespace``).
The container's command therefore runs through this module, which finds ``k``, replaces
:data:`PLACEHOLDER` in every argument by ``/robot_k`` and ``exec``-s the command. ``k`` is the
pod's StatefulSet ordinal (``--pod-name-variable VAR``, kept across restarts) or, since compose
gives replicas no index they can read, the lowest free one claimed with an exclusive ``flock`` on
``DIR/robot_k.lock`` in a volume all replicas share (``--claim-dir DIR``), held for the replica's
lifetime. An index at or above ``--max-robots`` (the learner's ``deployment_robots``) exits with
code 2 rather than start a robot whose experience would be refused. It imports the standard
library and :mod:`rl_nodes.graph` alone, so it adds little to every container start. Details:
docs/kubernetes.md.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rl_core.names import variables
from rl_nodes.graph import robot_namespace

#: Replaced in every command-line argument by the replica's namespace, ``/robot_k``.
PLACEHOLDER = "{robot_namespace}"
#: What the Kubernetes manifests call the variable holding the pod name.
POD_NAME_VARIABLE = variables.REPLICA_NAME
#: Variable set for the command: the robot index, for logs and tools.
ROBOT_INDEX_VARIABLE = variables.ROBOT_INDEX
EXIT_USAGE = 2

_ORDINAL = re.compile(r"-(\d+)$")


class ReplicaError(RuntimeError):
    """No robot index can be found for this replica; the message says why."""


def ordinal_of(pod_name: str) -> int:
    """The StatefulSet ordinal of a pod name: ``rl-robots-3`` -> 3.

    :raises ReplicaError: when the name does not end in ``-<number>``.
    """
    match = _ORDINAL.search(pod_name.strip())
    if not match:
        raise ReplicaError(f"pod name {pod_name!r} does not end in -<ordinal>; is the pod part of "
                           "a StatefulSet?")
    return int(match.group(1))


def claim_index(directory: str | os.PathLike[str], max_robots: int) -> tuple[int, int]:
    r"""Claim the lowest free robot index under ``directory``.

    :return: ``(index, descriptor)``; the descriptor holds the claim and is inheritable, so the
        claim lasts as long as this process and whatever it ``exec``\ s into.
    :raises ReplicaError: when all ``max_robots`` indexes are claimed.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(max_robots):
        descriptor = os.open(folder / f"robot_{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue
        os.set_inheritable(descriptor, True)
        return index, descriptor
    raise ReplicaError(f"all {max_robots} robot indexes in {folder} are taken by running replicas; "
                       "scale down, or regenerate the deployment with a larger max_robots:=")


def substitute(command: Sequence[str], index: int) -> list[str]:
    """``command`` with :data:`PLACEHOLDER` replaced by ``/robot_<index>`` in every argument."""
    return [argument.replace(PLACEHOLDER, robot_namespace(index)) for argument in command]


def robot_index(arguments: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """The robot index of this replica, from the pod name or a claim.

    :raises ReplicaError: without a usable index, or one of ``max_robots`` or more.
    """
    if arguments.pod_name_variable:
        pod_name = environ.get(arguments.pod_name_variable, "")
        if not pod_name:
            raise ReplicaError(f"{arguments.pod_name_variable} is not set; the manifest passes "
                               "the pod name in it (downward API, fieldRef metadata.name)")
        index = ordinal_of(pod_name)
    else:
        index, _ = claim_index(arguments.claim_dir, arguments.max_robots)
    if index >= arguments.max_robots:
        raise ReplicaError(f"robot index {index} is not below max_robots {arguments.max_robots}: "
                           "the learner would refuse this robot's experience; scale to at most "
                           f"{arguments.max_robots} robots or regenerate with a larger "
                           "max_robots:=")
    return index


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python3 -m rl_bringup.run.replica``."""
    parser = argparse.ArgumentParser(
        prog="python3 -m rl_bringup.run.replica",
        description=f"Find this replica's robot index, replace {PLACEHOLDER} in COMMAND by "
        "/robot_<index> and exec COMMAND.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pod-name-variable", metavar="VAR",
                        help="variable holding the StatefulSet pod name; its ordinal is the index")
    source.add_argument("--claim-dir", metavar="DIR",
                        help="folder shared by all replicas; claim the lowest free index there")
    parser.add_argument("--max-robots", type=int, required=True, metavar="K",
                        help="robot indexes must be below K (the learner's deployment_robots)")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; on success it does not return (the process becomes COMMAND)."""
    parser = build_parser()
    arguments = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command = list(arguments.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("missing COMMAND after --")
    if arguments.max_robots < 1:
        parser.error("--max-robots must be at least 1")
    try:
        index = robot_index(arguments, os.environ)
    except (ReplicaError, OSError) as error:
        print(f"replica: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    command = substitute(command, index)
    print(f"replica: robot index {index} -> {robot_namespace(index)}", file=sys.stderr, flush=True)
    os.environ[ROBOT_INDEX_VARIABLE] = str(index)
    os.execvp(command[0], command)
    return 0  # not reached: execvp replaces the process or raises


if __name__ == "__main__":
    sys.exit(main())
