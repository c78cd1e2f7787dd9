"""Unit tests of docker/Dockerfile and the entry point: what can be checked without Docker.

The Dockerfile's pinned learning dependencies must equal requirements.txt's; the dependencies
the package manifests declare come from rosdep, not from a hand-kept apt list; the
network-safety settings hold. The Dockerfile and the entry-point script are parsed into
instructions and command lines (shlex), so the tests check what would run, not how the text is
spelled. The compose files are tested in test_compose.py and test_docker_sros2.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from rl_bringup.tools.deploy.containers import IMAGE_INSTALL

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO_ROOT / "docker"
LEARNING_PACKAGES = ("torch", "pybullet", "gymnasium", "safetensors")
PIN = re.compile(r"^\s*([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)\s*$")


def requirement_pins() -> dict[str, str]:
    """``name -> version`` of the ``==`` pins in requirements.txt (names lower-cased)."""
    pins = {}
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        match = PIN.match(line.split("#", 1)[0])
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: ``FROM``, ``RUN``, ... and the text after it."""

    keyword: str
    arguments: str


def dockerfile() -> list[Instruction]:
    """docker/Dockerfile as instructions: comment lines dropped (also inside a continued
    instruction, as Docker does), backslash continuations joined."""
    instructions: list[Instruction] = []
    pending = ""
    for line in (DOCKER_DIR / "Dockerfile").read_text().splitlines():
        if line.strip().startswith("#") or (not line.strip() and not pending):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, arguments = pending.strip().partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return instructions


def arguments_of(keyword: str) -> list[str]:
    """The arguments of every ``keyword`` instruction, in order."""
    return [instruction.arguments for instruction in dockerfile() if instruction.keyword == keyword]


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a shell line (``a && b; c``), each split as the shell would."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in ("&&", "||", ";", "|"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [command for command in commands if command]


def run_commands() -> list[list[str]]:
    """Every command the image build runs, in order."""
    return [command for script in arguments_of("RUN") for command in shell_commands(script)]


def installed(manager: tuple[str, ...]) -> list[str]:
    """What ``manager install`` commands install (options and their values left out)."""
    packages: list[str] = []
    for command in run_commands():
        if tuple(command[:len(manager)]) != manager or "install" not in command:
            continue
        words = command[command.index("install") + 1:]
        skip_value = False
        for word in words:
            if skip_value:
                skip_value = False
            elif word in ("--index-url", "--extra-index-url", "-i"):
                skip_value = True
            elif not word.startswith("-"):
                packages.append(word)
    return packages


def environment() -> dict[str, str]:
    """The ``ENV KEY=VALUE ...`` settings of the image."""
    pairs = [word.split("=", 1) for text in arguments_of("ENV") for word in shlex.split(text)]
    return dict(pairs)


def test_dockerfile_pins_equal_requirements() -> None:
    pins = requirement_pins()
    pip_pins = dict(package.lower().split("==", 1) for package in installed(("pip3",))
                    if "==" in package)
    for package in LEARNING_PACKAGES:
        assert package in pip_pins, f"{package} is not pinned in the Dockerfile"
        assert pip_pins[package] == pins[package], (
            f"{package}: Dockerfile {pip_pins[package]} != requirements.txt {pins[package]}"
        )


def test_dockerfile_does_not_pip_install_ros_wheels_or_numpy() -> None:
    names = [re.split(r"[=<>!~\[]", package, maxsplit=1)[0].lower()
             for package in installed(("pip3",))]
    assert names
    for name in names:
        assert not name.startswith("ros"), "ROS packages come from apt in the image"
        # The ROS extensions are built against the apt numpy; a pip numpy would shadow it.
        assert name != "numpy"


def test_dockerfile_builds_on_kilted_with_colcon_and_the_repository_sources() -> None:
    assert arguments_of("FROM") == ["ros:kilted"]
    # The generated deployments run the executables from IMAGE_INSTALL (rl-bringup k8s, compose).
    assert arguments_of("WORKDIR")[0] == str(PurePosixPath(IMAGE_INSTALL).parent)
    copied = [shlex.split(text) for text in arguments_of("COPY")]
    assert {"src", "config", "launch"} <= {sources[0] for sources in copied}
    commands = run_commands()
    build = next(index for index, command in enumerate(commands) if command[:2] == ["colcon", "build"])
    assert commands[build - 1] == ["source", "/opt/ros/kilted/setup.bash"]
    assert {"ros-kilted-rviz2", "ros-kilted-rqt"} <= set(installed(("apt-get",)))
    assert environment()["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    (entrypoint,) = [json.loads(text) for text in arguments_of("ENTRYPOINT")]
    assert entrypoint == ["/entrypoint.sh"]
    assert ["docker/entrypoint.sh", "/entrypoint.sh"] in copied
    script = [command for line in (DOCKER_DIR / "entrypoint.sh").read_text().splitlines()
              if not line.lstrip().startswith("#") for command in shell_commands(line)]
    assert ["source", "/opt/ros/kilted/setup.bash"] in script
    assert script[-1] == ["exec", "$@"]


def test_the_image_runs_as_an_unprivileged_user_that_owns_its_output_folders() -> None:
    """Issue 19: no process of the image runs as root (the k8s pods run as the same uid)."""
    from rl_bringup.tools.deploy.k8s_objects import IMAGE_UID

    instructions = dockerfile()
    users = [index for index, instruction in enumerate(instructions) if instruction.keyword == "USER"]
    assert users and arguments_of("USER")[-1] == f"{IMAGE_UID}:{IMAGE_UID}"
    assert all(instruction.keyword not in ("RUN", "COPY", "ADD")
               for instruction in instructions[users[-1]:]), "root steps after USER"
    commands = run_commands()
    (useradd,) = [command for command in commands if command[:1] == ["useradd"]]
    assert option_value(useradd, "--uid") == str(IMAGE_UID)
    owned = [command for command in commands if command[:1] == ["chown"]]
    assert owned and {"/runs", "/run/rl_ros2/robot_claims"} <= set(owned[0][2:])
    assert arguments_of("WORKDIR")[-1] == environment()["HOME"] == "/home/rl"


def test_the_sros2_keystore_volumes_are_mounted_on_folders_of_the_user_alone() -> None:
    """A fresh named volume takes its mount point's owner and mode from the image: the
    keystore service (compose.sros2.yaml), running as the image's user, must be able to write
    its volumes, and their keys must be the user's alone."""
    import yaml

    overlay = yaml.safe_load((DOCKER_DIR / "compose.sros2.yaml").read_text())
    targets = {volume.split(":")[1] for volume in overlay["services"]["keystore"]["volumes"]}
    commands = run_commands()
    created = {folder for command in commands if command[:2] == ["mkdir", "-p"]
               for folder in command[2:]}
    (chown,) = [command for command in commands if command[:1] == ["chown"]]
    assert chown[1] == "rl:rl"
    modes = {folder: command[1] for command in commands if command[:1] == ["chmod"]
             for folder in command[2:]}
    for target in targets:
        assert target in created and target in chown[2:], target
        assert modes.get(target) == "0700", target
        assert target.startswith("/run/rl_ros2/"), target


def declared_keys() -> set[str]:
    """The run-time rosdep keys the package manifests under src/ declare."""
    import xml.etree.ElementTree as ElementTree

    keys = set()
    for manifest in (REPO_ROOT / "src").glob("*/package.xml"):
        root = ElementTree.parse(manifest).getroot()
        keys |= {element.text.strip() for tag in ("depend", "exec_depend")
                 for element in root.iter(tag) if element.text}
    return keys - {path.name for path in (REPO_ROOT / "src").iterdir()}


def option_value(command: list[str], option: str) -> str:
    return command[command.index(option) + 1]


def test_dockerfile_installs_the_manifests_dependencies_with_rosdep() -> None:
    commands = run_commands()
    (rosdep,) = [command for command in commands if command[:2] == ["rosdep", "install"]]
    assert option_value(rosdep, "--from-paths") == "src"
    assert {"--ignore-src", "-y"} <= set(rosdep)
    assert commands.index(["rosdep", "update", "--rosdistro", "kilted"]) < commands.index(rosdep)
    build = next(command for command in commands if command[:2] == ["colcon", "build"])
    assert commands.index(rosdep) < commands.index(build)
    # Every manifest is in the image before rosdep reads them.
    instructions = dockerfile()
    rosdep_step = next(index for index, instruction in enumerate(instructions)
                       if instruction.keyword == "RUN" and "rosdep install" in instruction.arguments)
    copied_before = {shlex.split(instruction.arguments)[0]
                     for instruction in instructions[:rosdep_step] if instruction.keyword == "COPY"}
    manifests = {str(path.relative_to(REPO_ROOT))
                 for path in (REPO_ROOT / "src").glob("*/package.xml")}
    assert manifests <= copied_before

    # Skipped: exactly the pip keys, each pinned in the pip step to requirements.txt's version.
    keys = declared_keys()
    skipped = set(option_value(rosdep, "--skip-keys").split())
    assert skipped == {key for key in keys if key.endswith("-pip")}
    pins = requirement_pins()
    pip_pins = dict(package.lower().split("==", 1) for package in installed(("pip3",))
                    if "==" in package)
    for key in skipped:
        distribution = key.removeprefix("python3-").removesuffix("-pip")
        assert pip_pins.get(distribution) == pins[distribution], key

    # No hand-kept apt package duplicates what a declared key provides.
    apt = set(installed(("apt-get",)))
    for key in keys - skipped:
        assert key not in apt and f"ros-kilted-{key.replace('_', '-')}" not in apt, key
    assert {"tf2_msgs", "launch_ros", "rmw_fastrtps_cpp", "python3-numpy"} <= keys


def test_dockerfile_copies_what_rl_bringups_symlinks_point_at() -> None:
    """src/rl_bringup/{launch,config} are relative symlinks; in /ws they must resolve to folders
    the image has."""
    package = REPO_ROOT / "src" / "rl_bringup"
    copied = {shlex.split(text)[-1].rstrip("/") for text in arguments_of("COPY")}
    workdir = arguments_of("WORKDIR")[0]  # where the sources are built (the last: $HOME)
    for name in ("launch", "config"):
        link = package / name
        assert link.is_symlink(), link
        in_image = Path(workdir) / "src" / "rl_bringup" / os.readlink(link)
        assert os.path.normpath(in_image) == f"{workdir}/{name}"
        assert f"./{name}" in copied
    # colcon runs in the workdir and reads ./colcon.meta there.
    assert ["colcon.meta", "./"] in [shlex.split(text) for text in arguments_of("COPY")]


def test_torch_variant_build_arg_chooses_the_wheel_index_and_defaults_to_cpu() -> None:
    instructions = dockerfile()
    declared = [index for index, instruction in enumerate(instructions)
                if instruction.keyword == "ARG"
                and instruction.arguments.split("=", 1)[0] == "TORCH_VARIANT"]
    assert len(declared) == 1, "TORCH_VARIANT is declared once"
    assert instructions[declared[0]].arguments == "TORCH_VARIANT=cpu"
    (torch_install,) = [command for command in run_commands() if command[0] == "pip3"
                        and any(word.startswith("torch==") for word in command)]
    index_url = torch_install[torch_install.index("--index-url") + 1]
    assert index_url == "https://download.pytorch.org/whl/${TORCH_VARIANT}"
    # The ARG is in scope (after FROM) before the RUN that uses it.
    first_use = next(index for index, instruction in enumerate(instructions)
                     if instruction.keyword == "RUN"
                     and "${TORCH_VARIANT}" in instruction.arguments)
    from_index = next(index for index, instruction in enumerate(instructions)
                      if instruction.keyword == "FROM")
    assert from_index < declared[0] < first_use
