"""The one update loop (rl_core.learning.learner.Learner.learn/run) over its sources, the run of
the trainer node without ROS (rl_core.learning.training_run) and what a run reports
(rl_core.monitoring.progress)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rl_core.algorithms.sac import SAC
from rl_core.config import ReplayConfig, SACConfig, TrainerConfig
from rl_core.learning.learner import (
    EVALUATION,
    GETTING_BATCHES,
    GRADIENT_STEPS,
    OTHER,
    WEIGHTS_AND_CHECKPOINTS,
    Learner,
    time_shares,
)
from rl_core.learning.training_run import (
    BATCHES_PER_REQUEST,
    INTERLEAVED,
    THREAD,
    TrainingRun,
    batches_per_request,
    choose_update_mode,
    replay_figures,
)
from rl_core.monitoring.progress import RateMeter, progress_line, summary_line
from rl_core.replay import UNLIMITED_BATCHES
from rl_core.replay.build import new_buffer, new_replay
from rl_core.runs.checkpoint import save_checkpoint

pytestmark = pytest.mark.unit

ENV_ID = "rl_ros2/CartPoleBalance-v0"
SMALL = SACConfig(hidden_sizes=(16, 16))


def filled_replay(transitions: int, prioritized: bool = False, learning_starts: int = 10,
                  total_env_steps: int = 20_000):
    config = ReplayConfig(capacity=1000, prioritized=prioritized, learning_starts=learning_starts,
                          updates_per_transition=1.0, error_buffer=10_000,
                          total_env_steps=total_env_steps)
    replay = new_replay(config, new_buffer(config, (4,), (1,)))
    rng = np.random.default_rng(0)
    for _ in range(transitions // 10):
        replay.add(rng.normal(size=(10, 4)).astype(np.float32),
                   rng.uniform(-1, 1, (10, 1)).astype(np.float32), np.ones(10, np.float32),
                   rng.normal(size=(10, 4)).astype(np.float32), np.zeros(10, bool))
    return replay


def test_learn_runs_a_step_per_granted_batch_and_keeps_priorities() -> None:
    replay = filled_replay(50, prioritized=True)
    learner = Learner(SAC(4, 1, SMALL), ENV_ID)
    learned = learner.learn(replay.take(32, UNLIMITED_BATCHES)[0])
    assert learned == 40  # 50 transitions, 10 before learning starts, one update each
    assert learner.sac.update_step == 40 and learner.env_steps == 50
    update = learner.priorities.take()
    assert update is not None and len(update) == 40 * 32 and update.drawn_at == 50
    assert replay.update_priorities(update) > 0
    # A uniform buffer gets no priorities back.
    uniform = Learner(SAC(4, 1, SMALL), ENV_ID)
    uniform.learn(filled_replay(50).take(32, UNLIMITED_BATCHES)[0])
    assert uniform.priorities.take() is None


def test_a_failed_update_is_reported_and_the_rest_go_on() -> None:
    replay = filled_replay(20)
    reports: list[tuple[str, str]] = []
    learner = Learner(SAC(4, 1, SMALL), ENV_ID, report=lambda what, why: reports.append((what, why)))
    grant = replay.take(8, UNLIMITED_BATCHES)[0]
    bad = grant.batches[0]._replace(rewards=np.full_like(grant.batches[0].rewards, np.nan))
    grant.batches[0] = bad
    assert learner.learn(grant) == 10
    assert learner.failed_updates == 1 and learner.sac.update_step == 9
    assert reports and reports[0][0] == "update" and "finite" in reports[0][1]


def test_run_ends_when_the_replay_buffer_says_the_run_is_done() -> None:
    replay = filled_replay(70, total_env_steps=60)  # 10 more than the budget came in
    learner = Learner(SAC(4, 1, SMALL), ENV_ID)
    rounds = []

    def source():
        rounds.append(1)
        return replay.take(8, 4)[0]

    assert learner.run(source, stop=threading.Event())
    assert learner.sac.update_step == 50  # every update the 50 paying transitions pay for
    assert len(rounds) == 50 // 4 + 1  # the 13th round grants the last 2 and says "done"
    assert learner.done and learner.total_env_steps == 60 and learner.env_steps == 70


def test_run_measures_where_the_learners_time_goes() -> None:
    replay = filled_replay(70, total_env_steps=60)
    learner = Learner(SAC(4, 1, SMALL), ENV_ID)

    def source():
        time.sleep(0.02)  # a replay buffer's answer on its way
        return replay.take(8, 4)[0]

    assert learner.run(source, stop=threading.Event(), after_round=lambda: time.sleep(0.01))
    seconds = learner.time_s
    assert seconds[GRADIENT_STEPS] == learner.update_time_s > 0
    assert seconds[GETTING_BATCHES] >= 13 * 0.02  # one wait per round
    assert seconds[WEIGHTS_AND_CHECKPOINTS] >= 12 * 0.01  # the last round ends the run first
    assert seconds[EVALUATION] == 0.0  # no periodic evaluation configured
    shares = time_shares(seconds, sum(seconds.values()) * 2)
    assert shares[OTHER] == pytest.approx(0.5) and sum(shares.values()) == pytest.approx(1.0)
    assert time_shares({GRADIENT_STEPS: 3.0}, 2.0)[OTHER] == 0.0  # never below 0


def test_run_reports_a_failed_round_goes_on_and_stops_when_asked() -> None:
    reports: list[str] = []
    stop = threading.Event()
    calls = []

    def source():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("service gone")
        if len(calls) == 3:
            stop.set()
        return None  # nothing granted yet

    learner = Learner(SAC(4, 1, SMALL), ENV_ID, report=lambda what, why: reports.append(why))
    assert not learner.run(source, stop=stop)
    assert reports == ["RuntimeError: service gone"] and len(calls) == 3


def test_the_update_mode_follows_where_the_replay_buffer_runs() -> None:
    assert choose_update_mode("auto", True, True)[:2] == (INTERLEAVED, "dispatch thread, after each insert")
    assert choose_update_mode("auto", True, False)[0] == THREAD
    mode, where, warning = choose_update_mode("interleaved", False, True)
    assert mode == THREAD and "over DDS" in where and "needs the replay buffer" in warning
    assert choose_update_mode("thread", True, True) == (
        THREAD, "learner thread, sampling the local buffer", "")


def test_answers_over_dds_carry_fewer_batches_of_images() -> None:
    assert batches_per_request(256, (4,), over_dds=True) == BATCHES_PER_REQUEST
    assert batches_per_request(256, (3, 84, 84, 3), over_dds=False) == BATCHES_PER_REQUEST
    frames = batches_per_request(256, (3, 84, 84, 3), over_dds=True)  # 27 MB of frames a batch
    assert frames == 1
    assert batches_per_request(64, (1, 32, 32, 3), over_dds=True) == 8  # 0.4 MB a batch


def test_replay_figures_read_a_status() -> None:
    assert replay_figures(None, 7) == {}
    status = SimpleNamespace(updates_per_transition=0.5, acting_weights_version=9,
                             insert_blocked_s=1.5, sample_blocked_s=2.0)
    assert replay_figures(status, 7) == {"updates_per_transition": 0.5, "policy_lag": 0.0,
                                         "acting_blocked_s": 1.5, "learner_blocked_s": 2.0}
    assert replay_figures(status, 12)["policy_lag"] == 3.0


def new_run(tmp_path: Path, **config) -> TrainingRun:
    reports: list[tuple[str, str]] = []
    settings = {"env_id": ENV_ID, "output_dir": str(tmp_path), "eval_episodes": 1,
                "eval_period": 0, **config}
    run = TrainingRun(TrainerConfig(**settings), SMALL, (4,), (1,),
                      report=lambda what, why: reports.append((what, why)), log=reports.append,
                      on_evaluated=None, priority_rows=1000)
    run.reports = reports  # type: ignore[attr-defined]
    return run


def test_a_training_run_counts_episodes_refuses_bad_ones_and_versions_weights(tmp_path: Path) -> None:
    run = new_run(tmp_path, deployment_robots=2)
    assert run.record_episodes(0, [1.0, 2.0]) is None and run.learner.episodes == 2
    assert run.record_episodes(2, [1.0])[0] == "episodes (foreign robot)"
    what, why = run.record_episodes(1, [1.0, float("nan")])
    assert what == "episodes (non-finite return)" and "robot 1" in why
    assert run.learner.episodes == 2
    version, state = run.next_weights()
    assert version == 1 and run.next_weights()[0] == 2
    assert all(tensor.device.type == "cpu" for tensor in state.values())


def test_a_training_run_diagnoses_warm_up_the_end_and_broken_losses(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    healthy, message, values = run.diagnosis(None, "thread", finished=False)
    assert healthy and message.startswith("warming up (0 transitions") and values["updates"] == 0
    assert run.diagnosis(None, "thread", finished=True)[:2] == (True, "training finished")
    run.learner.metrics["critic_loss"] = float("nan")
    healthy, message, _ = run.diagnosis(None, "thread", finished=True)
    assert not healthy and "NaN" in message


def test_a_training_run_resumes_from_its_newest_checkpoint(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    run.learner.learn(filled_replay(50).take(8, UNLIMITED_BATCHES)[0])
    run.next_weights()
    run.record_episodes(0, [3.0])
    run.save()
    resumed = new_run(tmp_path)
    assert resumed.sac.update_step == 40 and resumed.weights_version == 1
    assert resumed.learner.episodes == 1
    assert any("resumed from" in str(line) for line in resumed.reports)  # type: ignore[attr-defined]
    assert resumed.epoch > run.epoch


def test_the_runs_own_checkpoint_beats_resume_on_a_respawn(tmp_path: Path) -> None:
    elsewhere = new_run(tmp_path / "earlier")
    elsewhere.save()
    run = new_run(tmp_path / "run", resume=str(elsewhere.checkpoints.newest_valid()))
    run.learner.learn(filled_replay(50).take(8, UNLIMITED_BATCHES)[0])
    run.save()
    run.close()
    respawned = new_run(tmp_path / "run", resume=str(elsewhere.checkpoints.newest_valid()))
    assert respawned.sac.update_step == 40  # its own, not the resume:= one (0 updates)
    assert any("is not used" in str(line) for line in respawned.reports)  # type: ignore[attr-defined]


def test_a_resumed_run_orders_its_weights_after_the_checkpoint_even_with_the_clock_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = new_run(tmp_path)
    run.save()
    monkeypatch.setattr(time, "time_ns", lambda: run.epoch - 10**12)  # this host is behind
    assert new_run(tmp_path).epoch == run.epoch + 1


def test_a_training_run_reports_progress_and_ends_with_its_result(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    warning = run.start()
    assert warning == "" or "TensorBoard" in warning
    run.learner.learn(filled_replay(50, total_env_steps=50).take(8, UNLIMITED_BATCHES)[0])
    run.next_weights()
    run.next_weights()  # the newest weights are v2; v1 acted in the newest data: a lag of 1
    status = SimpleNamespace(updates_per_transition=1.0, acting_weights_version=1,
                             insert_blocked_s=0.0, sample_blocked_s=0.0, learning_starts=10)
    line, scalars = run.progress(status)
    assert line.startswith("steps 50/50 | ") and "updates 40 (1.00/transition) | weights v2" in line
    assert scalars["policy_lag"] == 1.0 and "critic_loss" in scalars
    assert run.done and run.health() == ""
    healthy, message, values = run.diagnosis(status, "interleaved", finished=False)
    assert healthy and message == "training (interleaved)" and values["updates"] == 40
    assert values["policy_lag"] == "1"
    result = run.finish("interleaved", status, {"robots": {}})
    document = json.loads((tmp_path / "result.json").read_text())
    assert document["update_mode"] == "interleaved" and document["policy_lag"] == 1.0
    assert result.updates_per_transition == pytest.approx(1.0)  # 40 updates / (50 - 10)
    assert "updates_per_transition" in document and run.learner.ended
    run.close()


def test_progress_and_summary_lines() -> None:
    learner = Learner(SAC(4, 1, SMALL), ENV_ID)
    learner.record_episode(12.0, 10)
    line = progress_line(learner, 10, 100, 1234.0, " (0.50/transition)", ("alpha 1.000",))
    assert line == ("steps 10/100 | 1,234 steps/s | episodes 1 | return(last 1) 12.0 | "
                    "updates 0 (0.50/transition) | alpha 1.000 | critic loss nan")
    assert progress_line(learner, 10, 0, 1.0).startswith("steps 10/? | ")  # budget not heard yet
    result = SimpleNamespace(env_steps=10, updates=5, updates_per_transition=0.5, episodes=1,
                             wall_time_s=3.0, eval_mean_return=1.0, eval_std_return=0.5,
                             eval_returns=[1.0, 1.0], eval_success_rate=None, checkpoint_dir="c",
                             best_eval_mean_return=None, target_env_steps=None)
    assert summary_line(result) == ("done: 10 transitions, 5 updates (0.500 per transition), 1 "
                                    "episodes in 3 s | evaluation return 1.0 ± 0.5 over 2 "
                                    "episodes | checkpoint c")
    result.target_env_steps, result.target_wall_time_s = 8, 2.4
    assert summary_line(result).endswith(" | checkpoint c | target met at 8 transitions (2 s)")
    meter = RateMeter()
    assert meter.read(100, 10)["env_steps_per_s"] > 0


def test_resume_names_a_run_and_continues_from_its_final_checkpoint(tmp_path: Path) -> None:
    earlier = new_run(tmp_path / "earlier")
    earlier.learner.learn(filled_replay(50).take(8, UNLIMITED_BATCHES)[0])
    save_checkpoint(tmp_path / "earlier" / "checkpoint", earlier.sac, {"env_steps": 50})
    earlier.sac.update_step = 7  # a different learner as the best, to tell them apart
    save_checkpoint(tmp_path / "earlier" / "best", earlier.sac, {"env_steps": 20})
    earlier.close()
    assert new_run(tmp_path / "a", resume=str(tmp_path / "earlier")).sac.update_step == 40
    assert new_run(tmp_path / "b", resume=str(tmp_path / "earlier" / "best")).sac.update_step == 7
    with pytest.raises(FileNotFoundError, match="no final checkpoint"):
        new_run(tmp_path / "c", resume=str(tmp_path / "b" / "final"))
