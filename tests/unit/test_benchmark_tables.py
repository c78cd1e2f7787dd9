"""The benchmarks' ``--markdown`` tables (issue 42): each script's table of synthetic figures has
the columns of its table on docs/results.md, in the page's order and alignment, and writes its
figures as the page does, so that its output can be pasted over the page's table.
Cost: imports of the benchmark modules (torch among them), about 3 s; nothing is measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import tables
from benchmarks.boundary import results_table as boundary_table
from benchmarks.discrete_actions import COLUMNS as DISCRETE_COLUMNS
from benchmarks.discrete_actions import summary_row
from benchmarks.fleet import FleetRow
from benchmarks.fleet import results_table as fleet_table
from benchmarks.hindsight import COLUMNS as HINDSIGHT_COLUMNS
from benchmarks.hindsight import summary_row as hindsight_row
from benchmarks.human_in_loop import INTERVENTIONS, NONE, Outcome
from benchmarks.human_in_loop import table as people_table
from benchmarks.image_codecs import results_table as codecs_table
from benchmarks.learning_tests import Run
from benchmarks.learning_tests import results_table as learning_tests_table
from benchmarks.protection import Cost
from benchmarks.protection import results_table as protection_table
from benchmarks.throughput import Row
from benchmarks.throughput import results_table as throughput_table
from benchmarks.update_speed import SIZES, SizeResult
from benchmarks.update_speed import results_table as update_speed_table
from rl_bringup.tools.train.compare import ModeRow
from rl_bringup.tools.train.compare import format_table as compare_table

pytestmark = pytest.mark.unit

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def page_header(section: str) -> list[str]:
    """The header and alignment lines of the first table under ``## section`` on the page."""
    lines = RESULTS.read_text().splitlines()
    start = lines.index(f"## {section}")
    first = next(index for index in range(start, len(lines)) if lines[index].startswith("|"))
    return lines[first:first + 2]


def assert_page_columns(table: str, section: str) -> list[str]:
    """``table``'s columns are the page's (a column missing, added or moved fails); its rows."""
    lines = table.splitlines()
    assert lines[:2] == page_header(section)
    columns = lines[0].count("|")
    assert all(line.count("|") == columns for line in lines[2:]), table
    return lines[2:]


# --- the shared helper -----------------------------------------------------------------------------

def test_a_row_without_a_cell_per_column_is_refused() -> None:
    columns = (("a", tables.LEFT), ("b", tables.RIGHT))
    assert tables.markdown_table(columns, [["x", ""]]) == "| a | b |\n|---|---:|\n| x | |"
    with pytest.raises(ValueError, match="1 cells under 2 columns"):
        tables.markdown_table(columns, [["x"]])


def test_plain_table_aligns_the_same_cells_without_bold() -> None:
    columns = (("mode", tables.LEFT), ("x none", tables.RIGHT))
    assert tables.plain_table(columns, [["hybrid", "**0.39**"]]) == "mode    x none\nhybrid    0.39"


@pytest.mark.parametrize(("value", "text"), [(14653.2, "14,653"), (None, "-"), (float("nan"), "-")])
def test_number_has_thousands_separators(value: float | None, text: str) -> None:
    assert tables.number(value) == text


@pytest.mark.parametrize(("seconds", "text"), [(19.2e-6, "19.2 µs"), (184e-6, "184 µs"),
                                               (1.4e-3, "1.4 ms"), (11e-3, "11 ms")])
def test_duration_as_the_page_writes_per_event_times(seconds: float, text: str) -> None:
    assert tables.duration(seconds) == text


@pytest.mark.parametrize(("share", "text"), [(0.145, "14.5 %"), (0.003, "0.3 %"),
                                             (0.0004, "0.04 %"), (0.00005, "0.005 %")])
def test_percent_as_the_page_writes_shares(share: float, text: str) -> None:
    assert tables.percent(share) == text


@pytest.mark.parametrize(("value", "text"), [(0.7, "0.70"), (17.14, "17.1"), (158.2, "158")])
def test_figures_keeps_three_significant_figures(value: float, text: str) -> None:
    assert tables.figures(value) == text


# --- one table per question --------------------------------------------------------------------------

def test_throughput_table() -> None:
    rows = {("bare", 1): Row("bare", 1, [14653.0, 13518.0, 15972.0]),
            ("colocated", 1): Row("colocated", 1, [12000.0]),
            ("bare", 64): Row("bare", 64, [40000.0, 36000.0]),
            ("decoupled", 64): Row("decoupled", 64, [26000.0, 24000.0]),
            ("central", 16): Row("central", 16, [9924.0], robots=4)}
    lines = assert_page_columns(throughput_table(rows, "2026-12-05"), "Acting throughput")
    assert lines == [
        "| bare | 1 | 14,653 | 13,518..15,972 | 1.00 | | 2026-12-05 |",
        "| colocated | 1 | 12,000 | | 0.82 | >= 0.8: met | 2026-12-05 |",
        "| bare | 64 | 38,000 | 36,000..40,000 | 1.00 | | 2026-12-05 |",
        "| decoupled | 64 | 25,000 | 24,000..26,000 | 0.66 | >= 0.6: met | 2026-12-05 |",
        "| central, 4 robots x 16 | 64 | 9,924 | | 0.26 | >= 0.8: SHORT | 2026-12-05 |"]


def protection_costs(scale: float) -> list[Cost]:
    """Costs in :func:`benchmarks.protection.measure`'s order: five per batch, then periodic."""
    batch = [Cost(f"check {k}", "replay buffer", scale * 10e-6, 0.0, "one batch",
                  decoupled_only=k == 4, nodes_only=k == 3) for k in range(5)]
    return [*batch, Cost("sign weights", "trainer", 184e-6, 2.0, "every 0.5 s"),
            Cost("verify weights", "each policy", 514e-6, 2.0, "every 0.5 s"),
            Cost("joint-state checks", "simulator", 1e-3, 50.0, "at 50 Hz")]


def test_protection_table() -> None:
    rates = {1: {"bare": 5000.0, "colocated": 3000.0, "decoupled": 1500.0},
             64: {"colocated": 16000.0}}
    table = protection_table({1: protection_costs(1.0), 64: protection_costs(2.0)}, rates,
                             "2026-12-06")
    lines = assert_page_columns(table, "Protection costs")
    assert lines[0] == ("| check 0 | replay buffer | 10.0 µs | 20.0 µs | width 1: 3.0 % of "
                        "colocated, 1.5 % of decoupled; width 64: 0.5 % of colocated | 2026-12-06 |")
    assert lines[4].startswith("| check 4 | replay buffer | 10.0 µs | 20.0 µs | width 1: 1.5 % "
                               "of decoupled |")
    assert lines[5] == ("| sign weights / verify weights | trainer / each policy, every 0.5 s | "
                        "184 µs / 514 µs | | 0.04 % / 0.1 % of a core | 2026-12-06 |")
    assert lines[6] == ("| joint-state checks | simulator, at 50 Hz | 1.0 ms | | 5.0 % of a core "
                        "| 2026-12-06 |")
    assert lines[7] == ("| **acting path in total** | | | | width 1: 12.0 % of colocated, 7.5 % of "
                        "decoupled; width 64: 2.0 % of colocated | 2026-12-06 |")


def test_update_speed_table() -> None:
    rates = {"ours": 324.0, "compiled": 1041.0, "ours bf16": 220.0, "compiled bf16": 595.0,
             "sb3": 249.0}
    eager_only = SizeResult("kuka", SIZES["kuka"], {"ours": 111.0, "sb3": 90.0},
                            {"float32": 900.0})
    table = update_speed_table([SizeResult("cartpole", SIZES["cartpole"], rates,
                                           {"float32": 4e4, "bfloat16": 29750.0}), eager_only])
    assert assert_page_columns(table, "Update speed") == [
        "| 1 | cartpole (64x64, batch 128) | 324 | 1,041 | 220 | 595 | 249 | 1.30x | **4.18x** "
        "| 2.39x | 0.02 |",
        "| 1 | kuka (256x256, batch 256) | 111 | - | - | - | 90 | 1.23x | - | - | - |"]


def test_image_codecs_table() -> None:
    work = {name: {"encode_us_per_step": 75.0, "decode_us_per_step": 133.4}
            for name in ("raw", "png", "jpeg q80", "latent")}
    dds = {"raw": {"steps_per_s": 363.8, "acting_bytes_per_step": 36985.0,
                   "experience_bytes_per_step": 73870.0},
           "jpeg": {"steps_per_s": 341.7, "acting_bytes_per_step": 2438.0,
                    "experience_bytes_per_step": 4195.0}}
    lines = assert_page_columns(codecs_table(work, dds, 80, 50), "Image codecs")
    assert lines == [
        "| raw (`Image`) | 36,985 | 73,870 | 363.8 | 1.00 | 75 | 133 |",
        "| png (`CompressedImage`) | - | - | - | - | 75 | 133 |",
        "| jpeg q80 (`CompressedImage`) | 2,438 | 4,195 | 341.7 | 0.94 | 75 | 133 |",
        "| latent (50 features) | - | - | - | - | 75 | 133 |"]


def test_boundary_table() -> None:
    def run(mode: str, rate: float, p50: float, p99: float, achieved: float) -> dict:
        return {"mode": mode, "rate_hz": rate, "p50_ms": p50, "p99_ms": p99,
                "achieved_hz": achieved}

    rows = [run("colocated", 50.0, 0.7, 1.49, 49.9), run("colocated", 100.0, 1.14, 17.13, 54.3),
            run("colocated", 250.0, 1.03, 13.8, 60.4), run("colocated", 50.0, 0.76, 1.54, 50.3),
            run("hybrid", 50.0, 0.76, 1.78, 50.2), run("hybrid", 100.0, 1.05, 15.3, 90.0),
            run("hybrid", 250.0, float("nan"), float("nan"), float("nan")),
            run("hybrid", 50.0, 0.75, 1.86, 50.4)]
    assert assert_page_columns(boundary_table(rows), "Control latency at the robot boundary") == [
        "| colocated | 0.70 / 1.49 ms, 0.76 / 1.54 ms | 49.9–50.3 Hz | 1.14 / 17.1 ms | 54.3 Hz "
        "| 1.03 / 13.8 ms | 60.4 Hz |",
        "| hybrid | 0.76 / 1.78 ms, 0.75 / 1.86 ms | 50.2–50.4 Hz | 1.05 / 15.3 ms | 90.0 Hz | - "
        "| - |"]


def test_fleet_table() -> None:
    row = FleetRow(robots=16, discovery="server", rate_hz=10.0, all_flowing_s=24.1,
                   up_median_s=21.8, up_to_flow_median_s=1.1, up_to_flow_max_s=1.6,
                   env_steps_per_s=159.9, target_env_steps_per_s=160.0,
                   updates_per_transition=0.73, robot_cpus=0.038, learner_cpus=0.86,
                   other_cpus=0.1, idle_cpus=0.5, robot_rss_mb=1329.4, robot_uss_mb=206.0,
                   learner_rss_mb=421.0, cpus=2)
    assert assert_page_columns(fleet_table([row]), "Fleet and ingest") == [
        "| 16 | 24.1 s | 21.8 s | 1.1 / 1.6 s | 159.9 (160) | 0.73 | 0.038 | 0.86 | 0.50 | "
        "1,329 / 206 MiB | 421 MiB |"]


def test_people_in_the_loop_table() -> None:
    outcomes = [Outcome(mode, variant, seed, 20000, target_env_steps=steps,
                        target_wall_time_s=seconds)
                for mode in ("colocated", "hybrid") for seed in (1, 2, 3)
                for variant, steps, seconds in ((NONE, 7000, 146.0), ("20 demos", 3000, 67.0),
                                                (INTERVENTIONS, 4000, 100.0))]
    table = people_table(outcomes, [NONE, "20 demos", INTERVENTIONS], ["colocated", "hybrid"])
    lines = assert_page_columns(table, "People in the loop")
    assert lines[:3] == ["| colocated | none | 3/3 | 7,000 | - | 146 | - |",
                         "| colocated | 20 demos | 3/3 | 3,000 | **0.43** | 67 | 0.46 |",
                         "| colocated | interventions | 3/3 | 4,000 | 0.57 | 100 | 0.68 |"]
    assert lines[4] == "| hybrid robots:=2 | 20 demos | 3/3 | 3,000 | **0.43** | 67 | 0.46 |"


def test_learning_tests_table() -> None:
    runs = [Run("tests/system/test_training_modes.py::test_learns[colocated]", seed, 0,
                {"best checkpoint": (196.8 + seed, 180.0)}) for seed in range(24)]
    runs += [Run("tests/system/test_faults.py::test_faults", seed, int(seed == 3),
                 {"left": (9000.0 + 500 * seed, 1.0)}) for seed in range(24)]
    lines = assert_page_columns(learning_tests_table(runs), "Learning-test failure rates")
    assert lines == [
        "| `test_training_modes` colocated | best checkpoint >= 180 | 24 | 0 | 208.3 | 196.8 "
        "| +16.8 | 11.7 % |",
        "| `test_faults` | left >= 1 | 24 | **1** | 14,750 | 9,000 | +8,999 | 18.3 % |"]


def test_discrete_actions_table() -> None:
    rows = [summary_row("SB3 DQN (zoo settings)", [([100.0, 500.0, 250.0], 240.0),
                                                  ([90.0, 480.0, 470.0], 260.0)])]
    body = assert_page_columns(tables.markdown_table(DISCRETE_COLUMNS, rows), "Discrete actions")
    assert body == ["| SB3 DQN (zoo settings) | 2 | 360.0 | 490.0 | 1 of 2 | 250 s |"]


def test_compare_table() -> None:
    row = ModeRow("hybrid", 2, 2, 2, wall_time_s=15.4, solved_at_s=9.1, solved_at_env_steps=4100,
                  eval_return=200.0, sample_efficiency=1.0, updates_per_transition=1.0,
                  env_steps_per_s=520.0, cpu_utilisation=0.6, wall_time_x_bare=1.03,
                  learner_time_shares={"gradient steps": 0.94, "getting batches": 0.04,
                                       "other": 0.02})
    body = assert_page_columns(compare_table([row]), "Learning per mode")
    assert body == ["| hybrid | 2 | 2/2 | 15.4 s | 1.03x | 9.1 s (4,100 steps) | 200.0 | 1.00 "
                    "| 1.00 | 520 | 60 % | 94 % | 4 % | 2 % |  |"]


def test_hindsight_table() -> None:
    runs = [([(3000, 0.1), (6000, 0.85), (9000, 0.9)], 300.0),
            ([(3000, 0.0), (6000, 0.5), (9000, 0.8)], 320.0), ([(3000, 0.0)], 100.0)]
    body = assert_page_columns(tables.markdown_table(HINDSIGHT_COLUMNS,
                                                     [hindsight_row("SAC + HER", runs)]),
                               "Goals and hindsight")
    assert body == ["| SAC + HER | 3 | 7,500 | 2 of 3 | 0.80 | 300 s |"]
