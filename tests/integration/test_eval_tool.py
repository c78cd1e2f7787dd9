"""``rl-bringup eval`` and ``rl-bringup export`` on a fresh (untrained) checkpoint: figures, the
GIF, the ONNX round trip, and the errors for bad paths and corrupt files."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image

from rl_bringup import cli
from rl_core.algorithms.sac import SAC
from rl_core.config import SACConfig
from rl_core.envs import CARTPOLE_ID, KUKA_REACH_ID
from rl_core.learning.evaluation import evaluate
from rl_core.runs.checkpoint import META_FILE, TENSORS_FILE, load_actor, save_checkpoint

pytestmark = pytest.mark.integration

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A cart-pole sized SAC checkpoint as the trainer writes it (no env_id recorded)."""
    sac = SAC(4, 1, SACConfig(hidden_sizes=(32, 32)), seed=1)
    return save_checkpoint(tmp_path / "run" / "checkpoint", sac, {"env_steps": 123})


def mean_return(out: str) -> tuple[float, float]:
    match = re.search(r"^mean return (\S+) ± (\S+) over \d+ episode", out, re.MULTILINE)
    assert match, out
    return float(match.group(1)), float(match.group(2))


def test_eval_reports_returns_and_writes_a_gif(run_cli: RunCli, checkpoint: Path,
                                               tmp_path: Path) -> None:
    gif = tmp_path / "media" / "first.gif"  # the folder does not exist yet
    code, out, err = run_cli("eval", f"checkpoint:={checkpoint}", "episodes:=2", f"gif:={gif}")
    assert code == 0, err
    assert "argv[0]" not in out
    assert f"task: {CARTPOLE_ID} (from inferred" in out  # the checkpoint does not name its task
    assert "over 2 episode(s)" in out
    actor, _ = load_actor(checkpoint)
    expected = evaluate(actor, CARTPOLE_ID, episodes=2, seed=0)
    assert mean_return(out) == (round(expected.mean, 2), round(expected.std, 2))

    with Image.open(gif) as image:
        assert image.format == "GIF"
        assert image.n_frames > 1
        assert image.size == (320, 240)
    # Frames of the first episode: its reset plus one per step.
    assert f"gif {gif} ({int(expected.lengths[0]) + 1} frames of the first episode" in out
    assert sorted(p.name for p in gif.parent.iterdir()) == ["first.gif"]


def test_the_task_comes_from_the_checkpoint_or_the_arguments(run_cli: RunCli, checkpoint: Path
                                                              ) -> None:
    meta_path = checkpoint / META_FILE
    meta = json.loads(meta_path.read_text())
    meta["env_id"] = CARTPOLE_ID  # what the trainer is asked to record
    meta_path.write_text(json.dumps(meta))
    code, out, err = run_cli("eval", f"checkpoint:={checkpoint}", "episodes:=1")
    assert code == 0, err
    assert f"task: {CARTPOLE_ID} (from the checkpoint)" in out

    code, out, err = run_cli("eval", f"checkpoint:={checkpoint}", "episodes:=1", "config:=cartpole")
    assert code == 0, err
    assert re.search(rf"task: {re.escape(CARTPOLE_ID)} \(from config .*cartpole.yaml\)", out)

    code, _, err = run_cli("eval", f"checkpoint:={checkpoint}", f"env_id:={KUKA_REACH_ID}")
    assert code == 2
    assert "has observations (23,)" in err and "the policy takes (4,) -> (1,)" in err
    code, _, err = run_cli("eval", f"checkpoint:={checkpoint}", "env_id:=rl_ros2/Nope-v0")
    assert code == 2 and "unknown env_id" in err


def test_export_then_eval_the_onnx_model(run_cli: RunCli, checkpoint: Path) -> None:
    code, out, err = run_cli("export", f"checkpoint:={checkpoint}")
    assert code == 0, err
    model = checkpoint / "policy.onnx"
    assert f"wrote {model}" in out and f"env_id {CARTPOLE_ID}" in out
    assert re.search(r"max \|onnx - torch\| = \S+ on 64 random observations", out)

    code, torch_out, err = run_cli("eval", f"checkpoint:={checkpoint}", "episodes:=2")
    assert code == 0, err
    code, onnx_out, err = run_cli("eval", f"onnx:={model}", "episodes:=2")
    assert code == 0, err
    assert f"task: {CARTPOLE_ID} (from the ONNX model)" in onnx_out
    assert mean_return(onnx_out) == mean_return(torch_out)
    code, both_out, err = run_cli("eval", f"checkpoint:={checkpoint}", f"onnx:={model}",
                                  "episodes:=2")
    assert code == 0, err
    assert f"policy: ONNX model {model} of checkpoint {checkpoint}" in both_out
    assert mean_return(both_out) == mean_return(torch_out)


def test_an_onnx_model_of_another_checkpoint_is_refused(run_cli: RunCli, checkpoint: Path,
                                                         tmp_path: Path) -> None:
    other = save_checkpoint(tmp_path / "other", SAC(4, 1, SACConfig(hidden_sizes=(16,))))
    model = tmp_path / "other.onnx"
    code, _, err = run_cli("export", f"checkpoint:={other}", f"onnx:={model}",
                           f"env_id:={CARTPOLE_ID}")
    assert code == 0, err
    code, _, err = run_cli("eval", f"checkpoint:={checkpoint}", f"onnx:={model}")
    assert code == 2
    assert "export this checkpoint again" in err


@pytest.mark.parametrize("command", ["eval", "export"])
def test_missing_checkpoints_exit_2(run_cli: RunCli, tmp_path: Path, command: str) -> None:
    code, _, err = run_cli(command, f"checkpoint:={tmp_path / 'nowhere'}")
    assert code == 2
    assert f"{cli.PROGRAM} {command}: error: no checkpoint at" in err and "does not exist" in err
    code, _, err = run_cli(command, f"checkpoint:={tmp_path}")  # a folder, but no checkpoint
    assert code == 2 and "holds no checkpoint" in err


def test_a_run_directory_stands_for_its_best_checkpoint_and_final_picks_the_last(
        run_cli: RunCli, checkpoint: Path) -> None:
    run = checkpoint.parent
    code, out, err = run_cli("eval", f"checkpoint:={run}", "episodes:=1")
    assert code == 0, err
    assert f"checkpoint {checkpoint} " in out  # no best kept: the final one
    best = save_checkpoint(run / "best", SAC(4, 1, SACConfig(hidden_sizes=(16,)), seed=2),
                           {"env_steps": 100})
    code, out, err = run_cli("eval", f"checkpoint:={run}", "episodes:=1")
    assert code == 0, err
    assert f"checkpoint {best} (hidden sizes [16]" in out
    code, out, err = run_cli("eval", f"checkpoint:={run / 'final'}", "episodes:=1")
    assert code == 0, err
    assert f"checkpoint {checkpoint} (hidden sizes [32, 32]" in out
    code, out, err = run_cli("export", f"checkpoint:={run}")
    assert code == 0, err
    assert (best / "policy.onnx").is_file() and f"from {best}" in out
    code, _, err = run_cli("eval", f"checkpoint:={run.parent / 'other' / 'best'}")
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize("command", ["eval", "export"])
def test_corrupt_checkpoints_exit_1(run_cli: RunCli, checkpoint: Path, command: str) -> None:
    tensors = checkpoint / TENSORS_FILE
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 0xFF
    tensors.write_bytes(bytes(data))
    code, out, err = run_cli(command, f"checkpoint:={checkpoint}")
    assert code == 1
    assert "checksum mismatch" in err
    assert "mean return" not in out and "wrote" not in out

    (checkpoint / META_FILE).write_text("{ not json")
    code, _, err = run_cli(command, f"checkpoint:={checkpoint}")
    assert code == 1 and "is not valid JSON" in err


def test_bad_eval_arguments(run_cli: RunCli, checkpoint: Path, tmp_path: Path) -> None:
    code, _, err = run_cli("eval", "episodes:=2")
    assert code == 2 and "give the policy: checkpoint:=DIR" in err
    code, _, err = run_cli("eval", f"checkpoint:={checkpoint}", "episodes:=0")
    assert code == 2 and "episodes:= must be" in err
    code, _, err = run_cli("eval", f"checkpoint:={checkpoint}", f"gif:={tmp_path}")
    assert code == 2 and "is a folder" in err
    code, _, err = run_cli("eval", f"onnx:={tmp_path / 'missing.onnx'}")
    assert code == 2 and "no ONNX model at" in err
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00garbage")
    code, _, err = run_cli("eval", f"onnx:={garbage}")
    assert code == 1 and "cannot be used" in err
    code, _, err = run_cli("eval", f"checkpoint:={checkpoint}", "speed:=fast")
    assert code == 2 and "unknown argument 'speed'" in err
    code, _, err = run_cli("export")
    assert code == 2 and "missing checkpoint:=DIR" in err
