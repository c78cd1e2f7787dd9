"""``rl-bringup record``: MCAP files that mcap_ros2 (and so ros2 bag / Foxglove) can decode.

One small colocated deployment runs (the recorder is the outside subscriber that makes the
container publish over DDS); the tool records a few seconds and the file is decoded again. The
same deployment shows the colocated graph of rl_nodes.graph (tests/system/test_graph.py). The
complete message definitions it stores are unit-tested in tests/unit/test_message_types.py.
"""

from __future__ import annotations

import hashlib
import math
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from tests.integration.deployments import assert_graph_is_documented, deployment, tool_argv
from tests.processes import Child

pytestmark = pytest.mark.integration

RECORDED = ("/experience", "/episodes", "/policy_weights", "/robot_0/observations")
RECORD_SECONDS = 5.0
#: Two robots, so that the graph check below sees every per-robot name twice.
ROBOTS = 2
TOOL_TIMEOUT_S = 60.0


# --- recording a deployment -----------------------------------------------------------------


@pytest.fixture(scope="module")
def colocated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    import os

    with deployment("colocated", ROBOTS, dict(os.environ),
                    tmp_path_factory.mktemp("colocated") / "run") as run:
        yield run


def run_tool(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                          check=False)


def read_back(path: Path) -> tuple[dict[str, list], dict[str, object], dict[str, object], str]:
    """Decoded messages by topic, channels and schemas by topic, and the file's profile."""
    messages: dict[str, list] = defaultdict(list)
    with path.open("rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        profile = reader.get_header().profile
        summary = reader.get_summary()
        assert summary is not None, "the file was not finalised (no summary section)"
        channels = {channel.topic: channel for channel in summary.channels.values()}
        schemas = {channel.topic: summary.schemas[channel.schema_id]
                   for channel in summary.channels.values()}
        for _, channel, _, decoded in reader.iter_decoded_messages():
            messages[channel.topic].append(decoded)
    return messages, channels, schemas, profile


def test_live_colocated_graph_matches_the_graph_module(colocated: Child, ros_env) -> None:
    assert_graph_is_documented("colocated", ROBOTS, int(ros_env["ROS_DOMAIN_ID"]), colocated)


def test_recorded_topics_decode_with_their_fields(colocated: Child, ros_env, tmp_path: Path
                                                  ) -> None:
    output = tmp_path / "run.mcap"
    result = run_tool([*tool_argv("record"), f"topics:={','.join(RECORDED)}",
                       f"output:={output}", f"duration:={RECORD_SECONDS}", "wait:=30"], ros_env)
    assert result.returncode == 0, result.stdout + result.stderr
    for topic in RECORDED:
        assert topic in result.stdout  # the per-topic counts

    messages, channels, schemas, profile = read_back(output)
    assert profile == "ros2"
    assert set(channels) == set(RECORDED)
    for topic in RECORDED:
        assert channels[topic].message_encoding == "cdr"
        assert schemas[topic].encoding == "ros2msg"
        assert b"MSG: std_msgs/msg/Header" in schemas[topic].data
        assert len(messages[topic]) > 0, f"no {topic} messages in {RECORD_SECONDS} s"
    assert "durability: transient_local" in channels["/policy_weights"].metadata[
        "offered_qos_profiles"]

    for batch in messages["/experience"]:
        obs_size = math.prod(batch.obs_shape)
        assert list(batch.obs_shape) == [4]  # cart-pole
        assert len(batch.obs) == len(batch.next_obs) == batch.batch_size * obs_size
        assert len(batch.rewards) == len(batch.terminated) == batch.batch_size
        assert len(batch.actions) == batch.batch_size * math.prod(batch.action_shape)
    for observation in messages["/robot_0/observations"]:
        assert observation.robot_id == 0
        assert len(observation.obs) == observation.num_envs * math.prod(observation.obs_shape)
    for episode in messages["/episodes"]:
        assert len(episode.returns) == len(episode.env_ids) == len(episode.lengths) > 0
        assert episode.total_env_steps > 0
    for weights in messages["/policy_weights"]:
        assert weights.format == "safetensors"
        assert hashlib.sha256(bytes(weights.data)).hexdigest() == weights.checksum


def test_ctrl_c_finalises_the_file(colocated: Child, ros_env, tmp_path: Path) -> None:
    output = tmp_path / "interrupted.mcap"
    recorder = Child([*tool_argv("record"), "topics:=/policy_weights,/replay_status",
                      f"output:={output}", "wait:=30"], env=ros_env)
    try:
        assert recorder.wait_for_line(lambda line: "Ctrl-C to stop" in line, TOOL_TIMEOUT_S), \
            recorder.output()
    finally:
        code = recorder.stop(grace_s=15.0)
    assert code == 0, recorder.output()
    assert "/policy_weights" in recorder.output()
    _, channels, _, _ = read_back(output)
    assert set(channels) == {"/policy_weights", "/replay_status"}


def test_unknown_topic_lists_the_available_ones(colocated: Child, ros_env, tmp_path: Path) -> None:
    # wait:=10: the listed topics are those discovered by then, and the machine may be busy.
    result = run_tool([*tool_argv("record"), "topics:=/no_such_topic", "wait:=10",
                       f"output:={tmp_path / 'never.mcap'}"], ros_env)
    assert result.returncode == 1
    assert "record: waiting up to 10 s for /no_such_topic in domain" in result.stdout
    assert "/no_such_topic" in result.stderr
    assert "/experience" in result.stderr and "rl_interfaces/msg/ExperienceBatch" in result.stderr
    assert not (tmp_path / "never.mcap").exists()


def test_malformed_topic_and_existing_output_are_usage_errors(ros_env, tmp_path: Path) -> None:
    malformed = run_tool([*tool_argv("record"), "topics:=/bad//name"], ros_env)
    assert malformed.returncode == 2
    assert "invalid topic name" in malformed.stderr
    existing = tmp_path / "exists.mcap"
    existing.write_bytes(b"keep me")
    refused = run_tool([*tool_argv("record"), f"output:={existing}"], ros_env)
    assert refused.returncode == 2
    assert "never overwritten" in refused.stderr
    assert existing.read_bytes() == b"keep me"
