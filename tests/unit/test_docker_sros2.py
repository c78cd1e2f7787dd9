"""Unit tests of the SROS2 overlay of docker/ (what can be checked without Docker or sros2).

Every service of compose.yaml that runs nodes gets security enforced with an enclave that the
keystore service creates; each service mounts, read-only, a volume of its own into which the
keystore service copies that service's enclave and the CA certificates, never the CA's private
keys (``private/``) or another service's enclave. The keystore script runs here against a fake
``ros2`` that lays out a keystore as sros2 does (public/, private/, enclaves/ with symlinks to
the CA certificates and the governance), so its copy step is tested on real files. The keystore
service is as restricted as the node services; the image has ``ros2 security`` and the script.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.container_commands import parse_node_command

pytestmark = pytest.mark.unit

DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"
SCRIPT = DOCKER_DIR / "sros2_keystore.sh"
PUBLIC_CERTS = {"ca.cert.pem", "identity_ca.cert.pem", "permissions_ca.cert.pem"}
#: The files rmw_dds_common reads from an enclave folder (get_security_files).
ENCLAVE_FILES = {"identity_ca.cert.pem", "cert.pem", "key.pem", "permissions_ca.cert.pem",
                 "governance.p7s", "permissions.p7s"}

#: A stand-in for ``ros2 security create_keystore|create_enclave`` with sros2's layout: the CA's
#: key in private/ (identity_ca and permissions_ca keys link to it), its certificate in public/
#: (linked likewise), enclaves/governance.p7s, and per enclave a key and certificate of its own
#: plus links to the CA certificates and the governance. It refuses an existing keystore, as
#: sros2 does, and logs each call.
FAKE_ROS2 = '''\
import os, secrets, sys
from pathlib import Path

verb, keystore = sys.argv[2], Path(sys.argv[3])
with open(os.environ["FAKE_ROS2_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
domain = os.environ.get("ROS_DOMAIN_ID", "0")
if verb == "create_keystore":
    if (keystore / "enclaves" / "governance.p7s").is_file():
        sys.exit("keystore exists")
    for folder in ("public", "private", "enclaves"):
        (keystore / folder).mkdir(parents=True, exist_ok=True)
    (keystore / "private" / "ca.key.pem").write_text(
        f"-----BEGIN PRIVATE KEY-----\\nca {secrets.token_hex(8)}\\n-----END PRIVATE KEY-----\\n")
    (keystore / "public" / "ca.cert.pem").write_text(
        f"-----BEGIN CERTIFICATE-----\\nca {secrets.token_hex(8)}\\n")
    for kind in ("identity_ca", "permissions_ca"):
        (keystore / "private" / f"{kind}.key.pem").symlink_to("ca.key.pem")
        (keystore / "public" / f"{kind}.cert.pem").symlink_to("ca.cert.pem")
    (keystore / "enclaves" / "governance.xml").write_text(f"<id>{domain}</id>")
    (keystore / "enclaves" / "governance.p7s").write_text(f"signed <id>{domain}</id>")
elif verb == "create_enclave":
    name = sys.argv[4]
    folder = keystore / "enclaves" / name.lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    for cert in ("identity_ca.cert.pem", "permissions_ca.cert.pem"):
        target = os.path.relpath(keystore / "public" / cert, folder)
        if not (folder / cert).is_symlink():
            (folder / cert).symlink_to(target)
    if not (folder / "governance.p7s").is_symlink():
        (folder / "governance.p7s").symlink_to(
            os.path.relpath(keystore / "enclaves" / "governance.p7s", folder))
    if not (folder / "key.pem").is_file():
        (folder / "key.pem").write_text(
            f"-----BEGIN PRIVATE KEY-----\\n{name} {secrets.token_hex(8)}\\n")
        (folder / "cert.pem").write_text(f"-----BEGIN CERTIFICATE-----\\n{name}\\n")
    (folder / "permissions.xml").write_text(f"<grant>{name} {domain}</grant>")
    (folder / "permissions.p7s").write_text(f"signed <grant>{name} {domain}</grant>")
else:
    sys.exit(f"unexpected {sys.argv}")
'''


def compose(name: str) -> dict[str, Any]:
    return yaml.safe_load((DOCKER_DIR / name).read_text())


def node_services() -> dict[str, tuple[list[str], bool]]:
    """Services of compose.yaml that run nodes: name -> (their namespaces, scalable)."""
    services = {}
    for name, service in compose("compose.yaml")["services"].items():
        command = parse_node_command(service["command"])
        namespaces = sorted({node.split("@", 1)[1] for node in command.nodes})
        services[name] = (namespaces, bool(command.replica))
    return services


def mounts(service: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """``target -> (source, read_only)`` of a service's short-syntax volumes."""
    table = {}
    for volume in service.get("volumes", []):
        source, target, *options = volume.split(":")
        table[target] = (source, "ro" in options)
    return table


def merged_mounts(name: str) -> dict[str, tuple[str, bool]]:
    """A node service's mounts once compose merges compose.yaml and the overlay (by target)."""
    base = compose("compose.yaml")["services"][name]
    return {**mounts(base), **mounts(compose("compose.sros2.yaml")["services"][name])}


def keystore_plan() -> tuple[str, dict[str, list[str]]]:
    """The keystore service's command read: (CA keystore folder, DEST folder -> enclaves)."""
    command = compose("compose.sros2.yaml")["services"]["keystore"]["command"]
    assert command[0] == "sros2_keystore.sh", command
    keystore, specs = command[1], command[2:]
    given: dict[str, list[str]] = {}
    for spec in specs:
        enclave, separator, dest = spec.partition("=")
        assert separator, f"{spec}: every enclave goes to the volume of the service using it"
        given.setdefault(dest, []).append(enclave)
    return keystore, given


def expand(value: str) -> str:
    """A compose value with ``${NAME:-default}`` replaced by its default."""
    return re.sub(r"\$\{[A-Za-z_]+:-([^}]*)\}", r"\1", str(value))


def fake_ros2(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``ros2`` is :data:`FAKE_ROS2` (calls logged to ``ros2.log``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    ros2 = bin_dir / "ros2"
    ros2.write_text(f"#!{sys.executable}\n{FAKE_ROS2}")
    ros2.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_ROS2_LOG": str(tmp_path / "ros2.log"),
            "ROS_DOMAIN_ID": "42", "HOME": str(tmp_path)}


def run_script(*arguments: str | Path, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *map(str, arguments)], capture_output=True,
                          text=True, timeout=60, env=environment, check=False)


def files_under(folder: Path) -> dict[str, Path]:
    """Every entry under ``folder`` by its relative path."""
    return {str(path.relative_to(folder)): path for path in folder.rglob("*")}


def ca_secrets(keystore: Path) -> list[bytes]:
    return [path.read_bytes() for path in (keystore / "private").iterdir()]


def assert_holds_only(dest: Path, keystore: Path, enclaves: set[str]) -> None:
    """``dest`` has the public certificates and exactly ``enclaves``, as plain files (links
    followed), and none of the CA's private keys."""
    entries = files_under(dest)
    assert not any(part == "private" for name in entries for part in Path(name).parts), entries
    assert {path.name for path in (dest / "public").iterdir()} == PUBLIC_CERTS
    given = {"/" + str(path.parent.relative_to(dest / "enclaves"))
             for path in (dest / "enclaves").rglob("key.pem")}
    assert given == enclaves, entries
    secrets = ca_secrets(keystore)
    for name, path in entries.items():
        assert not path.is_symlink(), f"{name} is a link: it would dangle without the keystore"
        if path.is_file():
            assert path.read_bytes() not in secrets, f"{name} is the CA's private key"
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, name
    for enclave in enclaves:
        folder = dest / "enclaves" / enclave.lstrip("/")
        assert ENCLAVE_FILES <= {path.name for path in folder.iterdir()}, enclave
        source = keystore / "enclaves" / enclave.lstrip("/")
        for name in ENCLAVE_FILES:
            assert (folder / name).read_bytes() == (source / name).read_bytes(), (enclave, name)


def test_every_node_service_enforces_security_with_an_enclave_of_its_own_volume() -> None:
    overlay = compose("compose.sros2.yaml")["services"]
    keystore_mounts = mounts(overlay["keystore"])
    _, given = keystore_plan()
    services = node_services()
    assert set(overlay) - {"keystore"} == set(services), "the overlay names compose.yaml's services"
    volumes = {}
    for name, (namespaces, scalable) in services.items():
        environment = overlay[name]["environment"]
        assert environment["ROS_SECURITY_ENABLE"] == "true"
        assert environment["ROS_SECURITY_STRATEGY"] == "Enforce"  # no silent fallback
        assert overlay[name]["depends_on"]["keystore"]["condition"] == \
            "service_completed_successfully"
        # The keystore folder is one volume, read-only, that the keystore service fills with
        # this service's enclave alone.
        volume, read_only = merged_mounts(name)[environment["ROS_SECURITY_KEYSTORE"]]
        assert read_only, name
        (dest,) = [target for target, (source, _) in keystore_mounts.items() if source == volume]
        enclave = environment["ROS_SECURITY_ENCLAVE_OVERRIDE"]
        assert given[dest] == [enclave], (name, given)
        volumes[name] = volume
        # One participant per process: the learner's enclave is its own; the replicas of a
        # scalable robot service (namespace known only at start) share the /robot enclave.
        if scalable:
            assert enclave == "/robot", (name, enclave)
        else:
            assert namespaces == ["/"] and enclave == f"/{name}", (name, namespaces, enclave)
    assert len(set(volumes.values())) == len(volumes), volumes
    assert set(given) == {dest for dest, (source, _) in keystore_mounts.items()
                          if source in volumes.values()}
    # Nothing in the overlay pins a robot replica (a name would stop --scale).
    assert not {"container_name", "hostname"} & set(overlay["robot"])


def test_only_the_keystore_service_mounts_the_ca_and_no_service_sees_anothers_keys() -> None:
    overlay = compose("compose.sros2.yaml")["services"]
    keystore, given = keystore_plan()
    keystore_mounts = mounts(overlay["keystore"])
    ca_volume = keystore_mounts[keystore][0]
    assert not keystore_mounts[keystore][1], "the keystore service writes the CA volume"
    assert overlay["keystore"]["network_mode"] == "none"
    for name in node_services():
        own = overlay[name]["environment"]["ROS_SECURITY_ENCLAVE_OVERRIDE"]
        sources = {source for source, _ in merged_mounts(name).values()}
        assert ca_volume not in sources, f"{name} mounts the CA's private keys"
        for dest, enclaves in given.items():
            if keystore_mounts[dest][0] in sources:
                assert enclaves == [own], f"{name} can read the keys of {enclaves}"
        assert not any(source.startswith((".", "/")) and "keystore" in source
                       for source in sources), f"{name} bind-mounts a keystore folder"


def test_the_keystore_service_run_gives_each_volume_its_enclave_and_no_private_key(
        tmp_path: Path) -> None:
    """The keystore service's own command, run with its volumes as folders here: what each
    node service then mounts holds its enclave and the CA certificates only."""
    overlay = compose("compose.sros2.yaml")["services"]
    volume_folders = {}
    for target, (volume, _) in mounts(overlay["keystore"]).items():
        volume_folders[target] = tmp_path / "volumes" / volume
        volume_folders[target].mkdir(parents=True)

    def here(argument: str) -> str:
        for target, folder in volume_folders.items():
            argument = argument.replace(target, str(folder))
        return argument

    command = overlay["keystore"]["command"]
    environment = fake_ros2(tmp_path)
    environment["ROS_DOMAIN_ID"] = expand(overlay["keystore"]["environment"]["ROS_DOMAIN_ID"])
    done = run_script(*map(here, command[1:]), environment=environment)
    assert done.returncode == 0, done.stderr
    keystore = Path(here(command[1]))
    assert (keystore / "private" / "ca.key.pem").is_file()
    for name in node_services():
        security = overlay[name]["environment"]
        volume, _ = merged_mounts(name)[security["ROS_SECURITY_KEYSTORE"]]
        assert_holds_only(tmp_path / "volumes" / volume, keystore,
                          {security["ROS_SECURITY_ENCLAVE_OVERRIDE"]})


def test_distribute_copies_enclaves_dereferenced_and_drops_what_is_no_longer_given(
        tmp_path: Path) -> None:
    environment = fake_ros2(tmp_path)
    keystore = tmp_path / "ca"
    done = run_script(keystore, "/learner", "/robot", "/robot/arm", environment=environment)
    assert done.returncode == 0, done.stderr
    assert (keystore / "enclaves" / "robot" / "identity_ca.cert.pem").is_symlink()  # as sros2
    dest = tmp_path / "robots"
    dest.mkdir()
    done = run_script("--distribute", keystore, dest, "/robot", "/learner",
                      environment=environment)
    assert done.returncode == 0, done.stderr
    # The nested enclave /robot/arm is another identity: giving /robot does not give it.
    assert_holds_only(dest, keystore, {"/robot", "/learner"})
    done = run_script("--distribute", keystore, dest, "/robot", environment=environment)
    assert done.returncode == 0, done.stderr
    assert_holds_only(dest, keystore, {"/robot"})  # the learner's key is gone from the volume


@pytest.mark.parametrize("arguments", [
    ("--distribute", "{ca}", "{ca}/enclaves", "/robot"),  # into the keystore
    ("--distribute", "{ca}", "{tmp}", "/robot"),  # around it
    ("--distribute", "{ca}", "{out}", "/../private"),  # a path, not an enclave name
    ("--distribute", "{ca}", "{out}", "/nobody"),
    ("{ca}", "/robot={ca}/enclaves"),
])
def test_the_script_refuses_destinations_that_would_hold_the_keystore(
        tmp_path: Path, arguments: tuple[str, ...]) -> None:
    environment = fake_ros2(tmp_path)
    keystore = tmp_path / "ca"
    assert run_script(keystore, "/robot", environment=environment).returncode == 0
    (tmp_path / "out").mkdir()
    names = {"ca": keystore, "tmp": tmp_path, "out": tmp_path / "out"}
    done = run_script(*(argument.format(**names) for argument in arguments),
                      environment=environment)
    assert done.returncode != 0, done.stdout
    assert not list((tmp_path / "out").iterdir())
    assert not (keystore / "enclaves" / "enclaves").exists()


def test_a_ca_key_linked_into_an_enclave_is_never_handed_out(tmp_path: Path) -> None:
    environment = fake_ros2(tmp_path)
    keystore = tmp_path / "ca"
    assert run_script(keystore, "/robot", environment=environment).returncode == 0
    (keystore / "enclaves" / "robot" / "extra.pem").symlink_to("../../private/ca.key.pem")
    dest = tmp_path / "robots"
    dest.mkdir()
    done = run_script("--distribute", keystore, dest, "/robot", environment=environment)
    assert done.returncode != 0 and "refusing" in done.stderr, done.stderr


def test_create_keeps_identities_and_refuses_a_keystore_of_another_domain(tmp_path: Path) -> None:
    environment = fake_ros2(tmp_path)
    keystore = tmp_path / "ca"
    dest = tmp_path / "learner"
    dest.mkdir()
    assert run_script(keystore, f"/learner={dest}", environment=environment).returncode == 0
    key = (dest / "enclaves" / "learner" / "key.pem").read_bytes()
    calls = (tmp_path / "ros2.log").read_text().splitlines()
    assert [call.split()[1] for call in calls] == ["create_keystore", "create_enclave"]
    assert run_script(keystore, f"/learner={dest}", environment=environment).returncode == 0
    assert (tmp_path / "ros2.log").read_text().splitlines() == calls, "identities are kept"
    assert (dest / "enclaves" / "learner" / "key.pem").read_bytes() == key
    done = run_script(keystore, f"/learner={dest}",
                      environment={**environment, "ROS_DOMAIN_ID": "7"})
    assert done.returncode == 2 and "ROS_DOMAIN_ID 42" in done.stderr, done.stderr
    without = {name: value for name, value in environment.items() if name != "ROS_DOMAIN_ID"}
    assert run_script(tmp_path / "other", "/learner", environment=without).returncode != 0


def test_the_keystore_service_is_restricted_and_signs_for_the_nodes_domain() -> None:
    keystore = compose("compose.sros2.yaml")["services"]["keystore"]
    user = str(keystore["user"]).split(":")
    assert int(user[0]) != 0 and int(user[-1]) != 0
    assert keystore["read_only"] is True
    assert keystore["cap_drop"] == ["ALL"] and "cap_add" not in keystore
    assert "no-new-privileges:true" in keystore["security_opt"]
    assert "/tmp" in keystore["tmpfs"] and keystore["environment"]["HOME"].startswith("/tmp")
    domains = {expand(service["environment"]["ROS_DOMAIN_ID"])
               for service in compose("compose.yaml")["services"].values()}
    assert domains == {expand(keystore["environment"]["ROS_DOMAIN_ID"])}


def test_image_has_ros2_security_and_the_keystore_script() -> None:
    text = (DOCKER_DIR / "Dockerfile").read_text().replace("\\\n", " ")
    installs = [shlex.split(line.split("apt-get install", 1)[1].split("&&", 1)[0])
                for line in text.splitlines() if "apt-get install" in line]
    assert any("ros-kilted-sros2" in packages for packages in installs), installs
    copies = [shlex.split(line)[1:] for line in text.splitlines() if line.startswith("COPY ")]
    assert ["docker/sros2_keystore.sh", "/usr/local/bin/sros2_keystore.sh"] in copies


def test_keystore_script_is_valid_bash_and_explains_its_usage() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "usage:" in done.stderr
