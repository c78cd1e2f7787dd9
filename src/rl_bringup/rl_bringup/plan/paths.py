"""Where rl_bringup finds its parameter files, launch files and the rl_nodes executables.

Two installs are supported:

* a **source checkout** built with ``colcon build --symlink-install`` (``scripts/setup.sh``, a
  ROS user's workspace): this module resolves to ``<repo>/src/rl_bringup/rl_bringup/plan/`` and the
  repository's top-level ``config/`` and ``launch/`` folders are used directly, so an edited or
  added config takes effect without rebuilding;
* a **plain colcon install** (``colcon build``, the docker image): ``setup.py`` copied
  ``config/`` and ``launch/`` into ``share/rl_bringup``, found through ``ament_index_python``.

The source checkout is checked first because a file added to ``config/`` reaches the install's
``share/`` folder only with the next build; in a plain install the package's folder holds no
``package.xml``, so the check falls through to the share folder.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

PACKAGE_NAME = "rl_bringup"
NODES_PACKAGE = "rl_nodes"
CONFIG_SUFFIXES = (".yaml", ".yml")
FASTDDS_MULTIHOST_PROFILE = "fastdds_multihost.xml"


def source_root() -> Path | None:
    """The repository root when this module runs from a source checkout.

    :return: the folder holding ``config/`` and ``src/``, or ``None`` in a colcon install.
    """
    package_folder = Path(__file__).resolve().parents[2]  # <repo>/src/rl_bringup
    root = package_folder.parent.parent
    if (package_folder / "package.xml").is_file() and (root / "config").is_dir():
        return root
    return None


def share_directory() -> Path | None:
    """``share/rl_bringup`` of a colcon (ament) install, if rl_bringup is installed there.

    :return: the share folder, or ``None`` when ament_index_python is missing, the ament prefix
        path is unset, or rl_bringup is not registered in it.
    """
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None
    try:
        return Path(get_package_share_directory(PACKAGE_NAME))
    except (LookupError, OSError, ValueError):
        # PackageNotFoundError is a KeyError (LookupError); an unset AMENT_PREFIX_PATH raises
        # EnvironmentError (OSError). Both just mean "not a colcon install".
        return None


def _data_directory(name: str) -> Path:
    """The ``config`` or ``launch`` folder, from the source checkout or the share folder.

    :param name: ``"config"`` or ``"launch"``.
    :raises FileNotFoundError: when neither a source checkout nor an installed share folder
        provides it.
    """
    root = source_root()
    if root is not None and (root / name).is_dir():
        return root / name
    share = share_directory()
    if share is not None and (share / name).is_dir():
        return share / name
    raise FileNotFoundError(
        f"cannot find the {name}/ folder of rl_bringup: not running from a source checkout and "
        f"rl_bringup is not installed in an ament prefix (source install/setup.bash of a colcon "
        f"build, or run scripts/setup.sh)"
    )


def config_directory() -> Path:
    """The folder holding the scenario parameter files (``cartpole.yaml``, ...).

    :raises FileNotFoundError: when no config folder can be found.
    """
    return _data_directory("config")


def fastdds_multihost_profile() -> Path:
    """The Fast DDS profile of multi-host deployments (``config/fastdds_multihost.xml``: UDPv4
    with non-blocking sends).

    :raises FileNotFoundError: when no config folder holds it.
    """
    path = config_directory() / FASTDDS_MULTIHOST_PROFILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: rebuild rl_bringup (colcon build)")
    return path


def launch_directory() -> Path:
    """The folder holding the ``*.launch.py`` files.

    :raises FileNotFoundError: when no launch folder can be found.
    """
    return _data_directory("launch")


def available_configs(directory: Path | None = None) -> list[str]:
    """Names (without suffix) of the parameter files in ``directory``.

    :param directory: folder to list; the config folder when ``None``.
    :return: sorted names, empty when the folder does not exist.
    """
    try:
        folder = directory if directory is not None else config_directory()
    except FileNotFoundError:
        return []
    if not folder.is_dir():
        return []
    return sorted(
        {
            path.stem
            for path in folder.iterdir()
            if path.suffix in CONFIG_SUFFIXES and path.is_file()
        }
    )


def resolve_config(value: str | os.PathLike[str], directory: Path | None = None) -> Path:
    """Turn a ``config:=`` value into an existing parameter file.

    Accepted forms: a path (absolute, or relative to the working directory, recognised by a path
    separator), or a bare name such as ``cartpole`` or ``cartpole.yaml`` that is looked up in the
    config folder first and then in the working directory.

    :param value: the value given by the user.
    :param directory: config folder to search bare names in; the default config folder when
        ``None``.
    :return: the absolute path of the parameter file.
    :raises FileNotFoundError: with the paths tried and the configs that exist.
    """
    text = os.fspath(value).strip()
    if not text:
        raise FileNotFoundError(_missing_config_message(text, [], directory))
    given = Path(text).expanduser()
    if given.is_absolute() or os.sep in text or (os.altsep and os.altsep in text):
        if given.is_file():
            return given.resolve()
        raise FileNotFoundError(_missing_config_message(text, [given.absolute()], directory))

    if given.suffix in CONFIG_SUFFIXES:
        names = [text]
    else:
        names = [text + suffix for suffix in CONFIG_SUFFIXES]
    tried: list[Path] = []
    try:
        folder: Path | None = directory if directory is not None else config_directory()
    except FileNotFoundError:
        folder = None
    for base in ([folder] if folder is not None else []) + [Path.cwd()]:
        for name in names:
            candidate = base / name
            tried.append(candidate)
            if candidate.is_file():
                return candidate.resolve()
    raise FileNotFoundError(_missing_config_message(text, tried, folder))


def _missing_config_message(text: str, tried: list[Path], directory: Path | None) -> str:
    """The error text for a config that does not exist: what was tried and what exists."""
    try:
        folder = directory if directory is not None else config_directory()
    except FileNotFoundError:
        folder = None
    existing = available_configs(folder) if folder is not None else []
    tried_text = ", ".join(str(path) for path in tried) or "nothing"
    if existing:
        choices = f"available configs in {folder}: {', '.join(existing)}"
    else:
        choices = "no config folder with *.yaml files was found"
    return f"config {text!r} not found (tried {tried_text}); {choices}"


def find_executable(executable: str, package: str = NODES_PACKAGE) -> Path | None:
    """Locate an executable of ``package`` the way ``ros2 run`` would, then in the virtualenv.

    Search order: ``<prefix>/lib/<package>/<executable>`` for every prefix of
    ``AMENT_PREFIX_PATH`` (colcon installs put console scripts there); the folder of the running
    interpreter (a virtualenv's ``bin/``, which works even when the venv is not activated); then
    ``PATH``. The package folders come first because names such as ``policy`` are generic enough
    to collide with unrelated programs on ``PATH``.

    :param executable: the console-script name, e.g. ``simulator``.
    :param package: the package that installs it.
    :return: the path, or ``None`` when it is not installed anywhere.
    """
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        candidate = Path(prefix) / "lib" / package / executable
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    candidate = Path(sys.executable).parent / executable
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(executable)
    return Path(found) if found else None
