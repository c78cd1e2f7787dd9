"""The package manifests declare what the code uses, so that ``rosdep install --from-paths src
--ignore-src`` sets a ROS machine up (and the docker image, which installs with rosdep).

Every module a package imports (at any depth, optional imports included) must be declared in that
package's own ``package.xml`` as a rosdep key, or, where rosdep has no key, listed in its
"pip only" comment and pinned in requirements.txt. Every message package an interface file uses
must be a dependency of rl_interfaces.
"""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCES = REPO_ROOT / "src"
PYTHON_PACKAGES = ("rl_core", "rl_nodes", "rl_bringup")
RUN_DEPENDENCY_TAGS = ("depend", "exec_depend", "build_export_depend")

#: Import name -> rosdep key, for modules whose key is not their own name (ROS packages' Python
#: modules carry the package name, which is the key). ``None``: rosdep has no key for it
#: (rosdistro's python.yaml), so pip installs it from requirements.txt's pins.
ROSDEP_KEYS: dict[str, str | None] = {
    "numpy": "python3-numpy",
    "yaml": "python3-yaml",
    "psutil": "python3-psutil",
    "matplotlib": "python3-matplotlib",
    "PIL": "python3-pil",
    "cryptography": "python3-cryptography",
    "pybullet": "python3-pybullet-pip",
    "pybullet_data": "python3-pybullet-pip",
    "pybullet_utils": "python3-pybullet-pip",
    "onnxruntime": "python3-onnxruntime-pip",
    "torch": None,
    "gymnasium": None,
    "safetensors": None,
    "onnx": None,
    "mcap": None,
    "mcap_ros2": None,
    "kubernetes": None,
}
#: Pip distribution of each key-less import, as requirements.txt names it.
PIP_DISTRIBUTIONS = {"torch": "torch", "gymnasium": "gymnasium", "safetensors": "safetensors",
                     "onnx": "onnx", "mcap": "mcap", "mcap_ros2": "mcap-ros2-support",
                     "kubernetes": "kubernetes"}


def imported_modules(package: str) -> set[str]:
    """Top-level names of every absolute import in ``src/PACKAGE/PACKAGE`` outside the standard
    library and the package itself."""
    names: set[str] = set()
    for path in (SOURCES / package / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {name for name in names
            if name not in sys.stdlib_module_names and name not in ("__future__", package)}


def manifest(package: str) -> ElementTree.Element:
    return ElementTree.parse(SOURCES / package / "package.xml").getroot()


def run_dependencies(package: str) -> set[str]:
    """The keys a package needs at run time (``depend``, ``exec_depend``, ...)."""
    root = manifest(package)
    return {element.text.strip() for tag in RUN_DEPENDENCY_TAGS for element in root.iter(tag)
            if element.text}


def pip_only(package: str) -> set[str]:
    """The names in the manifest's "pip only (...): a, b, and c" comment."""
    text = (SOURCES / package / "package.xml").read_text()
    match = re.search(r"<!--\s*pip only \([^)]*\):(.*?)-->", text, flags=re.S)
    if match is None:
        return set()
    words = re.split(r"[,\s]+", re.sub(r"\([^)]*\)", " ", match.group(1)))
    return {word for word in words if word and word != "and"}


def requirement_names() -> set[str]:
    names = set()
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            names.add(re.split(r"[=<>!~\[ ]", requirement, maxsplit=1)[0].lower())
    return names


@pytest.mark.parametrize("package", PYTHON_PACKAGES)
def test_every_import_is_declared_in_the_package_manifest(package: str) -> None:
    declared = run_dependencies(package)
    listed_pip_only = pip_only(package)
    missing = []
    for module in sorted(imported_modules(package)):
        key = ROSDEP_KEYS.get(module, module)
        if key is None:
            if module not in listed_pip_only:
                missing.append(f"{module} (no rosdep key: name it in the 'pip only' comment)")
        elif key not in declared:
            missing.append(f"{module} (<exec_depend>{key}</exec_depend>)")
    assert not missing, f"src/{package}/package.xml does not declare: {', '.join(missing)}"


@pytest.mark.parametrize("package", PYTHON_PACKAGES)
def test_pip_only_dependencies_have_no_rosdep_key_and_are_pinned(package: str) -> None:
    pinned = requirement_names()
    keyless_imports = {module for module in imported_modules(package)
                       if ROSDEP_KEYS.get(module, module) is None}
    for name in pip_only(package):
        # A name rosdep knows belongs in an <exec_depend>, not in the comment.
        assert name not in ROSDEP_KEYS or ROSDEP_KEYS[name] is None, name
        assert PIP_DISTRIBUTIONS.get(name, name).lower() in pinned, \
            f"{name} is not pinned in requirements.txt"
    assert keyless_imports <= pip_only(package)
    assert all(PIP_DISTRIBUTIONS[module] in pinned for module in keyless_imports)


def test_the_scan_sees_the_imports_that_matter() -> None:
    # Guards the scanner itself: imports inside functions and try blocks count.
    assert {"tf2_msgs", "rclpy", "torch"} <= imported_modules("rl_nodes")
    assert {"launch", "launch_ros", "ament_index_python"} <= imported_modules("rl_bringup")


def test_interface_files_use_only_declared_message_packages() -> None:
    interfaces = SOURCES / "rl_interfaces"
    used = set()
    for path in [*interfaces.glob("msg/*.msg"), *interfaces.glob("srv/*.srv")]:
        for line in path.read_text().splitlines():
            field_type = line.split("#", 1)[0].strip().split(" ")[0]
            if "/" in field_type:
                used.add(field_type.split("/")[0])
    assert used, "no message package found in the interface files"
    root = manifest("rl_interfaces")
    declared = {element.text.strip() for tag in ("depend", "build_depend")
                for element in root.iter(tag) if element.text}
    assert used <= declared
    # CMakeLists.txt hands the same packages to rosidl.
    cmake = (interfaces / "CMakeLists.txt").read_text()
    dependencies = re.search(r"DEPENDENCIES([^)]*)\)", cmake).group(1).split()
    assert used <= set(dependencies)
