"""The elastic-robots rule (rl_bringup.plan.autoscale) on measured numbers: no ROS, no processes.

Windows are written as the controller measures them. The tests marked "recorded" replay windows
logged by ``rl-bringup launch hybrid robots:=auto`` (cart-pole, 2 shared vCPUs;
docs/history/benchmarks-2026-12.md#elastic-robots-benchmarkselasticpy); the others are made up to
reach each branch of the rule.
"""

from __future__ import annotations

import math

import pytest

from rl_bringup.plan.autoscale import (
    ADD,
    HOLD,
    RETIRE,
    Autoscaler,
    AutoscaleSettings,
    StatusSample,
    Window,
    learning_steady,
    loss_without_one,
    relative_gain,
    settings_from_text,
    window_from_samples,
)

pytestmark = pytest.mark.unit


def window(robots: int, steps: float, *, paused: float = 0.0, ratio: float = 1.0,
           target: float = 1.0, rate_limited: bool = True, idle: float = 1.0,
           robot_cpus: float = 0.3) -> Window:
    return Window(robots=robots, duration_s=6.0, env_steps_per_s=steps,
                  updates_per_transition=ratio, target_updates_per_transition=target,
                  paused_fraction=paused, rate_limited=rate_limited, idle_cpus=idle,
                  robot_cpus=robot_cpus)


def run(autoscaler: Autoscaler, windows: list[Window], start: float = 0.0,
        step_s: float = 10.0) -> list[str]:
    """Feed windows ``step_s`` apart; the actions taken."""
    return [autoscaler.decide(w, start + i * step_s).action for i, w in enumerate(windows)]


def test_recorded_run_grows_retires_the_robot_the_learner_cannot_take_and_probes_again(
) -> None:
    # Recorded: robots at 25 Hz, max_robots 4, windows 6-7 s
    # (docs/history/benchmarks-2026-12.md#elastic-robots-benchmarkselasticpy).
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=4, cpu_headroom=0.0, hold_s=120.0))
    windows = [window(1, 25.0, idle=0.0, robot_cpus=0.03), window(2, 50.0, idle=0.0),
               window(3, 75.0, idle=0.0), window(4, 100.0, ratio=0.87, idle=0.0),
               window(4, 100.1, ratio=0.87, paused=0.94, idle=0.0),
               window(3, 75.1, ratio=1.10, idle=0.0), window(3, 75.1, idle=0.01)]
    times = [0.0, 20.0, 40.0, 60.0, 67.0, 79.0, 145.0]
    actions = [autoscaler.decide(w, t).action for w, t in zip(windows, times)]
    assert actions == [ADD, ADD, ADD, HOLD, RETIRE, HOLD, HOLD]
    assert "at max_robots (4)" in autoscaler.decisions[3].reason
    assert "learner falls behind for 2 window(s): 0.87" in autoscaler.decisions[4].reason
    assert "another 108 s" in autoscaler.decisions[5].reason
    assert "another 42 s" in autoscaler.decisions[6].reason
    assert autoscaler.decide(window(3, 75.0, idle=0.0), 200.0).action == ADD


def test_grows_while_each_robot_pays_and_stops_at_max_robots() -> None:
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=3))
    actions = run(autoscaler, [window(1, 29.6), window(2, 58.1), window(3, 86.0), window(3, 85.2)])
    assert actions == [ADD, ADD, HOLD, HOLD]
    added, last = autoscaler.decisions[1], autoscaler.decisions[-1]
    assert added.gain == pytest.approx(58.1 / 29.6 - 1)
    assert "paid" in added.reason and "29.6 -> 58.1" in added.reason
    assert "at max_robots (3)" in last.reason
    assert autoscaler.throughput == {1: 29.6, 2: 58.1, 3: 85.2}


def test_a_robot_that_does_not_pay_is_retired_and_the_count_holds() -> None:
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=4, hold_s=120.0))
    # 1 -> 2 pays (+60 %), 2 -> 3 brings 4 %: the third goes, and no probe for 120 s.
    actions = run(autoscaler, [window(1, 310.0), window(2, 497.0), window(3, 517.0),
                               window(2, 495.0), window(2, 501.0)])
    assert actions == [ADD, ADD, RETIRE, HOLD, HOLD]
    retired = autoscaler.decisions[2]
    assert retired.robots_before == 3 and retired.robots_after == 2
    assert "did not pay" in retired.reason and "+4.0% < 10%" in retired.reason
    assert "holding after a retirement" in autoscaler.decisions[3].reason
    # After the hold it probes once more (conditions may have changed).
    assert autoscaler.decide(window(2, 500.0), 200.0).action == ADD


def test_hold_zero_never_probes_again_after_a_retirement() -> None:
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=4, hold_s=0.0))
    run(autoscaler, [window(1, 100.0), window(2, 104.0)])
    assert autoscaler.decide(window(1, 100.0), 1e9).action == HOLD


def test_min_robots_are_never_retired() -> None:
    autoscaler = Autoscaler(AutoscaleSettings(min_robots=2, max_robots=4))
    assert run(autoscaler, [window(2, 100.0), window(3, 101.0)]) == [ADD, RETIRE]
    # At min_robots even a learner-bound window holds.
    bound = [window(2, 100.0, paused=0.8)] * 3
    assert run(autoscaler, bound, start=1000.0) == [HOLD, HOLD, HOLD]


def test_learner_bottleneck_blocks_adding() -> None:
    # Rate-limited: acting paused 42 % of the window; another robot cannot add throughput.
    decision = Autoscaler(AutoscaleSettings(max_robots=4)).decide(window(1, 188.0, paused=0.42),
                                                                  0.0)
    assert decision.action == HOLD
    assert "learner is the bottleneck: acting blocked 42%" in decision.reason


def test_robot_that_stopped_paying_is_retired_after_patience_windows() -> None:
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=3, patience=2))
    run(autoscaler, [window(1, 30.0), window(2, 60.0), window(3, 90.0)])
    # Later the learner slows (other load): it takes 58 env steps/s, which two robots delivered.
    actions = run(autoscaler, [window(3, 58.0, paused=0.9), window(3, 58.5, paused=0.95)],
                  start=100.0)
    assert actions == [HOLD, RETIRE]
    reason = autoscaler.decisions[-1].reason
    assert "stopped paying for 2 window(s)" in reason and "acting blocked 95%" in reason
    assert "2 robot(s) delivered 60.0 env steps/s, so one fewer loses about 0%" in reason


def test_a_learner_bound_robot_that_still_adds_throughput_stays() -> None:
    # Recorded (benchmarks/elastic.py, robots at 25 Hz on a busy 2-core machine): at 2 robots the
    # rate limiter sat at its error buffer the whole window, yet the second robot nearly doubled
    # the throughput.
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=4, patience=2))
    actions = run(autoscaler, [window(1, 25.1), window(2, 45.7, paused=1.0, ratio=1.02),
                               window(2, 45.9, paused=1.0), window(2, 45.2, paused=1.0)])
    assert actions == [ADD, HOLD, HOLD, HOLD]
    assert all(decision.cause == "learner_bound" for decision in autoscaler.decisions[1:])


def test_a_single_bad_window_does_not_retire() -> None:
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=2, patience=2))
    run(autoscaler, [window(1, 30.0), window(2, 60.0)])
    # Learner-bound windows in which one robot fewer would lose 3 %, but never two in a row.
    bad = window(2, 31.0, paused=0.6)
    actions = run(autoscaler, [bad, window(2, 60.0), bad], start=100.0)
    assert actions == [HOLD, HOLD, HOLD]
    assert autoscaler.decide(bad, 200.0).action == RETIRE


def test_without_rate_limit_a_falling_update_ratio_means_the_learner_falls_behind() -> None:
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=4, patience=2))
    behind = dict(rate_limited=False, ratio=0.55, target=1.0)
    first = autoscaler.decide(window(1, 400.0, **behind), 0.0)
    assert first.action == HOLD and "does not keep up: 0.55 updates/transition" in first.reason
    autoscaler = Autoscaler(AutoscaleSettings(max_robots=4, patience=2))
    run(autoscaler, [window(1, 200.0, rate_limited=False), window(2, 400.0, rate_limited=False)])
    actions = run(autoscaler, [window(3, 600.0, **behind), window(3, 600.0, **behind)], start=50.0)
    assert actions[-1] == RETIRE and "falls behind" in autoscaler.decisions[-1].reason


def test_no_cpu_headroom_blocks_adding_unless_the_check_is_off() -> None:
    tight = window(2, 60.0, idle=0.12, robot_cpus=0.35)
    decision = Autoscaler(AutoscaleSettings(max_robots=4)).decide(tight, 0.0)
    assert decision.action == HOLD
    assert "no CPU headroom: 0.12 idle CPUs < 1 x 0.35" in decision.reason
    assert Autoscaler(AutoscaleSettings(max_robots=4, cpu_headroom=0.0)).decide(
        tight, 0.0).action == ADD


def test_decisions_describe_the_numbers_behind_them() -> None:
    decision = Autoscaler(AutoscaleSettings(max_robots=2)).decide(
        window(1, 29.6, paused=0.03, idle=0.8), 0.0)
    text = decision.describe()
    assert text.startswith("add a robot (1 -> 2): the learner keeps up")
    for number in ("29.6 env steps/s", "1.00 updates/transition (target 1.00)",
                   "acting blocked 3%", "0.80 idle CPUs", "0.30 CPUs per robot"):
        assert number in text


@pytest.mark.parametrize(("robots", "now", "fewer", "loss"), [
    (1, 25.0, None, 1.0), (2, 45.7, 25.1, 1 - 25.1 / 45.7), (3, 58.0, 60.0, 0.0),
    (3, 0.0, 60.0, 0.0), (2, 45.0, None, None)])
def test_loss_without_one_robot(robots: int, now: float, fewer: float | None,
                                loss: float | None) -> None:
    measured = loss_without_one(window(robots, now, paused=1.0), fewer)
    assert measured == (pytest.approx(loss) if loss is not None else None)


def test_relative_gain_edges() -> None:
    assert relative_gain(100.0, 110.0) == pytest.approx(0.1)
    assert relative_gain(0.0, 5.0) == math.inf
    assert relative_gain(0.0, 0.0) == 0.0


def sample(stamp: float, inserted: int, sampled: int, blocked: float) -> StatusSample:
    return StatusSample(stamp_s=stamp, total_inserted=inserted, total_sampled=sampled,
                        insert_blocked_s=blocked, target_updates_per_transition=1.0, rate_limited=True)


def test_window_from_status_reports() -> None:
    samples = [sample(100.0, 1000, 500, 2.0), sample(101.0, 1030, 530, 2.1),
               sample(106.0, 1180, 680, 3.5)]
    measured = window_from_samples(samples, robots=2, idle_cpus=0.5, robot_cpus=0.25)
    assert measured.duration_s == pytest.approx(6.0)
    assert measured.env_steps_per_s == pytest.approx(30.0)
    assert measured.updates_per_transition == pytest.approx(1.0)
    assert measured.paused_fraction == pytest.approx(0.25)
    assert (measured.robots, measured.idle_cpus, measured.robot_cpus) == (2, 0.5, 0.25)
    stalled = window_from_samples([sample(0.0, 10, 0, 0.0), sample(6.0, 10, 0, 6.0)], 1, 1.0, 0.1)
    assert math.isnan(stalled.updates_per_transition) and stalled.paused_fraction == 1.0


@pytest.mark.parametrize(("samples", "match"), [
    ([sample(0.0, 0, 0, 0.0)], "at least two"),
    ([sample(5.0, 0, 0, 0.0), sample(5.0, 10, 0, 0.0)], "span"),
    ([sample(0.0, 900, 0, 0.0), sample(6.0, 100, 0, 0.0)], "backwards"),
])
def test_windows_that_cannot_be_judged_raise(samples: list[StatusSample], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        window_from_samples(samples, 1, 1.0, 0.1)


def test_settings_from_command_line_text() -> None:
    settings = settings_from_text({"min_robots": "2", "autoscale_window_s": "4",
                                   "autoscale_patience": "3"},
                                  default_max_robots=6)
    assert (settings.min_robots, settings.max_robots) == (2, 6)
    assert settings.window_s == 4.0 and settings.patience == 3
    # The default maximum never falls below the minimum.
    assert settings_from_text({"min_robots": "3"}, default_max_robots=2).max_robots == 3


@pytest.mark.parametrize(("values", "match"), [
    ({"min_robots": "3", "max_robots": "2"}, "min_robots <= max_robots"),
    ({"min_robots": "0"}, "min_robots <= max_robots"),
    ({"autoscale_window_s": "soon"}, "autoscale_window_s must be a number"),
    ({"max_robots": "2.5"}, "max_robots must be an integer"),
    ({"autoscale_max_paused_fraction": "1"}, r"\[0, 1\)"),
    ({"autoscale_patience": "0"}, "patience must be >= 1"),
    ({"autoscale_min_gain": "-0.1"}, "min_gain must be >= 0"),
    ({"window_s": "4"}, "unknown autoscale setting 'window_s'; valid: min_robots"),
    ({"autoscale_max_robots": "4"}, "unknown autoscale setting"),
])
def test_bad_settings_raise_with_the_reason(values: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        settings_from_text(values, default_max_robots=4)


@pytest.mark.parametrize(("inserted", "sampled", "rate_limited", "steady"), [
    (99, 0, True, False),       # learning has not started (learning_starts 100)
    (1500, 300, True, False),   # the learner owes 1100 batches: still catching up
    (1500, 1350, True, True),   # owes 50: within the error buffer
    (1500, 300, False, True),   # no rate limiter: the windows' ratio tells
    (100_100, 98_500, True, True),  # owes 1,500: under 2 % of what it sampled
    (100_100, 97_500, True, False),  # owes 2,500: over 2 %
])
def test_learning_is_steady_once_the_learner_caught_up(inserted: int, sampled: int,
                                                       rate_limited: bool, steady: bool) -> None:
    assert learning_steady(inserted, sampled, 100, 1.0, rate_limited) is steady
