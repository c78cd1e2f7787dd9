"""ament_python setup of rl_bringup.

The top-level ``launch/`` and ``config/`` folders of the repository are the single source of
launch files and parameter files (README, "Layout"); this package installs them into
``share/rl_bringup/launch`` and ``share/rl_bringup/config`` so that
``ros2 launch rl_bringup colocated.launch.py`` and ``get_package_share_directory('rl_bringup')``
find them in a colcon install.

They reach this package through two relative symlinks committed in git, ``launch -> ../../launch``
and ``config -> ../../config``, so every ``data_files`` source is a path *inside* the package
folder. That matters for ``colcon build --symlink-install``: colcon mirrors each data file source
into ``build/rl_bringup/<source>`` before running ``setup.py develop`` there, and a source such as
``../../launch/x.launch.py`` would make it create ``build/rl_bringup/../../launch/x.launch.py``,
i.e. a ``launch/`` folder in the workspace root, outside the build and install trees.

A pattern that matches nothing stops the build: an install without launch or config files would
only fail later, at ``ros2 launch`` time, with a less helpful message.
"""

import os
from glob import glob

from setuptools import find_packages, setup

package_name = "rl_bringup"

# colcon runs setup.py from the package folder (plain install) or from build/rl_bringup, where
# --symlink-install mirrors the sources (develop); data_files sources are relative to that folder.
_here = os.path.dirname(os.path.abspath(__file__))


def _package_files(*patterns: str) -> list[str]:
    """Files of the package folder matching ``patterns``, each pattern matching at least one.

    :param patterns: glob patterns relative to this folder, such as ``launch/*.launch.py``.
    :return: sorted paths relative to this folder (what ``data_files`` needs).
    :raises FileNotFoundError: when a pattern matches no file, naming the pattern and the folder
        (an exception, not SystemExit, which colcon's setup.py introspection would swallow).
    """
    files: list[str] = []
    for pattern in patterns:
        # isfile follows the symlinks and leaves out dangling ones (a file removed since the last
        # --symlink-install build leaves its mirror behind in build/).
        matches = [path for path in glob(os.path.join(_here, pattern)) if os.path.isfile(path)]
        if not matches:
            raise FileNotFoundError(
                f"rl_bringup: no file matches {pattern!r} in {_here}; the launch/ and config/ "
                f"symlinks of the package must point at the repository's launch/ and config/ "
                f"folders (build from a git checkout)"
            )
        files += (os.path.relpath(path, _here) for path in matches)
    return sorted(files)


setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", _package_files("launch/*.launch.py")),
        (
            "share/" + package_name + "/config",
            _package_files("config/*.yaml", "config/*.rviz", "config/*.json", "config/*.xml"),
        ),
        (
            "share/" + package_name + "/config/robots",
            _package_files("config/robots/*.xml", "config/robots/*.yaml"),
        ),
    ],
    install_requires=["setuptools"],
    extras_require={"test": ["pytest"]},
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
