"""Naming a run's checkpoints: a checkpoint folder, RUN/best, RUN/final, or RUN alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_core.acting.policy_model import build_policy_model
from rl_core.algorithms.sac import SAC
from rl_core.config import ConfigError, PolicyConfig, SACConfig
from rl_core.envs import CARTPOLE_ID, KUKA_REACH_ID
from rl_core.runs.checkpoint import save_checkpoint
from rl_core.runs.run_checkpoints import resolve_checkpoint

pytestmark = pytest.mark.unit


def learner(seed: int = 0) -> SAC:
    return SAC(4, 1, SACConfig(hidden_sizes=(16,)), seed=seed)


def test_a_run_stands_for_its_best_or_final_checkpoint_as_the_reader_prefers(tmp_path: Path
                                                                           ) -> None:
    run = tmp_path / "run"
    final = save_checkpoint(run / "checkpoint", learner(), env_id=CARTPOLE_ID)
    assert resolve_checkpoint(run) == final  # no best yet: the final one
    assert resolve_checkpoint(run / "final") == final
    with pytest.raises(FileNotFoundError, match=r"no best checkpoint .*eval_period > 0.*has final"):
        resolve_checkpoint(run / "best")
    best = save_checkpoint(run / "best", learner(1), env_id=CARTPOLE_ID)
    assert resolve_checkpoint(run) == best
    assert resolve_checkpoint(run, prefer="final") == final
    assert resolve_checkpoint(run / "best") == best
    assert resolve_checkpoint(final) == final  # a checkpoint folder is itself


def test_missing_checkpoints_say_what_is_there(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_checkpoint(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no best checkpoint.*holds no checkpoint"):
        resolve_checkpoint(tmp_path)
    save_checkpoint(tmp_path / "best", learner())
    with pytest.raises(FileNotFoundError, match=r"no final checkpoint.*checkpoints.*has best"):
        resolve_checkpoint(tmp_path / "final")
    with pytest.raises(ValueError, match="prefer"):
        resolve_checkpoint(tmp_path, prefer="newest")


def test_a_policy_starts_from_a_checkpoint_of_its_task_and_sizes(tmp_path: Path) -> None:
    trained = learner(5)
    save_checkpoint(tmp_path / "run" / "best", trained, env_id=CARTPOLE_ID)
    config = PolicyConfig(hidden_sizes=(16,), device="cpu", checkpoint=str(tmp_path / "run"))
    model, note = build_policy_model(config)
    assert note is not None and f"checkpoint {tmp_path / 'run' / 'best'}" in note
    obs = [[0.01, -0.02, 0.03, 0.0]]
    assert (model.actor.act(obs, deterministic=True)
            == trained.actor.act(obs, deterministic=True)).all()
    with pytest.raises(ConfigError, match="hidden_sizes"):
        build_policy_model(PolicyConfig(hidden_sizes=(32,), device="cpu",
                                        checkpoint=str(tmp_path / "run")))
    with pytest.raises(ConfigError, match=f"trained on {CARTPOLE_ID}"):
        build_policy_model(PolicyConfig(env_id=KUKA_REACH_ID, hidden_sizes=(16,), device="cpu",
                                        checkpoint=str(tmp_path / "run")))
    with pytest.raises(ConfigError, match="checkpoint: no final checkpoint"):
        build_policy_model(PolicyConfig(hidden_sizes=(16,), device="cpu",
                                        checkpoint=str(tmp_path / "run" / "final")))
