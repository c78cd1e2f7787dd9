"""The Kubernetes objects of a deployment (``rl-bringup k8s``), built from a
:class:`~rl_bringup.tools.deploy.containers.ContainerLayout` as the official ``kubernetes`` client's
models, which check field names and types as they are built.

The client is imported inside the functions: ``rl-bringup`` lists every tool at start, and
``rl-bringup plan`` must stay quick. What each object is for: :mod:`rl_bringup.tools.deploy.k8s` and
docs/kubernetes.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rl_bringup.plan.deployment import MAX_RESPAWNS
from rl_bringup.plan.discovery import discovery_server_argv
from rl_bringup.plan.run_key import RUN_ID_FILE_NAME, SIGNING_KINDS
from rl_bringup.run import replica
from rl_bringup.tools.deploy.containers import (
    CONTAINER_ENVIRONMENT,
    DEFAULT_IMAGE,
    OUTPUT_DIR,
    Container,
    ContainerLayout,
    action_key_environment,
    needs_action_key,
    replica_command,
)
from rl_core.learning.cpus import OMP_THREADS_VARIABLE, TORCH_THREADS_VARIABLE
from rl_core.monitoring.heartbeat import HEARTBEAT_TIMEOUT_S
from rl_core.names import variables
from rl_core.security import action_auth, weights_auth
from rl_nodes import graph

if TYPE_CHECKING:
    from kubernetes import client

GPU_CHOICES: tuple[str, ...] = ("none", "learner", "policy")
GPU_RESOURCE = "nvidia.com/gpu"

PART_OF = "rl-ros2"
#: On every object and pod of the deployment: the network policy and label selectors use it.
DEPLOYMENT_LABELS = {"app.kubernetes.io/part-of": PART_OF}
DISCOVERY_NAME = "rl-discovery"
LEARNER_NAME = "rl-learner"
ROBOTS_NAME = "rl-robots"
RUNS_CLAIM_NAME = "rl-runs"
PARAMETERS_NAME = "rl-parameters"
WEIGHTS_KEY_NAME = "rl-weights-key"
WEIGHTS_PUBLIC_KEY_NAME = "rl-weights-public-key"
#: The run's action key (rl_bringup.tools.deploy.containers.needs_action_key says who gets it).
ACTION_KEY_NAME = "rl-action-key"
NETWORK_POLICY_NAME = "rl-dds"
DISCOVERY_PORT = 11811
#: RTPS well-known ports: domain d uses PB + DG * d ... PB + DG * d + DG - 1 (PB 7400, DG 250).
DDS_PORT_BASE = 7400
DDS_DOMAIN_GAIN = 250
CONFIG_MOUNT = "/etc/rl_ros2/config"
WEIGHTS_KEY_MOUNT = "/etc/rl_ros2/weights"
WEIGHTS_PUBLIC_KEY_MOUNT = "/etc/rl_ros2/weights-public"
ACTION_KEY_MOUNT = "/etc/rl_ros2/action"
DEFAULT_STORAGE = "5Gi"
# Locally built images (kind load, minikube image load) carry no registry; IfNotPresent uses them
# where the default for :latest (Always) would try to pull.
IMAGE_PULL_POLICY = "IfNotPresent"
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"
#: The image's unprivileged user and group (docker/Dockerfile); every pod runs as it.
IMAGE_UID = 1000
#: The one writable folder of a container besides its volumes (the root filesystem is
#: read-only): an emptyDir for ROS's logs (``ROS_HOME``), matplotlib's cache and temporary files.
SCRATCH_MOUNT = "/tmp"
SCRATCH_ENVIRONMENT = {"HOME": SCRATCH_MOUNT, "ROS_HOME": f"{SCRATCH_MOUNT}/ros",
                       "MPLCONFIGDIR": f"{SCRATCH_MOUNT}/matplotlib"}
#: The file a node container's dispatch threads touch every second (rl_core.monitoring.heartbeat); its
#: probes read it through the image's entry point (which puts rl_core on the path).
HEARTBEAT_PATH = f"{SCRATCH_MOUNT}/heartbeat"
#: Seconds a node may take to beat first (imports, pybullet, torch) before it is restarted.
STARTUP_GRACE_S = 300
#: A node is ready while it beat within this many seconds.
READY_WITHIN_S = 10


@dataclass(frozen=True)
class NodeResources:
    """What one node needs: whole CPUs (so that requests = limits gives Guaranteed QoS and the
    static CPU manager can hand out exclusive cores) and memory."""

    cpus: int
    memory_mib: int


#: Per node kind; a container's requests and limits are the sums over its nodes. The memory is
#: what a node with torch and the task loaded needs, with headroom; the replay buffer's grows
#: with ``capacity`` (patch it for image observations).
NODE_RESOURCES: dict[str, NodeResources] = {
    graph.SIMULATOR: NodeResources(1, 1024),
    graph.POLICY: NodeResources(1, 1024),
    graph.REPLAY_BUFFER: NodeResources(1, 2048),
    graph.TRAINER: NodeResources(1, 2048),
    # Groups /diagnostics once a second: no core of its own beside the learner's nodes.
    graph.DIAGNOSTICS_AGGREGATOR: NodeResources(0, 256),
}
DISCOVERY_RESOURCES = NodeResources(1, 256)


@dataclass(frozen=True)
class K8sOptions:
    """The choices of a ``k8s`` command line beyond the plan's.

    :param image: the rl_ros2 image of every container.
    :param gpu: which containers get a GPU (:data:`GPU_CHOICES`).
    :param namespace: the Kubernetes namespace (kustomize sets it on every object); empty for
        the one ``kubectl`` uses.
    :param storage: size of the ``output_dir`` volume.
    """

    image: str = DEFAULT_IMAGE
    gpu: str = "none"
    namespace: str = ""
    storage: str = DEFAULT_STORAGE


def labels(component: str) -> dict[str, str]:
    """The labels of a deployment object; ``component`` tells the pods apart."""
    return {**DEPLOYMENT_LABELS, "app.kubernetes.io/component": component}


def dds_ports(domain_id: int) -> tuple[int, int]:
    """First and last UDP port of domain ``domain_id`` (discovery and user traffic)."""
    first = DDS_PORT_BASE + DDS_DOMAIN_GAIN * domain_id
    return first, first + DDS_DOMAIN_GAIN - 1


def container_name(name: str) -> str:
    """A plan name as a Kubernetes container name (DNS label: ``replay_buffer`` ->
    ``replay-buffer``)."""
    return name.replace("_", "-")


def _resources(kinds: list[str], gpu: bool) -> client.V1ResourceRequirements:
    from kubernetes import client

    needs = [NODE_RESOURCES[kind] for kind in kinds] if kinds else [DISCOVERY_RESOURCES]
    # Whole cores, at least one (the static CPU manager pins whole cores to Guaranteed pods).
    amounts = {"cpu": str(max(1, sum(need.cpus for need in needs))),
               "memory": f"{sum(need.memory_mib for need in needs)}Mi"}
    if gpu:
        amounts[GPU_RESOURCE] = "1"
    return client.V1ResourceRequirements(requests=dict(amounts), limits=dict(amounts))


def _wants_gpu(container: Container, gpu: str) -> bool:
    wanted = {"learner": graph.TRAINER, "policy": graph.POLICY}.get(gpu)
    return wanted is not None and wanted in container.kinds


def _signs(container: Container) -> bool:
    """Whether the container hosts a node that signs weights or status (rl_bringup.plan.run_key)."""
    return bool(SIGNING_KINDS & set(container.kinds))


def _environment(container: Container) -> list[client.V1EnvVar]:
    """The plan's environment, the container additions, the learner's key (the private key for
    the learner's signers, the public key for everyone else), the run's action key where
    :func:`needs_action_key`, torch threads, and the run identity (``run.id`` of the public key's
    ConfigMap, like the keys a file of the kustomize directory: rl_bringup.tools.deploy.k8s)."""
    from kubernetes import client

    trainer = NODE_RESOURCES[graph.TRAINER].cpus if graph.TRAINER in container.kinds else 1
    key = ({weights_auth.KEY_VARIABLE: "",
            weights_auth.KEY_FILE_VARIABLE: f"{WEIGHTS_KEY_MOUNT}/{weights_auth.KEY_FILE_NAME}"}
           if _signs(container) else
           {weights_auth.KEY_VARIABLE: "", weights_auth.KEY_FILE_VARIABLE: "",
            weights_auth.PUBLIC_KEY_VARIABLE: "", weights_auth.PUBLIC_KEY_FILE_VARIABLE:
            f"{WEIGHTS_PUBLIC_KEY_MOUNT}/{weights_auth.PUBLIC_KEY_FILE_NAME}"})
    if needs_action_key(container):
        key.update(action_key_environment(f"{ACTION_KEY_MOUNT}/{action_auth.KEY_FILE_NAME}"))
    values = {
        **container.process.env,
        **CONTAINER_ENVIRONMENT,
        **key,
        # Intra-op threads: the trainer's CPUs where it runs, 1 for acting (cpu_sets.assign_cpus).
        TORCH_THREADS_VARIABLE: str(trainer),
        OMP_THREADS_VARIABLE: str(trainer),
    }
    values.pop(weights_auth.RUN_ID_VARIABLE, None)  # the ConfigMap's, below
    environment = [client.V1EnvVar(name=name, value=value) for name, value in values.items()]
    run_id = client.V1EnvVarSource(config_map_key_ref=client.V1ConfigMapKeySelector(
        name=WEIGHTS_PUBLIC_KEY_NAME, key=RUN_ID_FILE_NAME))
    environment.append(client.V1EnvVar(name=weights_auth.RUN_ID_VARIABLE, value_from=run_id))
    if container.robot:
        pod_name = client.V1EnvVarSource(
            field_ref=client.V1ObjectFieldSelector(field_path="metadata.name"))
        environment.append(client.V1EnvVar(name=replica.POD_NAME_VARIABLE, value_from=pod_name))
    return environment


def _hardened(container: client.V1Container) -> client.V1Container:
    """``container`` without privileges: no capabilities, no escalation, a read-only root
    filesystem with the scratch folder mounted writable."""
    from kubernetes import client

    container.security_context = client.V1SecurityContext(
        allow_privilege_escalation=False, read_only_root_filesystem=True, privileged=False,
        capabilities=client.V1Capabilities(drop=["ALL"]))
    container.volume_mounts = [*(container.volume_mounts or []),
                               client.V1VolumeMount(name="scratch", mount_path=SCRATCH_MOUNT)]
    container.env = [*(container.env or []), *(client.V1EnvVar(name=name, value=value)
                                               for name, value in SCRATCH_ENVIRONMENT.items())]
    return container


def _pod_spec(containers: list[client.V1Container], volumes: list[client.V1Volume],
              **fields: Any) -> client.V1PodSpec:
    """A pod of hardened containers run as the image's user, without a service-account token
    (no node talks to the Kubernetes API) and with the scratch volume."""
    from kubernetes import client

    for container in [*containers, *(fields.get("init_containers") or [])]:
        _hardened(container)
    return client.V1PodSpec(
        containers=containers,
        volumes=[*volumes, client.V1Volume(name="scratch",
                                           empty_dir=client.V1EmptyDirVolumeSource())],
        automount_service_account_token=False,
        security_context=client.V1PodSecurityContext(
            run_as_non_root=True, run_as_user=IMAGE_UID, run_as_group=IMAGE_UID,
            fs_group=IMAGE_UID, seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault")),
        **fields)


def _node_container(layout: ContainerLayout, container: Container,
                    options: K8sOptions) -> client.V1Container:
    from kubernetes import client

    overrides = f"{CONFIG_MOUNT}/{container.overrides_name()}"
    command = container.command(f"{CONFIG_MOUNT}/{layout.scenario_name}", overrides)
    if container.robot:
        command = replica_command(command, ["--pod-name-variable", replica.POD_NAME_VARIABLE],
                                  layout.max_robots)
    # Only the learner's signers see the private key; robots read the public key alone.
    mounts = [client.V1VolumeMount(name="parameters", mount_path=CONFIG_MOUNT, read_only=True),
              client.V1VolumeMount(name="weights-key", mount_path=WEIGHTS_KEY_MOUNT,
                                   read_only=True) if _signs(container) else
              client.V1VolumeMount(name="weights-public-key", mount_path=WEIGHTS_PUBLIC_KEY_MOUNT,
                                   read_only=True)]
    if needs_action_key(container):
        mounts.append(client.V1VolumeMount(name="action-key", mount_path=ACTION_KEY_MOUNT,
                                           read_only=True))
    if not container.robot:
        mounts.append(client.V1VolumeMount(name="runs", mount_path=OUTPUT_DIR))
    sidecar = not container.robot and not container.main
    environment = [*_environment(container),
                   client.V1EnvVar(name=variables.HEARTBEAT_FILE, value=HEARTBEAT_PATH)]
    return client.V1Container(
        name=container_name(container.name),
        image=options.image,
        image_pull_policy=IMAGE_PULL_POLICY,
        # args, not command: the image's entrypoint sources ROS and the workspace first.
        args=command,
        env=environment,
        resources=_resources(container.kinds, _wants_gpu(container, options.gpu)),
        volume_mounts=mounts,
        restart_policy="Always" if sidecar else None,
        **_heartbeat_probes(),
    )


def _heartbeat_probes() -> dict[str, client.V1Probe]:
    """Startup, liveness and readiness of a node container, all from its heartbeat file: a hung
    node (its dispatch thread stopped) is restarted, as the rl-bringup supervisor does."""
    from kubernetes import client

    def check(within_s: float) -> client.V1ExecAction:
        return client.V1ExecAction(command=["/entrypoint.sh", "python3", "-m", "rl_core.monitoring.heartbeat",
                                            HEARTBEAT_PATH, f"{within_s:g}"])

    period = 10
    return {
        "startup_probe": client.V1Probe(_exec=check(HEARTBEAT_TIMEOUT_S), period_seconds=5,
                                        timeout_seconds=5,
                                        failure_threshold=STARTUP_GRACE_S // 5),
        "liveness_probe": client.V1Probe(_exec=check(HEARTBEAT_TIMEOUT_S),
                                         period_seconds=period, timeout_seconds=5,
                                         failure_threshold=3),
        "readiness_probe": client.V1Probe(_exec=check(READY_WITHIN_S), period_seconds=period,
                                          timeout_seconds=5, failure_threshold=1),
    }


def _volumes(with_runs: bool, with_action_key: bool = False) -> list[client.V1Volume]:
    from kubernetes import client

    volumes = [
        client.V1Volume(name="parameters",
                        config_map=client.V1ConfigMapVolumeSource(name=PARAMETERS_NAME)),
        client.V1Volume(name="weights-public-key", config_map=client.V1ConfigMapVolumeSource(
            name=WEIGHTS_PUBLIC_KEY_NAME)),
    ]
    if with_runs:  # the learner's pod: the private key is never in a robot's pod
        # 0o400: the key is read by the node processes only.
        volumes.append(client.V1Volume(
            name="weights-key", secret=client.V1SecretVolumeSource(secret_name=WEIGHTS_KEY_NAME,
                                                                   default_mode=0o400)))
        volumes.append(client.V1Volume(
            name="runs", persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(
                claim_name=RUNS_CLAIM_NAME)))
    if with_action_key:  # only in a pod with a container that needs it
        volumes.append(client.V1Volume(
            name="action-key", secret=client.V1SecretVolumeSource(secret_name=ACTION_KEY_NAME,
                                                                   default_mode=0o400)))
    return volumes


def _metadata(name: str, component: str) -> client.V1ObjectMeta:
    from kubernetes import client

    return client.V1ObjectMeta(name=name, labels=labels(component))


def _pod_template(component: str, spec: client.V1PodSpec) -> client.V1PodTemplateSpec:
    """A pod template; ``kubectl exec`` and ``kubectl logs`` pick its first container (the
    learner's main one) unless told otherwise."""
    from kubernetes import client

    default = {DEFAULT_CONTAINER_ANNOTATION: spec.containers[0].name}
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels(component), annotations=default), spec=spec)


def discovery_objects(options: K8sOptions) -> list[Any]:
    """The discovery server: a Deployment and its UDP Service."""
    from kubernetes import client

    component = "discovery-server"
    server = client.V1Container(
        name="discovery-server",
        image=options.image,
        image_pull_policy=IMAGE_PULL_POLICY,
        args=discovery_server_argv("0.0.0.0", DISCOVERY_PORT),
        env=[client.V1EnvVar(name=name, value=value)
             for name, value in CONTAINER_ENVIRONMENT.items()],
        ports=[client.V1ContainerPort(name="discovery", container_port=DISCOVERY_PORT,
                                      protocol="UDP")],
        resources=_resources([], gpu=False),
    )
    deployment = client.V1Deployment(
        api_version="apps/v1", kind="Deployment", metadata=_metadata(DISCOVERY_NAME, component),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels=labels(component)),
            template=_pod_template(component, _pod_spec([server], [])),
        ))
    service = client.V1Service(
        api_version="v1", kind="Service", metadata=_metadata(DISCOVERY_NAME, component),
        spec=client.V1ServiceSpec(
            selector=labels(component),
            ports=[client.V1ServicePort(name="discovery", port=DISCOVERY_PORT,
                                        target_port=DISCOVERY_PORT, protocol="UDP")],
        ))
    return [deployment, service]


def learner_objects(layout: ContainerLayout, options: K8sOptions) -> list[Any]:
    """The ``output_dir`` claim and the learner Job (main container: the trainer's process)."""
    from kubernetes import client

    component = "learner"
    claim = client.V1PersistentVolumeClaim(
        api_version="v1", kind="PersistentVolumeClaim",
        metadata=_metadata(RUNS_CLAIM_NAME, component),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=client.V1VolumeResourceRequirements(requests={"storage": options.storage}),
        ))
    main = [_node_container(layout, c, options) for c in layout.learner if c.main]
    sidecars = [_node_container(layout, c, options) for c in layout.learner if not c.main]
    pod = _pod_spec(
        main, _volumes(with_runs=True,
                       with_action_key=any(needs_action_key(c) for c in layout.learner)),
        # A crashed trainer restarts in place and resumes from the volume; exit 0 completes.
        restart_policy="OnFailure",
        init_containers=sidecars or None,
    )
    job = client.V1Job(
        api_version="batch/v1", kind="Job", metadata=_metadata(LEARNER_NAME, component),
        spec=client.V1JobSpec(backoff_limit=MAX_RESPAWNS,
                              template=_pod_template(component, pod)))
    return [claim, job]


def robot_objects(layout: ContainerLayout, options: K8sOptions) -> list[Any]:
    """The robots' headless Service (stable pod names in DNS) and StatefulSet."""
    from kubernetes import client

    component = "robot"
    service = client.V1Service(
        api_version="v1", kind="Service", metadata=_metadata(ROBOTS_NAME, component),
        spec=client.V1ServiceSpec(cluster_ip="None", selector=labels(component)))
    pod = _pod_spec([_node_container(layout, c, options) for c in layout.robots],
                    _volumes(with_runs=False,
                             with_action_key=any(needs_action_key(c) for c in layout.robots)))
    stateful_set = client.V1StatefulSet(
        api_version="apps/v1", kind="StatefulSet", metadata=_metadata(ROBOTS_NAME, component),
        spec=client.V1StatefulSetSpec(
            service_name=ROBOTS_NAME,
            replicas=layout.plan.robots,
            # Robots are independent: start and stop them all at once, not one by one.
            pod_management_policy="Parallel",
            selector=client.V1LabelSelector(match_labels=labels(component)),
            template=_pod_template(component, pod),
        ))
    return [service, stateful_set]


def network_policy(domain_id: int) -> Any:
    """DDS in and out only between the deployment's pods; DNS out to kube-system."""
    from kubernetes import client

    first, last = dds_ports(domain_id)
    dds = [client.V1NetworkPolicyPort(protocol="UDP", port=DISCOVERY_PORT),
           client.V1NetworkPolicyPort(protocol="UDP", port=first, end_port=last)]
    deployment_pods = [client.V1NetworkPolicyPeer(pod_selector=client.V1LabelSelector(
        match_labels=DEPLOYMENT_LABELS))]
    dns = client.V1NetworkPolicyEgressRule(
        to=[client.V1NetworkPolicyPeer(namespace_selector=client.V1LabelSelector(
            match_labels={"kubernetes.io/metadata.name": "kube-system"}))],
        ports=[client.V1NetworkPolicyPort(protocol=protocol, port=53)
               for protocol in ("UDP", "TCP")])
    return client.V1NetworkPolicy(
        api_version="networking.k8s.io/v1", kind="NetworkPolicy",
        metadata=client.V1ObjectMeta(name=NETWORK_POLICY_NAME,
                                     labels=DEPLOYMENT_LABELS),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(
                match_labels=DEPLOYMENT_LABELS),
            policy_types=["Ingress", "Egress"],
            ingress=[client.V1NetworkPolicyIngressRule(_from=deployment_pods, ports=dds)],
            egress=[client.V1NetworkPolicyEgressRule(to=deployment_pods, ports=dds), dns],
        ))


def manifests(layout: ContainerLayout, options: K8sOptions) -> dict[str, list[Any]]:
    """The objects of the deployment by resource file name, as ``kubernetes`` client models."""
    files = {
        "discovery-server.yaml": discovery_objects(options),
        "learner.yaml": learner_objects(layout, options),
    }
    if layout.robots:  # colocated: the robots run inside the learner's one process
        files["robots.yaml"] = robot_objects(layout, options)
    files["network-policy.yaml"] = [network_policy(layout.plan.domain_id)]
    return files
