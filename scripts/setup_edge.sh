#!/usr/bin/env bash
# Robot-side install of rl_ros2: a venv that runs the policy node with an exported ONNX model
# (`policy --ros-args -p onnx_model:=policy.onnx`), without torch, pybullet or gymnasium.
#
#   scripts/setup_edge.sh [EDGE_VENV]        # default: .venv-edge beside .venv
#
# - creates EDGE_VENV with the Python that built FROM (default .venv, made by scripts/setup.sh;
#   override with FROM=/path/to/venv or PYTHON=/path/to/python3.x),
# - installs requirements-edge.txt (rclpy, Fast DDS, the message packages, numpy, PyYAML,
#   onnxruntime),
# - copies the compiled rl_interfaces from FROM (its ament layout: the libraries, the Python
#   package, share/rl_interfaces and its ament index entries). They are compiled for FROM's
#   Python version and architecture: on a robot with another Python, run scripts/setup.sh there
#   once and pass that venv as FROM,
# - installs rl_core and rl_nodes (their sources only; the ONNX policy imports nothing else).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
edge="${1:-$root/.venv-edge}"
from="${FROM:-$root/.venv}"
say() { printf '[setup-edge] %s\n' "$*"; }
die() { printf '[setup-edge] ERROR: %s\n' "$*" >&2; exit 1; }

[ -x "$from/bin/python" ] || die "no built venv at $from; run scripts/setup.sh first (it builds rl_interfaces), or set FROM=/path/to/venv"
from_py="$from/bin/python"
site_of() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
# The interpreter behind FROM (a venv's python is a link to it), unless PYTHON names one.
python="${PYTHON:-$("$from_py" -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')}"
[ "$(version_of "$python")" = "$(version_of "$from_py")" ] \
  || die "$python is Python $(version_of "$python"), but rl_interfaces in $from was built for $(version_of "$from_py")"
from_site="$(site_of "$from_py")"
[ -f "$from_site/rl_interfaces/__init__.py" ] \
  || die "$from has no built rl_interfaces; run scripts/setup.sh first"

if [ ! -x "$edge/bin/python" ]; then
  say "creating $edge with $python"
  "$python" -m venv "$edge"
fi
vpy="$edge/bin/python"
say "installing requirements-edge.txt"
"$vpy" -m pip install --disable-pip-version-check -q -r "$root/requirements-edge.txt" \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

# --- rl_interfaces: the files an ament install puts under the prefix -------------------------
# Links are followed (cp -L): a colcon --symlink-install build links them into its build folder.
say "copying rl_interfaces from $from"
edge_site="$(site_of "$vpy")"
mkdir -p "$edge/lib" "$edge/share/ament_index/resource_index" "$edge_site"
cp -L "$from"/lib/librl_interfaces__*.so "$edge/lib/"
rm -rf "$edge_site/rl_interfaces" "$edge/share/rl_interfaces"
cp -rL "$from_site/rl_interfaces" "$edge_site/"
cp -rL "$from/share/rl_interfaces" "$edge/share/"
for entry in "$from"/share/ament_index/resource_index/*/rl_interfaces; do
  kind="$(basename "$(dirname "$entry")")"
  mkdir -p "$edge/share/ament_index/resource_index/$kind"
  cp -L "$entry" "$edge/share/ament_index/resource_index/$kind/"
done

# --- rl_core and rl_nodes ----------------------------------------------------------------------
# Built from a copy, so the build leaves nothing in the source tree.
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
for package in rl_core rl_nodes; do
  mkdir -p "$staging/$package"
  cp -a "$root/src/$package/setup.py" "$root/src/$package/setup.cfg" "$root/src/$package/package.xml" \
    "$root/src/$package/resource" "$staging/$package/"
  (cd "$root/src/$package" && find "$package" -name '*.py' -exec cp --parents {} "$staging/$package/" \;)
done
say "installing rl_core and rl_nodes"
"$vpy" -m pip install --disable-pip-version-check -q --no-deps "$staging/rl_core" "$staging/rl_nodes" \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

# The check runs in a clean environment: a shell of the full venv would lend it its libraries.
env -u LD_LIBRARY_PATH -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u PYTHONPATH "$vpy" -c \
  'import rclpy, rl_interfaces.msg, onnxruntime, rl_nodes.policy' \
  || die "the edge environment does not import; remove $edge and run again"
say "ready: $edge ($(du -sh "$edge" | cut -f1)); run: $edge/bin/policy --ros-args -p onnx_model:=FILE"
