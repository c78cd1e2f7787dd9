"""ament_python setup of rl_bringup.

The top-level ``launch/`` and ``config/`` folders of the repository are the single source of
launch files and parameter files (README, "Layout"); this package installs
them into ``share/rl_bringup`` so that ``ros2 launch rl_bringup colocated.launch.py`` and
``get_package_share_directory('rl_bringup')`` find them in a colcon install.
"""

from glob import glob
import os

from setuptools import find_packages, setup

package_name = "rl_bringup"

# colcon and pip both run setup.py from this folder; data_files sources must be relative
# paths, so the repository folders are globbed relative to this file's folder.
_here = os.path.dirname(os.path.abspath(__file__))


def _repository_files(pattern: str) -> list[str]:
    """Files of the repository matching ``pattern`` (relative to the repository root).

    :param pattern: glob pattern such as ``launch/*.launch.py``.
    :return: sorted paths relative to this package folder (empty outside a repository checkout,
        e.g. when building from an sdist).
    """
    matches = glob(os.path.join(_here, "..", "..", pattern))
    return sorted(os.path.relpath(path, _here) for path in matches)


setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", _repository_files("launch/*.launch.py")),
        (
            "share/" + package_name + "/config",
            _repository_files("config/*.yaml") + _repository_files("config/*.rviz")
            + _repository_files("config/*.json"),
        ),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="rl_ros2 developers",
    maintainer_email="dev@rl-ros2.invalid",
    description=(
        "Deployments of rl_ros2: the deployment plan (mode -> processes), launch files, "
        "configs, and the rl-bringup command for installs without ros2 launch."
    ),
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "rl-bringup = rl_bringup.cli:main",
        ],
    },
)
