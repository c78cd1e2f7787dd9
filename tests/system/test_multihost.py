"""Multi-host deployment on a private network of Linux network namespaces.

Three "hosts" on one bridge (see ``netns.py``): ``learner`` runs replay_buffer + trainer,
``robot_0`` and ``robot_1`` each run simulator + policy. Every process talks over UDP only
(``FASTDDS_BUILTIN_TRANSPORTS=UDPv4``: shared memory would let processes of one machine bypass
the veths), so whatever reaches the learner crossed the bridge. The same deployment runs twice:

* ``subnet``: multicast discovery (``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``);
* ``server``: a Fast DDS discovery server in the learner namespace, every process a client.

The discovery variables come from ``rl_bringup.plan.discovery.discovery_environment``, so the test
checks the settings ``rl-bringup ... discovery:=subnet|server:HOST:PORT`` gives users.

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

import collections
import json
import os
import re
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from netns import NamespaceUnavailable, Network, bridged_hosts, check_rights, ip, namespaces_with_prefix
from processes import REPO, Child

from rl_bringup.plan.discovery import discovery_environment

pytestmark = pytest.mark.system

BIN = Path(sys.executable).parent
CONFIG = REPO / "config" / "cartpole.yaml"
HOSTS = ("learner", "robot_0", "robot_1")
ROBOT_IDS = {0, 1}
BUDGET = 3000  # env steps over both robots
RATE_HZ = 50.0  # per simulator: 2 robots -> ~30 s of stepping, light enough for 2 cores
DISCOVERY_PORT = 11811
LINK_CUT_S = 10.0
#: Env steps (both robots). The cut comes at about 4,000 and robot_1 goes on alone while it
#: lasts; what is left after it lets robot_0 rejoin and send episodes played with new weights
#: (no learning outcome is asserted). At 8,000 robot_0 sent 2 episodes after the cut, one run,
#: 2026-12-06: too few to count on, so 10,000.
LINK_CUT_BUDGET = 10000
#: Steps per second of each robot in the cut-link run. Unlimited, robot_1 once used up what was
#: left of the budget after the cut before robot_0 had rejoined (a whole-suite run, 2026-12-07);
#: at 100 Hz the two robots take at least 25 s over the last 5,000 steps.
LINK_CUT_RATE_HZ = 100.0
LINK_CUT_AT = 2000  # robot_0's own env steps when its link is cut: mid-training
#: What a simulator logs when it first hears the replay buffer (rl_nodes.simulator).
FIRST_STATUS = "the replay buffer reports; acting follows its rate limiter"

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
    variables, _notes = discovery_environment(discovery, env)
    env.update(variables)
    env.update(FASTDDS_BUILTIN_TRANSPORTS="UDPv4", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return env


def write_overrides(path: Path, output_dir: Path, budget: int, rate_hz: float,
                    eval_episodes: int | None) -> Path:
    # A second params file: its node blocks win over the scenario file's (a plain -p does not).
    trainer: dict[str, Any] = {"checkpoint_period": 0.0, "output_dir": str(output_dir)}
    if eval_episodes is not None:
        trainer["eval_episodes"] = eval_episodes
    path.write_text(json.dumps({"/**/trainer": {"ros__parameters": trainer},
                                "/**/replay_buffer": {"ros__parameters": {"total_env_steps": budget}},
                                "/**/simulator": {"ros__parameters": {"max_rate_hz": rate_hz}}}))
    return path  # JSON is YAML


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


def run_deployment(network: Network, discovery: str, env: dict[str, str], tmp_path: Path,
                   budget: int = BUDGET, rate_hz: float = RATE_HZ,
                   eval_episodes: int | None = 2, deadline_s: float = TRAINER_DEADLINE_S,
                   during: Callable[[dict[str, Child]], None] | None = None
                   ) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Start learner, observer and two robots in their namespaces; run ``during(children)``
    (the started processes by name) while they train; check the run; stop all. Returns
    result.json and every process's output lines by name (``observer``, ``learner``,
    ``robot_0``, ...)."""
    output_dir = tmp_path / "run"
    overrides = write_overrides(tmp_path / "overrides.yaml", output_dir, budget, rate_hz,
                                eval_episodes)
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

        if during is not None:
            during(children)
        code = learner.wait(deadline_s)
        assert code is not None, f"trainer did not finish in {deadline_s} s\n" + \
            tails(children)
        assert code == 0, tails(children)
        result_file = output_dir / "result.json"
        assert result_file.is_file(), tails(children)
        result = json.loads(result_file.read_text())
        assert result["env_steps"] >= budget, result
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
        return result, {name: list(child.lines) for name, child in children.items()}
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


def thread_waits(pid: int) -> list[str]:
    """The kernel function each thread of ``pid`` waits in (``/proc/PID/task/*/wchan``; "0"
    for a running thread): a robot stuck in a blocking send shows ``sock_alloc_send_pskb``."""
    waits = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            waits.append((task / "wchan").read_text().strip() or "0")
        except OSError:
            pass  # the thread ended
    return waits


def episode_versions(lines: list[str], robot_id: int) -> list[int]:
    """Policy versions of ``robot_id``'s episodes in the observer's output, in order."""
    return [int(match.group(3)) for line in lines
            if (match := EPISODES_LINE.search(line)) and int(match.group(1)) == robot_id]


@pytest.mark.parametrize("network", [(2, "c")], indirect=True)
def test_training_survives_a_cut_link(network: Network, ros_env: dict[str, str],
                                      tmp_path: Path) -> None:
    """Unplug robot_0's cable for LINK_CUT_S in the middle of training, then plug it back: the
    robot must rejoin (its episodes reach the learner again, played with weights published after
    the cut) and the run must complete its budget at the configured update ratio. Cut off from the
    replay buffer, robot_0 pauses acting (experience sent then would be lost) and resumes once the
    link is back.

    Whether the run also solves cart-pole is printed, not asserted: that is one draw of the
    distributed spread, and this run failed 180 in 2 of about 24 runs on record (156.8 and 175.4,
    both in whole-suite runs), well above the 1 in 100 a learning test may fail (issue 21;
    docs/reliability.md, "A cut link"). ``benchmarks/seed_spread.py --mode hybrid`` measures it."""
    env = process_environment(ros_env, "subnet")
    marks: dict[str, int] = {}
    waits: collections.Counter[str] = collections.Counter()

    def cut_link(children: dict[str, Child]) -> None:
        observer = children["observer"]
        # Weights version 1 (the untrained actor) goes out before the learner serves; cut only
        # once robot_0 follows the replay buffer, which it judges silent only after hearing it.
        assert children["robot_0"].wait_for_line(lambda line: FIRST_STATUS in line, 240.0), \
            "robot_0 never heard /replay_status"
        assert observer.wait_for_line(
            lambda line: bool((m := EPISODES_LINE.search(line)) and m.group(1) == "0"
                              and int(m.group(2)) >= LINK_CUT_AT and int(m.group(3)) > 0),
            240.0), f"robot_0 never reached {LINK_CUT_AT} env steps with learned weights"
        network.set_link("robot_0", up=False)
        try:
            time.sleep(1.0)  # what was already on the wire
            marks["cut"] = len(observer.lines)
            until = time.monotonic() + LINK_CUT_S - 1.0
            while time.monotonic() < until:  # where robot_0's threads wait, for a failure report
                waits.update(thread_waits(children["robot_0"].pid))
                time.sleep(0.5)
            marks["silent"] = len(observer.lines)
        finally:
            network.set_link("robot_0", up=True)
        marks["version_at_restore"] = max(episode_versions(observer.lines, 1), default=0)
        marks["restored"] = len(observer.lines)

    result, outputs = run_deployment(network, "subnet", env, tmp_path, budget=LINK_CUT_BUDGET,
                                     rate_hz=LINK_CUT_RATE_HZ, eval_episodes=None, deadline_s=480.0,
                                     during=cut_link)
    lines = outputs["observer"]
    assert episode_versions(lines[marks["cut"]:marks["silent"]], 0) == [], \
        "robot_0's episodes reached the learner through a cut link"
    rejoined = episode_versions(lines[marks["restored"]:], 0)
    print(f"link cut: robot_0 episodes after the link came back: {len(rejoined)}, versions "
          f"{rejoined[:1]}..{rejoined[-1:]}; robot_1 was at v{marks['version_at_restore']}; "
          f"evaluation {result['eval_mean_return']:.1f}, best {result['best_eval_mean_return']}")
    assert rejoined and max(rejoined) > marks["version_at_restore"], \
        f"robot_0 did not rejoin with new weights: {rejoined[-5:]}, {marks}"
    robot_0 = "\n".join(outputs["robot_0"])
    assert "no /replay_status" in robot_0 and "the replay buffer reports again" in robot_0, \
        ("robot_0 did not pause while cut off from the replay buffer, or never resumed; its "
         f"threads' kernel waits during the cut (samples): {dict(waits)}\n" + robot_0)
    assert result["updates_per_transition"] == pytest.approx(1.0, rel=0.05), \
        f"{result}\nthe learner's progress:\n" + "\n".join(outputs["learner"][-30:])
