"""rl_core's packages in one layer order: a module imports only from its own layer and the ones
below it, never from a layer above (not even inside a function), as the ``rl-bringup`` tools never
import the CLI (tests/unit/test_cli_imports.py).

Lowest first: the names everything shares; the run's configuration; what crosses the wire; who
may say what; the algorithms and their networks; a run's files; the simulated environments; the
robot boundary; replay; what a run shows; the learner's side; the robot's acting side. Imports at
a module's top, inside functions and under ``TYPE_CHECKING`` all count. Cost: it parses rl_core's
modules once, about 0.3 s.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import rl_core
from tests.unit.package_imports import (
    entries,
    imported_names,
    owning_module,
    package_modules,
    upward_imports,
)

pytestmark = pytest.mark.unit

PACKAGE = Path(rl_core.__file__).parent
#: rl_core's packages (and the config module), lowest layer first.
LAYERS = ("names", "config", "wire", "security", "algorithms", "runs", "envs", "robot", "replay",
          "monitoring", "learning", "acting")
#: Imports that run against the order, kept on purpose: (importing module, imported module) -> why.
EXCEPTIONS = {
    ("rl_core.monitoring.progress", "rl_core.learning.learner"):
        "type annotations only (under TYPE_CHECKING): the progress line formats a Learner's "
        "figures, which the learning side hands it",
    ("rl_core.monitoring.progress", "rl_core.learning.periodic_evaluation"):
        "type annotations only (under TYPE_CHECKING): the summary reports an Evaluation",
}


MODULES = package_modules(PACKAGE)


def layer(module: str) -> str | None:
    """The layer of an rl_core module (its package under rl_core); None for rl_core itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


@cache
def rl_core_imports(module: str) -> frozenset[tuple[str, int]]:
    """``(imported rl_core module, line)`` of every import in ``module``'s source."""
    return frozenset((owning_module(name, MODULES), line)
                     for name, line in imported_names(MODULES[module], module)
                     if name.split(".")[0] == "rl_core")


def test_every_entry_of_rl_core_has_a_layer() -> None:
    found = entries(PACKAGE)
    assert found == set(LAYERS), (
        f"place each package of rl_core in LAYERS (tests/unit/test_layers.py): new "
        f"{sorted(found - set(LAYERS))}, gone {sorted(set(LAYERS) - found)}")


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = upward_imports(MODULES, rl_core_imports, layer, LAYERS, EXCEPTIONS)
    assert not upward, ("imports from a higher layer of rl_core (order, lowest first: "
                        f"{' < '.join(LAYERS)}); move what is imported down, or the importer "
                        "up:\n" + "\n".join(upward))


def test_every_exception_is_still_needed() -> None:
    unused = [pair for pair in EXCEPTIONS
              if pair[1] not in {imported for imported, _ in rl_core_imports(pair[0])}]
    assert not unused, f"exceptions no import needs any more (drop them): {unused}"


def test_the_scan_sees_imports_inside_functions_and_type_checking() -> None:
    # Guards the scanner: robot.tasks imports rl_core.envs only inside space_shapes, and
    # progress imports the learner under TYPE_CHECKING.
    assert "rl_core.envs" in {name for name, _ in rl_core_imports("rl_core.robot.tasks")}
    assert "rl_core.learning.learner" in {
        name for name, _ in rl_core_imports("rl_core.monitoring.progress")}
