"""Format-1 checkpoints (two critic networks) load into the ensemble critic and go on exactly."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch

from rl_core.runs.checkpoint import load_checkpoint, read_checkpoint_meta, save_checkpoint

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoint_format1"
_spec = importlib.util.spec_from_file_location("make_format1", FIXTURES / "make.py")
assert _spec is not None and _spec.loader is not None
make_format1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_format1)


@pytest.mark.parametrize("name", ["flat", "pixels"])
def test_a_format1_checkpoint_resumes_where_the_old_code_would_have(name: str, tmp_path: Path
                                                                     ) -> None:
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    assert read_checkpoint_meta(FIXTURES / name)["format_version"] == 1
    sac, meta = load_checkpoint(FIXTURES / name)
    shape = sac.obs_shape
    torch.testing.assert_close(torch.tensor(make_format1.probe(sac, shape, sac.action_dim)),
                               torch.tensor(expected["q_before"]), rtol=1e-5, atol=1e-6)
    # One more update from the saved Adam moments gives what the format-1 code computed.
    torch.manual_seed(7)
    metrics = sac.update(make_format1.batch(shape, sac.action_dim, 10))
    # The metrics that code reported (later ones, such as bc_loss, did not exist then).
    assert {name: metrics[name] for name in expected["metrics"]} == pytest.approx(
        expected["metrics"], rel=1e-4, abs=1e-6)
    torch.testing.assert_close(torch.tensor(make_format1.probe(sac, shape, sac.action_dim)),
                               torch.tensor(expected["q_after"]), rtol=1e-4, atol=1e-6)
    # The optimizers keep this learner's multi-tensor implementation, not the saved flags.
    assert all(group["fused"] or group["foreach"]
               for optimizer in sac.optimizers().values() for group in optimizer.param_groups)
    # What the resumed run saves is format 2 and loads back unchanged.
    save_checkpoint(tmp_path / "again", sac, meta["counters"])
    assert read_checkpoint_meta(tmp_path / "again")["format_version"] == 2
    again, _ = load_checkpoint(tmp_path / "again")
    for first, second in zip(sac.critic.parameters(), again.critic.parameters()):
        assert torch.equal(first, second)


def test_an_unknown_format_is_refused_with_the_versions_this_code_reads(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "flat", tmp_path / "future")
    meta_path = tmp_path / "future" / "checkpoint.json"
    meta = json.loads(meta_path.read_text())
    meta["format_version"] = 9
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="format version 9.*reads versions 1, 2"):
        load_checkpoint(tmp_path / "future")
