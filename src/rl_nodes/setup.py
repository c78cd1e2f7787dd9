import runpy
from pathlib import Path

from setuptools import find_packages, setup

package_name = "rl_nodes"
#: The node kinds, each a console script of its own. Read from rl_core's registry rather than
#: imported: rl_core need not be installed yet when this package builds.
NODE_KINDS = runpy.run_path(
    str(Path(__file__).resolve().parent.parent / "rl_core" / "rl_core" / "names" / "node_kinds.py"))[
        "NODE_KINDS"]

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    extras_require={"test": ["pytest"]},
    zip_safe=True,
    maintainer="rl_ros2 developers",
    maintainer_email="dev@rl-ros2.invalid",
    description="ROS 2 nodes of rl_ros2, the zero-copy channel and the colocated container.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            *(f"{kind} = rl_nodes.{kind}:main" for kind in NODE_KINDS),
            "container = rl_nodes.container:main",
            "sim_robot = rl_nodes.sim_robot:main",
            "diagnostics_aggregator = rl_nodes.diagnostics_aggregator:main",
        ],
    },
)
