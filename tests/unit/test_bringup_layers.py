"""rl_bringup's packages in one layer order, as tests/unit/test_layers.py holds rl_core's: a module
imports only from its own layer and the ones below it, never from a layer above (not even inside a
function or under ``TYPE_CHECKING``).

Lowest first: ``plan`` (what a deployment is), ``run`` (running it), ``tools`` (the other
subcommands), and the two front ends, ``cli`` and ``launch_helpers``. Besides the order: ``plan``
stays pure — no rclpy or launch, not even through what it imports, and nothing that starts a
process (subprocess, multiprocessing, ``os.exec*``, ``os.spawn*``, ``os.system``, ``os.fork`` ...);
and the tool groups (``deploy``, ``operate``, ``train``) import none of each other, only what
``tools/`` shares (``common``, ``subcommand``). Cost: it parses rl_bringup's modules once and
imports ``plan`` in one fresh interpreter, about 0.6 s in all.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import rl_bringup
from tests.unit.package_imports import (
    entries,
    imported_names,
    owning_module,
    package_modules,
    upward_imports,
)

pytestmark = pytest.mark.unit

PACKAGE = Path(rl_bringup.__file__).parent
#: rl_bringup's layers, lowest first.
LAYERS = ("plan", "run", "tools", "front ends")
#: Each entry of rl_bringup (a package or a module) -> its layer.
ENTRIES = {"plan": "plan", "run": "run", "tools": "tools",
           "cli": "front ends", "launch_helpers": "front ends"}
#: The packages of tools/ by audience; each imports only itself and what tools/ shares.
TOOL_GROUPS = ("deploy", "operate", "train")
#: What the plan must not load: it runs (and is tested) without a ROS install.
ROS_MODULES = ("rclpy", "launch", "launch_ros")
#: Modules and os functions that start (or replace this with) another process.
PROCESS_MODULES = ("subprocess", "multiprocessing", "pty", "concurrent.futures.process")
PROCESS_CALLS = ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execl",
                 "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe", "spawnl",
                 "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe")


MODULES = package_modules(PACKAGE)


def entry(module: str) -> str | None:
    """The entry of rl_bringup a module belongs to (``plan``, ``cli``...); None for the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "rl_bringup" else None


def layer(module: str) -> str | None:
    """The layer of an rl_bringup module; None for rl_bringup itself and other packages."""
    own = entry(module)
    return ENTRIES.get(own) if own is not None else None


@cache
def imports(module: str) -> frozenset[tuple[str, int]]:
    """``(imported name, line)`` of every import in ``module``'s source (package_imports), with
    rl_bringup names resolved to their module."""
    return frozenset((owning_module(name, MODULES) if name.startswith("rl_bringup") else name,
                      line) for name, line in imported_names(MODULES[module], module))


@cache
def process_starts(module: str) -> frozenset[tuple[str, int]]:
    """``(what, line)`` for every way ``module`` could start a process: an import of a
    :data:`PROCESS_MODULES` module or of a :data:`PROCESS_CALLS` function of os, or a call
    ``os.<one of them>(...)``."""
    found = {(name, line) for name, line in imports(module)
             if any(name == bad or name.startswith(bad + ".") for bad in PROCESS_MODULES)
             or name in {f"os.{call}" for call in PROCESS_CALLS}}
    path = MODULES[module]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Attribute) and node.attr in PROCESS_CALLS
                and isinstance(node.value, ast.Name) and node.value.id == "os"):
            found.add((f"os.{node.attr}", node.lineno))
    return frozenset(found)


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}"


def test_every_entry_of_rl_bringup_has_a_layer() -> None:
    found = entries(PACKAGE)
    assert found == set(ENTRIES), (
        f"place each entry of rl_bringup in ENTRIES (tests/unit/test_bringup_layers.py): new "
        f"{sorted(found - set(ENTRIES))}, gone {sorted(set(ENTRIES) - found)}")


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = upward_imports(MODULES, imports, layer, LAYERS)
    assert not upward, ("imports from a higher layer of rl_bringup (order, lowest first: "
                        f"{' < '.join(LAYERS)}); move what is imported down, or the importer "
                        "up:\n" + "\n".join(upward))


def test_the_plan_imports_no_ros_and_starts_no_process() -> None:
    found = []
    for module in MODULES:
        if entry(module) != "plan":
            continue
        found += [f"{where(module, line)} imports {name}" for name, line in sorted(imports(module))
                  if name.split(".")[0] in ROS_MODULES]
        found += [f"{where(module, line)} can start a process: {what}"
                  for what, line in sorted(process_starts(module))]
    assert not found, ("rl_bringup.plan is what a deployment is, pure: no rclpy or launch, no "
                       "process started (that is rl_bringup.run's job):\n" + "\n".join(found))


def test_importing_the_plan_loads_no_ros() -> None:
    plan_modules = sorted(module for module in MODULES if entry(module) == "plan")
    check = ("import importlib, sys\n"
             "for name in sys.argv[1:]: importlib.import_module(name)\n"
             f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(ROS_MODULES)!r}))")
    result = subprocess.run([sys.executable, "-c", check, *plan_modules], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]", (
        f"importing rl_bringup.plan loads {result.stdout.strip()}; it must run without a ROS "
        "install (`python -X importtime -c 'import rl_bringup.plan.MODULE'` shows the chain)")


def test_tool_groups_import_none_of_each_other() -> None:
    crossing = []
    for module in MODULES:
        parts = module.split(".")
        if parts[:2] != ["rl_bringup", "tools"]:
            continue
        # None: tools/__init__ or a module every tool shares (common, subcommand).
        own = parts[2] if len(parts) > 2 and parts[2] in TOOL_GROUPS else None
        for imported, line in sorted(imports(module)):
            other = imported.split(".")
            if other[:2] == ["rl_bringup", "tools"] and len(other) > 2 \
                    and other[2] in TOOL_GROUPS and other[2] != own:
                crossing.append(f"{where(module, line)} ({own or 'shared'}) imports {imported}")
    assert not crossing, ("a tool group imports only itself and what tools/ shares (common, "
                          "subcommand); move the shared piece there:\n" + "\n".join(crossing))


def test_the_scans_see_imports_inside_functions_and_type_checking_and_os_calls() -> None:
    # Guards the scanners: elastic imports ros_session only inside a function, cpu_sets imports
    # ProcessSpec under TYPE_CHECKING, and replica replaces itself with os.execvp.
    assert "rl_bringup.run.ros_session" in {name for name, _ in imports("rl_bringup.run.elastic")}
    assert "rl_bringup.plan.process_spec" in {
        name for name, _ in imports("rl_bringup.plan.cpu_sets")}
    assert "os.execvp" in {what for what, _ in process_starts("rl_bringup.run.replica")}
    assert "subprocess" in {what for what, _ in process_starts("rl_bringup.run.supervisor")}
