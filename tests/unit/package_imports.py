"""What a package's modules import, read from their sources (nothing is imported): the layer
tests of rl_core and rl_bringup and the import-circle test of rl_nodes share it. Imports at a
module's top, inside functions and under ``TYPE_CHECKING`` all count; relative imports are
resolved."""

from __future__ import annotations

import ast
from pathlib import Path


def package_modules(package: Path) -> dict[str, Path]:
    """Every module of the package in folder ``package`` by dotted name (a package's
    ``__init__.py`` under the package's own name)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" not in path.parts:
            parts = path.relative_to(package.parent).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(path: Path, module: str) -> frozenset[tuple[str, int]]:
    """``(name, line)`` of every import in the source of ``module`` at ``path``: ``import a.b``
    gives ``a.b``; ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module of ``a`` or
    a name in it: :func:`owning_module` tells)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add((base, node.lineno))
            found.update((f"{base}.{alias.name}", node.lineno) for alias in node.names)
    return frozenset(found)


def owning_module(name: str, modules: dict[str, Path]) -> str:
    """The module of ``modules`` that ``name`` is or holds (``rl_core.wire.transport.Batch``:
    ``rl_core.wire.transport``); what is left of ``name`` when none is."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name
