"""No import circle among rl_nodes' modules, counting imports inside functions and under
``TYPE_CHECKING`` (issue 42: component_manager <-> runtime was dodged by a function-level import,
and the boundary, teleop and endpoint modules imported what builds them for their types; each
takes a port, rl_nodes.ports, instead). Reads the sources only: well under a second."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "rl_nodes" / "rl_nodes"


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The rl_nodes modules ``path`` imports anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "rl_nodes":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("rl_nodes."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names
                      if alias.name.startswith("rl_nodes.")}
    return (found & modules) - {path.stem}


def cycle_in(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``edges`` (module -> modules it imports), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(edges[module]):
            if state.get(imported) == 1:
                return path[path.index(imported):] + [imported]
            if imported not in state and (found := visit(imported)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_rl_nodes_has_no_import_circle() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    edges = {path.stem: imports_of(path, modules) for path in PACKAGE.glob("*.py")}
    assert "runtime" in edges and "component_manager" in edges["container"]
    circle = cycle_in(edges)
    assert circle is None, " -> ".join(circle or [])


def test_a_circle_is_found() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set()}) is None
