from setuptools import find_packages, setup

package_name = "rl_nodes"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="rl_ros2 developers",
    maintainer_email="dev@rl-ros2.invalid",
    description="ROS 2 nodes of rl_ros2, the zero-copy channel and the colocated container.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "simulator = rl_nodes.simulator:main",
            "policy = rl_nodes.policy:main",
            "replay_buffer = rl_nodes.replay_buffer:main",
            "trainer = rl_nodes.trainer:main",
            "container = rl_nodes.container:main",
            "sim_robot = rl_nodes.sim_robot:main",
        ],
    },
)
