"""Unit tests of ``rl-bringup k8s``: the kustomize directory renders with ``kubectl kustomize``,
every rendered object validates against the Kubernetes API schema (the official ``kubernetes``
client's models), and the objects do what docs/kubernetes.md says: robots scale by the
StatefulSet's replicas alone, the learner Job keeps output_dir on its volume, every pod
discovers through the discovery server, DDS stays between the deployment's pods."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import yaml
from kubernetes import client

from rl_bringup.plan.deployment import MAX_ROBOTS, make_plan
from rl_bringup.plan.discovery import discovery_server_argv
from rl_bringup.run import replica
from rl_bringup.tools.deploy import k8s_objects
from rl_core.security import action_auth
from tests.unit.container_commands import (
    REPO_ROOT,
    node_executables,
    parse_node_command,
    without_params_files,
)

pytestmark = pytest.mark.unit

MODES = ("colocated", "decoupled", "hybrid")
RENDER_TIMEOUT_S = 60
Objects = list[dict[str, Any]]


def kubectl() -> str:
    """The kubectl binary; skip without one, except under CI, where it must be there."""
    found = shutil.which("kubectl")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is not installed; CI machines have it (/usr/bin/kubectl)")
        pytest.skip("kubectl is not installed: `kubectl kustomize` cannot render the directory")
    return found


def render(directory: Path) -> Objects:
    """``kubectl kustomize DIR``: the objects ``kubectl apply -k DIR`` would send."""
    done = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True,
                          text=True, timeout=RENDER_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return [document for document in yaml.safe_load_all(done.stdout) if document]


def model_name(obj: dict[str, Any]) -> str:
    """The client's model of an object: ``apps/v1`` + ``StatefulSet`` -> ``V1StatefulSet``."""
    version = obj["apiVersion"].rpartition("/")[2]
    assert version == "v1", f"{obj['kind']} uses {obj['apiVersion']}; only stable v1 APIs"
    return f"V1{obj['kind']}"


def validate(obj: dict[str, Any]) -> Any:
    """Deserialize ``obj`` into its model; fail on missing required fields or wrong types (the
    models refuse them) and on fields the model does not know (the deserializer drops them, so
    serializing the model again would not give ``obj`` back)."""
    api = client.ApiClient()
    model = api.deserialize(json.dumps(obj), model_name(obj), "application/json")
    assert api.sanitize_for_serialization(model) == obj, f"{obj['kind']} has unknown fields"
    return model


@pytest.fixture
def generate(run_cli: Callable[..., tuple[int, str, str]],
             tmp_path: Path) -> Callable[..., Path]:
    """``rl-bringup k8s ARGS output:=DIR`` into a fresh folder; returns the folder."""
    count = 0

    def run(*arguments: str) -> Path:
        nonlocal count
        count += 1
        directory = tmp_path / f"k8s_{count}"
        code, out, err = run_cli("k8s", *arguments, f"output:={directory}")
        assert code == 0, err
        assert "kubectl apply -k" in out
        return directory

    return run


def by_kind(objects: Objects, kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: Objects, kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [obj for obj in by_kind(objects, kind)
                if name is None or obj["metadata"]["name"] == name]
    return found


def pod_specs(objects: Objects) -> dict[str, dict[str, Any]]:
    """Pod spec of every workload by its kind and name."""
    return {f"{obj['kind']}/{obj['metadata']['name']}": obj["spec"]["template"]["spec"]
            for obj in objects if obj["kind"] in ("Deployment", "StatefulSet", "Job")}


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def node_containers(objects: Objects) -> list[dict[str, Any]]:
    """Containers that run rl_nodes (not the discovery server)."""
    return [container for kind_name, pod in pod_specs(objects).items()
            if not kind_name.startswith("Deployment/") for container in all_containers(pod)]


def environment(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def parameters_map(objects: Objects) -> dict[str, Any]:
    """The ConfigMap of the parameter files (the other one holds the public key)."""
    (found,) = [obj for obj in by_kind(objects, "ConfigMap")
                if obj["metadata"]["name"].startswith(k8s_objects.PARAMETERS_NAME)]
    return found


def config_map(objects: Objects) -> dict[str, str]:
    return parameters_map(objects)["data"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("gpu", k8s_objects.GPU_CHOICES)
def test_every_rendered_object_validates_against_the_kubernetes_api(
        generate: Callable[..., Path], mode: str, gpu: str) -> None:
    objects = render(generate(mode, "robots:=2", f"gpu:={gpu}"))
    kinds = sorted(obj["kind"] for obj in objects)
    expected = ["ConfigMap", "ConfigMap", "Deployment", "Job", "NetworkPolicy",
                "PersistentVolumeClaim",
                "Secret", "Service"]
    if mode != "colocated":
        expected += ["Service", "StatefulSet"]
    if mode == "decoupled":  # the run's action key, for the robot's simulator and policy
        expected += ["Secret"]
    assert kinds == sorted(expected)
    for obj in objects:
        validate(obj)


def test_the_schema_check_refuses_unknown_and_missing_fields(
        generate: Callable[..., Path]) -> None:
    objects = render(generate("hybrid", "robots:=1"))
    job = one(objects, "Job")
    unknown = json.loads(json.dumps(job))
    unknown["spec"]["template"]["spec"]["containers"][0]["comand"] = ["x"]
    with pytest.raises(AssertionError, match="unknown fields"):
        validate(unknown)
    missing = json.loads(json.dumps(job))
    del missing["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ValueError, match="name"):
        validate(missing)
    wrong = json.loads(json.dumps(one(objects, "Service", k8s_objects.DISCOVERY_NAME)))
    wrong["spec"]["ports"][0]["port"] = "11811"
    with pytest.raises(ValueError, match="port"):
        validate(wrong)


@pytest.mark.parametrize("mode", ("decoupled", "hybrid"))
def test_scaling_the_robots_changes_only_the_statefulset_replicas(
        generate: Callable[..., Path], mode: str) -> None:
    first, second = generate(mode, "robots:=2"), generate(mode, "robots:=5")
    for name in ("weights.key", "weights.pub", "action.key", "run.id"):  # one run's keys
        if (first / name).is_file():
            shutil.copyfile(first / name, second / name)
    two, five = render(first), render(second)
    assert len(two) == len(five)
    for obj in two:
        (other,) = [candidate for candidate in five if candidate["kind"] == obj["kind"]
                    and candidate["metadata"]["name"] == obj["metadata"]["name"]]
        if obj["kind"] == "StatefulSet":
            assert (obj["spec"]["replicas"], other["spec"]["replicas"]) == (2, 5)
            other = {**other, "spec": {**other["spec"], "replicas": 2}}
        assert obj == other, obj["kind"]


@pytest.mark.parametrize("mode", ("decoupled", "hybrid"))
def test_each_robot_pod_becomes_the_robot_of_its_ordinal(
        generate: Callable[..., Path], mode: str) -> None:
    objects = render(generate(mode, "robots:=2", "max_robots:=8"))
    robots = one(objects, "StatefulSet")
    assert robots["spec"]["podManagementPolicy"] == "Parallel"
    pod = robots["spec"]["template"]["spec"]
    # A pod added by `kubectl scale` (ordinal 5) runs what the plan runs for robot 5.
    plan = {process.name: process for process in make_plan(mode, 6, environ={}).processes}
    for container in pod["containers"]:
        assert environment(container)[replica.POD_NAME_VARIABLE] == {
            "fieldRef": {"fieldPath": "metadata.name"}}
        command = parse_node_command(container["args"])
        assert command.replica == {"--pod-name-variable": replica.POD_NAME_VARIABLE,
                                   "--max-robots": "8"}
        pod_name = f"{robots['metadata']['name']}-5"
        became = parse_node_command(replica.substitute(container["args"],
                                                       replica.ordinal_of(pod_name)))
        name = "robot_5" if container["name"] == "robot" else f"{container['name']}_robot_5"
        expected = plan[name]
        assert became.executable == expected.executable
        # The parameter files' paths differ: the scenario's, and the overrides of a pod that
        # hosts a simulator (await_replay_status), from the ConfigMap.
        assert without_params_files(became.arguments) == without_params_files(expected.argv()[1:])
        assert became.params_files[0] == f"{k8s_objects.CONFIG_MOUNT}/cartpole.yaml"
        assert len(became.params_files) == expected.argv().count("--params-file")


@pytest.mark.parametrize("mode", MODES)
def test_the_learner_job_keeps_output_dir_on_its_volume(
        generate: Callable[..., Path], mode: str) -> None:
    objects = render(generate(mode, "robots:=2", "max_robots:=16"))
    job = one(objects, "Job")
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    (main,) = pod["containers"]
    command = parse_node_command(main["args"])
    assert "trainer" in {command.executable, *(node.split("@")[0] for node in command.nodes)}
    for sidecar in pod.get("initContainers", []):
        assert sidecar["restartPolicy"] == "Always"  # native sidecar: stopped when main ends
    (volume,) = [volume for volume in pod["volumes"] if "persistentVolumeClaim" in volume]
    claim = one(objects, "PersistentVolumeClaim")
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    data = config_map(objects)
    for container in all_containers(pod):
        (mount,) = [mount for mount in container["volumeMounts"]
                    if mount["name"] == volume["name"]]
        command = parse_node_command(container["args"])
        params_files = command.params_files
        if command.executable == "diagnostics_aggregator":
            # decoupled's aggregator sidecar declares neither parameter: no overrides file.
            assert params_files == [f"{k8s_objects.CONFIG_MOUNT}/cartpole.yaml"]
            continue
        parameters = yaml.safe_load(data[Path(params_files[-1]).name])
        for kind, block in parameters.items():
            if kind == "/**/simulator":  # colocated: the robots in the learner's process
                assert block == {"ros__parameters": {"await_replay_status": True}}
                continue
            assert block["ros__parameters"]["output_dir"] == mount["mountPath"]
            # The learner accepts every robot the StatefulSet can be scaled to.
            assert block["ros__parameters"]["deployment_robots"] == 16


@pytest.mark.parametrize("mode", MODES)
def test_every_pod_runs_unprivileged_with_a_read_only_root(
        generate: Callable[..., Path], mode: str) -> None:
    """Issue 19: non-root, no capabilities, no escalation, no service-account token; the only
    writable places are the volumes (output_dir) and the scratch emptyDir."""
    pods = pod_specs(render(generate(mode, "robots:=2")))
    assert {"Deployment/rl-discovery", "Job/rl-learner"} <= set(pods)  # and robots, if any
    for name, pod in pods.items():
        assert pod["automountServiceAccountToken"] is False, name
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] != 0, name
        assert security["fsGroup"] == security["runAsGroup"] == k8s_objects.IMAGE_UID
        assert security["seccompProfile"]["type"] == "RuntimeDefault"
        (scratch,) = [volume for volume in pod["volumes"] if volume["name"] == "scratch"]
        assert scratch["emptyDir"] == {}
        for container in all_containers(pod):
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True and context["privileged"] is False
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
            assert not mounts[k8s_objects.SCRATCH_MOUNT].get("readOnly")
            env = environment(container)
            assert env["ROS_HOME"].startswith(k8s_objects.SCRATCH_MOUNT + "/")
            assert env["HOME"] == k8s_objects.SCRATCH_MOUNT
            assert all(mount.get("readOnly") for path, mount in mounts.items()
                       if path not in (k8s_objects.SCRATCH_MOUNT, "/runs")), container["name"]


@pytest.mark.parametrize("mode", MODES)
def test_node_containers_are_probed_by_their_heartbeat(
        generate: Callable[..., Path], mode: str) -> None:
    """Issue 19: a hung node (its dispatch thread stopped) is restarted by its liveness probe."""
    from rl_core.monitoring.heartbeat import HEARTBEAT_TIMEOUT_S

    containers = node_containers(render(generate(mode, "robots:=2")))
    assert containers
    for container in containers:
        assert environment(container)["RL_ROS2_HEARTBEAT_FILE"] == k8s_objects.HEARTBEAT_PATH
        assert k8s_objects.HEARTBEAT_PATH.startswith(k8s_objects.SCRATCH_MOUNT + "/")
        for probe, within in (("startupProbe", HEARTBEAT_TIMEOUT_S),
                              ("livenessProbe", HEARTBEAT_TIMEOUT_S),
                              ("readinessProbe", k8s_objects.READY_WITHIN_S)):
            command = container[probe]["exec"]["command"]
            assert command == ["/entrypoint.sh", "python3", "-m", "rl_core.monitoring.heartbeat",
                               k8s_objects.HEARTBEAT_PATH, f"{within:g}"], (probe, command)
        startup = container["startupProbe"]
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 60


@pytest.mark.parametrize("mode", MODES)
def test_every_node_discovers_through_the_discovery_server(
        generate: Callable[..., Path], mode: str) -> None:
    objects = render(generate(mode, "robots:=2", "domain_id:=7"))
    service = one(objects, "Service", k8s_objects.DISCOVERY_NAME)
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["protocol"]) == (k8s_objects.DISCOVERY_PORT, "UDP")
    server = one(objects, "Deployment", k8s_objects.DISCOVERY_NAME)
    assert server["spec"]["template"]["metadata"]["labels"].items() >= \
        service["spec"]["selector"].items()
    (container,) = server["spec"]["template"]["spec"]["containers"]
    assert container["args"] == discovery_server_argv("0.0.0.0", k8s_objects.DISCOVERY_PORT)
    for container in node_containers(objects):
        env = environment(container)
        assert env["ROS_DISCOVERY_SERVER"] == f"{service['metadata']['name']}:{port['port']}"
        assert env["ROS_DOMAIN_ID"] == "7"
        assert env["FASTDDS_BUILTIN_TRANSPORTS"] == "UDPv4"


@pytest.mark.parametrize("mode", MODES)
def test_nodes_run_installed_executables_with_parameters_from_the_config_map(
        generate: Callable[..., Path], mode: str) -> None:
    objects = render(generate(mode, "robots:=2"))
    data = config_map(objects)
    assert data["cartpole.yaml"] == (REPO_ROOT / "config" / "cartpole.yaml").read_text()
    executables = node_executables()
    for kind_name, pod in pod_specs(objects).items():
        (parameters,) = [volume for volume in pod.get("volumes", []) if "configMap" in volume
                         and volume["name"] == "parameters"] or [None]
        for container in all_containers(pod):
            if kind_name.startswith("Deployment/"):
                continue
            command = parse_node_command(container["args"])
            assert (command.package, command.executable in executables) == ("rl_nodes", True)
            (mount,) = [mount for mount in container["volumeMounts"]
                        if parameters and mount["name"] == parameters["name"]]
            for path in command.params_files:
                assert Path(path).parent == Path(mount["mountPath"])
                assert Path(path).name in data, path
            assert parameters["configMap"]["name"] == parameters_map(objects)["metadata"]["name"]


def test_the_weights_key_is_a_generated_secret_from_a_private_file(
        generate: Callable[..., Path], run_cli: Callable[..., tuple[int, str, str]]) -> None:
    directory = generate("hybrid", "robots:=1")
    key_file = directory / "weights.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    objects = render(directory)
    secret = one(objects, "Secret")
    assert base64.b64decode(secret["data"]["weights.key"]).decode() == key_file.read_text()
    (public,) = [obj for obj in by_kind(objects, "ConfigMap")
                 if obj["metadata"]["name"].startswith(k8s_objects.WEIGHTS_PUBLIC_KEY_NAME)]
    assert public["data"]["weights.pub"] == (directory / "weights.pub").read_text()
    signers = 0
    for kind_name, pod in pod_specs(objects).items():
        if kind_name.startswith("Deployment/"):
            continue
        secrets = [volume for volume in pod["volumes"] if "secret" in volume]
        # Only the learner's pod has the private key; the robots' pods the public key alone.
        assert len(secrets) == (kind_name.startswith("Job/")), kind_name
        for container in all_containers(pod):
            env = environment(container)
            mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            if {"trainer", "replay_buffer"} & set(container["name"].split("-")) or \
                    env["RL_ROS2_WEIGHTS_KEY_FILE"]:
                signers += 1
                assert secrets and secrets[0]["secret"]["secretName"] == \
                    secret["metadata"]["name"]
                assert env["RL_ROS2_WEIGHTS_KEY_FILE"] == \
                    f"{mounts[secrets[0]['name']]}/weights.key"
            else:
                assert env["RL_ROS2_WEIGHTS_KEY_FILE"] == env["RL_ROS2_WEIGHTS_KEY"] == ""
                assert "weights-key" not in mounts
                assert env["RL_ROS2_WEIGHTS_PUBLIC_KEY_FILE"] == \
                    f"{mounts['weights-public-key']}/weights.pub"
    assert signers >= 1
    before = key_file.read_text()
    code, _, err = run_cli("k8s", "hybrid", "robots:=3", f"output:={directory}")
    assert code == 0, err
    assert key_file.read_text() == before, "regenerating keeps the run's key"


ACTING = {"simulator", "policy"}
LEARNING = {"trainer", "replay_buffer"}
ACTION_VARIABLES = (action_auth.KEY_VARIABLE, action_auth.KEY_FILE_VARIABLE,
                    action_auth.ROBOT_KEYS_VARIABLE)


def container_kinds(container: dict[str, Any]) -> set[str]:
    """The node kinds a container hosts (its ``--node`` list, else its executable)."""
    command = parse_node_command(container["args"])
    return {node.split("@")[0] for node in command.nodes} or {command.executable}


@pytest.mark.parametrize(("mode", "holders"), [
    ("decoupled", {"simulator", "policy"}),
    # One process hosts a robot's simulator and its policy: its own process' key suffices, and
    # without the run key a robot pod taken over cannot drive another robot.
    ("hybrid", set()),
    ("colocated", set()),
])
def test_containers_of_one_robot_share_the_run_action_key_and_the_learner_gets_none(
        generate: Callable[..., Path], run_cli: Callable[..., tuple[int, str, str]], mode: str,
        holders: set[str]) -> None:
    directory = generate(mode, "robots:=2")
    key_file = directory / action_auth.KEY_FILE_NAME
    objects = render(directory)
    secrets = [obj for obj in by_kind(objects, "Secret")
               if obj["metadata"]["name"].startswith(k8s_objects.ACTION_KEY_NAME)]
    given: dict[str, action_auth.ActionKeys] = {}
    for kind_name, pod in pod_specs(objects).items():
        if kind_name.startswith("Deployment/"):
            continue
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        for container in all_containers(pod):
            kinds, env = container_kinds(container), environment(container)
            mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            if not env.get(action_auth.KEY_FILE_VARIABLE):
                assert not kinds & ACTING or ACTING <= kinds, f"{kinds} hosts half a robot"
                assert not any(env.get(variable) for variable in ACTION_VARIABLES), kinds
                assert "action-key" not in mounts, kinds
                continue
            # A simulator or policy whose counterpart is another container, never the learner.
            assert kinds & ACTING and not ACTING <= kinds and not kinds & LEARNING, kinds
            assert kind_name.startswith("StatefulSet/"), kind_name
            assert env[action_auth.KEY_VARIABLE] == env[action_auth.ROBOT_KEYS_VARIABLE] == ""
            mount = mounts["action-key"]
            assert env[action_auth.KEY_FILE_VARIABLE] == f"{mount}/{action_auth.KEY_FILE_NAME}"
            (secret,) = secrets
            assert volumes["action-key"]["secret"]["secretName"] == secret["metadata"]["name"]
            content = base64.b64decode(secret["data"][action_auth.KEY_FILE_NAME]).decode()
            assert content == key_file.read_text()
            given[container["name"]] = action_auth.load_keys(
                {action_auth.KEY_FILE_VARIABLE: str(key_file)})
        if kind_name.startswith("Job/"):
            assert "action-key" not in volumes, "the learner's pod holds no action key"
    assert set(given) == holders
    if not holders:
        assert not secrets and not key_file.exists()
        return
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    # What the policy container signs, the simulator container steps with.
    simulator = action_auth.ActionCheck(given["simulator"])
    actions = np.zeros((2, 1), dtype=np.float32)
    seen = action_auth.observation_digest(np.zeros((2, 4), dtype=np.float32))
    for robot in (0, 5):
        simulator.expect(robot, 7, [seen])  # the observations it published
        mac = given["policy"].mac(robot, 7, actions, 3, seen)
        assert simulator.refusal(robot, 7, actions, 3, mac) is None
    before = key_file.read_text()
    code, _, err = run_cli("k8s", mode, "robots:=3", f"output:={directory}")
    assert code == 0, err
    assert key_file.read_text() == before, "regenerating keeps the run's action key"


@pytest.mark.parametrize(("mode", "gpu", "with_gpu"), [
    ("hybrid", "none", set()),
    ("hybrid", "learner", {"learner"}),
    ("hybrid", "policy", {"robot"}),
    ("decoupled", "learner", {"trainer"}),
    ("decoupled", "policy", {"policy"}),
    ("colocated", "policy", {"container"}),
])
def test_resources_are_whole_cpus_with_gpus_where_asked(
        generate: Callable[..., Path], mode: str, gpu: str, with_gpu: set[str]) -> None:
    objects = render(generate(mode, "robots:=2", f"gpu:={gpu}"))
    found = set()
    for pod in pod_specs(objects).values():
        for container in all_containers(pod):
            resources = container["resources"]
            assert resources["requests"] == resources["limits"]
            assert resources["limits"]["cpu"].isdigit()
            if k8s_objects.GPU_RESOURCE in resources["limits"]:
                assert resources["limits"][k8s_objects.GPU_RESOURCE] == "1"
                found.add(container["name"])
    assert found == with_gpu


def test_the_network_policy_keeps_dds_between_the_deployments_pods(
        generate: Callable[..., Path]) -> None:
    objects = render(generate("decoupled", "robots:=2", "domain_id:=3"))
    policy = one(objects, "NetworkPolicy")["spec"]
    selector = policy["podSelector"]["matchLabels"]
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "Job"):
            assert obj["spec"]["template"]["metadata"]["labels"].items() >= selector.items()
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    (ingress,) = policy["ingress"]
    assert ingress["from"] == [{"podSelector": {"matchLabels": selector}}]
    first = 7400 + 250 * 3
    expected_ports = [{"port": k8s_objects.DISCOVERY_PORT, "protocol": "UDP"},
                      {"port": first, "endPort": first + 249, "protocol": "UDP"}]
    assert ingress["ports"] == expected_ports
    dds, dns = policy["egress"]
    assert dds == {"to": [{"podSelector": {"matchLabels": selector}}], "ports": expected_ports}
    assert {port["port"] for port in dns["ports"]} == {53}


def test_namespace_and_the_deployment_label_go_on_every_object(
        generate: Callable[..., Path]) -> None:
    objects = render(generate("hybrid", "robots:=1", "namespace:=rl-run"))
    assert {obj["metadata"].get("namespace") for obj in objects} == {"rl-run"}
    assert {obj["metadata"]["labels"]["app.kubernetes.io/part-of"] for obj in objects} == \
        {k8s_objects.PART_OF}


@pytest.mark.parametrize(("arguments", "message"), [
    (("hybrid", "robots:=2"), "missing output:=DIR"),
    (("hybrid", "robots:=2", "output:=x", "gpu:=tpu"), "gpu:= must be one of"),
    (("hybrid", "robots:=4", "output:=x", "max_robots:=2"), "max_robots must be from"),
    (("hybrid", "output:=x", f"max_robots:={MAX_ROBOTS + 1}"), "max_robots:= must be"),
    (("hybrid", "output:=x", "storage:=lots"), "storage:= must be"),
    (("hybrid", "output:=x", "image:=rl ros2"), "image:= must be"),
    (("hybrid", "output:=x", "namespace:=Bad_Name"), "namespace:= must be"),
    (("robots:=2", "output:=x"), "missing MODE"),
    (("swarm", "output:=x"), "unknown mode"),
])
def test_bad_input_exits_2_with_the_reason(run_cli: Callable[..., tuple[int, str, str]],
                                           tmp_path: Path, arguments: tuple[str, ...],
                                           message: str) -> None:
    code, _, err = run_cli("k8s", *[argument.replace("output:=x", f"output:={tmp_path / 'x'}")
                                    for argument in arguments])
    assert code == 2
    assert message in err
    assert not (tmp_path / "x").exists()
