"""The lint test of this package for ``colcon test``: ruff with the repository's ruff.toml over the
package, its tests included (what ament_flake8 and ament_pep257 are to other ROS packages; the
repository's own tests/unit/test_style.py runs the same rules over the whole tree)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]


@pytest.mark.unit
def test_ruff_finds_nothing() -> None:
    config = next((folder / "ruff.toml" for folder in PACKAGE.parents
                   if (folder / "ruff.toml").is_file()), None)
    if config is None:
        pytest.skip(f"no ruff.toml above {PACKAGE}: the package is outside the rl_ros2 repository")
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (pip install ruff; the repository pins it)")
    # --no-cache: nothing written into the source tree.
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                             str(config), str(PACKAGE)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"ruff check {PACKAGE}:\n{result.stdout}{result.stderr}"
