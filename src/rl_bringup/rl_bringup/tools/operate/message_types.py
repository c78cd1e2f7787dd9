"""ROS 2 message types by name: the generated Python class of ``pkg/msg/Type`` and the complete
``ros2msg`` definition rosbag2 stores in MCAP files.

Used by ``record`` (schemas and raw subscriptions), ``status`` (scalar topics) and ``doctor``
(rate measurement). No rclpy: the definitions are read from the installed ``.msg`` files.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: rosbag2's separator between the definitions of a ros2msg complete message definition.
DEFINITION_SEPARATOR = "=" * 80
#: Field types of the ROS 2 interface definition language that are not messages.
PRIMITIVE_TYPES = frozenset({
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
    "int32", "uint32", "int64", "uint64", "string", "wstring",
})
_TYPE_NAME = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)/(?:(msg)/)?([A-Za-z][A-Za-z0-9_]*)$")


class DefinitionError(LookupError):
    """A message definition (``.msg`` file) could not be found or read."""


def split_type_name(type_name: str, default_package: str | None = None) -> tuple[str, str]:
    """``pkg/msg/Type`` or ``pkg/Type`` (or ``Type`` inside ``default_package``) -> (pkg, Type).

    :raises DefinitionError: for names that are not message type names.
    """
    if "/" not in type_name and default_package is not None:
        return default_package, type_name
    match = _TYPE_NAME.match(type_name)
    if match is None:
        raise DefinitionError(f"{type_name!r} is not a message type name (pkg/msg/Type)")
    return match.group(1), match.group(3)


def interface_share_dirs() -> list[Path]:
    """``share`` folders that may hold interface definitions: ``AMENT_PREFIX_PATH`` entries
    (a sourced colcon or ROS install), then this interpreter's prefix (the virtualenv, where the
    PyPI wheels and the project's rl_interfaces install their ``share/<pkg>/msg/*.msg``)."""
    prefixes = [entry for entry in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
                if entry]
    prefixes += [sys.prefix, sys.base_prefix]
    folders: list[Path] = []
    for prefix in prefixes:
        folder = Path(prefix) / "share"
        if folder not in folders:
            folders.append(folder)
    return folders


def find_msg_file(package: str, name: str, share_dirs: Sequence[Path] | None = None) -> Path:
    """The installed ``share/<package>/msg/<name>.msg``.

    :raises DefinitionError: naming the folders searched.
    """
    folders = interface_share_dirs() if share_dirs is None else list(share_dirs)
    for folder in folders:
        candidate = folder / package / "msg" / f"{name}.msg"
        if candidate.is_file():
            return candidate
    searched = ", ".join(str(folder / package / "msg") for folder in folders)
    raise DefinitionError(f"no definition of {package}/msg/{name}: {name}.msg is not in {searched}")


def referenced_types(definition: str, package: str) -> list[str]:
    """Message types (``pkg/Type``) used by the fields of a ``.msg`` text, in field order.

    Constants (``int32 X=1``) only have primitive types; array suffixes (``[]``, ``[3]``,
    ``[<=3]``) and string bounds (``string<=8``) are stripped.
    """
    found: list[str] = []
    for line in definition.splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        field_type = text.split()[0]
        field_type = field_type.split("[", 1)[0].split("<=", 1)[0]
        if field_type in PRIMITIVE_TYPES:
            continue
        referenced_package, name = split_type_name(field_type, default_package=package)
        qualified = f"{referenced_package}/{name}"
        if qualified not in found:
            found.append(qualified)
    return found


def full_message_definition(type_name: str,
                            read_definition: Callable[[str, str], str] | None = None) -> str:
    """The complete ``ros2msg`` definition of ``type_name`` as rosbag2 stores it in MCAP.

    The type's own ``.msg`` text comes first; every type it uses, directly or through other
    types, follows once (depth-first, first use first), each after a line of 80 ``=`` and a
    ``MSG: pkg/msg/Type`` line (rosbag2's docs/message_definition_encoding.md).

    :param type_name: ``pkg/msg/Type``.
    :param read_definition: ``(package, Type) -> .msg text``; reads the installed ``.msg``
        files when ``None`` (tests pass a dictionary lookup).
    :raises DefinitionError: when a definition is missing.
    """
    if read_definition is None:
        def read_definition(package: str, name: str) -> str:
            return find_msg_file(package, name).read_text(encoding="utf-8")

    root_package, root_name = split_type_name(type_name)
    root_text = read_definition(root_package, root_name).rstrip()
    sections: list[str] = [root_text]
    seen = {f"{root_package}/{root_name}"}

    def visit(package: str, text: str) -> None:
        for dependency in referenced_types(text, package):
            if dependency in seen:
                continue
            seen.add(dependency)
            dependency_package, dependency_name = split_type_name(dependency)
            dependency_text = read_definition(dependency_package, dependency_name).rstrip()
            sections.append(f"{DEFINITION_SEPARATOR}\nMSG: {dependency_package}/msg/"
                            f"{dependency_name}\n{dependency_text}")
            visit(dependency_package, dependency_text)

    visit(root_package, root_text)
    return "\n".join(sections) + "\n"


def message_class(type_name: str) -> Any:
    """The generated Python class of ``pkg/msg/Type`` (imports ``pkg.msg``).

    :raises DefinitionError: when the package's Python module is not installed.
    """
    package, name = split_type_name(type_name)
    try:
        module = importlib.import_module(f"{package}.msg")
        return getattr(module, name)
    except (ImportError, AttributeError) as error:
        raise DefinitionError(f"cannot import {package}.msg.{name} ({error}); install the "
                              f"interface package into this environment") from None
