"""The trainer's table of robot boundary figures from /diagnostics (rl_core.monitoring.progress.RobotFigures):
bounded and checked, since any peer on the domain can publish /diagnostics (issue 41)."""

from __future__ import annotations

import pytest

from rl_core.monitoring.progress import RobotFigures, is_deployment_robot

pytestmark = pytest.mark.unit
RATE, LATENCY, SAFETY = "intervention rate", "command latency p50 ms", "safety "


def figures(**options: object) -> RobotFigures:
    return RobotFigures((RATE, LATENCY), (SAFETY,),
                        known=lambda robot: is_deployment_robot(robot, 2), **options)


@pytest.mark.parametrize("value", ["abc", "", "nan", "inf", "-inf", "1" * 100, "0x10"])
def test_a_value_that_is_no_finite_number_is_skipped_and_counted(value: str) -> None:
    """One such value stopped the trainer's progress lines: float() raised in its timer."""
    table = figures()
    table.update("/robot_0", {RATE: value, LATENCY: "2.5"})
    assert table.numbers(RATE) == {} and table.numbers(LATENCY) == {"/robot_0": 2.5}
    assert table.malformed == 1
    table.update("/robot_1", {RATE: value})
    assert len(table) == 1 and table.malformed == 2


def test_only_the_figures_asked_for_are_kept_and_at_most_max_figures() -> None:
    table = figures(max_figures=3)
    table.update("/robot_0", {RATE: "0.5", "other": "1", **{f"{SAFETY}{k}": "0" for k in range(5)}})
    (kept,) = table.table().values()
    assert len(kept) == 3 and "other" not in kept and kept[RATE] == "0.5"
    assert table.dropped == 3


def test_the_table_is_bounded_and_unknown_robots_go_first() -> None:
    table = figures(max_robots=3)
    table.update("/robot_0", {RATE: "0.1"})
    table.update("/evil_0", {RATE: "0.9"})
    table.update("/robot_1", {RATE: "0.2"})
    for k in range(1, 100):  # a flood of forged ids: one unknown slot, cycling
        table.update(f"/evil_{k}", {RATE: "0.9"})
    assert set(table.table()) == {"/robot_0", "/robot_1", "/evil_99"}
    assert table.dropped == 99


def test_an_unknown_robot_never_pushes_out_a_known_one_and_known_ones_cycle_oldest_first(
) -> None:
    table = RobotFigures((RATE,), known=lambda robot: robot.startswith("/robot_"), max_robots=2)
    table.update("/robot_0", {RATE: "0.1"})
    table.update("/robot_1", {RATE: "0.2"})
    table.update("/evil", {RATE: "0.9"})
    assert set(table.table()) == {"/robot_0", "/robot_1"} and table.dropped == 1
    table.update("/robot_0", {RATE: "0.3"})  # heard again: now the newest
    table.update("/robot_2", {RATE: "0.4"})
    assert table.numbers(RATE) == {"/robot_0": 0.3, "/robot_2": 0.4} and table.dropped == 2


@pytest.mark.parametrize(("hardware_id", "robots", "expected"), [
    ("/robot_0", 2, True), ("/lab/robot_1", 2, True), ("/robot_2", 2, False),
    ("/robot_7", 0, True), ("/", 2, False), ("/trainer", 0, False), ("robot_0x", 0, False),
])
def test_deployment_robots_by_namespace(hardware_id: str, robots: int, expected: bool) -> None:
    assert is_deployment_robot(hardware_id, robots) is expected
