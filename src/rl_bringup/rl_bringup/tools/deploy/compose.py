"""``rl-bringup compose``: a docker compose file of a deployment, from the deployment plan.

Usage::

    rl-bringup compose MODE robots:=N output:=FILE [config:=NAME] [image:=IMAGE] [max_robots:=K]

The services come from :func:`.containers.container_layout`, the same plan the
launch files and ``rl-bringup launch`` run: one service per learner process and one scalable
service per robot process (``docker compose up --scale robot=N``), each robot replica claiming
its index (:mod:`rl_bringup.run.replica`, ``--claim-dir``). The keys, the run identity and (in
decoupled mode) the run's action key reach the services as secrets and variables, and every
service runs unprivileged with a read-only root, as the Kubernetes pods do
(:mod:`rl_bringup.tools.deploy.k8s_objects`); see docs/kubernetes.md and docs/reliability.md.
``docker/compose.yaml`` is this command's output for ``hybrid robots:=2``; a unit test checks it.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from rl_bringup.plan import paths
from rl_bringup.plan.deployment import MAX_ROBOTS
from rl_bringup.plan.discovery import DOMAIN_ID_VARIABLE
from rl_bringup.plan.run_key import RUN_ID_FILE_NAME, SIGNING_KINDS, run_identity, run_token
from rl_bringup.tools.deploy.containers import (
    CONTAINER_ENVIRONMENT,
    DEFAULT_DOMAIN_ID,
    DEFAULT_IMAGE,
    IMAGE_CONFIG_DIR,
    OUTPUT_DIR,
    Container,
    ContainerLayout,
    action_key_environment,
    action_key_file,
    image_from_values,
    layout_from_values,
    needs_action_key,
    replica_command,
    weights_key_file,
)
from rl_bringup.tools.deploy.k8s_objects import IMAGE_UID, SCRATCH_ENVIRONMENT, SCRATCH_MOUNT
from rl_bringup.tools.subcommand import EXIT_FAILURE, SubparsersAction, ToolError, add_tool
from rl_core.security import action_auth, weights_auth

COMMAND = "compose"
KEYS: tuple[str, ...] = ("robots", "output", "config", "image", "max_robots")
NETWORK = "rl_net"
SECRET = "weights_key"
SECRET_PATH = f"/run/secrets/{SECRET}"
#: The public key, the only key a robot service gets (rl_bringup.plan.run_key).
PUBLIC_SECRET = "weights_public_key"
PUBLIC_SECRET_PATH = f"/run/secrets/{PUBLIC_SECRET}"
#: The run's action key, for the services whose simulator's policy runs in another service.
ACTION_SECRET = "action_key"
ACTION_SECRET_PATH = f"/run/secrets/{ACTION_SECRET}"
CLAIMS_VOLUME = "robot_claims"
CLAIMS_DIR = "/run/rl_ros2/robot_claims"
CONFIG_VARIABLE = "RL_CONFIG"
OVERRIDES_DIR = "/etc/rl_ros2"
DOCKERFILE = "docker/Dockerfile"
RUNS_FOLDER = "runs"
#: The image's user (docker/Dockerfile), the same uid the Kubernetes pods run as.
SERVICE_USER = f"{IMAGE_UID}:{IMAGE_UID}"
#: The hardening every service gets (the pods' securityContext, in compose's words): no
#: capabilities at all (no node binds a low port, changes owners or uses raw sockets) and no
#: privilege gain through setuid binaries.
HARDENING: dict[str, Any] = {
    "user": SERVICE_USER,
    "read_only": True,
    "tmpfs": [SCRATCH_MOUNT],
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges:true"],
}


class _ComposeDumper(yaml.SafeDumper):
    """Plain YAML for people: no anchors, multi-line text (parameter files) as ``|`` blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_ComposeDumper.add_representer(str, _represent_text)


def _scenario_path(layout: ContainerLayout) -> str:
    """The scenario file inside the image, switchable with ``RL_CONFIG`` at ``up`` time.

    :raises ToolError: for a scenario the image does not carry.
    """
    scenario = Path(layout.plan.config_file).resolve()
    installed = paths.config_directory().resolve()
    if scenario.parent != installed:
        raise ToolError(f"compose runs the scenarios installed in the image ({installed}/*.yaml); "
                        f"{scenario} is not one of them: copy it into {installed} and rebuild "
                        "the image")
    return f"{IMAGE_CONFIG_DIR}/${{{CONFIG_VARIABLE}:-{scenario.stem}}}.yaml"


def _environment(container: Container) -> dict[str, str]:
    environment = dict(container.process.env)
    # One domain for every service, chosen when the project starts.
    default = environment[DOMAIN_ID_VARIABLE]
    environment[DOMAIN_ID_VARIABLE] = f"${{{DOMAIN_ID_VARIABLE}:-{default}}}"
    # One run identity for every service, given when the project starts (the file is committed:
    # no token of one folder in it).
    environment[weights_auth.RUN_ID_VARIABLE] = f"${{{weights_auth.RUN_ID_VARIABLE}:-}}"
    key = ({weights_auth.KEY_FILE_VARIABLE: SECRET_PATH} if _signs(container) else
           {weights_auth.KEY_FILE_VARIABLE: "",
            weights_auth.PUBLIC_KEY_FILE_VARIABLE: PUBLIC_SECRET_PATH})
    if needs_action_key(container):
        key.update(action_key_environment(ACTION_SECRET_PATH))
    # The root filesystem is read-only: HOME (ROS's logs under ROS_HOME, matplotlib's cache)
    # moves to the tmpfs, as in the pods.
    return {**environment, **CONTAINER_ENVIRONMENT, **SCRATCH_ENVIRONMENT, **key}


def _signs(container: Container) -> bool:
    """Whether the service hosts a node that signs weights or status: only those get the
    private key."""
    return bool(SIGNING_KINDS & set(container.kinds))


def _relative(target: Path, folder: Path) -> str:
    """``target`` relative to the compose file's folder (compose resolves paths from there)."""
    return os.path.relpath(target, folder)


def _service(layout: ContainerLayout, container: Container, *, image: str, folder: Path,
             repository: Path | None) -> dict[str, Any]:
    service: dict[str, Any] = {"image": image}
    if repository is not None:
        service["build"] = {"context": _relative(repository, folder), "dockerfile": DOCKERFILE}
    overrides = f"{OVERRIDES_DIR}/{container.overrides_name()}"
    command = container.command(_scenario_path(layout), overrides)
    if container.robot:
        command = replica_command(command, ["--claim-dir", f"{CLAIMS_DIR}/{container.name}"],
                                  layout.max_robots)
    service["command"] = command
    service["environment"] = _environment(container)
    service["networks"] = [NETWORK]
    service["init"] = True  # signals reach the node process; zombies are reaped
    service.update(copy.deepcopy(HARDENING))  # copies: no YAML shared between services
    service["secrets"] = [SECRET if _signs(container) else PUBLIC_SECRET]
    if needs_action_key(container):
        service["secrets"].append(ACTION_SECRET)
    if container.process.has_overrides:
        service["configs"] = [{"source": _config_name(container), "target": overrides}]
    if container.robot:
        service["scale"] = layout.plan.robots
        service["restart"] = "on-failure"
        service["depends_on"] = [learner.name for learner in layout.learner]
        service["volumes"] = [f"{CLAIMS_VOLUME}:{CLAIMS_DIR}"]
    else:
        runs = (repository / RUNS_FOLDER) if repository is not None else folder / RUNS_FOLDER
        service["volumes"] = [f"{_relative(runs, folder)}:{OUTPUT_DIR}"]
    return service


def _config_name(container: Container) -> str:
    return f"{container.name}_parameters"


def compose_document(layout: ContainerLayout, *, image: str, folder: Path,
                     repository: Path | None) -> dict[str, Any]:
    """The compose file as a mapping.

    :param folder: the folder the compose file goes into (relative paths start there).
    :param repository: the source checkout to build the image from; ``None``: no ``build``.
    """
    services = {container.name: _service(layout, container, image=image, folder=folder,
                                          repository=repository)
                for container in layout.containers}
    document: dict[str, Any] = {"services": services}
    configs = {_config_name(container): {"content": container.process.overrides_document()}
               for container in layout.containers if container.process.has_overrides}
    if configs:
        document["configs"] = configs
    document["secrets"] = {SECRET: {"file": f"./{weights_auth.KEY_FILE_NAME}"},
                           PUBLIC_SECRET: {"file": f"./{weights_auth.PUBLIC_KEY_FILE_NAME}"}}
    if layout.needs_action_key:
        document["secrets"][ACTION_SECRET] = {"file": f"./{action_auth.KEY_FILE_NAME}"}
    # internal: no gateway out of the machine; SUBNET discovery multicast stays on the bridge.
    document["networks"] = {NETWORK: {"internal": True}}
    if layout.robots:
        document["volumes"] = {CLAIMS_VOLUME: {}}
    return document


def _header(layout: ContainerLayout, regenerate: str) -> str:
    main = layout.main.name
    robots = [container.name for container in layout.robots]
    scale = " ".join(f"--scale {name}=N" for name in robots)
    lines = [
        "Generated from the deployment plan (rl_bringup.plan); regenerate it, do not edit it:",
        f"  {regenerate}",
        "",
        f"Mode {layout.plan.mode}: services {', '.join(c.name for c in layout.containers)} on the "
        f"internal network {NETWORK}.",
        f"DDS discovers by multicast (SUBNET) on {NETWORK} only, which has no route out of this "
        "machine, and",
        "runs over UDP only: shared memory cannot cross containers.",
        f"Every service runs as uid {IMAGE_UID} with a read-only root filesystem (a tmpfs at "
        f"{SCRATCH_MOUNT} for logs), no",
        "capabilities and no-new-privileges; compose.sros2.yaml adds SROS2 (docker/README.md).",
        "",
        f"  ROS_DOMAIN_ID={DEFAULT_DOMAIN_ID} docker compose -f FILE up --build "
        f"--abort-on-container-exit --exit-code-from {main}" + (f" [{scale}]" if robots else ""),
        "",
        f"--exit-code-from {main}: the run ends with the trainer (exit 0 when training is done).",
        f"{CONFIG_VARIABLE}=NAME picks another scenario of the image's config folder.",
        "The weights are signed with the key in weights.key beside this file (rl-bringup compose",
        "writes it); without rl-bringup create it once:",
        "  python3 -c 'import secrets; print(secrets.token_hex(32))' > weights.key "
        "&& chmod 600 weights.key",
        f"{weights_auth.RUN_ID_VARIABLE}=ID at up time binds those signatures to this run "
        "(rl-bringup compose",
        f"prints one, kept in {RUN_ID_FILE_NAME}); unset, they bind none.",
    ]
    acting = [container.name for container in layout.containers if needs_action_key(container)]
    if acting:
        lines += [
            f"{' and '.join(acting)} authenticate actions with the run key in "
            f"{action_auth.KEY_FILE_NAME} (made the same way); every",
            "replica holds it, so one taken over could drive any robot of this deployment.",
        ]
    if robots:
        lines += [
            "",
            f"Robots: {layout.plan.robots} replicas of {' and of '.join(robots)} (scale:, or "
            "--scale at up time). Each replica",
            f"claims the lowest free robot index in the volume {CLAIMS_VOLUME} "
            "(python3 -m rl_bringup.run.replica)",
            f"and runs as /robot_<index>; the learner accepts robot ids below "
            f"max_robots={layout.max_robots}.",
        ]
    return "".join(f"# {line}".rstrip() + "\n" for line in lines) + "\n"


def regenerate_command(layout: ContainerLayout, output: str, image: str) -> str:
    """The ``rl-bringup compose`` line that writes this file again."""
    words = ["rl-bringup", COMMAND, layout.plan.mode, f"robots:={layout.plan.robots}"]
    if Path(layout.plan.config_file).stem != "cartpole":
        words.append(f"config:={Path(layout.plan.config_file).stem}")
    if image != DEFAULT_IMAGE:
        words.append(f"image:={image}")
    if layout.max_robots != MAX_ROBOTS:
        words.append(f"max_robots:={layout.max_robots}")
    return " ".join([*words, f"output:={output}"])


def compose_text(layout: ContainerLayout, output: Path, image: str = DEFAULT_IMAGE) -> str:
    """The compose file for ``output`` (its folder anchors the relative paths)."""
    repository = paths.source_root()
    folder = output.resolve().parent
    shown = output.resolve()
    if repository is not None and shown.is_relative_to(repository.resolve()):
        shown = shown.relative_to(repository.resolve())
    document = compose_document(layout, image=image, folder=folder, repository=repository)
    body = yaml.dump(document, Dumper=_ComposeDumper, sort_keys=False, width=100)
    return _header(layout, regenerate_command(layout, str(shown), image)) + body


def compose(values: dict[str, str]) -> int:
    """``rl-bringup compose MODE robots:=N output:=FILE ...``.

    :return: the exit code.
    :raises ToolError: exit 2 for bad input, 1 when the file cannot be written.
    """
    if not values.get("output"):
        raise ToolError("missing output:=FILE (the compose file to write, e.g. "
                        "docker/compose.yaml)")
    image = image_from_values(values)
    _, layout = layout_from_values(values, discovery="subnet", domain_id=DEFAULT_DOMAIN_ID)
    output = Path(values["output"]).expanduser()
    text = compose_text(layout, output, image)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    except OSError as error:
        raise ToolError(f"cannot write {output}: {error}", EXIT_FAILURE) from None
    key = weights_key_file(output.parent)
    action_key = f"; action key {action_key_file(output.parent)}" \
        if layout.needs_action_key else ""
    try:
        run_id = run_identity(run_token(output.parent), layout.plan.namespace)
    except OSError as error:
        raise ToolError(f"cannot write {output.parent / RUN_ID_FILE_NAME}: {error}",
                        EXIT_FAILURE) from None
    print(f"wrote {output}; weights key {key}{action_key}")
    scale = " ".join(f"--scale {container.name}={layout.plan.robots}"
                     for container in layout.robots)
    print(f"run:  {weights_auth.RUN_ID_VARIABLE}={run_id} "
          f"ROS_DOMAIN_ID={DEFAULT_DOMAIN_ID} docker compose -f {output} up --build "
          f"--abort-on-container-exit --exit-code-from {layout.main.name} {scale}".rstrip())
    return 0


def register(subparsers: SubparsersAction) -> None:
    """Add ``compose`` to the ``rl-bringup`` subcommands."""
    add_tool(
        subparsers, COMMAND, compose, keys=KEYS, takes_mode=True,
        help="write a docker compose file of a mode from the plan (robots as a scalable service)",
        description="Write a docker compose file for MODE (colocated, decoupled, hybrid): the "
        "learner processes as services, each robot process as one service started robots "
        "times (docker compose up --scale robot=N; each replica claims its robot index). "
        "key:=value arguments: robots:=N (1..64), output:=FILE (required), config:=NAME (a "
        f"scenario of config/, default cartpole), image:=IMAGE (default {DEFAULT_IMAGE}), "
        "max_robots:=K (robot ids the learner accepts, so the most replicas; default 64).",
    )
