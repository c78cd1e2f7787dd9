"""Image observations through DDS in decoupled robots:=2, per observation_codec: every codec
steps both robots with nothing refused, a batch crosses as one image (raw: its exact size),
compression shrinks it, and latent sends only features on the acting path.

The runs are ``benchmarks/image_codecs.py``'s measurement (learner idle, acting free), short;
the benchmark's figures are in docs/results.md#image-codecs. One test over the three runs: with
two lanes, tests of one module on two workers each start the module's runs (about 105 s each).
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.image_codecs import ROBOTS, measure_deployment
from rl_core.envs import CARTPOLE_PIXELS_ID
from rl_core.robot.tasks import space_shapes

pytestmark = pytest.mark.system
#: Header and shape fields of an ObservationBatch and an Image beside the pixels, at most.
OVERHEAD_BYTES = 400


def test_every_codec_crosses_dds_at_its_size_and_nothing_is_refused(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    import os

    environ = dict(os.environ, PYTHONUNBUFFERED="1")
    figures = {codec: measure_deployment(codec, environ, tmp_path_factory.mktemp(codec),
                                         warmup_s=1.5, window_s=3.0)
               for codec in ("raw", "jpeg", "latent")}
    check_every_codec_steps_both_robots_and_nothing_is_refused(figures)
    check_raw_sends_each_observation_once_at_its_size(figures)
    check_compression_and_latent_shrink_what_crosses(figures)


def check_every_codec_steps_both_robots_and_nothing_is_refused(figures: dict) -> None:
    for codec, run in figures.items():
        assert run["env_steps"] >= 10 * ROBOTS, (codec, run)
        assert run["rejected"] == {}, (codec, run["rejected"], run["rejections_logged"])


def check_raw_sends_each_observation_once_at_its_size(figures: dict) -> None:
    shape, _ = space_shapes(CARTPOLE_PIXELS_ID)
    pixels = int(np.prod(shape))
    raw = figures["raw"]
    # one observation image per env step (one robot's env per batch), plus small headers
    assert pixels <= raw["acting_bytes_per_step"] <= pixels + OVERHEAD_BYTES, raw
    # experience: obs and next_obs
    assert 2 * pixels <= raw["experience_bytes_per_step"] <= 2 * pixels + OVERHEAD_BYTES, raw


def check_compression_and_latent_shrink_what_crosses(figures: dict) -> None:
    raw, jpeg, latent = figures["raw"], figures["jpeg"], figures["latent"]
    assert jpeg["acting_bytes_per_step"] < 0.2 * raw["acting_bytes_per_step"], (jpeg, raw)
    assert jpeg["experience_bytes_per_step"] < 0.2 * raw["experience_bytes_per_step"]
    # latent: 50 float32 features and the batch header on the acting path; png experience
    assert latent["acting_bytes_per_step"] < 50 * 4 + OVERHEAD_BYTES, latent
    assert latent["experience_bytes_per_step"] < 0.2 * raw["experience_bytes_per_step"]
