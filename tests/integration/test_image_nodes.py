"""The nodes on a pixel task: colocated training hands frames over without encoding them; the
policy acts on frames and on a latent robot's features; the robot-side encoder follows only
signed weights of its camera's shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rclpy
import torch

from rl_core.algorithms.encoders import image_to_tensor, make_actor
from rl_core.envs import CARTPOLE_PIXELS_ID
from rl_core.robot.tasks import space_shapes
from rl_core.security.weights_auth import KEY_FILE_VARIABLE, KEY_VARIABLE, SigningKey, sign_weights
from rl_nodes import image_transport
from rl_nodes.image_transport import LatentEncoder
from rl_nodes.intra_process import IntraProcessManager
from rl_nodes.messages import Observations, Weights
from rl_nodes.policy import PolicyNode
from rl_nodes.replay_buffer import ReplayBufferNode
from rl_nodes.simulator import SimulatorNode
from rl_nodes.trainer import TrainerNode
from tests.integration.in_process import overrides_file, spinning
from tests.processes import REPO

pytestmark = pytest.mark.integration
CONFIG = REPO / "config" / "cartpole_pixels.yaml"
KEY = SigningKey(bytes(range(32)))


@pytest.fixture
def encodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every image encoding the nodes do, by codec."""
    calls: list[str] = []
    original = image_transport.encode_batch

    def counting(frames: np.ndarray, codec: str, quality: int = 90) -> bytes:
        calls.append(codec)
        return original(frames, codec, quality)

    monkeypatch.setattr(image_transport, "encode_batch", counting)
    return calls


@pytest.fixture
def pixel_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                ) -> Iterator[dict[str, object]]:
    """The four nodes of a colocated pixel cart-pole run with ``observation_codec`` jpeg."""
    monkeypatch.setenv(KEY_VARIABLE, KEY.raw.hex())
    monkeypatch.delenv(KEY_FILE_VARIABLE, raising=False)
    overrides = overrides_file(tmp_path, {
        "simulator": {"random_steps": 20, "observation_codec": "jpeg",
                      "visualization_rate_hz": 0.0},
        "replay_buffer": {"learning_starts": 40, "capacity": 500, "snapshot_period": 0.0,
                          "output_dir": str(tmp_path / "run"), "total_env_steps": 10**6},
        "trainer": {"batch_size": 16, "weights_period": 0.2,
                    "checkpoint_period": 0.0, "output_dir": str(tmp_path / "run")},
    })
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG), "--params-file", str(overrides)])
    nodes = {"simulator": SimulatorNode("/robot_0"), "policy": PolicyNode("/robot_0"),
             "replay": ReplayBufferNode("/"), "trainer": TrainerNode("/")}
    probe = rclpy.create_node("probe")
    with spinning(list(nodes.values()), probe):
        yield {**nodes, "ipc": IntraProcessManager.for_context(probe.context)}


def test_colocated_pixel_training_never_encodes(pixel_nodes, encodes: list[str]) -> None:
    simulator, policy, replay, trainer = (pixel_nodes[k] for k in ("simulator", "policy",
                                                                    "replay", "trainer"))
    ipc: IntraProcessManager = pixel_nodes["ipc"]
    assert ipc.spin_until(lambda: trainer.sac.update_step >= 5 and policy.version >= 2, 180.0)
    assert trainer.update_mode == "interleaved" and trainer.sac.pixels
    assert replay.buffer.obs_dtype == np.uint8 and replay.buffer.obs_shape == policy.obs_shape
    assert simulator.total_env_steps > 40 and simulator.policy_version >= 1, "the policy acted"
    assert encodes == [], "frames crossed to the policy and the replay buffer without encoding"
    assert simulator.images.observations_pub.dds_publications == 0
    assert simulator.images.experience_pub.dds_publications == 0
    assert simulator.dds_bytes()["acting"] == 0 and policy.rejected_messages == 0


@pytest.fixture
def pixel_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[PolicyNode]:
    monkeypatch.setenv(KEY_VARIABLE, KEY.raw.hex())
    monkeypatch.delenv(KEY_FILE_VARIABLE, raising=False)
    rclpy.init(args=["--ros-args", "--params-file", str(CONFIG)])
    policy = PolicyNode("/robot_0")
    policy.start()  # active (lifecycle): an inactive policy takes no observations
    try:
        yield policy
    finally:
        policy.destroy_node()
        rclpy.try_shutdown()


def frames(rows: int) -> np.ndarray:
    shape, _ = space_shapes(CARTPOLE_PIXELS_ID)
    return np.random.default_rng(0).integers(0, 256, (rows, *shape), dtype=np.uint8)


def test_the_policy_acts_on_frames_and_on_encoder_features(pixel_policy: PolicyNode) -> None:
    policy = pixel_policy
    actor = policy.actor
    images = frames(3)
    with torch.no_grad():
        features = actor.encoder(image_to_tensor(images)).numpy()
    from_images = policy._act(images, deterministic=True)
    from_features = policy._act(features, deterministic=True)
    assert from_images.shape == (3, 1)
    np.testing.assert_allclose(from_features, from_images, atol=1e-5)
    assert policy._valid_observations(Observations(0, 1, features))
    assert policy._valid_observations(Observations(0, 1, images))
    assert not policy._valid_observations(Observations(0, 1, np.zeros((3, 7), np.float32)))
    assert policy.rejections == {"observations": 1}


def signed_weights(actor: torch.nn.Module, version: int, key: SigningKey | None = KEY,
                   epoch: int = 5) -> Weights:
    weights = Weights(version, version, {name: tensor.detach().clone() for name, tensor in
                                         actor.state_dict().items()},
                      actor.architecture(), epoch=epoch)
    if key is not None:
        sign_weights(weights, key)
    return weights


class Refusals:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def reject(self, what: str, reason: str) -> None:
        self.reasons.append(f"{what}: {reason}")


def test_the_robot_side_encoder_follows_only_signed_weights_of_its_camera() -> None:
    shape, _ = space_shapes(CARTPOLE_PIXELS_ID)
    node = Refusals()
    latent = LatentEncoder(node, shape, KEY.public)
    actor = make_actor(shape, 1, (16,), 50, 8)
    assert not latent.ready
    assert not latent.on_weights(signed_weights(actor, 1, key=None))
    assert not latent.on_weights(signed_weights(actor, 1, key=SigningKey(bytes(32))))
    other = make_actor((2, *shape[1:]), 1, (16,), 50, 8)  # another frame stack
    assert not latent.on_weights(signed_weights(other, 1))
    assert not latent.ready and len(node.reasons) == 3
    assert "signature" in node.reasons[0] and "camera gives" in node.reasons[2]

    assert latent.on_weights(signed_weights(actor, 2))
    images = frames(2)
    with torch.no_grad():
        expected = actor.encoder(image_to_tensor(images)).numpy()
    np.testing.assert_allclose(latent.encode(images), expected, atol=1e-6)
    assert not latent.on_weights(signed_weights(actor, 1)), "an older version is a replay"
    assert "replay" in node.reasons[-1]
    newer = make_actor(shape, 1, (16,), 50, 8)  # same network, other weights
    assert latent.on_weights(signed_weights(newer, 3))
    with torch.no_grad():
        expected = newer.encoder(image_to_tensor(images)).numpy()
    np.testing.assert_allclose(latent.encode(images), expected, atol=1e-6)
