"""The safety layer: joint limits, change per period (across episodes and holds), ramp-in,
position limits, workspace box over the command's standing time, holds, velocity envelope."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.robot import JointLimits, JointSample
from rl_core.robot.safety import (
    CHANGE_LIMITED,
    CLIPPED,
    ESTOP,
    POSITION_LIMIT,
    RAMPED,
    WORKSPACE,
    SafetyLayer,
)

pytestmark = pytest.mark.unit


def _limits(count: int = 2) -> JointLimits:
    return JointLimits(tuple(f"j{i}" for i in range(count)), np.full(count, -1.0),
                       np.full(count, 1.0), np.full(count, 2.0), np.full(count, 5.0))


def _state(position: list[float], velocity: list[float] | None = None) -> JointSample:
    position_array = np.asarray(position, dtype=np.float64)
    velocity_array = np.zeros_like(position_array) if velocity is None else np.asarray(velocity)
    return JointSample(0.0, position_array, velocity_array, np.zeros_like(position_array))


def _layer(interface: str, max_change: float = np.inf, **kwargs: object) -> SafetyLayer:
    return SafetyLayer(interface, _limits(), np.arange(2), 0.1, np.full(2, max_change),
                       **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("interface, bound", [("velocity", 2.0), ("effort", 5.0),
                                              ("position", 1.0)])
def test_commands_are_clipped_to_the_interface_limit_and_counted(interface: str,
                                                                 bound: float) -> None:
    layer = _layer(interface)
    command = layer.filter(np.array([10.0, -10.0]), _state([0.0, 0.0]))
    np.testing.assert_allclose(command, [bound, -bound] if interface != "position" else [1, -1])
    assert layer.interventions[CLIPPED] == 1
    layer.filter(np.array([0.1, 0.1]), _state([0.0, 0.0]))
    assert layer.interventions[CLIPPED] == 1  # commands inside the limits pass untouched


def test_change_per_period_is_limited_from_the_last_command() -> None:
    layer = _layer("velocity", max_change=0.5)
    state = _state([0.0, 0.0])
    np.testing.assert_allclose(layer.filter(np.array([0.2, 0.0]), state), [0.2, 0.0])
    np.testing.assert_allclose(layer.filter(np.array([2.0, -2.0]), state), [0.7, -0.5])
    assert layer.interventions[CHANGE_LIMITED] == 1
    # Nothing forgets the last command (an episode start neither): the next is limited too.
    np.testing.assert_allclose(layer.filter(np.array([-2.0, 0.0]), state), [0.2, 0.0])


def test_the_change_limit_applies_before_the_range_so_no_command_leaves_it() -> None:
    # A hold outside the limits (a position beyond them) must not carry later commands out.
    layer = _layer("position", max_change=0.1)
    hold = layer.hold(_state([1.5, -1.5]))
    np.testing.assert_allclose(hold, [1.0, -1.0])  # the hold itself is inside the limits
    command = layer.filter(np.array([1.0, -1.0]), _state([1.5, -1.5]))
    assert np.all(command <= 1.0) and np.all(command >= -1.0)


def test_commands_ramp_in_from_a_hold() -> None:
    layer = _layer("velocity", ramp_periods=4)
    state = _state([0.0, 0.0])
    layer.hold(state)
    ramp = [layer.filter(np.array([2.0, -2.0]), state)[0] for _ in range(5)]
    np.testing.assert_allclose(ramp, [0.5, 1.0, 1.5, 2.0, 2.0])
    assert layer.interventions[RAMPED] == 3


def test_a_joint_beyond_the_velocity_envelope_is_reported() -> None:
    layer = _layer("velocity", velocity_envelope=1.5)  # limit 2 rad/s: envelope 3 rad/s
    assert not layer.beyond_envelope(_state([0.0, 0.0], [2.9, -2.9]))
    assert layer.beyond_envelope(_state([0.0, 0.0], [0.0, -3.1]))
    assert not _layer("velocity").beyond_envelope(_state([0.0, 0.0], [0.0, -30.0]))


def test_a_velocity_pushing_past_a_position_limit_is_stopped_but_moving_back_is_not() -> None:
    layer = _layer("velocity")
    state = _state([0.95, -0.95])
    np.testing.assert_allclose(layer.filter(np.array([1.0, 1.0]), state), [0.0, 1.0])
    assert layer.interventions[POSITION_LIMIT] == 1
    np.testing.assert_allclose(layer.filter(np.array([-1.0, 1.0]), state), [-1.0, 1.0])


def test_hold_keeps_the_position_or_sends_zero() -> None:
    state = _state([0.3, -0.2], [1.0, 1.0])
    np.testing.assert_allclose(_layer("position").hold(state), [0.3, -0.2])
    np.testing.assert_allclose(_layer("velocity").hold(state), [0.0, 0.0])
    np.testing.assert_allclose(_layer("effort").hold(state), [0.0, 0.0])


def test_a_command_leaving_the_workspace_box_holds_the_robot() -> None:
    # A planar "end effector" at the joint positions themselves, in a box of +-0.5.
    def end_effector(state: JointSample) -> np.ndarray:
        return np.array([state.position[0], state.position[1], 0.0])

    layer = _layer("velocity", end_effector=end_effector,
                   workspace=((-0.5, -0.5, -1.0), (0.5, 0.5, 1.0)))
    inside = _state([0.45, 0.0])
    np.testing.assert_allclose(layer.filter(np.array([1.0, 0.0]), inside), [0.0, 0.0])
    assert layer.interventions[WORKSPACE] == 1
    # Outside already: moving back in is allowed, further out is not.
    outside = _state([0.7, 0.0])
    np.testing.assert_allclose(layer.filter(np.array([-1.0, 0.0]), outside), [-1.0, 0.0])
    np.testing.assert_allclose(layer.filter(np.array([1.0, 0.0]), outside), [0.0, 0.0])


def test_the_workspace_is_checked_over_the_whole_standing_time() -> None:
    def end_effector(state: JointSample) -> np.ndarray:
        return np.array([state.position[0], state.position[1], 0.0])

    box = ((-0.5, -0.5, -1.0), (0.5, 0.5, 1.0))
    # 0.3 rad/s from 0.4: one period (0.1 s) stays inside, the 0.5 s deadline does not.
    one_period = _layer("velocity", end_effector=end_effector, workspace=box)
    np.testing.assert_allclose(one_period.filter(np.array([0.3, 0.0]), _state([0.4, 0.0])),
                               [0.3, 0.0])
    deadline = _layer("velocity", end_effector=end_effector, workspace=box, standing_time=0.5)
    np.testing.assert_allclose(deadline.filter(np.array([0.3, 0.0]), _state([0.4, 0.0])),
                               [0.0, 0.0])
    assert deadline.interventions[WORKSPACE] == 1


def test_counted_holds_and_bad_commands() -> None:
    layer = _layer("velocity")
    layer.count(ESTOP)
    assert layer.interventions[ESTOP] == 1
    with pytest.raises(ValueError, match="finite"):
        layer.filter(np.array([np.nan, 0.0]), _state([0.0, 0.0]))
    with pytest.raises(ValueError, match="2 command values"):
        layer.filter(np.array([0.0]), _state([0.0, 0.0]))
    with pytest.raises(ValueError, match="interface"):
        SafetyLayer("torque", _limits(), np.arange(2), 0.1, np.ones(2))
