"""Authenticated actions (rl_core.security.action_auth): the MAC of an action batch under its robot's key
and over the digest of the observations it answers, where the keys come from, what a simulator
steps with, and how ``rl-bringup`` gives each robot's processes that robot's key alone
(rl_bringup.plan.run_key). No rclpy."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from rl_bringup.plan.deployment import Plan, PlanError, make_plan
from rl_bringup.plan.process_spec import ProcessSpec
from rl_bringup.plan.run_key import served_robots, with_action_keys, with_weights_key
from rl_core.security import action_auth
from rl_core.security.action_auth import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    MAC_BYTES,
    ROBOT_KEYS_VARIABLE,
    ActionCheck,
    ActionKeyError,
    ActionKeys,
)
from rl_core.wire.messages import Observations

pytestmark = pytest.mark.unit

RUN_KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
ACTIONS = np.array([[0.5, -0.25, 1.0], [0.0, -1.0, 0.125]], dtype=np.float32)
#: The observations the actions answer, and their digest.
OBS = np.array([[0.1, 0.2, 0.3, 0.4], [1.5, -2.5, 3.5, -4.5]], dtype=np.float32)
SEEN = action_auth.observation_digest(OBS)
#: One batch: robot_id, step, actions, policy_version, digest of the observations answered.
BATCH = (3, 1_234, ACTIONS, 17, SEEN)


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
    (4, 1_234, ACTIONS, 17, SEEN),  # another robot
    (3, 1_235, ACTIONS, 17, SEEN),  # another step
    (3, 1_234, ACTIONS, 18, SEEN),  # another policy version
    (3, 1_234, ACTIONS.reshape(3, 2), 17, SEEN),  # same values, another action shape
    (3, 1_234, ACTIONS.reshape(1, 2, 3), 17, SEEN),  # same values, another num_envs
    (3, 1_234, ACTIONS * np.float32(0.5), 17, SEEN),  # other values
    (3, 1_234, ACTIONS[:1], 17, SEEN),  # fewer rows
    (3, 1_234, ACTIONS, 17, action_auth.observation_digest(OBS[::-1])),  # other observations
])
def test_the_mac_covers_every_field(changed: tuple[int, int, np.ndarray, int, bytes]) -> None:
    keys = ActionKeys(RUN_KEY)
    assert not keys.verify(*changed, keys.mac(*BATCH))


def test_the_mac_is_an_hmac_sha256_of_the_documented_message() -> None:
    import hmac

    expected = hmac.digest(action_auth.robot_key(RUN_KEY, 3), action_auth.action_message(*BATCH),
                           "sha256")
    assert ActionKeys(RUN_KEY).mac(*BATCH) == expected


def test_float64_actions_mac_as_the_float32_the_wire_carries() -> None:
    keys = ActionKeys(RUN_KEY)
    as_float64 = (3, 1_234, ACTIONS.astype(np.float64), 17, SEEN)
    assert keys.mac(*as_float64) == keys.mac(*BATCH)
    assert keys.verify(*BATCH, keys.mac(*as_float64))
    # A Fortran-ordered copy holds the same values: the MAC is over C order.
    assert keys.mac(3, 1_234, np.asfortranarray(ACTIONS), 17, SEEN) == keys.mac(*BATCH)


def test_each_robot_has_its_own_key_and_a_robot_key_wins_over_the_run_key() -> None:
    run = ActionKeys(RUN_KEY)
    assert run.key(0) != run.key(1)
    assert run.key(0) == action_auth.robot_key(RUN_KEY, 0)
    robot_only = ActionKeys(robot_keys={3: run.key(3)})
    assert robot_only.verify(*BATCH, run.mac(*BATCH))
    # Robot 3's key makes no MAC that robot 4 accepts.
    assert not run.verify(4, 1_234, ACTIONS, 17, SEEN, robot_only.mac(4, 1_234, ACTIONS, 17, SEEN))
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


# --- the digest of the observations answered ---------------------------------------------------

def test_an_answer_to_other_observations_does_not_verify() -> None:
    """One byte of the observations changed, and the genuine answer to them no longer fits."""
    keys = ActionKeys(RUN_KEY)
    other = OBS.copy()
    other.view(np.uint8).reshape(-1)[5] ^= 1
    mac = keys.mac(3, 1_234, ACTIONS, 17, action_auth.observation_digest(other))
    assert not keys.verify(*BATCH, mac)
    frames = np.zeros((2, 3, 8, 8, 3), dtype=np.uint8)
    changed = frames.copy()
    changed[1, 2, 7, 7, 2] = 1
    assert action_auth.observation_digest(frames) != action_auth.observation_digest(changed)


def test_the_digest_binds_the_shape_and_the_form() -> None:
    digest = action_auth.observation_digest
    assert len(digest(OBS)) == action_auth.DIGEST_BYTES
    assert digest(OBS) != digest(OBS.reshape(1, 8))  # same bytes, another batch shape
    assert digest(OBS) != digest(OBS.reshape(4, 2))
    assert digest(OBS) != digest(OBS.view(np.uint8).reshape(2, 16))  # same bytes as frames
    # The values as the wire carries them: float64 as the float32 it sends, in C order.
    assert digest(OBS.astype(np.float64)) == digest(OBS) == digest(np.asfortranarray(OBS))
    # An encoded image binds its payload, not the pixels (a lossy decoder may change them).
    frames = np.zeros((2, 3, 8, 8, 3), dtype=np.uint8)
    payload = action_auth.payload_digest(b"\x89PNG...")
    assert digest(frames, payload) != digest(frames)
    assert digest(frames, payload) == digest(np.ones_like(frames), payload)
    assert digest(frames, payload) != digest(frames[:1], payload)
    assert digest(frames, payload) != digest(frames, action_auth.payload_digest(b"\x89PNG..!"))


def test_the_digest_of_a_received_batch_is_of_what_crossed() -> None:
    frames = np.zeros((1, 3, 8, 8, 3), dtype=np.uint8)
    payload = action_auth.payload_digest(b"jpeg bytes")
    assert action_auth.batch_digest(Observations(0, 1, OBS)) == SEEN
    assert action_auth.batch_digest(Observations(0, 1, frames, payload_digest=payload)) == \
        action_auth.observation_digest(frames, payload)


def test_the_cost_of_a_digest() -> None:
    """A figure, not a limit: the digest of a batch per call for typical sizes (SHA-256; about
    3, 6 and 19 µs on the 2-core development machine when it is quiet)."""
    for name, obs in (("1x4 float32", np.zeros((1, 4), np.float32)),
                      ("64x17 float32", np.zeros((64, 17), np.float32)),
                      ("1x84x84x3 uint8", np.zeros((1, 84, 84, 3), np.uint8))):
        calls = 2000
        started = time.perf_counter()
        for _ in range(calls):
            action_auth.observation_digest(obs)
        each_us = (time.perf_counter() - started) / calls * 1e6
        print(f"observation digest of {name}: {each_us:.1f} µs")
        assert each_us < 5_000  # (only that it is not absurd: timings vary with the load)


# --- what a simulator steps with -----------------------------------------------------------------

def published(check: ActionCheck, robot: int = 3, step: int = 1_234, obs: np.ndarray = OBS
              ) -> ActionCheck:
    """``check`` after its simulator published ``obs`` for ``step``."""
    check.expect(robot, step, [action_auth.observation_digest(obs)])
    return check


def test_a_simulator_steps_only_with_its_robots_mac() -> None:
    check = published(ActionCheck(ActionKeys(robot_keys={3: ActionKeys(RUN_KEY).key(3)})))
    assert check.refusal(*BATCH[:4], ActionKeys(RUN_KEY).mac(*BATCH)) is None
    refusal = check.refusal(*BATCH[:4], ActionKeys(OTHER_KEY).mac(*BATCH))
    assert refusal is not None and "does not verify" in refusal and "step 1234" in refusal
    refusal = check.refusal(*BATCH[:4], b"")
    assert refusal is not None and "no MAC" in refusal
    # allow_unsigned does not switch off a configured key.
    keyed = published(ActionCheck(ActionKeys(RUN_KEY), allow_unsigned=True))
    assert keyed.refusal(*BATCH[:4], b"") is not None


def test_a_simulator_steps_only_with_answers_to_what_it_published() -> None:
    """The attack: a peer sends the policy observations of a future step and replays the genuine
    answer once the simulator gets there; the simulator published other observations."""
    policy = ActionKeys(RUN_KEY)
    check = ActionCheck(ActionKeys(RUN_KEY))
    peers = OBS + np.float32(1.0)
    harvested = policy.mac(3, 1_234, ACTIONS, 17, action_auth.observation_digest(peers))
    refusal = check.refusal(*BATCH[:4], harvested)  # before the simulator got there
    assert refusal is not None and "did not publish" in refusal
    published(check)
    refusal = check.refusal(*BATCH[:4], harvested)
    assert refusal is not None and "other observations" in refusal
    assert check.refusal(*BATCH[:4], policy.mac(*BATCH)) is None  # the genuine answer
    # A republished batch of another form (a local copy and an encoded image) fits either.
    payload = action_auth.observation_digest(OBS, action_auth.payload_digest(b"image"))
    check.expect(3, 1_234, [payload])
    assert check.refusal(*BATCH[:4], policy.mac(3, 1_234, ACTIONS, 17, payload)) is None
    assert check.refusal(*BATCH[:4], policy.mac(*BATCH)) is None


def test_a_simulator_remembers_a_bounded_number_of_batches() -> None:
    policy = ActionKeys(RUN_KEY)
    check = ActionCheck(ActionKeys(RUN_KEY))
    for step in range(action_auth.REMEMBERED_BATCHES + 1):
        published(check, step=step)
    assert check.refusal(3, 0, ACTIONS, 17, policy.mac(3, 0, ACTIONS, 17, SEEN)) is not None
    assert check.refusal(3, 1, ACTIONS, 17, policy.mac(3, 1, ACTIONS, 17, SEEN)) is None
    # Another robot's batch of the same step is another batch.
    assert check.refusal(4, 1, ACTIONS, 17, policy.mac(4, 1, ACTIONS, 17, SEEN)) is not None


def test_without_a_key_only_allow_unsigned_accepts_actions_from_elsewhere() -> None:
    local = ActionKeys()  # the policy of this process
    check = published(ActionCheck(ActionKeys()))
    assert check.refusal(*BATCH[:4], local.mac(*BATCH)) is None
    refusal = check.refusal(*BATCH[:4], ActionKeys(RUN_KEY).mac(*BATCH))
    assert refusal is not None
    assert KEY_VARIABLE in refusal and "allow_unsigned:=true" in refusal
    assert ActionCheck(ActionKeys(), allow_unsigned=True).refusal(*BATCH[:4], b"") is None


# --- every robot's processes get that robot's key (rl_bringup.plan.run_key) --------------------

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
    simulator_0 = published(ActionCheck(keys_of(processes["simulator_robot_0"])), 0, 5)
    assert simulator_0.refusal(0, 5, ACTIONS, 0, policy_1.mac(0, 5, ACTIONS, 0, SEEN)) is not None
    policy_0 = keys_of(processes["policy_robot_0"])
    assert simulator_0.refusal(0, 5, ACTIONS, 0, policy_0.mac(0, 5, ACTIONS, 0, SEEN)) is None


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
            check = published(ActionCheck(keys_of(process)), robot, 9)
            assert check.refusal(robot, 9, ACTIONS, 1,
                                 policy.mac(robot, 9, ACTIONS, 1, SEEN)) is None


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


def test_a_batch_handed_over_in_process_carries_its_digest_and_a_decoded_one_is_hashed() -> None:
    """Zero-copy: the policy takes the digest the simulator computed for this very object;
    a batch decoded from DDS has none (the field is not on the wire) and is hashed."""
    obs = np.arange(8, dtype=np.float32).reshape(2, 4)
    local = Observations(0, 3, obs)
    local.values_digest = action_auth.observation_digest(obs)
    assert action_auth.batch_digest(local) == local.values_digest
    decoded = Observations(0, 3, obs.copy())
    assert decoded.values_digest == b""
    assert action_auth.batch_digest(decoded) == local.values_digest
