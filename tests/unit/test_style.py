"""The repository's style, enforced: ruff (ruff.toml) on every Python file, mypy (mypy.ini) on
rl_core, no function in src/ longer than MAX_FUNCTION_LINES lines of code (its signature and
body; the docstring not counted), no module docstring longer than MAX_MODULE_DOCSTRING_LINES
lines, and one docstring style in src/: reST field lists
(``:param x:``, ``:returns:``, ``:raises E:``, ``:ivar x:``), no Google-style sections."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MAX_FUNCTION_LINES = 80
#: A module docstring says what and why; figures and measurements go to docs/results.md.
MAX_MODULE_DOCSTRING_LINES = 15
#: A Google-style docstring section header alone on its line (``Args:``, ``Returns:`` ...).
GOOGLE_SECTION = re.compile(r"^\s*(Args|Arguments|Returns|Raises|Yields|Attributes|Example|"
                            r"Examples|Note|Notes):\s*$")


def run(command: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout_s,
                          check=False)


def test_ruff_finds_nothing() -> None:
    result = run([str(BIN / "ruff"), "check", "--no-cache", "src", "tests", "benchmarks",
                  "launch"], 120.0)
    assert result.returncode == 0, (
        f"ruff check failed (fix what it says, or `ruff check --fix` for the [*] ones):\n"
        f"{result.stdout[-6000:]}{result.stderr[-2000:]}")


def test_mypy_finds_nothing_in_rl_core(tmp_path: Path) -> None:
    result = run([str(BIN / "mypy"), "--config-file", "mypy.ini", "--cache-dir",
                  str(tmp_path / "mypy_cache")], 600.0)
    assert result.returncode == 0, f"mypy on rl_core failed:\n{result.stdout[-6000:]}"


def test_no_function_in_src_is_longer_than_the_limit() -> None:
    long = []
    for path in sorted((REPO / "src").rglob("*.py")):
        if "build" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                docstring = node.body[0] if node.body else None
                if (isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
                        and isinstance(docstring.value.value, str)):
                    lines -= (docstring.end_lineno or docstring.lineno) - docstring.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines})")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + \
        "\n".join(long)


def test_docstrings_in_src_use_one_style() -> None:
    found = []
    for path in sorted((REPO / "src").rglob("*.py")):
        if "build" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                docstring = ast.get_docstring(node, clean=False) or ""
                found += [f"{path.relative_to(REPO)}: {getattr(node, 'name', 'module')} "
                          f"{line.strip()}" for line in docstring.splitlines()
                          if GOOGLE_SECTION.match(line)]
    assert not found, ("Google-style docstring sections; write reST fields (:param x:, "
                       ":returns:, :raises E:, :ivar x:) as the rest of src does:\n"
                       + "\n".join(found))


def test_module_docstrings_are_at_most_15_lines() -> None:
    long = []
    for path in sorted((REPO / "src").rglob("*.py")):
        parts = path.relative_to(REPO).parts
        if "build" in parts or "test" in parts or path.name == "setup.py":
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text(), str(path)), clean=False)
        lines = len((docstring or "").strip().splitlines())
        if lines > MAX_MODULE_DOCSTRING_LINES:
            long.append(f"{path.relative_to(REPO)} ({lines})")
    assert not long, (f"module docstrings over {MAX_MODULE_DOCSTRING_LINES} lines (say what and "
                      "why; figures go to docs/results.md):\n" + "\n".join(long))
