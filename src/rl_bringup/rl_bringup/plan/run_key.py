"""The deployment's signing key, run identity and action keys, handed out by both front ends.

:func:`with_weights_key` gives the learner's processes (:data:`SIGNING_KINDS`: those hosting a
trainer or a replay buffer) the private key (rl_core.security.weights_auth) and every other
process the public key alone, so that no robot process can sign weights or replay status. The
key is ``weights_key:=FILE``, else the caller's, else a fresh pair written into the run
directory; a robot host that set only a public key keeps it. Every process also gets the same
run identity ``RL_ROS2_RUN_ID`` (the caller's, else ``TOKEN@/NAMESPACE`` with the token kept in
``run.id``), which each signature binds so that runs sharing a key cannot replay each other's.

:func:`with_action_keys` hands out the robots' action keys (rl_core.security.action_auth): a
process serving one robot gets that robot's key alone, so a robot that is taken over cannot drive
another; one serving several robots gets the run's action key, from which every robot's derives;
the others get none. Precedence and files: docs/reliability.md, "What is protected".
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from rl_bringup.plan.deployment import Plan, PlanError
from rl_bringup.plan.process_spec import ProcessSpec
from rl_core.security import action_auth, weights_auth

#: Node kinds whose process holds the private key: they sign weights and replay status.
SIGNING_KINDS = frozenset({"trainer", "replay_buffer"})
#: What a process that must not sign gets instead of the caller's private key variables.
_NO_PRIVATE_KEY = {weights_auth.KEY_VARIABLE: "", weights_auth.KEY_FILE_VARIABLE: ""}


#: Node kinds that make or check the MACs of a robot's actions (rl_core.security.action_auth).
ACTING_KINDS = frozenset({"simulator", "policy"})
#: The action key variables, emptied for a process that gets none of the caller's.
_NO_ACTION_KEYS = {action_auth.KEY_VARIABLE: "", action_auth.KEY_FILE_VARIABLE: "",
                   action_auth.ROBOT_KEYS_VARIABLE: ""}
_ROBOT_NAMESPACE = re.compile(r"^/robot_(\d+)/?$")
#: The file in the run directory that keeps its run identity's token.
RUN_ID_FILE_NAME = "run.id"
#: Random bytes of a token.
RUN_TOKEN_BYTES = 16


def served_robots(process: ProcessSpec) -> frozenset[int] | None:
    """The robots whose actions ``process`` makes or checks (empty: none); None for every robot
    (a central policy, in ``/``)."""
    robots = set()
    for kind, namespace in process.hosted_nodes():
        match = _ROBOT_NAMESPACE.match(namespace)
        if kind not in ACTING_KINDS:
            continue
        if match is None:
            return None
        robots.add(int(match.group(1)))
    return frozenset(robots)


def with_action_keys(plan: Plan, environ: Mapping[str, str] | None = None) -> Plan:
    """The plan with each robot's action key in the environment of the processes that serve that
    robot, and the run's action key in those that serve several.

    :raises PlanError: when the caller's action keys are malformed.
    """
    environ = os.environ if environ is None else environ
    try:
        given = action_auth.load_keys(environ)
    except action_auth.ActionKeyError as error:
        raise PlanError(str(error)) from None
    run_key = given.run_key or os.urandom(action_auth.KEY_BYTES)

    def keys_of(process: ProcessSpec) -> dict[str, str]:
        robots = served_robots(process)
        if robots is None or len(robots) > 1:
            return {**_NO_ACTION_KEYS, action_auth.KEY_VARIABLE: run_key.hex(),
                    action_auth.ROBOT_KEYS_VARIABLE: action_auth.format_robot_keys(
                        given.robot_keys)}
        if not robots:
            return dict(_NO_ACTION_KEYS)
        robot = next(iter(robots))
        key = given.robot_keys.get(robot) or action_auth.robot_key(run_key, robot)
        return {**_NO_ACTION_KEYS,
                action_auth.ROBOT_KEYS_VARIABLE: action_auth.format_robot_keys({robot: key})}

    processes = [dataclasses.replace(process, env={**process.env, **keys_of(process)})
                 for process in plan.processes]
    return dataclasses.replace(plan, processes=processes)


def signs(process: ProcessSpec) -> bool:
    """Whether ``process`` hosts a node that signs (:data:`SIGNING_KINDS`)."""
    return any(kind in SIGNING_KINDS for kind, _ in process.hosted_nodes())


def _output_dir(plan: Plan) -> str | None:
    """The run directory: the learning processes' ``output_dir``; None without one."""
    return next((str(process.parameters["output_dir"]) for process in plan.processes
                 if process.parameters.get("output_dir")), None)


def _private_key(plan: Plan, key_file: str | None,
                 environ: Mapping[str, str]) -> tuple[dict[str, str], str] | None:
    """The signers' key variables and a note; None when the caller gave only a public key."""
    if key_file:
        path = Path(key_file).expanduser().resolve()
        try:
            weights_auth.load_key({weights_auth.KEY_FILE_VARIABLE: str(path)})
        except weights_auth.WeightsKeyError as error:
            raise PlanError(f"weights_key:={key_file}: {error}") from None
        return ({weights_auth.KEY_VARIABLE: "", weights_auth.KEY_FILE_VARIABLE: str(path)},
                f"weights and replay status are signed with the key in {path}")
    if environ.get(weights_auth.KEY_VARIABLE) or environ.get(weights_auth.KEY_FILE_VARIABLE):
        return {}, "weights and replay status are signed with the key of the environment"
    if environ.get(weights_auth.PUBLIC_KEY_VARIABLE) or \
            environ.get(weights_auth.PUBLIC_KEY_FILE_VARIABLE):
        return None
    directory = _output_dir(plan) or tempfile.mkdtemp(prefix="rl_ros2_run_")
    path = weights_auth.create_key_file(directory)
    return ({weights_auth.KEY_VARIABLE: "", weights_auth.KEY_FILE_VARIABLE: str(path)},
            f"weights and replay status are signed with a per-run key ({path}; robots get "
            f"{path.parent / weights_auth.PUBLIC_KEY_FILE_NAME} alone); give other learner "
            f"hosts weights_key:={path}, robot hosts {weights_auth.PUBLIC_KEY_VARIABLE}")


def run_token(directory: str | os.PathLike[str]) -> str:
    """The run directory's token (``directory/run.id``): written once (random, mode 0644), then
    read, so that a restarted run keeps its identity.

    :raises OSError: when it can be neither read nor written.
    """
    path = Path(directory) / RUN_ID_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # a restart, or another front end of the same run was first
        return path.read_text().strip()
    token = os.urandom(RUN_TOKEN_BYTES).hex()
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    return token


def run_identity(token: str, namespace: str) -> str:
    """The run identity of a run directory's ``token`` deployed in ``namespace``."""
    return f"{token}@{namespace}"


def _run_id(plan: Plan, environ: Mapping[str, str], signs_here: bool) -> tuple[str, str]:
    """The deployment's run identity (:data:`weights_auth.RUN_ID_VARIABLE`) and a note.

    :raises PlanError: when the run directory's token can be neither read nor written.
    """
    variable = weights_auth.RUN_ID_VARIABLE
    given = weights_auth.run_identity(environ)
    if given:
        return given, f"weights and replay status are signed for run {given} ({variable})"
    if not signs_here:
        return "", (f"no {variable}: this host's robots check signatures for the unnamed run; "
                    f"export the {variable} that the learner host's run header prints")
    directory = _output_dir(plan)
    try:
        token = run_token(directory) if directory else os.urandom(RUN_TOKEN_BYTES).hex()
    except OSError as error:
        raise PlanError(f"cannot keep the run identity in {directory}: {error}") from None
    identity = run_identity(token, plan.namespace)
    kept = f"{directory}/{RUN_ID_FILE_NAME}" if directory else "fresh: no output_dir"
    return identity, (f"weights and replay status are signed for run {identity} (token {kept}); "
                      f"processes of this run on other hosts need {variable}={identity}")


def with_weights_key(plan: Plan, key_file: str | None = None,
                     environ: Mapping[str, str] | None = None) -> Plan:
    """The plan with the private key in its signers' environment and the public key in
    everyone's, the run identity in everyone's, and the robots' action keys
    (:func:`with_action_keys`).

    :raises PlanError: when ``key_file`` or the environment's key is not usable.
    """
    environ = os.environ if environ is None else environ
    private = _private_key(plan, key_file, environ)
    run_id, run_note = _run_id(plan, environ, signs_here=private is not None)
    run = {weights_auth.RUN_ID_VARIABLE: run_id}
    if private is None:  # a robot host: the caller's public key reaches every process
        processes = [dataclasses.replace(process, env={**process.env, **_NO_PRIVATE_KEY, **run})
                     for process in plan.processes]
        return with_action_keys(dataclasses.replace(
            plan, environment={**plan.environment, **run}, processes=processes,
            notes=[*plan.notes, run_note]), environ)
    signer_env, note = private
    try:
        key = weights_auth.load_key({**environ, **signer_env})
    except weights_auth.WeightsKeyError as error:
        raise PlanError(str(error)) from None
    assert key is not None
    public = {weights_auth.PUBLIC_KEY_VARIABLE: key.public.hex(),
              weights_auth.PUBLIC_KEY_FILE_VARIABLE: ""}
    processes = [dataclasses.replace(process, env={
        **process.env, **public, **run, **(signer_env if signs(process) else _NO_PRIVATE_KEY)})
        for process in plan.processes]
    return with_action_keys(dataclasses.replace(
        plan, environment={**plan.environment, **public, **run}, processes=processes,
        notes=[*plan.notes, note, run_note]), environ)
