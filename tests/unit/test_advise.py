"""``rl-bringup advise``: the selection rule, and the subcommand end to end with few samples and
without the DDS measurement (tests/integration/test_advise_dds.py measures it)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from rl_bringup.tools.deploy import advise
from rl_bringup.tools.deploy.advise import Recommendation, recommend

pytestmark = pytest.mark.unit

US = 1e-6


# --- the pure decision ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env_step_s", "inference_s", "robots", "num_envs", "mode", "reason_parts"),
    [
        # same order of magnitude, one robot: colocated
        (20 * US, 100 * US, 1, 1, "colocated", ["5x", "same order of magnitude", "zero-copy"]),
        (100 * US, 100 * US, 1, 1, "colocated", ["1x", "lowest latency"]),
        # the batch decides: 10 us x 64 envs = 640 us against 100 us inference
        (10 * US, 100 * US, 1, 64, "colocated", ["640 µs per batch of 64 envs", "6.4x"]),
        # orders of magnitude apart, either way round: decoupled
        (10 * US, 100 * US, 1, 1, "decoupled", ["inference costs 10x", "1.0 orders"]),
        (5e-3, 50 * US, 1, 1, "decoupled", ["the simulator step costs 100x", "2.0 orders"]),
        (1 * US, 1e-3, 1, 1, "decoupled", ["1,000x", "3.0 orders", "own hardware"]),
        # several robots with one central learner: hybrid ...
        (50 * US, 100 * US, 4, 1, "hybrid", ["4 robots", "central learner", "Ape-X"]),
        # ... unless the costs are orders apart
        (10 * US, 1e-3, 4, 1, "decoupled", ["100x", "4 robots"]),
    ],
)
def test_selection_rule(env_step_s: float, inference_s: float, robots: int, num_envs: int,
                        mode: str, reason_parts: list[str]) -> None:
    result = recommend(env_step_s, inference_s, robots, num_envs=num_envs)
    assert isinstance(result, Recommendation)
    assert result.mode == mode, result.reason
    for part in reason_parts:
        assert part in result.reason


def test_just_under_the_threshold_is_the_same_order() -> None:
    assert recommend(10.1 * US, 100 * US).mode == "colocated"
    assert recommend(10 * US, 100 * US).mode == "decoupled"
    assert recommend(10 * US, 100 * US, ratio_threshold=20.0).mode == "colocated"


@pytest.mark.parametrize("robots", [1, 8])
def test_elastic_scale_means_decoupled(robots: int) -> None:
    result = recommend(50 * US, 60 * US, robots, elastic=True)
    assert result.mode == "decoupled"
    assert "elastic" in result.reason and f"{robots} robot" in result.reason


def test_a_measured_dds_round_trip_is_quoted() -> None:
    colocated = recommend(100 * US, 100 * US, dds_round_trip_s=0.9e-3)
    assert "DDS round trip (900 µs) costs 4.5x the work of one step" in colocated.reason
    decoupled = recommend(10 * US, 1e-3, dds_round_trip_s=0.9e-3)
    assert "amortise" in decoupled.reason
    assert "DDS" not in recommend(100 * US, 100 * US).reason


@pytest.mark.parametrize(
    "kwargs",
    [
        {"env_step_s": 0.0, "inference_s": 1e-4},
        {"env_step_s": 1e-4, "inference_s": -1.0},
        {"env_step_s": float("nan"), "inference_s": 1e-4},
        {"env_step_s": 1e-4, "inference_s": float("inf")},
        {"env_step_s": 1e-4, "inference_s": 1e-4, "robots": 0},
        {"env_step_s": 1e-4, "inference_s": 1e-4, "num_envs": 0},
        {"env_step_s": 1e-4, "inference_s": 1e-4, "ratio_threshold": 1.0},
        {"env_step_s": 1e-4, "inference_s": 1e-4, "dds_round_trip_s": 0.0},
    ],
)
def test_invalid_figures_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        recommend(**kwargs)  # type: ignore[arg-type]


# --- the subcommand ------------------------------------------------------------------------------


def field(output: str, name: str) -> str:
    """The value printed after ``name`` at the start of a line of the report."""
    match = re.search(rf"^{re.escape(name)}\s+(.*)$", output, re.MULTILINE)
    assert match, f"no {name!r} line in:\n{output}"
    return match.group(1)


def seconds(text: str) -> float:
    """``12.3 µs`` / ``4.5 ms`` / ``1.2 s`` at the start of ``text`` in seconds."""
    match = re.match(r"([0-9.e+-]+) (µs|ms|s)\b", text)
    assert match, text
    return float(match.group(1)) * {"µs": 1e-6, "ms": 1e-3, "s": 1.0}[match.group(2)]


def test_advise_measures_and_recommends(run_cli: Callable[..., tuple[int, str, str]]) -> None:
    code, out, err = run_cli("advise", "samples:=5", "dds:=false", "compare:=none")
    assert code == 0, err
    assert "cartpole.yaml: rl_ros2/CartPoleBalance-v0, num_envs 1, hidden sizes [64, 64]" in out
    assert "argv[0]" not in out  # pybullet's printf is kept out of the report
    env_step_s = seconds(field(out, "env step"))
    inference_s = seconds(field(out, "inference"))
    assert 0 < env_step_s < 1 and 0 < inference_s < 1
    assert field(out, "env step").endswith("per env (mean of 5 steps of 1 env, random actions)")
    assert "per batch of 1" in field(out, "inference")
    assert field(out, "DDS round trip") == "skipped (dds:=false)"
    mode = field(out, "recommendation")
    # The printed figures are rounded to 3 digits; the decision on them agrees unless the ratio
    # sits right at the threshold.
    if abs(inference_s / env_step_s - 10) > 0.5 and abs(env_step_s / inference_s - 10) > 0.5:
        assert mode == recommend(env_step_s, inference_s).mode
    assert field(out, "reason")
    assert field(out, "run it with") == f"rl-bringup train {mode}"


def test_advise_uses_the_scenario_sizes_and_the_hints(
        run_cli: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, tuple[object, ...]] = {}

    def fake_env_step(env_id: str, num_envs: int, samples: int, seed: int = 0) -> float:
        calls["env"] = (env_id, num_envs, samples)
        return 50 * US

    def fake_inference(obs_dim: int, action_dim: int, hidden_sizes: tuple[int, ...], batch: int,
                       samples: int, deterministic: bool = False, seed: int = 0) -> float:
        calls["inference"] = (obs_dim, action_dim, hidden_sizes, batch, samples)
        return 400 * US

    monkeypatch.setattr(advise, "measure_env_step", fake_env_step)
    monkeypatch.setattr(advise, "measure_inference", fake_inference)
    code, out, err = run_cli("advise", "config:=kuka_reach", "robots:=3", "samples:=7",
                             "dds:=false")
    assert code == 0, err
    assert calls["env"] == ("rl_ros2/KukaReach-v0", 4, 7)
    assert calls["inference"] == (23, 7, (256, 256), 4, 7)
    assert field(out, "env step").startswith("50 µs per env")
    assert field(out, "simulator step") == "200 µs per batch of 4"
    assert field(out, "inference").startswith("400 µs per batch of 4")
    assert field(out, "ratio") == "2x (inference slower)"
    assert field(out, "recommendation") == "hybrid"
    assert "3 robots with one central learner" in field(out, "reason")
    assert field(out, "run it with") == "rl-bringup train hybrid robots:=3 config:=kuka_reach"

    code, out, _ = run_cli("advise", "config:=kuka_reach", "elastic:=true", "dds:=false")
    assert code == 0
    assert field(out, "recommendation") == "decoupled"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["samples:=0"], "samples:= must be 1..10000000"),
        (["samples:=many"], "samples:= must be an integer"),
        (["robots:=65"], "robots:= must be 1..64"),
        (["dds:=maybe"], "dds:= must be true or false"),
        (["config:=no_such_scenario"], "config 'no_such_scenario' not found"),
        (["colour:=red"], "unknown argument 'colour'"),
    ],
)
def test_bad_arguments_exit_2(run_cli: Callable[..., tuple[int, str, str]], argv: list[str],
                              message: str) -> None:
    code, out, err = run_cli("advise", *argv)
    assert code == 2
    assert message in err
    assert "recommendation" not in out


def comparison(*rows: dict) -> dict:
    return {"settings": {"total_env_steps": 8000}, "rows": [
        {"completed": 1, "robots": 1, **row} for row in rows]}


def test_a_measured_comparison_picks_the_fastest_mode_that_learns() -> None:
    document = comparison(
        {"mode": "bare", "wall_time_s": 30.0, "sample_efficiency": 1.0},
        {"mode": "colocated", "wall_time_s": 31.0, "sample_efficiency": 1.0},
        {"mode": "decoupled", "robots": 2, "wall_time_s": 25.0, "sample_efficiency": 0.5},
        {"mode": "hybrid", "robots": 2, "wall_time_s": 28.0, "sample_efficiency": 0.99})
    recommendation = advise.recommend_from_comparison(document, robots=1)
    assert recommendation is not None and recommendation.mode == "hybrid"
    assert "decoupled (robots 2): 25 s" in recommendation.reason  # every mode's figures quoted


def test_several_robots_prefer_a_distributed_mode_when_one_learns() -> None:
    document = comparison(
        {"mode": "colocated", "wall_time_s": 20.0, "sample_efficiency": 1.0},
        {"mode": "decoupled", "robots": 2, "wall_time_s": 40.0, "sample_efficiency": 0.95})
    assert advise.recommend_from_comparison(document, robots=1).mode == "colocated"
    assert advise.recommend_from_comparison(document, robots=2).mode == "decoupled"


def test_a_comparison_where_nothing_learns_gives_no_recommendation() -> None:
    document = comparison({"mode": "decoupled", "wall_time_s": 10.0, "sample_efficiency": 0.2})
    assert advise.recommend_from_comparison(document) is None


def test_a_bad_comparison_file_is_a_usage_error(tmp_path) -> None:
    path = tmp_path / "compare.json"
    path.write_text("{}")
    with pytest.raises(advise.ToolError, match="not a compare.json"):
        advise.load_comparison(str(path))
    with pytest.raises(advise.ToolError, match="cannot read"):
        advise.load_comparison(str(tmp_path / "missing.json"))
