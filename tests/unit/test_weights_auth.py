"""The per-run weights key and HMAC-SHA256 signatures (rl_core.weights_auth), and how
``rl-bringup`` hands one key to every process of a run (rl_bringup.run_key). No rclpy."""

from __future__ import annotations

import hmac
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rl_bringup.plan import Plan, PlanError, make_plan
from rl_bringup.run_key import with_weights_key
from rl_core import weights_auth
from rl_core.weights_auth import KEY_FILE_VARIABLE, KEY_VARIABLE, WeightsKeyError

pytestmark = pytest.mark.unit

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
#: The signed fields of one publication: epoch, version, update_step, architecture, data.
FIELDS: dict[str, Any] = {"epoch": 1_700_000_000_000_000_000, "version": 7, "update_step": 350,
                          "architecture": '{"hidden_sizes": [64, 64], "obs_dim": 4}',
                          "data": b"safetensors bytes"}


def write_key(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- loading the key ------------------------------------------------------------------------------

def test_no_key_configured_means_none() -> None:
    assert weights_auth.load_key({}) is None
    assert weights_auth.load_key({KEY_VARIABLE: "", KEY_FILE_VARIABLE: ""}) is None


def test_key_variable_wins_over_key_file(tmp_path: Path) -> None:
    key_file = write_key(tmp_path / "weights.key", OTHER_KEY.hex() + "\n")
    assert weights_auth.load_key({KEY_VARIABLE: f"  {KEY.hex()}\n"}) == KEY
    assert weights_auth.load_key({KEY_FILE_VARIABLE: str(key_file)}) == OTHER_KEY
    assert weights_auth.load_key({KEY_VARIABLE: KEY.hex(), KEY_FILE_VARIABLE: str(key_file)}) == KEY


def test_load_key_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_FILE_VARIABLE, raising=False)
    monkeypatch.setenv(KEY_VARIABLE, KEY.hex())
    assert weights_auth.load_key() == KEY


@pytest.mark.parametrize("text, reason", [
    ("not hex at all", "hex digits"),
    ("abc", "hex digits"),  # odd number of digits
    ("00" * (weights_auth.MIN_KEY_BYTES - 1), f"at least {weights_auth.MIN_KEY_BYTES} bytes"),
])
def test_malformed_keys_are_refused_with_the_reason(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(WeightsKeyError, match=reason) as raised:
        weights_auth.load_key({KEY_VARIABLE: text})
    assert KEY_VARIABLE in str(raised.value)
    key_file = write_key(tmp_path / "weights.key", text)
    with pytest.raises(WeightsKeyError, match=reason) as raised:
        weights_auth.load_key({KEY_FILE_VARIABLE: str(key_file)})
    assert str(key_file) in str(raised.value)


def test_shortest_allowed_key_is_accepted() -> None:
    key = b"\x01" * weights_auth.MIN_KEY_BYTES
    assert weights_auth.load_key({KEY_VARIABLE: key.hex()}) == key


@pytest.mark.parametrize("name", ["missing.key", "a_directory"])
def test_unreadable_key_file_is_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "a_directory").mkdir()
    path = tmp_path / name
    with pytest.raises(WeightsKeyError, match="cannot be read") as raised:
        weights_auth.load_key({KEY_FILE_VARIABLE: str(path)})
    assert str(path) in str(raised.value)


def test_key_error_is_a_value_error() -> None:
    assert issubclass(WeightsKeyError, ValueError)


# --- creating a key file --------------------------------------------------------------------------

def test_create_key_file_writes_a_private_random_key(tmp_path: Path) -> None:
    path = weights_auth.create_key_file(tmp_path / "run" / "nested")
    assert path == tmp_path / "run" / "nested" / weights_auth.KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = weights_auth.load_key({KEY_FILE_VARIABLE: str(path)})
    assert key is not None and len(key) == weights_auth.KEY_BYTES
    other = weights_auth.create_key_file(tmp_path / "another_run")
    assert weights_auth.load_key({KEY_FILE_VARIABLE: str(other)}) != key


def test_create_key_file_keeps_an_existing_key(tmp_path: Path) -> None:
    first = weights_auth.create_key_file(tmp_path)
    text = first.read_text()
    second = weights_auth.create_key_file(tmp_path)
    assert second == first and second.read_text() == text


# --- signing and verifying ------------------------------------------------------------------------

def test_signature_is_hex_hmac_sha256_and_deterministic() -> None:
    signature = weights_auth.signature(KEY, **FIELDS)
    assert len(signature) == 64 and int(signature, 16) >= 0
    assert weights_auth.signature(KEY, **FIELDS) == signature
    assert weights_auth.verify(KEY, signature, **FIELDS)


@pytest.mark.parametrize("name, value", [
    ("epoch", FIELDS["epoch"] + 1),
    ("version", FIELDS["version"] + 1),
    ("update_step", FIELDS["update_step"] - 1),
    ("architecture", '{"hidden_sizes": [64, 65], "obs_dim": 4}'),
    ("data", b"safetensors bytez"),
    ("data", b""),
])
def test_changing_any_signed_field_changes_the_signature(name: str, value: Any) -> None:
    signature = weights_auth.signature(KEY, **FIELDS)
    changed = {**FIELDS, name: value}
    assert weights_auth.signature(KEY, **changed) != signature
    assert not weights_auth.verify(KEY, signature, **changed)


def test_architecture_and_data_boundary_is_part_of_the_signature() -> None:
    # Moving bytes between architecture and data must not keep the signature (length-prefixed).
    moved = {**FIELDS, "architecture": FIELDS["architecture"] + "s",
             "data": FIELDS["data"][1:]}
    assert weights_auth.signature(KEY, **moved) != weights_auth.signature(KEY, **FIELDS)


def test_verify_fails_with_another_key_or_a_bad_signature() -> None:
    signature = weights_auth.signature(KEY, **FIELDS)
    assert not weights_auth.verify(OTHER_KEY, signature, **FIELDS)
    assert not weights_auth.verify(KEY, "", **FIELDS)
    assert not weights_auth.verify(KEY, "0" * 64, **FIELDS)
    assert not weights_auth.verify(KEY, signature.upper(), **FIELDS)


def test_verify_compares_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []
    original = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        calls.append((a, b))
        return original(a, b)

    monkeypatch.setattr(weights_auth.hmac, "compare_digest", spy)
    signature = weights_auth.signature(KEY, **FIELDS)
    assert weights_auth.verify(KEY, signature, **FIELDS)
    assert not weights_auth.verify(OTHER_KEY, signature, **FIELDS)
    assert len(calls) == 2 and all(given == signature for _, given in calls)


# --- one key for every process of a run (rl_bringup.run_key) -------------------------------------

def decoupled_plan(output_dir: Path | None) -> Plan:
    return make_plan("decoupled", output_dir=output_dir, domain_id=7, environ={})


def assert_every_process_has(plan: Plan, key_file: Path) -> None:
    assert plan.environment[KEY_FILE_VARIABLE] == str(key_file)
    assert plan.processes
    for process in plan.processes:
        assert process.env[KEY_FILE_VARIABLE] == str(key_file), process.name


def test_a_key_in_the_callers_environment_is_inherited_unchanged(tmp_path: Path) -> None:
    plan = decoupled_plan(tmp_path)
    key_file = write_key(tmp_path / "shared.key", KEY.hex())
    for environ in ({KEY_VARIABLE: KEY.hex()}, {KEY_FILE_VARIABLE: str(key_file)}):
        assert with_weights_key(plan, None, environ) is plan
    assert not (tmp_path / weights_auth.KEY_FILE_NAME).exists()


def test_weights_key_argument_names_the_key_file(tmp_path: Path) -> None:
    key_file = write_key(tmp_path / "shared.key", KEY.hex())
    plan = decoupled_plan(tmp_path / "run")
    keyed = with_weights_key(plan, str(key_file), {})
    assert_every_process_has(keyed, key_file.resolve())
    assert any(str(key_file.resolve()) in note for note in keyed.notes)
    assert not (tmp_path / "run" / weights_auth.KEY_FILE_NAME).exists()
    # The argument wins over a key in the caller's environment.
    assert with_weights_key(plan, str(key_file), {KEY_VARIABLE: OTHER_KEY.hex()}) is not plan
    # The original plan is left as it was.
    assert KEY_FILE_VARIABLE not in plan.environment
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
    assert weights_auth.load_key({KEY_FILE_VARIABLE: str(key_file)}) is not None
    assert_every_process_has(keyed, key_file)
    assert any("per-run key" in note and "weights_key:=" in note for note in keyed.notes)
    # A restarted run in the same directory keeps its key.
    text = key_file.read_text()
    with_weights_key(decoupled_plan(output_dir), None, {})
    assert key_file.read_text() == text


def test_without_output_dir_the_key_goes_to_a_private_temporary_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    keyed = with_weights_key(decoupled_plan(None), None, {})
    key_file = Path(keyed.environment[KEY_FILE_VARIABLE])
    assert key_file.parent.parent == tmp_path and key_file.parent.name.startswith("rl_ros2_run_")
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert_every_process_has(keyed, key_file)
