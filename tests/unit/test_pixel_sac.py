"""SAC on image observations: encoder layout, DrQ shifts, shared-encoder training, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_core.algorithms.encoders import (
    EncodedActor,
    image_to_tensor,
    is_image_shape,
    make_actor,
    random_shift,
)
from rl_core.algorithms.networks import SquashedGaussianActor
from rl_core.algorithms.sac import SAC
from rl_core.config import SACConfig
from rl_core.runs.checkpoint import (
    actor_to_bytes,
    load_actor,
    load_actor_bytes,
    load_checkpoint,
    save_checkpoint,
)
from rl_core.wire.messages import Batch

pytestmark = pytest.mark.unit

OBS_SHAPE = (2, 16, 16, 3)


def image_batch(rows: int = 16, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    return Batch(
        obs=rng.integers(0, 256, (rows, *OBS_SHAPE), dtype=np.uint8),
        actions=rng.uniform(-1, 1, (rows, 1)).astype(np.float32),
        rewards=rng.normal(size=rows).astype(np.float32),
        next_obs=rng.integers(0, 256, (rows, *OBS_SHAPE), dtype=np.uint8),
        terminated=np.zeros(rows, dtype=np.float32),
        indices=np.arange(rows, dtype=np.int64),
        weights=np.ones(rows, dtype=np.float32),
    )


def pixel_sac(seed: int = 0, **overrides: object) -> SAC:
    config = SACConfig(hidden_sizes=(16, 16), feature_dim=8, encoder_channels=4, **overrides)
    return SAC(OBS_SHAPE, 1, config, seed=seed)


def test_image_shapes_select_the_encoder() -> None:
    assert is_image_shape(OBS_SHAPE) and not is_image_shape((4,))
    assert not is_image_shape((16, 16, 3)), "frames come stacked"
    assert pixel_sac().pixels and not SAC(4, 1, SACConfig(hidden_sizes=(8,))).pixels
    with pytest.raises(ValueError, match="stacked RGB frames"):
        SAC((4, 5), 1, SACConfig())


def test_image_to_tensor_folds_frames_into_channels_and_scales() -> None:
    frames = np.zeros((1, *OBS_SHAPE), dtype=np.uint8)
    frames[0, 1, 2, 3] = (255, 0, 128)  # second frame, row 2, column 3
    tensor = image_to_tensor(frames)
    assert tensor.shape == (1, 6, 16, 16) and tensor.dtype == torch.float32
    assert tensor[0, 3:, 2, 3].tolist() == pytest.approx([0.5, -0.5, 128 / 255 - 0.5], abs=1e-6)
    assert float(tensor[0, :3].max()) == -0.5


def test_random_shift_translates_each_image_by_at_most_pad_pixels() -> None:
    torch.manual_seed(0)
    images = torch.rand(32, 3, 10, 12)
    assert random_shift(images, 0) is images
    shifted = random_shift(images, 2)
    assert shifted.shape == images.shape
    padded = torch.nn.functional.pad(images, (2, 2, 2, 2), mode="replicate")
    for index in range(len(images)):
        matches = [(dy, dx) for dy in range(5) for dx in range(5)
                   if torch.equal(shifted[index], padded[index, :, dy:dy + 10, dx:dx + 12])]
        assert matches, "every output is a crop of the padded input"
    assert not torch.equal(shifted, images)


def test_updates_reduce_critic_loss_and_only_the_critic_trains_the_encoder() -> None:
    sac = pixel_sac(critic_lr=3e-3, image_shift=0)
    assert sac.actor.encoder is sac.critic.encoder
    assert sac.critic_target.encoder is not sac.critic.encoder
    actor_params = {id(p) for group in sac.actor_optimizer.param_groups for p in group["params"]}
    assert not actor_params & {id(p) for p in sac.critic.encoder.parameters()}
    batch = image_batch()
    first = np.mean([sac.update(batch)["critic_loss"] for _ in range(3)])
    for _ in range(60):
        sac.update(batch)
    last = np.mean([sac.update(batch)["critic_loss"] for _ in range(3)])
    assert last < 0.5 * first, (first, last)


def test_actor_loss_sends_no_gradient_into_the_encoder() -> None:
    sac = pixel_sac(critic_lr=0.0, image_shift=0)  # a critic step then changes nothing
    before = [p.clone() for p in sac.critic.encoder.parameters()]
    head_before = [p.clone() for p in sac.actor.head.parameters()]
    sac.update(image_batch())
    for old, new in zip(before, sac.critic.encoder.parameters(), strict=True):
        torch.testing.assert_close(old, new)
    assert any(not torch.equal(old, new)
               for old, new in zip(head_before, sac.actor.head.parameters(), strict=True))


def test_actions_from_frames_are_bounded() -> None:
    sac = pixel_sac()
    obs = image_batch(5).obs
    actions = sac.act(obs)
    assert actions.shape == (5, 1) and np.all(np.abs(actions) <= 1.0)
    np.testing.assert_array_equal(sac.act(obs, deterministic=True),
                                  sac.act(obs, deterministic=True))


def test_checkpoint_and_weight_bytes_round_trip(tmp_path) -> None:
    sac = pixel_sac(seed=2)
    batch = image_batch()
    for _ in range(3):
        sac.update(batch)
    save_checkpoint(tmp_path / "ckpt", sac, {"env_steps": 10})
    restored, meta = load_checkpoint(tmp_path / "ckpt")
    assert meta["obs_shape"] == list(OBS_SHAPE) and restored.pixels
    assert restored.actor.encoder is restored.critic.encoder
    torch.manual_seed(5)
    expected = sac.update(batch)
    torch.manual_seed(5)
    assert restored.update(batch) == pytest.approx(expected, rel=1e-5)

    actor, _ = load_actor(tmp_path / "ckpt")
    assert isinstance(actor, EncodedActor)
    remote = make_actor(OBS_SHAPE, 1, (16, 16), 8, 4)
    load_actor_bytes(remote, *actor_to_bytes(sac.actor))
    np.testing.assert_allclose(remote.act(batch.obs, deterministic=True),
                               sac.act(batch.obs, deterministic=True), rtol=1e-5)
    with pytest.raises(ValueError, match="weights are for"):
        load_actor_bytes(SquashedGaussianActor(int(np.prod(OBS_SHAPE)), 1, (16, 16)),
                         *actor_to_bytes(sac.actor))


def test_a_mixed_precision_step_of_an_image_learner_is_the_float32_step_within_rounding() -> None:
    """``update_precision: bfloat16`` with the convolutional encoder (eager: image tasks are
    not compiled): the same metrics as float32 within bfloat16's rounding, parameters float32."""
    batch, metrics = image_batch(), {}
    learners = [pixel_sac(update_precision=precision) for precision in ("float32", "bfloat16")]
    for sac in learners:
        torch.manual_seed(1)  # the same shifts and draws
        metrics[sac.config.update_precision] = sac.update(batch)
    assert metrics["bfloat16"] == pytest.approx(metrics["float32"], rel=0.02, abs=1e-3)
    assert {p.dtype for p in learners[1].critic.parameters()} == {torch.float32}
