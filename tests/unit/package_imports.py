"""What a package's modules import, read from their sources (nothing is imported): the layer
tests of rl_core and rl_bringup and the import-circle test of rl_nodes share it. Imports at a
module's top, inside functions and under ``TYPE_CHECKING`` all count; relative imports are
resolved."""

from __future__ import annotations

import ast
from collections.abc import Callable, Container, Sequence
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
    """The module of ``modules`` that ``name`` is or holds (``rl_core.wire.messages.Batch``:
    ``rl_core.wire.messages``); what is left of ``name`` when none is."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def entries(package: Path) -> set[str]:
    """The entries of the package in folder ``package``: its packages and modules by name."""
    return {path.stem for path in package.iterdir()
            if path.name not in ("__init__.py", "__pycache__")}


def upward_imports(modules: dict[str, Path], imports: Callable[[str], frozenset[tuple[str, int]]],
                   layer: Callable[[str], str | None], layers: Sequence[str],
                   allowed: Container[tuple[str, str]] = ()) -> list[str]:
    """``file:line (layer) imports module (layer)`` for every import from a higher layer, but
    those ``allowed`` as ``(importing module, imported module)``."""
    upward = []
    for module, path in modules.items():
        own = layer(module)
        if own is None:
            continue
        for imported, line in sorted(imports(module)):
            other = layer(imported)
            if (other is not None and layers.index(other) > layers.index(own)
                    and (module, imported) not in allowed):
                root = next(folder for folder in path.parents
                            if folder.name == module.split(".")[0]).parent
                upward.append(f"{path.relative_to(root)}:{line} ({own}) imports {imported} "
                              f"({other})")
    return upward
