"""The safety layer: joint limits, change per period, position limits, workspace box, holds."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.robot import JointLimits, JointSample
from rl_core.robot.safety import CHANGE_LIMITED, CLIPPED, ESTOP, POSITION_LIMIT, WORKSPACE, SafetyLayer

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
    layer.reset()  # a new episode starts from a held robot: no previous command
    np.testing.assert_allclose(layer.filter(np.array([2.0, 0.0]), state), [2.0, 0.0])


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
