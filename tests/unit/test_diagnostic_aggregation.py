"""The /diagnostics_agg tree: grouping by the shipped analyzer file, rollups, staleness, Other,
and the analyzer-file checks (rl_core.monitoring.diagnostic_aggregation, no ROS)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rl_core.monitoring.diagnostic_aggregation import (
    ERROR,
    MAX_ITEMS,
    MAX_TEXT_CHARS,
    MAX_VALUES,
    OK,
    STALE,
    WARN,
    Aggregator,
    AnalyzerConfigError,
    Status,
    shipped_analyzer_file,
    toplevel_level,
)

pytestmark = pytest.mark.unit
SHIPPED = Path(__file__).resolve().parents[2] / "config" / "robots" / "diagnostic_analyzers.yaml"
RUN = ["/robot_0/simulator", "/robot_0/policy", "/robot_1/simulator", "/robot_1/policy",
       "/replay_buffer", "/trainer"]


def levels(tree: list[Status]) -> dict[str, int]:
    return {status.name: status.level for status in tree}


def shipped() -> Aggregator:
    return Aggregator.from_file(SHIPPED)


def test_the_shipped_file_is_the_one_the_nodes_find() -> None:
    assert shipped_analyzer_file().resolve() == SHIPPED.resolve()


def test_statuses_group_per_robot_and_node_kind() -> None:
    aggregator = shipped()
    aggregator.update([Status(name, OK, "running", "/ns", (("fill", "3"),)) for name in RUN],
                      now=0.0)
    tree = aggregator.report(now=1.0)
    by_name = {status.name: status for status in tree}
    assert {"/rl_ros2/Robots/robot_0/simulator", "/rl_ros2/Robots/robot_0/policy",
            "/rl_ros2/Robots/robot_1/simulator", "/rl_ros2/Robots/robot_1/policy",
            "/rl_ros2/Learner/replay_buffer", "/rl_ros2/Learner/trainer"} <= set(by_name)
    leaf = by_name["/rl_ros2/Robots/robot_1/policy"]
    assert (leaf.level, leaf.message, leaf.hardware_id, leaf.values) == (
        OK, "running", "/ns", (("fill", "3"),))
    # Every parent exists and carries its children's messages.
    for parent in ("/rl_ros2", "/rl_ros2/Robots", "/rl_ros2/Robots/robot_0", "/rl_ros2/Learner"):
        assert by_name[parent].level == OK and by_name[parent].message == "OK"
    assert dict(by_name["/rl_ros2/Robots/robot_0"].values) == {
        "/robot_0/policy": "running", "/robot_0/simulator": "running"}
    assert ("Robots", "OK") in by_name["/rl_ros2"].values
    assert not any("/Other" in name for name in by_name), "everything was matched"
    # Slots this run does not use and the absent autoscaler are OK, not Stale.
    assert levels(tree)["/rl_ros2/Robots/robot_3"] == OK
    assert levels(tree)["/rl_ros2/Bringup"] == OK
    assert toplevel_level(tree) == OK


def test_parents_take_their_worst_child() -> None:
    aggregator = shipped()
    aggregator.update([Status(name, OK) for name in RUN], now=0.0)
    aggregator.update([Status("/robot_1/simulator", WARN, "slow")], now=0.5)
    tree = levels(aggregator.report(now=1.0))
    assert tree["/rl_ros2/Robots/robot_1/simulator"] == WARN
    assert tree["/rl_ros2/Robots/robot_1"] == tree["/rl_ros2/Robots"] == tree["/rl_ros2"] == WARN
    assert tree["/rl_ros2/Robots/robot_0"] == tree["/rl_ros2/Learner"] == OK
    aggregator.update([Status("/trainer", ERROR, "NaN loss")], now=1.5)
    tree = levels(aggregator.report(now=2.0))
    assert tree["/rl_ros2/Learner"] == tree["/rl_ros2"] == ERROR
    assert tree["/rl_ros2/Robots"] == WARN


def test_a_silent_status_turns_stale_after_the_timeout_and_its_parents_error() -> None:
    aggregator = shipped()
    aggregator.update([Status(name, OK) for name in RUN], now=0.0)
    for second in range(1, 8):  # everyone but robot 0's policy keeps publishing
        aggregator.update([Status(name, OK) for name in RUN if name != "/robot_0/policy"],
                          now=float(second))
    assert levels(aggregator.report(now=5.0))["/rl_ros2/Robots/robot_0/policy"] == OK
    tree = aggregator.report(now=7.0)
    assert levels(tree)["/rl_ros2/Robots/robot_0/policy"] == STALE
    # A stale child beside live ones: the parents show Error (diagnostic_aggregator's rollup).
    assert levels(tree)["/rl_ros2/Robots/robot_0"] == ERROR
    assert levels(tree)["/rl_ros2/Robots"] == levels(tree)["/rl_ros2"] == ERROR
    assert levels(tree)["/rl_ros2/Robots/robot_1"] == OK
    assert toplevel_level(tree) == ERROR
    # Everything silent: everything stale, parents included.
    tree = aggregator.report(now=30.0)
    assert {level for name, level in levels(tree).items() if "robot_0" in name} == {STALE}
    # It comes back when heard again.
    aggregator.update([Status("/robot_0/policy", OK)], now=30.0)
    assert levels(aggregator.report(now=30.5))["/rl_ros2/Robots/robot_0/policy"] == OK


def test_unmatched_statuses_go_under_other_and_are_dropped_when_silent() -> None:
    aggregator = shipped()
    aggregator.update([Status("/trainer", OK), Status("/my_driver", WARN, "hot")], now=0.0)
    tree = aggregator.report(now=1.0)
    # Upstream's naming, kept so that both aggregators publish the same tree: slashes become
    # blanks, and Other removes no prefix.
    assert levels(tree)["/rl_ros2/Other/ my_driver"] == WARN
    assert levels(tree)["/rl_ros2/Other"] == WARN
    assert levels(tree)["/rl_ros2"] == OK, "Other sits beside the root, not under it"
    assert toplevel_level(tree) == WARN
    aggregator.update([Status("/trainer", OK)], now=6.0)
    assert not any("/Other" in status.name for status in aggregator.report(now=6.5))
    # A robot beyond the file's groups is still shown, under Other.
    aggregator.update([Status("/robot_9/simulator", OK)], now=7.0)
    assert "/rl_ros2/Other/ robot_9 simulator" in levels(aggregator.report(now=7.5))


def test_the_autoscaler_lands_under_bringup() -> None:
    aggregator = shipped()
    aggregator.update([Status("/rl_bringup/autoscaler", WARN, "robot 3 idle")], now=0.0)
    tree = levels(aggregator.report(now=1.0))
    assert tree["/rl_bringup/autoscaler".replace("/rl_bringup", "/rl_ros2/Bringup")] == WARN
    assert tree["/rl_ros2/Bringup"] == WARN


def test_the_shipped_robot_groups_take_their_own_robot_only() -> None:
    document = yaml.safe_load(SHIPPED.read_text())
    robots = document["analyzers"]["ros__parameters"]["robots"]["analyzers"]
    assert list(robots) == [f"robot_{k}" for k in range(len(robots))] and len(robots) >= 2
    for key, block in robots.items():
        assert block["path"] == key and block["find_and_remove_prefix"] == [f"/{key}/"]
    aggregator = shipped()
    aggregator.update([Status("/robot_10/simulator", OK)], now=0.0)
    assert "/rl_ros2/Robots/robot_1/simulator" not in levels(aggregator.report(now=0.5))


def generic(**fields: object) -> dict[str, object]:
    return {"analyzers": {"ros__parameters": {"path": "Root", "things": {
        "type": "diagnostic_aggregator/GenericAnalyzer", "path": "Things", **fields}}}}


def test_expected_names_show_missing_until_heard_and_num_items_counts() -> None:
    aggregator = Aggregator.from_document(generic(expected=["/a", "/b"], remove_prefix=["/"]))
    tree = {status.name: status for status in aggregator.report(now=0.0)}
    assert tree["/Root/Things/a"].level == STALE and tree["/Root/Things/a"].message == "Missing"
    aggregator.update([Status("/a", OK)], now=1.0)
    assert levels(aggregator.report(now=1.5))["/Root/Things"] == ERROR  # b still missing
    counted = Aggregator.from_document(generic(startswith=["/x"], num_items=2))
    counted.update([Status("/x1", OK)], now=0.0)
    header = counted.report(now=0.5)[0]
    assert (header.level, header.message) == (ERROR, "Expected 2, found 1")


def test_discard_stale_drops_silent_statuses_and_stays_ok() -> None:
    aggregator = Aggregator.from_document(generic(startswith=["/x"], timeout=1.0,
                                                  discard_stale=True))
    aggregator.update([Status("/x", WARN)], now=0.0)
    assert levels(aggregator.report(now=0.5))["/Root/Things"] == WARN
    tree = levels(aggregator.report(now=2.0))
    assert tree == {"/Root/Things": OK, "/Root": OK}


def test_an_empty_analyzer_is_stale_without_num_items_zero() -> None:
    aggregator = Aggregator.from_document(generic(startswith=["/x"]))
    assert levels(aggregator.report(now=0.0))["/Root/Things"] == STALE


@pytest.mark.parametrize("fields, message", [
    ({"startswith": "/x"}, "startswith must be a list of strings"),
    ({}, "no way to pick statuses"),
    ({"startswith": ["/x"], "timeot": 3.0}, "unknown parameter.*timeot"),
    ({"startswith": ["/x"], "timeout": "5"}, "timeout must be a floating-point number"),
    ({"startswith": ["/x"], "timeout": 5}, r"write 5.0, not 5"),
    ({"name": ["/x"]}, "unknown parameter.*'name'"),
    ({"regex": ["("]}, "regex"),
    ({"startswith": ["/x"], "type": "diagnostic_aggregator/FancyAnalyzer"}, "unknown type"),
    ({"startswith": ["/x"], "path": ""}, "'path' must be a non-empty string"),
])
def test_bad_analyzer_files_are_rejected_with_the_reason(fields: dict[str, object],
                                                         message: str) -> None:
    with pytest.raises(AnalyzerConfigError, match=message):
        Aggregator.from_document(generic(**fields))


def test_bad_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(AnalyzerConfigError, match="cannot read"):
        Aggregator.from_file(tmp_path / "none.yaml")
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("/**/trainer:\n  ros__parameters:\n    seed: 1\n")
    with pytest.raises(AnalyzerConfigError, match=f"{wrong}.*'analyzers: ros__parameters:'"):
        Aggregator.from_file(wrong)


def test_a_flood_of_forged_names_is_bounded_and_evicts_the_least_recent_first() -> None:
    """Anyone can publish /diagnostics (issue 41): names that match an analyzer that keeps its
    statuses (the Learner's '/trainer' prefix) must not grow the tree without bound. The least
    recently heard go first, counted as dropped; the deployment's own come back with their next
    status (1 Hz), in place of forged ones."""
    aggregator = shipped()
    aggregator.update([Status("/trainer_old", OK)], now=0.0)
    aggregator.update([Status(name, OK) for name in RUN], now=1.0)  # 2 of them in Learner
    flood = 3 * MAX_ITEMS
    aggregator.update([Status(f"/trainer_forged_{k}", OK) for k in range(flood)], now=2.0)
    aggregator.update([Status(f"/elsewhere_{k}", OK) for k in range(flood)], now=2.0)
    assert aggregator.dropped == (3 + flood - MAX_ITEMS) + (flood - MAX_ITEMS)
    aggregator.update([Status(name, OK) for name in RUN], now=3.0)
    tree = aggregator.report(now=3.5)
    learner = [s.name for s in tree if s.name.startswith("/rl_ros2/Learner/")]
    other = [s.name for s in tree if s.name.startswith("/rl_ros2/Other/")]
    assert len(learner) == MAX_ITEMS and len(other) == MAX_ITEMS
    assert "/rl_ros2/Learner/trainer_old" not in learner
    assert {"/rl_ros2/Learner/trainer", "/rl_ros2/Learner/replay_buffer"} <= set(learner)
    assert len(tree) < 3 * MAX_ITEMS


def test_expected_names_are_never_evicted() -> None:
    aggregator = Aggregator({"path": "x", "robots": {
        "type": "diagnostic_aggregator/GenericAnalyzer", "path": "R", "expected": ["/a", "/b"],
        "startswith": ["/r"]}})
    analyzer = aggregator.root.analyzers[0]
    analyzer.max_items = 3
    aggregator.update([Status(name, OK) for name in ("/a", "/b", "/r1", "/r2", "/r3")], now=1.0)
    assert list(analyzer.heard) == ["/a", "/b", "/r3"] and aggregator.dropped == 2


def test_oversized_statuses_are_clipped_and_counted() -> None:
    aggregator = shipped()
    huge = Status("/trainer", OK, "m" * 10 * MAX_TEXT_CHARS,
                  values=tuple((f"k{k}", "v" * 10 * MAX_TEXT_CHARS) for k in range(10 * MAX_VALUES)))
    aggregator.update([huge, Status("/replay_buffer", 7)], now=1.0)
    trainer = next(s for s in aggregator.report(now=1.0) if s.name == "/rl_ros2/Learner/trainer")
    assert len(trainer.values) == MAX_VALUES and len(trainer.message) == MAX_TEXT_CHARS
    assert all(len(value) == MAX_TEXT_CHARS for _, value in trainer.values)
    assert aggregator.clipped == 1 and aggregator.dropped == 0
