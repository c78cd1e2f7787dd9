"""Interventions (rl_core.acting.teleop): Joy mappings with a deadman button, plain commands, timeouts
and the intervention rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rl_core.acting.teleop import Intervention, JoyMapping
from rl_core.config import ConfigError

pytestmark = pytest.mark.unit

MAPPING = """
axes: [1, 0, -1]
scale: [1.0, -0.5, 1.0]
deadman_button: 2
deadzone: 0.1
"""


def mapping_file(tmp_path: Path, text: str = MAPPING) -> Path:
    path = tmp_path / "joy.yaml"
    path.write_text(text)
    return path


def test_axes_drive_actions_only_while_the_deadman_button_is_held(tmp_path: Path) -> None:
    mapping = JoyMapping.from_file(mapping_file(tmp_path), action_size=3)
    held, released = [0, 0, 1], [0, 0, 0]
    np.testing.assert_allclose(mapping.action([0.6, -0.8, 0.3], held), [-0.8, -0.3, 0.0])
    np.testing.assert_allclose(mapping.action([0.05, 3.0, 0.0], held), [1.0, 0.0, 0.0])  # clip, deadzone
    assert mapping.action([0.6, -0.8, 0.3], released) is None
    assert mapping.action([0.6, -0.8], [1]) is None  # a device without the button
    with pytest.raises(ValueError, match="needs 2 finite axes"):
        mapping.action([0.5], held)
    with pytest.raises(ValueError, match="finite"):
        mapping.action([0.5, float("nan")], held)
    default = JoyMapping.from_file(mapping_file(tmp_path, "axes: [0, 1]\ndeadman_button: 0\n"), 2)
    assert default.scale == (1.0, 1.0) and default.deadzone == 0.05


@pytest.mark.parametrize(("text", "size", "match"), [
    ("axes: [0, 1]\n", 2, "needs 'axes'.*'deadman_button'"),
    ("axes: [0, 1]\ndeadman_button: 0\n", 3, "maps 2 action dimensions, the task has 3"),
    ("axes: [0, 1]\ndeadman_button: 0\ntrigger: 5\n", 2, r"unknown keys \['trigger'\]"),
    ("axes: [0, x]\ndeadman_button: 0\n", 2, "invalid literal"),
    ("axes: [0, 1]\nscale: [1]\ndeadman_button: 0\n", 2, "scale has 1 values for 2 axes"),
    ("axes: [0, -2]\ndeadman_button: 0\n", 2, "axes must be Joy axis indices or -1"),
    ("axes: [0\n", 2, "is not YAML"),
])
def test_bad_mapping_files_say_what_to_fix(tmp_path: Path, text: str, size: int,
                                           match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        JoyMapping.from_file(mapping_file(tmp_path, text), size)


def test_a_missing_mapping_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="joy.yaml'.*No such file"):
        JoyMapping.from_file(tmp_path / "joy.yaml", 2)


def test_the_newest_input_drives_until_it_times_out_or_is_let_go(tmp_path: Path) -> None:
    intervention = Intervention(3, timeout_s=0.5, mapping=JoyMapping.from_file(
        mapping_file(tmp_path), 3))
    policy = np.zeros((2, 3), np.float32)
    actions, flags = intervention.apply(policy, now=0.0)
    assert flags.tolist() == [False, False] and actions is policy
    intervention.on_joy([0.5, 0.5, 0.0], [0, 0, 1], now=1.0)
    actions, flags = intervention.apply(policy, now=1.2)
    assert flags.tolist() == [True, True] and actions.dtype == np.float32
    np.testing.assert_allclose(actions, [[0.5, -0.25, 0.0]] * 2)
    assert intervention.command(now=1.6) is None  # no reading for longer than the timeout
    intervention.on_joy([0.5, 0.5, 0.0], [0, 0, 1], now=2.0)
    intervention.on_joy([0.5, 0.5, 0.0], [0, 0, 0], now=2.1)  # the deadman released
    assert intervention.command(now=2.2) is None
    intervention.on_command([2.0, -0.5, 0.25], now=3.0)  # a program's command, clipped
    np.testing.assert_allclose(intervention.command(now=3.1), [1.0, -0.5, 0.25])
    assert intervention.rate == pytest.approx(2 / 4)  # 2 of 4 env steps driven by the operator
    with pytest.raises(ValueError, match="needs 3 finite values"):
        intervention.on_command([0.1, 0.2], now=4.0)
    with pytest.raises(ValueError, match="teleop mapping"):
        Intervention(3, 0.5).on_joy([0.0], [1], now=0.0)


def test_a_gamepad_drives_a_gripper_on_two_buttons(tmp_path: Path) -> None:
    """An arm and a gripper (an action row ending with close 0, stay 1, open 2): the axes drive
    the arm, the buttons the gripper, a program's command carries the choice."""
    text = "axes: [0, 1]\ndeadman_button: 0\ngripper_buttons: [1, 2]\n"
    mapping = JoyMapping.from_file(mapping_file(tmp_path, text), action_size=3, choices=3)
    axes = [0.5, -0.5]
    np.testing.assert_allclose(mapping.action(axes, [1, 1, 0]), [0.5, -0.5, 0])  # close
    np.testing.assert_allclose(mapping.action(axes, [1, 0, 1]), [0.5, -0.5, 2])  # open
    np.testing.assert_allclose(mapping.action(axes, [1, 0, 0]), [0.5, -0.5, 1])  # stay
    assert mapping.action(axes, [0, 1, 0]) is None  # the deadman still rules
    with pytest.raises(ConfigError, match="the task has a gripper: give gripper_buttons"):
        JoyMapping.from_file(mapping_file(tmp_path, "axes: [0, 1]\ndeadman_button: 0\n"), 3, 3)
    with pytest.raises(ConfigError, match="gripper_buttons, but the task has no gripper"):
        JoyMapping.from_file(mapping_file(tmp_path, text), 2)
    with pytest.raises(ConfigError, match="discrete part has 4 choices: unset teleop"):
        JoyMapping.from_file(mapping_file(tmp_path, text), 3, 4)
    intervention = Intervention(3, 0.5, mapping, choices=3)
    intervention.on_command([2.0, -0.5, 2.0], now=0.0)  # the arm clipped, the choice kept
    np.testing.assert_allclose(intervention.command(now=0.1), [1.0, -0.5, 2.0])
    with pytest.raises(ValueError, match="last value is a choice's index in \\[0, 3\\)"):
        intervention.on_command([0.0, 0.0, 1.5], now=0.2)


def test_a_gamepad_may_drive_an_arm_and_a_gripper_but_no_lone_discrete_action(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """(CartPole-v1's refusal: tests/unit/test_task_spaces.py.)"""
    from rl_bringup.plan.deployment import make_plan

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "system" /
                                    "user_packages"))
    plan = make_plan("colocated", 1, domain_id=7, environ={}, extra_parameters={
        "env_id": "user_env_module:PointGrip-v0", "teleop": True})
    assert plan.processes
