"""Multi-host deployment on a private network of Linux network namespaces.

Three "hosts" on one bridge (see ``netns.py``): ``learner`` runs replay_buffer + trainer,
``robot_0`` and ``robot_1`` each run simulator + policy. Every process talks over UDP only
(``FASTDDS_BUILTIN_TRANSPORTS=UDPv4``: shared memory would let processes of one machine bypass
the veths), so whatever reaches the learner crossed the bridge. The same deployment runs twice:

* ``subnet``: multicast discovery (``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``);
* ``server``: a Fast DDS discovery server in the learner namespace, every process a client.

The discovery variables come from ``rl_bringup.plan.discovery_environment``, so the test checks
the settings ``rl-bringup ... discovery:=subnet|server:HOST:PORT`` gives users.

Proof that the deployment worked across hosts:

* the trainer exits 0 with ``result.json``: env_steps >= budget, updates > 0;
* an observer in the learner namespace receives ``/episodes`` from BOTH robot ids (robot ->
  learner) with ``policy_version > 0`` (the robots act with weights the learner sent them);
* the byte counters of both robots' bridge ports show bulk traffic in both directions.

Network safety: the addresses exist only inside namespaces the test creates and removes in a
``finally``; nothing runs in the caller's network namespace. Without the rights to create
namespaces the tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from rl_bringup.plan import discovery_environment

from netns import Network, NamespaceUnavailable, bridged_hosts, check_rights, ip
from netns import namespaces_with_prefix
from processes import REPO, Child

pytestmark = pytest.mark.system

BIN = Path(sys.executable).parent
CONFIG = REPO / "config" / "cartpole.yaml"
HOSTS = ("learner", "robot_0", "robot_1")
ROBOT_IDS = {0, 1}
BUDGET = 3000  # env steps over both robots
RATE_HZ = 50.0  # per simulator: 2 robots -> ~30 s of stepping, light enough for 2 cores
DISCOVERY_PORT = 11811

START_DEADLINE_S = 30.0
TRAINER_DEADLINE_S = 120.0
# Each robot sends ~1,500 experience batches and receives the actor weights every 0.5 s (tens of
# kB each); discovery alone is a few kB. 100 kB each way can only be the data itself.
MIN_PORT_BYTES = 100_000

OBSERVER = textwrap.dedent(
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rl_interfaces.msg import EpisodeStatistics

    def report(msg):
        print(f"episodes robot_id={msg.robot_id} total_env_steps={msg.total_env_steps} "
              f"policy_version={msg.policy_version}", flush=True)

    rclpy.init()
    node = rclpy.create_node("multihost_observer")
    node.create_subscription(EpisodeStatistics, "/episodes", report,
                             QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    print("observer ready", flush=True)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    """
)
EPISODES_LINE = re.compile(
    r"episodes robot_id=(\d+) total_env_steps=(\d+) policy_version=(\d+)")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="module")
def namespace_rights() -> None:
    """Skip (fail under CI=true) when this process may not create network namespaces."""
    try:
        check_rights()
    except NamespaceUnavailable as reason:
        message = f"cannot create network namespaces: {reason}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: multi-host tests must run; run them as root)")
        pytest.skip(message)


@pytest.fixture
def network(request: pytest.FixtureRequest, namespace_rights: None) -> Iterator[Network]:
    """The three hosts on a bridge; every namespace is gone afterwards (checked)."""
    subnet, letter = request.param
    tag = f"{os.getpid()}{letter}"
    with bridged_hosts(HOSTS, subnet=subnet, tag=tag) as built:
        yield built
    assert namespaces_with_prefix(tag) == [], "network namespaces left behind"


def process_environment(base: dict[str, str], discovery: str) -> dict[str, str]:
    """``base`` with the project's discovery setting, UDP only, one torch thread per process."""
    env = dict(base)
    for inherited in ("ROS_DISCOVERY_SERVER", "ROS_STATIC_PEERS", "ROS_LOCALHOST_ONLY",
                      "ROS_SUPER_CLIENT", "FASTDDS_DEFAULT_PROFILES_FILE",
                      "FASTRTPS_DEFAULT_PROFILES_FILE"):
        env.pop(inherited, None)
    variables, _notes = discovery_environment(discovery)
    env.update(variables)
    env.update(FASTDDS_BUILTIN_TRANSPORTS="UDPv4", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return env


def write_overrides(path: Path, output_dir: Path) -> Path:
    # A second params file: its node blocks win over the scenario file's (a plain -p does not).
    path.write_text(textwrap.dedent(
        f"""
        /**/trainer:
          ros__parameters:
            total_env_steps: {BUDGET}
            eval_episodes: 2
            checkpoint_period: 0.0
            output_dir: "{output_dir}"
        /**/simulator:
          ros__parameters:
            max_rate_hz: {RATE_HZ}
        """))
    return path


def port_bytes(network: Network, host: str) -> tuple[int, int]:
    """(bytes the host sent, bytes it received) counted at its bridge port."""
    link = json.loads(ip("-s", "-j", "link", "show", f"v-{host}",
                         namespace=network.bridge_namespace))[0]
    stats = link.get("stats64", link.get("stats"))
    # The bridge port receives what the host sends and transmits what the host receives.
    return stats["rx"]["bytes"], stats["tx"]["bytes"]


def tails(children: dict[str, Child], lines: int = 25) -> str:
    return "\n".join(f"--- {name} (exit {child.process.poll()}) ---\n"
                     + "\n".join(child.lines[-lines:]) for name, child in children.items())


def run_deployment(network: Network, discovery: str, env: dict[str, str], tmp_path: Path) -> None:
    """Start learner, observer and two robots in their namespaces; check the run; stop all."""
    output_dir = tmp_path / "run"
    overrides = write_overrides(tmp_path / "overrides.yaml", output_dir)
    params = ["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)]
    children: dict[str, Child] = {}

    def start(name: str, host: str, argv: list[str]) -> Child:
        children[name] = Child(network.exec_argv(host, argv, env), env=env)
        return children[name]

    try:
        if discovery.startswith("server:"):
            server = start("discovery_server", "learner", [
                str(BIN / "python"), str(BIN.parent / "tools" / "fastdds" / "fastdds.py"),
                "discovery", "-i", "0", "-l", network.address("learner"),
                "-p", str(DISCOVERY_PORT)])
            assert server.wait_for_line(lambda line: "Server started" in line,
                                        START_DEADLINE_S), tails(children)
        observer = start("observer", "learner", [str(BIN / "python"), "-c", OBSERVER])
        assert observer.wait_for_line(lambda line: line == "observer ready",
                                      START_DEADLINE_S), tails(children)
        learner = start("learner", "learner", [
            str(BIN / "container"), "--node", "replay_buffer@/", "--node", "trainer@/", *params])
        for robot_id in sorted(ROBOT_IDS):
            start(f"robot_{robot_id}", f"robot_{robot_id}", [
                str(BIN / "container"), "--node", f"simulator@/robot_{robot_id}",
                "--node", f"policy@/robot_{robot_id}", *params])

        code = learner.wait(TRAINER_DEADLINE_S)
        assert code is not None, f"trainer did not finish in {TRAINER_DEADLINE_S} s\n" + \
            tails(children)
        assert code == 0, tails(children)
        result_file = output_dir / "result.json"
        assert result_file.is_file(), tails(children)
        result = json.loads(result_file.read_text())
        assert result["env_steps"] >= BUDGET, result
        assert result["updates"] > 0, result

        # Episodes of both robots crossed to the learner's host, played with the learner's weights.
        seen: dict[int, int] = {}
        for line in observer.lines:
            match = EPISODES_LINE.search(line)
            if match:
                robot_id, version = int(match.group(1)), int(match.group(3))
                seen[robot_id] = max(seen.get(robot_id, 0), version)
        assert set(seen) == ROBOT_IDS, f"episodes seen from robots {sorted(seen)}\n" + \
            tails(children)
        assert all(version > 0 for version in seen.values()), \
            f"robots never acted with learned weights: {seen}\n" + tails(children)

        for robot_id in sorted(ROBOT_IDS):
            sent, received = port_bytes(network, f"robot_{robot_id}")
            print(f"{discovery}: robot_{robot_id} sent {sent} B, received {received} B; "
                  f"policy version {seen[robot_id]}")
            assert sent >= MIN_PORT_BYTES and received >= MIN_PORT_BYTES, (robot_id, sent, received)
        summary = {key: result[key] for key in ("env_steps", "updates", "episodes")}
        print(f"{discovery}: {json.dumps(summary)}")
    finally:
        for child in reversed(children.values()):
            child.stop(grace_s=5.0)


@pytest.mark.parametrize("network", [(0, "s")], indirect=True)
def test_multicast_discovery_across_hosts(network: Network, ros_env: dict[str, str],
                                          tmp_path: Path) -> None:
    env = process_environment(ros_env, "subnet")
    run_deployment(network, "subnet", env, tmp_path)


@pytest.mark.parametrize("network", [(1, "d")], indirect=True)
def test_discovery_server_across_hosts(network: Network, ros_env: dict[str, str],
                                       tmp_path: Path) -> None:
    discovery = f"server:{network.address('learner')}:{DISCOVERY_PORT}"
    env = process_environment(ros_env, discovery)
    run_deployment(network, discovery, env, tmp_path)
