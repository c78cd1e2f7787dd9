"""The ``rl-bringup`` tools import without the CLI: no tool module imports ``rl_bringup.cli``
(not even inside a function), the shared leaf imports no tool, and each tool module imports on
its own in a fresh interpreter without pulling in the CLI, rclpy or torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import rl_bringup.tools

pytestmark = pytest.mark.unit

TOOLS_DIR = Path(rl_bringup.tools.__file__).parent
LEAF = "rl_bringup.tools.subcommand"
IMPORT_TIMEOUT_S = 60.0


def module_name(path: Path) -> str:
    parts = path.relative_to(TOOLS_DIR.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


TOOL_MODULES = sorted(module_name(path) for path in TOOLS_DIR.rglob("*.py")
                      if path.name != "__main__.py")


def imported_modules(module: str) -> set[str]:
    """Every module ``module``'s source imports, at its top or inside functions."""
    path = TOOLS_DIR.parent.parent.joinpath(*module.split("."))
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("module", TOOL_MODULES)
def test_no_tool_imports_the_cli(module: str) -> None:
    assert "rl_bringup.cli" not in imported_modules(module)


def test_the_leaf_imports_no_tool() -> None:
    tools = {name for name in imported_modules(LEAF) if name.startswith("rl_bringup.tools")}
    assert tools == set()


def test_each_tool_module_imports_alone_without_the_cli_rclpy_or_torch() -> None:
    check = ("import importlib, sys; importlib.import_module(sys.argv[1]); "
             "print(sorted({'rl_bringup.cli', 'rclpy', 'torch'} & set(sys.modules)))")
    # One fresh interpreter per module, all started at once (each takes about a second).
    children = {module: subprocess.Popen([sys.executable, "-c", check, module], text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for module in TOOL_MODULES}
    results = {}
    try:
        for module, child in children.items():
            out, err = child.communicate(timeout=IMPORT_TIMEOUT_S)
            results[module] = (child.returncode, out.strip(), err.strip()[-500:])
    finally:
        for child in children.values():
            child.kill()  # by PID, only the interpreters started above; no-op once reaped
            child.wait()
    assert results == {module: (0, "[]", "") for module in TOOL_MODULES}
