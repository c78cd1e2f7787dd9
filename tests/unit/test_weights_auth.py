"""The learner's Ed25519 key and signatures (rl_core.security.weights_auth), signed replay status
(rl_core.security.signed_status), and how ``rl-bringup`` gives the private key to the learner's processes
and the public key alone to the robots' (rl_bringup.plan.run_key). No rclpy."""

from __future__ import annotations

import hashlib
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rl_bringup.plan.deployment import Plan, PlanError, make_plan
from rl_bringup.plan.run_key import signs, with_weights_key
from rl_core.security import weights_auth
from rl_core.security.signed_status import StatusCheck, StatusSigner
from rl_core.security.weights_auth import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    PUBLIC_KEY_FILE_VARIABLE,
    PUBLIC_KEY_VARIABLE,
    RUN_ID_VARIABLE,
    SigningKey,
    WeightsKeyError,
)

pytestmark = pytest.mark.unit

RAW = bytes(range(32))
OTHER_RAW = bytes(range(1, 33))
KEY = SigningKey(RAW)
OTHER_KEY = SigningKey(OTHER_RAW)
#: The signed fields of one publication: epoch, version, update_step, architecture, data.
FIELDS: dict[str, Any] = {"epoch": 1_700_000_000_000_000_000, "version": 7, "update_step": 350,
                          "architecture": '{"hidden_sizes": [64, 64], "obs_dim": 4}',
                          "data": b"safetensors bytes"}


def write_key(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- loading the keys -----------------------------------------------------------------------------

def test_no_key_configured_means_none() -> None:
    assert weights_auth.load_key({}) is None
    assert weights_auth.load_key({KEY_VARIABLE: "", KEY_FILE_VARIABLE: ""}) is None
    assert weights_auth.load_public_key({}) is None


def test_key_variable_wins_over_key_file(tmp_path: Path) -> None:
    key_file = write_key(tmp_path / "weights.key", OTHER_RAW.hex() + "\n")
    assert weights_auth.load_key({KEY_VARIABLE: f"  {RAW.hex()}\n"}).raw == RAW
    assert weights_auth.load_key({KEY_FILE_VARIABLE: str(key_file)}).raw == OTHER_RAW
    assert weights_auth.load_key({KEY_VARIABLE: RAW.hex(),
                                  KEY_FILE_VARIABLE: str(key_file)}).raw == RAW


def test_the_public_key_is_configured_or_derived(tmp_path: Path) -> None:
    public_file = write_key(tmp_path / "weights.pub", OTHER_KEY.public.hex())
    assert weights_auth.load_public_key({PUBLIC_KEY_VARIABLE: KEY.public.hex()}).raw == \
        KEY.public.raw
    assert weights_auth.load_public_key({PUBLIC_KEY_FILE_VARIABLE: str(public_file)}).raw == \
        OTHER_KEY.public.raw
    # A process holding the private key checks with its public half.
    assert weights_auth.load_public_key({KEY_VARIABLE: RAW.hex()}).raw == KEY.public.raw
    # A configured public key wins over the private key's.
    assert weights_auth.load_public_key({KEY_VARIABLE: RAW.hex(),
                                         PUBLIC_KEY_VARIABLE: OTHER_KEY.public.hex()}).raw == \
        OTHER_KEY.public.raw


@pytest.mark.parametrize("text, reason", [
    ("not hex at all", "hex digits"),
    ("abc", "hex digits"),  # odd number of digits
    ("00" * 16, "an Ed25519 key has 32"),
    ("00" * 33, "an Ed25519 key has 32"),
])
def test_malformed_keys_are_refused_with_the_reason(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(WeightsKeyError, match=reason) as raised:
        weights_auth.load_key({KEY_VARIABLE: text})
    assert KEY_VARIABLE in str(raised.value)
    key_file = write_key(tmp_path / "weights.key", text)
    with pytest.raises(WeightsKeyError, match=reason) as raised:
        weights_auth.load_key({KEY_FILE_VARIABLE: str(key_file)})
    assert str(key_file) in str(raised.value)
    with pytest.raises(WeightsKeyError, match=reason):
        weights_auth.load_public_key({PUBLIC_KEY_VARIABLE: text})


@pytest.mark.parametrize("name", ["missing.key", "a_directory"])
def test_unreadable_key_file_is_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "a_directory").mkdir()
    path = tmp_path / name
    with pytest.raises(WeightsKeyError, match="cannot be read") as raised:
        weights_auth.load_key({KEY_FILE_VARIABLE: str(path)})
    assert str(path) in str(raised.value)


def test_key_error_is_a_value_error() -> None:
    assert issubclass(WeightsKeyError, ValueError)


# --- creating a key pair --------------------------------------------------------------------------

def test_create_key_file_writes_a_private_random_key_and_its_public_key(tmp_path: Path) -> None:
    path = weights_auth.create_key_file(tmp_path / "run" / "nested")
    assert path == tmp_path / "run" / "nested" / weights_auth.KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = weights_auth.load_key({KEY_FILE_VARIABLE: str(path)})
    public = path.parent / weights_auth.PUBLIC_KEY_FILE_NAME
    assert weights_auth.load_public_key({PUBLIC_KEY_FILE_VARIABLE: str(public)}).raw == \
        key.public.raw
    other = weights_auth.create_key_file(tmp_path / "another_run")
    assert weights_auth.load_key({KEY_FILE_VARIABLE: str(other)}).raw != key.raw


def test_create_key_file_keeps_an_existing_key(tmp_path: Path) -> None:
    first = weights_auth.create_key_file(tmp_path)
    text = first.read_text()
    second = weights_auth.create_key_file(tmp_path)
    assert second == first and second.read_text() == text


def test_the_command_line_makes_a_pair_and_prints_the_public_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert weights_auth.main(["new", str(tmp_path)]) == 0
    key = weights_auth.load_key({KEY_FILE_VARIABLE: str(tmp_path / "weights.key")})
    capsys.readouterr()
    assert weights_auth.main(["public", str(tmp_path / "weights.key")]) == 0
    assert capsys.readouterr().out.strip() == key.public.hex()
    assert weights_auth.main(["public", str(tmp_path / "missing.key")]) == 2
    assert "cannot be read" in capsys.readouterr().err


# --- signing and verifying ------------------------------------------------------------------------

def test_signature_is_ed25519_and_verifies_with_the_public_key_only() -> None:
    signature = weights_auth.signature(KEY, **FIELDS)
    assert len(signature) == weights_auth.SIGNATURE_HEX_DIGITS and int(signature, 16) >= 0
    assert weights_auth.verify(KEY.public, signature, **FIELDS)
    public_only = weights_auth.VerifyKey(KEY.public.raw)
    assert weights_auth.verify(public_only, signature, **FIELDS)
    assert not hasattr(public_only, "sign")


@pytest.mark.parametrize("name, value", [
    ("epoch", FIELDS["epoch"] + 1),
    ("version", FIELDS["version"] + 1),
    ("update_step", FIELDS["update_step"] - 1),
    ("architecture", '{"hidden_sizes": [64, 65], "obs_dim": 4}'),
    ("data", b"safetensors bytez"),
    ("data", b""),
])
def test_changing_any_signed_field_fails_verification(name: str, value: Any) -> None:
    signature = weights_auth.signature(KEY, **FIELDS)
    changed = {**FIELDS, name: value}
    assert not weights_auth.verify(KEY.public, signature, **changed)


def test_architecture_and_data_boundary_is_part_of_the_signature() -> None:
    # Moving bytes between architecture and data must not keep the signature (length-prefixed).
    moved = {**FIELDS, "architecture": FIELDS["architecture"] + "s",
             "data": FIELDS["data"][1:]}
    assert not weights_auth.verify(KEY.public, weights_auth.signature(KEY, **FIELDS), **moved)


def test_verify_fails_with_another_key_or_a_bad_signature() -> None:
    signature = weights_auth.signature(KEY, **FIELDS)
    assert not weights_auth.verify(OTHER_KEY.public, signature, **FIELDS)
    for bad in ("", "0" * 128, "zz" * 64, signature[:-2], signature + "00"):
        assert not weights_auth.verify(KEY.public, bad, **FIELDS)


# --- signed replay status (rl_core.security.signed_status) -------------------------------------------------

def test_a_signed_newer_status_is_obeyed_and_a_replay_refused() -> None:
    signer, check = StatusSigner(KEY), StatusCheck(KEY.public)
    epoch, first = signer.next()
    signature = signer.sign(b"status 1")
    assert check.refusal(epoch, first, signature, b"status 1") is None
    _, second = signer.next()
    later = signer.sign(b"status 2")
    assert check.refusal(epoch, second, later, b"status 2") is None
    assert "a replay" in check.refusal(epoch, first, signature, b"status 1")
    assert "not signed by the learner" in check.refusal(epoch, 9, later, b"status 9")
    assert "not signed" in check.refusal(epoch, 10, OTHER_KEY.sign(b"x"), b"x")
    assert check.refused == 3


def test_without_a_public_key_status_is_refused_unless_unsigned_is_allowed() -> None:
    assert "allow_unsigned" in StatusCheck(None).refusal(1, 1, "", b"status")
    allowing = StatusCheck(None, allow_unsigned=True)
    assert allowing.refusal(1, 1, "", b"status") is None
    assert "a replay" in allowing.refusal(1, 1, "", b"status")
    assert StatusSigner(None).sign(b"status") == ""


# --- the run identity every signature binds (issue 41 item 7) -------------------------------------

RUN_A, RUN_B = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1@/", "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2@/"


def test_the_run_identity_is_read_with_the_keys() -> None:
    private = weights_auth.load_key({KEY_VARIABLE: RAW.hex(), RUN_ID_VARIABLE: f" {RUN_A}\n"})
    assert private.run_id == private.public.run_id == RUN_A
    public = weights_auth.load_public_key({PUBLIC_KEY_VARIABLE: KEY.public.hex(),
                                           RUN_ID_VARIABLE: RUN_B})
    assert public.run_id == RUN_B and public.raw == KEY.public.raw
    assert weights_auth.load_key({KEY_VARIABLE: RAW.hex()}).run_id == ""  # hand-started


def test_a_weights_signature_of_another_run_does_not_verify_under_the_same_key() -> None:
    run_a, run_b = SigningKey(RAW, RUN_A), SigningKey(RAW, RUN_B)
    signed_for_a = weights_auth.signature(run_a, **FIELDS)
    assert weights_auth.verify(run_a.public, signed_for_a, **FIELDS)
    assert not weights_auth.verify(run_b.public, signed_for_a, **FIELDS)
    assert not weights_auth.verify(KEY.public, signed_for_a, **FIELDS)  # the unnamed run
    assert not weights_auth.verify(run_a.public, weights_auth.signature(KEY, **FIELDS), **FIELDS)


def test_the_unnamed_runs_weights_message_is_the_one_before_run_identities() -> None:
    """A process without RL_ROS2_RUN_ID signs and checks exactly what it did before."""
    architecture = FIELDS["architecture"].encode()
    before = (b"rl_ros2 weights\0" + struct.pack("<QQQQ", FIELDS["epoch"], FIELDS["version"],
                                                 FIELDS["update_step"], len(architecture))
              + architecture + hashlib.sha256(FIELDS["data"]).digest())
    assert weights_auth.weights_message(**FIELDS) == before
    assert weights_auth.weights_message(**FIELDS, run_id=RUN_A) != before
    assert KEY.public.verify(weights_auth.signature(KEY, **FIELDS), before)


def test_a_status_signature_of_another_run_is_refused_and_counted() -> None:
    signer = StatusSigner(SigningKey(RAW, RUN_B))
    epoch, sequence = signer.next()
    signature = signer.sign(b"acting paused")
    check_a = StatusCheck(SigningKey(RAW, RUN_A).public)
    refusal = check_a.refusal(epoch, sequence, signature, b"acting paused")
    assert refusal is not None and "another run" in refusal and RUN_A in refusal
    assert check_a.refused == 1 and check_a.last == (0, 0)
    assert StatusCheck(KEY.public).refusal(epoch, sequence, signature, b"acting paused")
    # The same status signed for run A is obeyed there.
    assert check_a.refusal(epoch, sequence, StatusSigner(SigningKey(RAW, RUN_A)).sign(
        b"acting paused"), b"acting paused") is None


def test_a_respawned_signer_stays_after_its_snapshot_epoch() -> None:
    far_future = 2**63
    signer = StatusSigner(KEY, saved_epoch=far_future)
    assert signer.epoch == far_future + 1
    restored = StatusSigner(KEY)
    restored.next()
    restored.resume_after(far_future)
    assert restored.next() == (far_future + 1, 1)
    restored.resume_after(5)  # an older snapshot changes nothing
    assert restored.epoch == far_future + 1


# --- the private key for the learner's processes, the public key for all (rl_bringup.plan.run_key)

def decoupled_plan(output_dir: Path | None) -> Plan:
    return make_plan("decoupled", output_dir=output_dir, domain_id=7, environ={})


def assert_keys(plan: Plan, key_file: str | None, public: SigningKey) -> None:
    """The signers have ``key_file`` (None: the caller's), every other process no private key,
    and everyone the public key."""
    assert plan.environment[PUBLIC_KEY_VARIABLE] == public.public.hex()
    assert {process.name for process in plan.processes if signs(process)} == \
        {"replay_buffer", "trainer"}
    for process in plan.processes:
        assert process.env[PUBLIC_KEY_VARIABLE] == public.public.hex(), process.name
        if not signs(process):
            assert process.env[KEY_VARIABLE] == process.env[KEY_FILE_VARIABLE] == "", process.name
        elif key_file is not None:
            assert process.env[KEY_FILE_VARIABLE] == key_file and process.env[KEY_VARIABLE] == ""
        else:
            assert KEY_FILE_VARIABLE not in process.env and KEY_VARIABLE not in process.env


def test_a_key_in_the_callers_environment_reaches_the_signers_only(tmp_path: Path) -> None:
    plan = decoupled_plan(tmp_path)
    key_file = write_key(tmp_path / "shared.key", RAW.hex())
    for environ in ({KEY_VARIABLE: RAW.hex()}, {KEY_FILE_VARIABLE: str(key_file)}):
        assert_keys(with_weights_key(plan, None, environ), None, KEY)
    assert not (tmp_path / weights_auth.KEY_FILE_NAME).exists()


def test_a_robot_host_with_only_the_public_key_keeps_it(tmp_path: Path) -> None:
    plan = decoupled_plan(tmp_path)
    keyed = with_weights_key(plan, None, {PUBLIC_KEY_VARIABLE: KEY.public.hex()})
    assert PUBLIC_KEY_VARIABLE not in keyed.environment  # inherited from the caller
    assert all(process.env[KEY_VARIABLE] == "" for process in keyed.processes)
    assert not (tmp_path / weights_auth.KEY_FILE_NAME).exists()


def test_weights_key_argument_names_the_key_file_and_wins(tmp_path: Path) -> None:
    key_file = write_key(tmp_path / "shared.key", RAW.hex())
    plan = decoupled_plan(tmp_path / "run")
    keyed = with_weights_key(plan, str(key_file), {})
    assert_keys(keyed, str(key_file.resolve()), KEY)
    assert any(str(key_file.resolve()) in note for note in keyed.notes)
    assert not (tmp_path / "run" / weights_auth.KEY_FILE_NAME).exists()
    # The argument wins over a key in the caller's environment.
    assert_keys(with_weights_key(plan, str(key_file), {KEY_VARIABLE: OTHER_RAW.hex()}),
                str(key_file.resolve()), KEY)
    # The original plan is left as it was.
    assert PUBLIC_KEY_VARIABLE not in plan.environment
    assert all(KEY_FILE_VARIABLE not in process.env for process in plan.processes)


@pytest.mark.parametrize("name, text", [("missing.key", None), ("short.key", "00" * 4),
                                        ("garbage.key", "not a key")])
def test_a_bad_weights_key_argument_is_a_plan_error(tmp_path: Path, name: str,
                                                     text: str | None) -> None:
    path = tmp_path / name
    if text is not None:
        write_key(path, text)
    with pytest.raises(PlanError, match=f"weights_key:={path}"):
        with_weights_key(decoupled_plan(tmp_path), str(path), {})


def test_a_fresh_key_is_created_in_the_output_dir(tmp_path: Path) -> None:
    output_dir = tmp_path / "run"
    keyed = with_weights_key(decoupled_plan(output_dir), None, {})
    key_file = output_dir / weights_auth.KEY_FILE_NAME
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = weights_auth.load_key({KEY_FILE_VARIABLE: str(key_file)})
    assert_keys(keyed, str(key_file), key)
    assert (output_dir / weights_auth.PUBLIC_KEY_FILE_NAME).is_file()
    assert any("per-run key" in note and "weights_key:=" in note for note in keyed.notes)
    # A restarted run in the same directory keeps its key.
    text = key_file.read_text()
    with_weights_key(decoupled_plan(output_dir), None, {})
    assert key_file.read_text() == text


def test_without_output_dir_the_key_goes_to_a_private_temporary_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    keyed = with_weights_key(decoupled_plan(None), None, {})
    key_file = Path(next(process.env[KEY_FILE_VARIABLE] for process in keyed.processes
                         if signs(process)))
    assert key_file.parent.parent == tmp_path and key_file.parent.name.startswith("rl_ros2_run_")
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert_keys(keyed, str(key_file), weights_auth.load_key({KEY_FILE_VARIABLE: str(key_file)}))
