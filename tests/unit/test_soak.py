"""The soak's schedule (benchmarks/soak.py) and the pure parts of the fuzzing it and
benchmarks/faults.py send (benchmarks/fuzz.py): lifecycle transitions a node's state does not
offer and that stop nothing, the graph's managed nodes and containers, loads and unloads a
container must refuse, and the replay buffer's counters watched over save and load."""

from __future__ import annotations

import random

import pytest

from benchmarks import fuzz
from benchmarks.faults import BOUNDARY_KINDS, Kill
from benchmarks.soak import ESTOP, HOSTILE, KILL, SoakReport, markdown, plan_events

pytestmark = pytest.mark.unit


def test_plan_events_spaces_each_action_and_ends_before_the_last_minute() -> None:
    events = plan_events(60, 5, 1, 3, robots=2, seed=7)
    kills = [event for event in events if event.action == KILL]
    assert [event.at_s for event in kills] == [300.0 * k for k in range(1, 12)]
    assert [event.at_s for event in events if event.action == HOSTILE] == \
        [30.0 + 60.0 * k for k in range(60)]
    assert [event.at_s for event in events if event.action == ESTOP][:2] == [195.0, 375.0]
    assert all(0 < event.at_s < 3600 and event.robot in (0, 1) for event in events)
    assert [event.at_s for event in events] == sorted(event.at_s for event in events)


def test_plan_events_takes_every_kind_once_per_round_and_replays_from_its_seed() -> None:
    events = plan_events(50, 1, 0, 0, robots=2, seed=3)
    kinds = [event.kind for event in events]
    assert len(kinds) == 49 and all(event.action == KILL for event in events)
    rounds = len(BOUNDARY_KINDS)
    for start in range(0, 45, rounds):
        assert sorted(kinds[start:start + rounds]) == sorted(BOUNDARY_KINDS)
    assert plan_events(50, 1, 0, 0, robots=2, seed=3) == events
    assert plan_events(50, 1, 0, 0, robots=2, seed=4) != events


@pytest.mark.parametrize("bad", [dict(minutes=-1), dict(kill_every=-1), dict(robots=0)])
def test_plan_events_refuses_negative_periods_and_no_robots(bad: dict) -> None:
    arguments = dict(minutes=4, kill_every=1, hostile_every=1, estop_every=3, robots=2, seed=0)
    with pytest.raises(ValueError):
        plan_events(**{**arguments, **bad})


def test_the_four_minute_trial_has_kills_bursts_and_an_estop() -> None:
    actions = [event.action for event in plan_events(4, 1, 1, 3, robots=2, seed=1)]
    assert actions.count(KILL) == 3 and actions.count(HOSTILE) == 4 and actions.count(ESTOP) == 1


@pytest.mark.parametrize("seed", range(20))
def test_unavailable_transitions_never_offer_or_stop(seed: int) -> None:
    active = [(4, "deactivate"), (7, "shutdown")]
    requests = fuzz.unavailable_transitions(random.Random(seed), active, 50)
    assert len(requests) == 50
    for transition, label in requests:
        if label:
            assert label not in {"deactivate", "shutdown", "cleanup"} and label.strip()
        else:
            assert transition not in {4, 7} | fuzz.STOPPING_TRANSITIONS
        assert 0 <= transition <= 255


def test_managed_nodes_and_containers_come_from_the_graphs_services() -> None:
    services = [
        ("/trainer/change_state", ["lifecycle_msgs/srv/ChangeState"]),
        ("/robot_0/policy/change_state", ["lifecycle_msgs/srv/ChangeState"]),
        ("/robot_0/sim_robot/reset", ["rl_interfaces/srv/ResetRobot"]),
        ("/fake/change_state", ["std_srvs/srv/Trigger"]),
        ("/container/_container/load_node", ["composition_interfaces/srv/LoadNode"]),
        ("/robot_1/container/_container/list_nodes", ["composition_interfaces/srv/ListNodes"]),
    ]
    assert fuzz.managed_nodes(services) == ["/robot_0/policy", "/trainer"]
    assert fuzz.containers(services) == ["/container"]


def test_composition_requests_are_all_refusable() -> None:
    from rl_core.security.composition import PACKAGE, PLUGINS

    refused = fuzz.refused_load_parameters(("use_sim_time",))
    assert "use_sim_time" in refused and "output_dir" in refused
    requests = fuzz.composition_requests(random.Random(5), "/container", [1, 2, 3], refused, 60)
    assert {type_name for type_name, _, _ in requests} == {"LoadNode", "UnloadNode"}
    for type_name, service, request in requests:
        if type_name == "UnloadNode":
            assert service == "/container/_container/unload_node"
            assert request.unique_id not in (1, 2, 3)
            continue
        assert service == "/container/_container/load_node"
        valid = request.package_name == PACKAGE and request.plugin_name in PLUGINS
        assert not valid or any(parameter.name in refused for parameter in request.parameters)


def test_counter_watch_notes_counters_that_go_back() -> None:
    seen = iter([(10, 100), (10, 120), (9, 130), (12, 125)])
    report = fuzz.FuzzReport()
    watch = fuzz.CounterWatch(lambda: next(seen), report)
    watch.check("save a")
    assert not report.counter_regressions
    watch.check("load a")
    watch.check("load b")
    assert len(report.counter_regressions) == 2
    assert "load a" in report.counter_regressions[0]


def test_file_requests_save_twice_then_load_the_same_name() -> None:
    requests = fuzz.file_requests(random.Random(0))
    assert [name for name, _ in requests] == ["save", "save", "load", "load"]
    assert requests[0][1] == requests[1][1] == requests[2][1]
    assert requests[0][1].endswith(".npz")


def test_markdown_lists_the_command_and_every_kill() -> None:
    report = SoakReport(1, ".venv/bin/python benchmarks/soak.py --minutes 4", 4.0, "2 cores",
                        "2026-01-01")
    report.kills = [Kill("replay_buffer", "replay_buffer", 5000, 5000, restored=4990,
                         restored_inserted=4990),
                    Kill("simulator", "simulator_robot_1", 6000, 5000,
                         estop_released=["the simulator restarted after a fault"])]
    report.eval_mean, report.eval_std = 199.5, 0.5
    table = markdown(report)
    assert "benchmarks/soak.py --minutes 4" in table
    assert "| replay_buffer | 5,000 | 4,990 | 10 |" in table
    assert "simulator_robot_1" in table and "restarted after a fault" in table
    assert "met" in table and report.solved
