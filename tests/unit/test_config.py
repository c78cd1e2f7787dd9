"""Scenario files: per-node blocks, wildcards, validation with reasons."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from rl_core.config import (
    RENAMED_PARAMETERS,
    ConfigError,
    ReplayConfig,
    SimulatorConfig,
    load_run_config,
    node_parameters,
    parameters_for,
    renamed,
)

pytestmark = pytest.mark.unit
CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIG_DIR.glob("*.yaml")))
def test_shipped_configs_load(name: str) -> None:
    config = load_run_config(CONFIG_DIR / name)
    assert config.policy.hidden_sizes == config.sac.hidden_sizes
    assert config.simulator.env_id == config.trainer.env_id == config.policy.env_id


def test_specific_blocks_override_wildcards_and_overrides_win(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("/**:\n  ros__parameters:\n    seed: 1\n"
                    "/**/trainer:\n  ros__parameters:\n    seed: 2\n    batch_size: 32\n")
    config = load_run_config(path, {"trainer": {"batch_size": 64}})
    assert config.simulator.seed == 1 and config.trainer.seed == 2
    assert config.trainer.batch_size == 64
    document = {"/**": {"ros__parameters": {"seed": 1}},
                "robot_0/simulator": {"ros__parameters": {"seed": 5}}}
    assert node_parameters(document, "simulator") == {"seed": 5}
    assert node_parameters(document, "policy") == {"seed": 1}


@pytest.mark.parametrize("text, message", [
    ("/**/trainer:\n  ros__parameters:\n    batch_sise: 3\n", "unknown parameter.*batch_sise"),
    ("/**/trainer:\n  ros__parameters:\n    batch_size: 0\n", "outside its range"),
    ("/**/trainer:\n  ros__parameters:\n    gamma: .nan\n", "finite number"),
    ("/**/trainer:\n  ros__parameters:\n    update_mode: fast\n", "update_mode must be one of"),
    ("/**/simulater:\n  ros__parameters:\n    seed: 3\n", "unknown node 'simulater'"),
    ("/**:\n  ros__parameters:\n    hidden_size: [3]\n", "unknown shared parameter"),
    ("/**/policy:\n  ros__parameters:\n    hidden_sizes: [8]\n", "hidden_sizes"),
    ("/**/trainer:\n  seed: 3\n", "ros__parameters"),
    ("[1, 2", "not valid YAML"),
])
def test_bad_files_are_rejected_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_run_config(path)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_run_config(tmp_path / "nope.yaml")


def test_dataclasses_validate_directly() -> None:
    assert SimulatorConfig(num_envs=4).num_envs == 4
    with pytest.raises(ConfigError, match="integer"):
        SimulatorConfig(num_envs=2.5)  # type: ignore[arg-type]
    assert ReplayConfig(updates_per_transition=2).updates_per_transition == 2.0


def test_a_former_parameter_name_works_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("/**:\n  ros__parameters:\n    env_id: rl_ros2/CartPoleBalance-v0\n"
                    "/**/replay_buffer:\n  ros__parameters:\n    updates_per_step: 0.25\n")
    with pytest.warns(FutureWarning, match="'updates_per_step' is deprecated: it was renamed "
                      "to 'updates_per_transition'"):
        config = load_run_config(path)
    assert config.replay.updates_per_transition == 0.25
    # Where both are given, the new name wins; overrides use either name.
    with pytest.warns(FutureWarning):
        both = renamed({"updates_per_step": 4.0, "updates_per_transition": 2.0})
    assert both == {"updates_per_transition": 2.0}
    with pytest.warns(FutureWarning):
        overridden = load_run_config(path, {"replay_buffer": {"updates_per_step": 3.0}})
    assert overridden.replay.updates_per_transition == 3.0
    assert RENAMED_PARAMETERS == {"updates_per_step": "updates_per_transition"}


def test_the_budget_is_the_replay_buffers_and_set_on_the_trainer_it_is_refused(
        tmp_path: Path) -> None:
    """total_env_steps moved from the trainer to the replay buffer (it owns the schedule); after
    a release of passing it on with a warning, the trainer's is refused, saying where it goes."""
    path = tmp_path / "old.yaml"
    path.write_text("/**:\n  ros__parameters:\n    env_id: rl_ros2/CartPoleBalance-v0\n"
                    "/**/trainer:\n  ros__parameters:\n    total_env_steps: 1234\n")
    with pytest.raises(ConfigError, match="'total_env_steps' is the replay_buffer's .* not the "
                       "trainer's: move it to the replay_buffer's block"):
        load_run_config(path)
    # Where it belongs, or shared by every node, it raises no warning.
    path.write_text("/**:\n  ros__parameters:\n    total_env_steps: 99\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_run_config(path).replay.total_env_steps == 99
        assert load_run_config(path, {"replay_buffer": {"total_env_steps": 7}}
                               ).replay.total_env_steps == 7


def test_overrides_go_to_the_node_kinds_that_declare_them() -> None:
    overrides = {"total_env_steps": 5, "actor_lr": 0.1, "updates_per_step": 2.0,
                 "use_sim_time": True, "seed": 3}
    assert parameters_for("replay_buffer", overrides) == {
        "total_env_steps": 5, "updates_per_step": 2.0, "use_sim_time": True, "seed": 3}
    assert parameters_for("trainer", overrides) == {"actor_lr": 0.1, "use_sim_time": True,
                                                    "seed": 3}
    assert parameters_for("sim_robot", overrides) == overrides  # not a node kind of rl_core
