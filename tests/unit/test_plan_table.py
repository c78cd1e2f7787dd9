"""The node table of ``rl-bringup plan`` (rl_bringup.cli.format_node_table) and the places that
show it: the launch files' docstrings and docs/architecture.md. No ROS needed."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from rl_bringup.cli import format_node_table, main
from rl_bringup.plan.deployment import Plan, make_plan
from rl_bringup.plan.layouts import MODES

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def plan_for(mode: str, robots: int = 2, **kwargs: Any) -> Plan:
    """A plan with a fixed domain id and no inherited environment."""
    return make_plan(mode, robots, domain_id=7, environ={}, **kwargs)


def rows(table: str) -> list[list[str]]:
    """The cells of each line of a node table."""
    return [line.split() for line in table.splitlines()]


def test_hybrid_table_has_a_row_per_node_with_process_kind_namespace_and_executable() -> None:
    assert rows(format_node_table(plan_for("hybrid"))) == [
        ["PROCESS", "KIND", "NAMESPACE", "EXECUTABLE"],
        ["robot_0", "simulator", "/robot_0", "container"],
        ["robot_0", "policy", "/robot_0", "container"],
        ["robot_1", "simulator", "/robot_1", "container"],
        ["robot_1", "policy", "/robot_1", "container"],
        ["learner", "replay_buffer", "/", "container"],
        ["learner", "trainer", "/", "container"],
        ["learner", "diagnostics_aggregator", "/", "container"],
    ]


def test_decoupled_table_names_each_process_executable() -> None:
    assert rows(format_node_table(plan_for("decoupled", 1)))[1:] == [
        ["simulator_robot_0", "simulator", "/robot_0", "simulator"],
        ["policy_robot_0", "policy", "/robot_0", "policy"],
        ["replay_buffer", "replay_buffer", "/", "replay_buffer"],
        ["trainer", "trainer", "/", "trainer"],
        ["diagnostics_aggregator", "diagnostics_aggregator", "/", "diagnostics_aggregator"],
    ]


@pytest.mark.parametrize("mode", MODES)
def test_table_lists_every_hosted_node_in_process_order(mode: str) -> None:
    plan = plan_for(mode, 3, policy_layout="central", robot_interface="ros2_control")
    table = rows(format_node_table(plan))
    assert [(kind, namespace) for _, kind, namespace, _ in table[1:]] == plan.hosted_nodes()
    assert ["policy", "/"] in [row[1:3] for row in table]
    assert ["sim_robot_robot_2", "sim_robot", "/robot_2", "sim_robot"] in table


def test_columns_are_aligned() -> None:
    lines = format_node_table(plan_for("decoupled")).splitlines()
    for column in ("KIND", "NAMESPACE", "EXECUTABLE"):
        start = lines[0].index(column)
        assert all(line[start - 2:start] == "  " and line[start] != " " for line in lines), column


def test_cli_prints_the_node_table_alone_and_in_the_plan_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected = format_node_table(plan_for("hybrid"))
    assert main(["plan", "hybrid", "robots:=2", "domain_id:=7", "--format", "nodes"]) == 0
    assert capsys.readouterr().out == expected + "\n"
    assert main(["plan", "hybrid", "robots:=2", "domain_id:=7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("nodes") + 1
    assert lines[start:start + len(expected.splitlines())] == \
        [f"  {line}" for line in expected.splitlines()]
    assert lines[start + len(expected.splitlines())] == "processes"


@pytest.mark.parametrize("mode", MODES)
def test_launch_file_lists_the_nodes_of_its_mode(mode: str) -> None:
    path = REPO / "launch" / f"{mode}.launch.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    docstring = ast.get_docstring(tree) or ""
    table = "\n".join(f"    {line}" for line in format_node_table(plan_for(mode)).splitlines())
    assert table in docstring, f"{path.name}: update the table to `rl-bringup plan {mode} " \
        f"robots:=2 --format nodes`"
    modes = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
             and [target.id for target in node.targets if isinstance(target, ast.Name)] == ["MODE"]
             and isinstance(node.value, ast.Constant)]
    assert modes == [mode]


@pytest.mark.parametrize("mode", MODES)
def test_architecture_doc_shows_the_node_table_of_each_mode(mode: str) -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    block = f"`rl-bringup plan {mode} robots:=2 --format nodes`:\n\n```text\n" \
        f"{format_node_table(plan_for(mode))}\n```"
    assert block in text
