"""No import circle among rl_nodes' modules, counting imports inside functions and under
``TYPE_CHECKING`` (issue 42: component_manager <-> runtime was dodged by a function-level import,
and the boundary, teleop and endpoint modules imported what builds them for their types; each
takes a port, rl_nodes.ports, instead). Reads the sources only: well under a second."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.package_imports import imported_names, owning_module, package_modules

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "rl_nodes" / "rl_nodes"


MODULES = package_modules(PACKAGE)


def imports_of(module: str) -> set[str]:
    """The rl_nodes modules (by file name) that ``module`` imports anywhere in it."""
    found = {owning_module(name, MODULES) for name, _ in imported_names(MODULES[module], module)
             if name.startswith("rl_nodes.")}
    return {name.split(".")[1] for name in found if name in MODULES} - {module.split(".")[1]}


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
    edges = {module.split(".")[1]: imports_of(module) for module in MODULES if "." in module}
    assert "runtime" in edges and "component_manager" in edges["container"]
    circle = cycle_in(edges)
    assert circle is None, " -> ".join(circle or [])


def test_a_circle_is_found() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set()}) is None
