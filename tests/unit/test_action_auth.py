"""Authenticated actions (rl_core.action_auth): the MAC of an action batch under its robot's key,
where the keys come from, what a simulator steps with, and how ``rl-bringup`` gives each robot's
processes that robot's key alone (rl_bringup.run_key). No rclpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rl_bringup.plan import Plan, PlanError, make_plan
from rl_bringup.process_spec import ProcessSpec
from rl_bringup.run_key import served_robots, with_action_keys, with_weights_key
from rl_core import action_auth
from rl_core.action_auth import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    MAC_BYTES,
    ROBOT_KEYS_VARIABLE,
    ActionCheck,
    ActionKeyError,
    ActionKeys,
)

pytestmark = pytest.mark.unit

RUN_KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
ACTIONS = np.array([[0.5, -0.25, 1.0], [0.0, -1.0, 0.125]], dtype=np.float32)
#: One batch: robot_id, step, actions, policy_version.
BATCH = (3, 1_234, ACTIONS, 17)


# --- the MAC -------------------------------------------------------------------------------------

def test_a_mac_verifies_under_its_robots_key_only() -> None:
    keys = ActionKeys(RUN_KEY)
    mac = keys.mac(*BATCH)
    assert len(mac) == MAC_BYTES
    assert keys.verify(*BATCH, mac)
    assert not ActionKeys(OTHER_KEY).verify(*BATCH, mac)  # another run's key
    assert not keys.verify(*BATCH, mac[:-1])
    assert not keys.verify(*BATCH, b"")
    assert not keys.verify(*BATCH, bytes(MAC_BYTES))


@pytest.mark.parametrize("changed", [
    (4, 1_234, ACTIONS, 17),  # another robot
    (3, 1_235, ACTIONS, 17),  # another step
    (3, 1_234, ACTIONS, 18),  # another policy version
    (3, 1_234, ACTIONS.reshape(3, 2), 17),  # same values, another action shape
    (3, 1_234, ACTIONS.reshape(1, 2, 3), 17),  # same values, another num_envs
    (3, 1_234, ACTIONS * np.float32(0.5), 17),  # other values
    (3, 1_234, ACTIONS[:1], 17),  # fewer rows
])
def test_the_mac_covers_every_field(changed: tuple[int, int, np.ndarray, int]) -> None:
    keys = ActionKeys(RUN_KEY)
    assert not keys.verify(*changed, keys.mac(*BATCH))


def test_the_mac_is_an_hmac_sha256_of_the_documented_message() -> None:
    import hmac

    expected = hmac.digest(action_auth.robot_key(RUN_KEY, 3), action_auth.action_message(*BATCH),
                           "sha256")
    assert ActionKeys(RUN_KEY).mac(*BATCH) == expected


def test_float64_actions_mac_as_the_float32_the_wire_carries() -> None:
    keys = ActionKeys(RUN_KEY)
    as_float64 = (3, 1_234, ACTIONS.astype(np.float64), 17)
    assert keys.mac(*as_float64) == keys.mac(*BATCH)
    assert keys.verify(*BATCH, keys.mac(*as_float64))
    # A Fortran-ordered copy holds the same values: the MAC is over C order.
    assert keys.mac(3, 1_234, np.asfortranarray(ACTIONS), 17) == keys.mac(*BATCH)


def test_each_robot_has_its_own_key_and_a_robot_key_wins_over_the_run_key() -> None:
    run = ActionKeys(RUN_KEY)
    assert run.key(0) != run.key(1)
    assert run.key(0) == action_auth.robot_key(RUN_KEY, 0)
    robot_only = ActionKeys(robot_keys={3: run.key(3)})
    assert robot_only.verify(*BATCH, run.mac(*BATCH))
    # Robot 3's key makes no MAC that robot 4 accepts.
    assert not run.verify(4, 1_234, ACTIONS, 17, robot_only.mac(4, 1_234, ACTIONS, 17))
    both = ActionKeys(RUN_KEY, {3: OTHER_KEY})
    assert both.key(3) == OTHER_KEY and both.key(2) == run.key(2)


def test_without_a_configured_key_only_this_process_agrees_with_itself() -> None:
    first, second = ActionKeys(), ActionKeys()
    assert not first.configured(3) and not first.any_configured
    assert second.verify(*BATCH, first.mac(*BATCH))  # a policy and a simulator of one process
    assert first.key(3) != ActionKeys(RUN_KEY).key(3)
    assert ActionKeys(robot_keys={3: OTHER_KEY}).configured(3)
    assert not ActionKeys(robot_keys={3: OTHER_KEY}).configured(2)


# --- where the keys come from --------------------------------------------------------------------

def test_keys_load_from_the_environment(tmp_path: Path) -> None:
    assert ActionKeys(RUN_KEY).key(3) == action_auth.load_keys({KEY_VARIABLE: RUN_KEY.hex()}).key(3)
    key_file = tmp_path / "action.key"
    key_file.write_text(RUN_KEY.hex() + "\n")
    assert action_auth.load_keys({KEY_FILE_VARIABLE: str(key_file)}).run_key == RUN_KEY
    robots = action_auth.load_keys({ROBOT_KEYS_VARIABLE: f"3={OTHER_KEY.hex()}"})
    assert robots.robot_keys == {3: OTHER_KEY} and robots.run_key is None
    assert not action_auth.load_keys({}).any_configured


def test_robot_keys_round_trip() -> None:
    keys = {0: RUN_KEY, 12: OTHER_KEY}
    assert action_auth.parse_robot_keys(action_auth.format_robot_keys(keys)) == keys
    assert action_auth.parse_robot_keys("") == {}


@pytest.mark.parametrize("environ, match", [
    ({KEY_VARIABLE: "00" * 4}, "holds 4 bytes"),
    ({KEY_VARIABLE: "not hex"}, "hex digits"),
    ({KEY_FILE_VARIABLE: "/nonexistent/action.key"}, "cannot be read"),
    ({ROBOT_KEYS_VARIABLE: "robot=00"}, "is not ROBOT=HEX"),
    ({ROBOT_KEYS_VARIABLE: f"3{RUN_KEY.hex()}"}, "is not ROBOT=HEX"),
    ({ROBOT_KEYS_VARIABLE: "3=abcd"}, "robot 3"),
])
def test_a_malformed_key_says_how_to_fix_it(environ: dict[str, str], match: str) -> None:
    with pytest.raises(ActionKeyError, match=match):
        action_auth.load_keys(environ)


def test_an_error_does_not_print_the_robot_key() -> None:
    secret = "ab" * 32
    with pytest.raises(ActionKeyError) as error:
        action_auth.parse_robot_keys(f"x{secret}")
    assert secret not in str(error.value)


# --- what a simulator steps with -----------------------------------------------------------------

def test_a_simulator_steps_only_with_its_robots_mac() -> None:
    check = ActionCheck(ActionKeys(robot_keys={3: ActionKeys(RUN_KEY).key(3)}))
    assert check.refusal(*BATCH, ActionKeys(RUN_KEY).mac(*BATCH)) is None
    refusal = check.refusal(*BATCH, ActionKeys(OTHER_KEY).mac(*BATCH))
    assert refusal is not None and "does not verify" in refusal and "step 1234" in refusal
    refusal = check.refusal(*BATCH, b"")
    assert refusal is not None and "no MAC" in refusal
    # allow_unsigned does not switch off a configured key.
    keyed = ActionCheck(ActionKeys(RUN_KEY), allow_unsigned=True)
    assert keyed.refusal(*BATCH, b"") is not None


def test_without_a_key_only_allow_unsigned_accepts_actions_from_elsewhere() -> None:
    local = ActionKeys()  # the policy of this process
    check = ActionCheck(ActionKeys())
    assert check.refusal(*BATCH, local.mac(*BATCH)) is None
    refusal = check.refusal(*BATCH, ActionKeys(RUN_KEY).mac(*BATCH))
    assert refusal is not None
    assert KEY_VARIABLE in refusal and "allow_unsigned:=true" in refusal
    assert ActionCheck(ActionKeys(), allow_unsigned=True).refusal(*BATCH, b"") is None


# --- every robot's processes get that robot's key (rl_bringup.run_key) -------------------------

def plan_of(mode: str, robots: int = 2, **options: object) -> Plan:
    return make_plan(mode, robots, domain_id=7, environ={}, **options)  # type: ignore[arg-type]


def keys_of(process: ProcessSpec) -> ActionKeys:
    return action_auth.load_keys(process.env)


def by_name(plan: Plan) -> dict[str, ProcessSpec]:
    return {process.name: process for process in plan.processes}


def test_decoupled_robots_get_their_own_key_and_the_learner_none() -> None:
    plan = with_action_keys(plan_of("decoupled"), {KEY_VARIABLE: RUN_KEY.hex()})
    processes = by_name(plan)
    run = ActionKeys(RUN_KEY)
    for name, process in processes.items():
        robots = served_robots(process)
        keys = keys_of(process)
        if not robots:  # replay buffer, trainer
            assert not keys.any_configured, name
            assert all(process.env[variable] == "" for variable in
                       (KEY_VARIABLE, KEY_FILE_VARIABLE, ROBOT_KEYS_VARIABLE)), name
            continue
        (robot,) = robots
        assert keys.run_key is None and keys.robot_keys == {robot: run.key(robot)}, name
    # A taken-over robot 1 cannot make actions robot 0 steps with.
    policy_1 = keys_of(processes["policy_robot_1"])
    simulator_0 = ActionCheck(keys_of(processes["simulator_robot_0"]))
    assert simulator_0.refusal(0, 5, ACTIONS, 0, policy_1.mac(0, 5, ACTIONS, 0)) is not None
    policy_0 = keys_of(processes["policy_robot_0"])
    assert simulator_0.refusal(0, 5, ACTIONS, 0, policy_0.mac(0, 5, ACTIONS, 0)) is None


@pytest.mark.parametrize("mode", ["decoupled", "hybrid", "colocated"])
def test_a_central_policy_holds_every_robots_key(mode: str) -> None:
    plan = with_action_keys(plan_of(mode, 3, policy_layout="central"), {})
    central = next(process for process in plan.processes
                   if ("policy", "/") in process.hosted_nodes())
    assert served_robots(central) is None
    policy = keys_of(central)
    assert policy.run_key is not None
    for process in plan.processes:
        for robot in served_robots(process) or ():
            check = ActionCheck(keys_of(process))
            assert check.refusal(robot, 9, ACTIONS, 1, policy.mac(robot, 9, ACTIONS, 1)) is None


def test_hybrid_robot_containers_get_their_robots_key_and_colocated_the_run_key() -> None:
    hybrid = by_name(with_action_keys(plan_of("hybrid"), {KEY_VARIABLE: RUN_KEY.hex()}))
    assert keys_of(hybrid["robot_1"]).robot_keys == {1: ActionKeys(RUN_KEY).key(1)}
    assert not keys_of(hybrid["learner"]).any_configured
    colocated = with_action_keys(plan_of("colocated"), {KEY_VARIABLE: RUN_KEY.hex()})
    (container,) = colocated.processes
    assert keys_of(container).run_key == RUN_KEY


def test_sim_robot_processes_get_no_action_key() -> None:
    plan = with_action_keys(plan_of("hybrid", 1, robot_interface="ros2_control"), {})
    sim_robots = [process for process in plan.processes
                  if any(kind == "sim_robot" for kind, _ in process.hosted_nodes())]
    assert sim_robots and all(not keys_of(process).any_configured for process in sim_robots)


def test_each_launch_makes_fresh_keys_unless_the_caller_gives_one() -> None:
    first = by_name(with_action_keys(plan_of("decoupled"), {}))["simulator_robot_0"]
    second = by_name(with_action_keys(plan_of("decoupled"), {}))["simulator_robot_0"]
    assert keys_of(first).key(0) != keys_of(second).key(0)
    given = {KEY_VARIABLE: RUN_KEY.hex()}
    assert by_name(with_action_keys(plan_of("decoupled"), given))["simulator_robot_0"].env == \
        by_name(with_action_keys(plan_of("decoupled"), given))["simulator_robot_0"].env


def test_a_robot_key_the_caller_set_is_kept() -> None:
    """A robot host given its robot's key (a central policy elsewhere holds the run key)."""
    given = {ROBOT_KEYS_VARIABLE: f"0={OTHER_KEY.hex()}"}
    processes = by_name(with_action_keys(plan_of("decoupled", 1), given))
    assert keys_of(processes["simulator_robot_0"]).robot_keys == {0: OTHER_KEY}


def test_a_malformed_caller_key_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match=KEY_VARIABLE):
        with_action_keys(plan_of("decoupled"), {KEY_VARIABLE: "00"})


def test_the_launchers_key_step_hands_out_action_keys_too(tmp_path: Path) -> None:
    """``rl-bringup`` and the launch files call with_weights_key: it gives the action keys."""
    plan = with_weights_key(make_plan("decoupled", 1, output_dir=tmp_path, domain_id=7,
                                      environ={}), None, {KEY_VARIABLE: RUN_KEY.hex()})
    processes = by_name(plan)
    assert keys_of(processes["policy_robot_0"]).robot_keys == {0: ActionKeys(RUN_KEY).key(0)}
    assert not keys_of(processes["trainer"]).any_configured
    # The action keys stay out of the environment every process shares.
    assert not set(plan.environment) & {KEY_VARIABLE, ROBOT_KEYS_VARIABLE}
