"""pytest set-up of rl_bringup's tests: the network-safety defaults, the markers, and a clear skip
of the launch tests where launch_testing's pytest plugin is not loaded.

* ROS discovery stays on the loopback (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, always), and a
  run without ``ROS_DOMAIN_ID`` gets one of its own from the process id (never ROS's default 0,
  where every unconfigured shell is): set before any test module imports rclpy, and inherited by
  the launched processes.
* The launch tests (``test_*_launch.py``) are collected by launch_testing's pytest plugin, which
  ``colcon test`` loads with a pytest it supports (docs/testing.md). Its hook declares an argument
  that pytest 9 removed, so the repository's pytest 9 venv does not load it; there the files are
  skipped with that reason instead of failing to import, and tests/system/test_colcon_test.py
  runs them through ``colcon test``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
if not os.environ.get("ROS_DOMAIN_ID", "").strip():
    os.environ["ROS_DOMAIN_ID"] = str(1 + os.getpid() % 100)

LAUNCH_TESTS = "test_*_launch.py"
NO_PLUGIN_REASON = (
    "launch_testing's pytest plugin is not loaded (it cannot load into pytest 9): run the launch "
    "tests with `colcon test` (docs/testing.md), as tests/system/test_colcon_test.py does")


def pytest_configure(config: pytest.Config) -> None:
    # The repository's pytest.ini declares them too; a workspace without it needs them here.
    config.addinivalue_line("markers", "unit: fast tests, no ROS")
    config.addinivalue_line("markers", "system: launch files run to the end of training (slow)")


class _SkippedLaunchTests(pytest.File):
    def collect(self) -> Any:
        pytest.skip(NO_PLUGIN_REASON)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.File | None:
    if module_path.match(LAUNCH_TESTS) and not parent.config.pluginmanager.has_plugin(
            "launch_testing"):
        return _SkippedLaunchTests.from_parent(parent, path=module_path)
    return None
