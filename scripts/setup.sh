#!/usr/bin/env bash
# One idempotent setup step for rl_ros2, used by `make run` and `make test`.
#
# - creates .venv with Python 3.11 or 3.12 (override with PYTHON=/path/to/python3.x),
# - installs the pinned requirements (skipped when requirements.txt is unchanged),
# - rewrites the ROS wheels' CMake export files to this interpreter's include dirs,
# - where ../shared/ros2-cli exists (developer and CI machines; override with ROS2_CLI_DIR),
#   installs the real `ros2` command line and launch from its wheels,
# - builds src/ with `colcon build --symlink-install --merge-install` into the venv prefix
#   (colcon.meta honoured; skipped when no package manifest, interface or data file list changed),
#   and makes the result usable with no sourcing: a .pth file for the symlinked Python packages,
#   the packages' executables linked into .venv/bin.
# A second run with nothing changed finishes in seconds.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
build_dir="$root/build"
say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# --- prerequisites ---------------------------------------------------------------------------
[ "$(uname -s)" = Linux ] || die "rl_ros2 needs Linux (the ROS 2 Kilted wheels exist for x86_64 Linux only)."
[ "$(uname -m)" = x86_64 ] || die "the ROS 2 Kilted wheels exist for x86_64 only; this machine is $(uname -m)."

python="${PYTHON:-}"
if [ -z "$python" ]; then
  for candidate in python3.11 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
       && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info[:2] in ((3, 11), (3, 12)) else 1)' 2>/dev/null; then
      python="$(command -v "$candidate")"; break
    fi
  done
fi
[ -n "$python" ] || die "no Python 3.11 or 3.12 found. Install one, e.g. 'sudo apt-get install python3.11 python3.11-venv python3.11-dev' (Debian 12) or 'sudo apt-get install python3.12 python3.12-venv python3.12-dev' (Ubuntu 24.04), or set PYTHON=/path/to/python3.11."
"$python" -c 'import sys; sys.exit(0 if sys.version_info[:2] in ((3, 11), (3, 12)) else 1)' \
  || die "$python is not Python 3.11 or 3.12 (the ROS 2 Kilted wheels are built for cp311 and cp312)."
"$python" -c 'import venv, ensurepip' 2>/dev/null \
  || die "$python lacks the venv module. Install it, e.g. 'sudo apt-get install python3-venv' (or python3.11-venv / python3.12-venv)."
py_include="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
[ -f "$py_include/Python.h" ] \
  || die "Python headers missing ($py_include/Python.h). Install them, e.g. 'sudo apt-get install python3-dev' (or python3.11-dev / python3.12-dev)."
command -v cmake >/dev/null 2>&1 || die "cmake not found. Install it: 'sudo apt-get install cmake'."
command -v g++ >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1 \
  || die "no C++ compiler found. Install one: 'sudo apt-get install g++'."

hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1; }

# --- virtual environment ---------------------------------------------------------------------
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  say "existing $venv is broken; recreating it"; rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv with $python"
  "$python" -m venv "$venv"
fi
vpy="$venv/bin/python"

requirements_hash="$(hash_of "$root/requirements.txt")"
if [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$requirements_hash" ]; then
  say "installing pinned requirements (first time: a few minutes)"
  "$vpy" -m pip install --disable-pip-version-check -q -r "$root/requirements.txt" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "$requirements_hash" > "$venv/.requirements.sha256"
  # New wheels: build everything again against them.
  rm -rf "$build_dir"; rm -f "$venv/.colcon.sha256"
else
  say "requirements unchanged"
fi

# --- CMake export path fix -------------------------------------------------------------------
# The wheels' rosidl_generator_py CMake exports carry the wheel builder's interpreter paths
# (/opt/python/cpXY-cpXY/...). Point them at this venv's interpreter and numpy headers.
numpy_include="$("$vpy" -c 'import numpy; print(numpy.get_include())')"
py_include="$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
mapfile -t stale < <(grep -rl --include='*.cmake' '/opt/python/cp3' "$venv/share" 2>/dev/null || true)
if [ "${#stale[@]}" -gt 0 ]; then
  say "rewriting ${#stale[@]} CMake export files to $py_include and $numpy_include"
  sed -i -E \
    -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_core/include#$numpy_include#g" \
    -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#$py_include#g" \
    "${stale[@]}"
fi

# --- the real ros2 command line (optional) ---------------------------------------------------
# launch, launch_ros and ros2cli have no wheels on the package registry; ../shared/ros2-cli holds
# them (see its README). Where it exists they go into the venv, and colcon builds its
# composition_interfaces (launch_ros imports it) with our packages.
ros2_cli_dir="${ROS2_CLI_DIR:-$root/../shared/ros2-cli}"
colcon_paths=("$root/src")
if [ -d "$ros2_cli_dir/wheels" ]; then
  ros2_cli_dir="$(cd "$ros2_cli_dir" && pwd)"
  ros2_cli_hash="$(hash_of "$root/requirements-ros2-cli.txt" <(cd "$ros2_cli_dir/wheels" && ls -l -- *.whl))"
  if [ "$(cat "$venv/.ros2-cli.sha256" 2>/dev/null)" != "$ros2_cli_hash" ]; then
    say "installing the ros2 command line and launch from $ros2_cli_dir"
    "$vpy" -m pip install --disable-pip-version-check -q -r "$root/requirements-ros2-cli.txt" \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    # --no-deps: the wheels name ament_index_python, which the registry has as ros-ament-index-python.
    "$vpy" -m pip install --disable-pip-version-check -q --no-deps "$ros2_cli_dir"/wheels/*.whl
    echo "$ros2_cli_hash" > "$venv/.ros2-cli.sha256"
  else
    say "ros2 command line up to date"
  fi
  colcon_paths+=("$ros2_cli_dir/composition_interfaces")
else
  say "no $ros2_cli_dir: skipping the ros2 command line (tests that need it will skip)"
fi

# --- launch_testing, for `colcon test` only (optional) -----------------------------------------
# The launch tests in src/rl_bringup/test need launch_testing's pytest plugin. Its hook declares an
# argument pytest 9 removed, so with the plugin in site-packages *every* pytest 9 run of this venv
# (`make test`) stops at start-up (../shared/ros2-cli/README.md). So it goes, with a pytest that
# accepts it (8.4; ROS Kilted itself ships 7.4), into $venv/launch_testing, which Python never
# searches by itself: `PYTHONPATH=<absolute path of .venv/launch_testing> colcon test`
# (docs/testing.md, tests/system/test_colcon_test.py) runs the packages' tests with that pytest and
# the plugin, while `make test` keeps pytest 9 and never sees them. pytest 8.4's own dependencies (pluggy, iniconfig,
# packaging, pygments) are in the venv already, at versions it supports: hence --no-deps.
launch_testing_pytest="pytest==8.4.2"
launch_testing_dir="$venv/launch_testing"
if [ -d "$ros2_cli_dir/launch_testing" ]; then
  launch_testing_hash="$(hash_of <(echo "$launch_testing_pytest"; cd "$ros2_cli_dir/launch_testing" && ls -l -- *.whl))"
  if [ "$(cat "$launch_testing_dir/.sha256" 2>/dev/null)" != "$launch_testing_hash" ]; then
    say "installing launch_testing and $launch_testing_pytest into $launch_testing_dir (for colcon test)"
    rm -rf "$launch_testing_dir"
    "$vpy" -m pip install --disable-pip-version-check -q --no-deps --target "$launch_testing_dir" \
      "$launch_testing_pytest" "$ros2_cli_dir"/launch_testing/*.whl \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    echo "$launch_testing_hash" > "$launch_testing_dir/.sha256"
  else
    say "launch_testing for colcon test up to date"
  fi
fi

# --- colcon build ------------------------------------------------------------------------------
# A venv from before the colcon build holds pip editable installs of the Python packages.
if [ -f "$venv/.packages.sha256" ]; then
  "$vpy" -m pip uninstall --disable-pip-version-check -q -y rl_core rl_nodes rl_bringup || true
  rm -f "$venv/.packages.sha256" "$venv/.interfaces.sha256"
fi
# What a rebuild depends on. Python sources are not in it: --symlink-install links each package
# folder, so edits and new modules take effect at once. Data files are linked one by one, so the
# names of the launch and config files are.
build_inputs=(
  "$root/colcon.meta"
  "$root"/src/*/package.xml "$root"/src/*/setup.py "$root"/src/*/setup.cfg "$root"/src/*/resource/*
  "$root"/src/rl_interfaces/CMakeLists.txt "$root"/src/rl_interfaces/msg/* "$root"/src/rl_interfaces/srv/*
)
if [ "${#colcon_paths[@]}" -gt 1 ]; then
  build_inputs+=("$ros2_cli_dir"/composition_interfaces/{CMakeLists.txt,package.xml} "$ros2_cli_dir"/composition_interfaces/srv/*)
fi
build_hash="$(hash_of "${build_inputs[@]}" <(echo "$vpy" "${colcon_paths[@]}"; ls "$root/launch" "$root/config"))"
packages=(rl_interfaces rl_core rl_nodes rl_bringup)
if [ "$(cat "$venv/.colcon.sha256" 2>/dev/null)" != "$build_hash" ] \
   || ! "$vpy" -c 'import rl_interfaces.msg, rl_core, rl_nodes, rl_bringup' 2>/dev/null \
   || ! [ -x "$venv/bin/rl-bringup" ]; then
  say "colcon build --symlink-install into $venv (first time: about two minutes)"
  mkdir -p "$build_dir"
  # Run from the repository root: colcon reads ./colcon.meta (per-package arguments).
  (
    cd "$root"
    export AMENT_PREFIX_PATH="$venv" CMAKE_PREFIX_PATH="$venv" PATH="$venv/bin:$PATH"
    "$venv/bin/colcon" --log-base "$build_dir/log" build \
      --base-paths "${colcon_paths[@]}" --build-base "$build_dir" \
      --install-base "$venv" --merge-install --symlink-install \
      --cmake-args "-DPython3_EXECUTABLE=$vpy" \
      --event-handlers console_cohesion+ console_start_end- status- >"$build_dir/colcon.log" 2>&1
  ) || { tail -n 40 "$build_dir/colcon.log" >&2; die "colcon build failed; full log: $build_dir/colcon.log"; }

  # `setup.py develop` (--symlink-install) puts the packages on PYTHONPATH through colcon's
  # environment hooks, which only sourcing sets. A .pth file gives the venv the same paths.
  python_paths="$(env -u PYTHONPATH bash -c 'source "$1/local_setup.bash" && printf "%s" "${PYTHONPATH:-}"' _ "$venv")"
  site_packages="$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  tr ':' '\n' <<<"$python_paths" | grep -v -x -F -e "$site_packages" -e '' \
    > "$site_packages/rl_ros2_colcon_develop.pth" || true
  # colcon installs executables where `ros2 run` looks (lib/<package>/); the venv's bin/ links
  # them for pip-only use (.venv/bin/rl-bringup, the supervisor's node executables).
  for package in "${packages[@]}"; do
    for executable in "$venv/lib/$package"/*; do
      [ -f "$executable" ] && [ -x "$executable" ] || continue
      ln -sfn "../lib/$package/$(basename "$executable")" "$venv/bin/$(basename "$executable")"
    done
  done
  echo "$build_hash" > "$venv/.colcon.sha256"
else
  say "colcon build up to date"
fi

"$vpy" -c 'import rclpy, rl_interfaces.msg, rl_core, rl_nodes, rl_bringup' \
  || die "the environment does not import; remove $venv and $build_dir and run again"
say "ready: $venv"
