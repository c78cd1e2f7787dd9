"""Declare a node's parameters from rl_core's config dataclasses, validated in one place.

Each dataclass field carries its description and range (``rl_core.config.param``), so the ROS
parameter descriptors (shown by ``ros2 param describe`` and as sliders in rqt_reconfigure) and the
bare loop's configuration come from one source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.exceptions import InvalidParameterTypeException
from rclpy.node import Node
from rclpy.parameter import Parameter

from rl_core.config import MOVED_PARAMETERS, RENAMED_PARAMETERS, ConfigError, deprecation_notice

C = TypeVar("C")


def _descriptor(field: dataclasses.Field[Any], default: Any) -> ParameterDescriptor:
    meta = field.metadata
    descriptor = ParameterDescriptor(description=meta.get("description", ""),
                                     read_only=bool(meta.get("read_only", False)))
    low, high, step = meta.get("low"), meta.get("high"), meta.get("step")
    if low is not None and high is not None and not isinstance(default, bool):
        if isinstance(default, int):
            descriptor.integer_range = [IntegerRange(from_value=int(low), to_value=int(high),
                                                     step=int(step or 1))]
        elif isinstance(default, float):
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=float(low), to_value=float(high), step=float(step or 0.0))]
    return descriptor


def _default(field: dataclasses.Field[Any]) -> Any:
    value = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    return list(value) if isinstance(value, tuple) else value


def declare_config(node: Node, config_class: type[C]) -> C:
    """Declare every field of ``config_class`` as a parameter of ``node`` and build the config.

    :raises ConfigError: when the values given (params file, ``-p``) are invalid; the message
        names the parameter and the valid range.
    """
    values = {}
    for field in dataclasses.fields(config_class):
        default = _default(field)
        values[field.name] = _declare(node, field.name, default, _descriptor(field, default))
        old = field.metadata.get("renamed_from")
        if old:  # the former name works for a release, with a warning where it is set
            descriptor = _descriptor(field, default)
            descriptor.description = f"Deprecated: renamed to {field.name}. " + descriptor.description
            value = _declare(node, old, default, descriptor)
            if value != default:
                node.get_logger().warn(deprecation_notice(old))
                if values[field.name] == default:
                    values[field.name] = value
    return config_class(**values)


def declare_moved(node: Node, name: str) -> None:
    """Declare ``name``, a parameter that moved from this node's kind to another
    (:data:`rl_core.config.MOVED_PARAMETERS`), so that a value given to this node is seen and
    said to be unused. The node cannot tell a shared ``/**`` value (meant for the other node)
    from one in its own block; rl-bringup and the launch files refuse the latter before
    anything starts (rl_core.config)."""
    kind = node.get_name()
    owner = MOVED_PARAMETERS[(kind, name)]
    descriptor = ParameterDescriptor(
        description=f"Moved: the {owner}'s parameter; a value here is not used (0 = not set).",
        read_only=True)
    if _declare(node, name, 0, descriptor):
        node.get_logger().warn(f"{name} is the {owner}'s parameter: this {kind} does not use "
                               f"it (the run's value is the {owner}'s)")


def _declare(node: Node, name: str, default: Any, descriptor: ParameterDescriptor) -> Any:
    if node.has_parameter(name):  # a configure after one that failed (rl_nodes.lifecycle)
        return node.get_parameter(name).value
    try:
        return node.declare_parameter(name, default, descriptor).value
    except InvalidParameterTypeException as error:
        raise ConfigError(f"parameter {name!r} of node {node.get_name()!r} must be of type "
                          f"{type(default).__name__} (write e.g. {default!r}): {error}") from error


def watch_config(node: Node, get_config: Callable[[], Any], apply: Callable[[Any], None]) -> None:
    """Validate parameter changes against the config dataclass and apply the accepted ones live.

    :param get_config: returns the node's current config (one dataclass instance).
    :param apply: receives the new, validated config when a change is accepted.
    """

    def on_set(parameters: list[Parameter]) -> SetParametersResult:
        current = get_config()
        names = {f.name for f in dataclasses.fields(current)}
        changes = {}
        for parameter in parameters:
            name = RENAMED_PARAMETERS.get(parameter.name, parameter.name)
            if name not in names:
                continue
            value = parameter.value
            if isinstance(getattr(current, name), float) and isinstance(value, int):
                value = float(value)
            changes[name] = value
        if not changes:
            return SetParametersResult(successful=True)
        try:
            updated = dataclasses.replace(current, **changes)
        except (ConfigError, TypeError) as error:
            return SetParametersResult(successful=False, reason=str(error))
        apply(updated)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(on_set)
