#!/usr/bin/env bash
# One idempotent setup step for rl_ros2, used by `make run` and `make test`.
#
# - creates .venv with Python 3.11 or 3.12 (override with PYTHON=/path/to/python3.x),
# - installs the pinned requirements (skipped when requirements.txt is unchanged),
# - rewrites the ROS wheels' CMake export files to this interpreter's include dirs,
# - builds and installs rl_interfaces into the venv prefix (skipped when its sources are unchanged),
# - installs rl_core, rl_nodes and rl_bringup in editable mode.
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
  rm -f "$venv/.interfaces.sha256"   # new wheels: rebuild the interfaces against them
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

# --- rl_interfaces -----------------------------------------------------------------------------
interfaces_hash="$(hash_of "$root"/src/rl_interfaces/CMakeLists.txt "$root"/src/rl_interfaces/package.xml \
  "$root"/src/rl_interfaces/msg/* "$root"/src/rl_interfaces/srv/* <(echo "$vpy"))"
if [ "$(cat "$venv/.interfaces.sha256" 2>/dev/null)" != "$interfaces_hash" ] \
   || ! "$vpy" -c 'import rl_interfaces.msg' 2>/dev/null; then
  say "building rl_interfaces (about a minute)"
  rm -rf "$build_dir/rl_interfaces"
  mkdir -p "$build_dir"
  (
    export AMENT_PREFIX_PATH="$venv" CMAKE_PREFIX_PATH="$venv" PATH="$venv/bin:$PATH"
    cmake -S "$root/src/rl_interfaces" -B "$build_dir/rl_interfaces" \
      -DCMAKE_INSTALL_PREFIX="$venv" -DPython3_EXECUTABLE="$vpy" \
      -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release >"$build_dir/rl_interfaces.log" 2>&1 \
    && cmake --build "$build_dir/rl_interfaces" -j "$(nproc)" >>"$build_dir/rl_interfaces.log" 2>&1 \
    && cmake --install "$build_dir/rl_interfaces" >>"$build_dir/rl_interfaces.log" 2>&1
  ) || { tail -n 40 "$build_dir/rl_interfaces.log" >&2; die "building rl_interfaces failed; full log: $build_dir/rl_interfaces.log"; }
  echo "$interfaces_hash" > "$venv/.interfaces.sha256"
else
  say "rl_interfaces up to date"
fi

# --- ament_python packages (editable) --------------------------------------------------------
packages_hash="$(hash_of "$root"/src/rl_{core,nodes,bringup}/{setup.py,setup.cfg,package.xml})"
if [ "$(cat "$venv/.packages.sha256" 2>/dev/null)" != "$packages_hash" ] \
   || ! "$vpy" -c 'import rl_core, rl_nodes, rl_bringup' 2>/dev/null; then
  say "installing rl_core, rl_nodes, rl_bringup (editable)"
  "$vpy" -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation \
    -e "$root/src/rl_core" -e "$root/src/rl_nodes" -e "$root/src/rl_bringup"
  echo "$packages_hash" > "$venv/.packages.sha256"
else
  say "python packages up to date"
fi

"$vpy" -c 'import rclpy, rl_interfaces.msg, rl_core, rl_nodes, rl_bringup' \
  || die "the environment does not import; remove $venv and $build_dir and run again"
say "ready: $venv"
