from setuptools import find_packages, setup

package_name = "rl_core"

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
    description="ROS-free RL core of rl_ros2: envs, replay, SAC, checkpoints, bare training loop.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "rl-train-bare = rl_core.learning.training:main",
        ],
    },
)
