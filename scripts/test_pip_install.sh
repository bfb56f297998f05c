#!/usr/bin/env bash
# The install path Python users take: a fresh virtual environment, `pip install .` of this
# checkout (offline: setuptools, wheel and numpy are Debian's, seen through
# --system-site-packages), then, from outside the checkout, import perseus and solve the
# bundled Bloom profile. The CMake build inside pip goes to $PERSEUS_CMAKE_BUILD_DIR
# (default build-pip/cmake, kept, so later runs are incremental). Prints "pip install: ok".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=/usr/bin/python3  # Debian's: the interpreter python3-dev and pybind11-dev build for
export PERSEUS_CMAKE_BUILD_DIR="${PERSEUS_CMAKE_BUILD_DIR:-$root/build-pip/cmake}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-${PERSEUS_JOBS:-2}}"
unset PYTHONPATH PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS PIP_REQUIRE_VIRTUALENV

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv --system-site-packages "$tmp/venv"
echo "pip install: building and installing into a new venv (CMake build in $PERSEUS_CMAKE_BUILD_DIR)"
start=$SECONDS
"$tmp/venv/bin/python" -m pip install --quiet --no-build-isolation --no-index --no-cache-dir \
  --disable-pip-version-check "$root"
echo "pip install: installed in $((SECONDS - start)) s"

# Nothing the build wrote beside the sources (setuptools' scratch files go to build-pip/).
shopt -s nullglob
junk=("$root"/*.egg-info "$root"/src/perseus/python/*.egg-info "$root"/src/perseus/python/perseus/_perseus*.so
      "$root"/build/lib.* "$root"/build/bdist.* "$root"/build/temp.*)
if ((${#junk[@]})); then
  echo "pip install: FAILED: the build left files in the source tree: ${junk[*]}" >&2
  exit 1
fi

cd "$tmp"
"$tmp/venv/bin/python" - "$root" "$tmp/venv" <<'PY'
import importlib.metadata
import pathlib
import sys

import numpy as np

import perseus

root, venv = (pathlib.Path(a).resolve() for a in sys.argv[1:3])
where = pathlib.Path(perseus.__file__).resolve()
assert venv in where.parents and root not in where.parents, f"perseus imported from {where}, not the venv"
assert importlib.metadata.version("perseus") == perseus.__version__, importlib.metadata.version("perseus")

profile = perseus.Profile.read_csv(root / "data/profiles/bloom-176b+a100-sxm.csv")
frontier = perseus.optimize(profile, microbatches=12, p_blocking=83.64, unit_time=0.001)
assert len(frontier) > 100, len(frontier)
for name in ("times", "energies", "effective_energies"):
    values = getattr(frontier, name)
    assert isinstance(values, np.ndarray), (name, type(values))
    assert values.dtype == np.float64 and values.shape == (len(frontier),), (name, values.dtype, values.shape)
    assert np.all(np.isfinite(values)), name
times = frontier.times
assert np.all(np.diff(times) > 0), "times rise from T_min to T*"
assert times[0] == frontier.t_min and times[-1] == frontier.t_star
assert np.all(np.diff(frontier.effective_energies) < 0), "a slower point costs less"
plan = frontier.plan(frontier.select(deadline_s=3.0))
assert len(plan) == 8 and all(len(stage) == 24 for stage in plan)
print(f"pip install: perseus {perseus.__version__} imported from {where.parent}: {len(frontier)} points, "
      f"T_min {frontier.t_min:.3f} s, T* {frontier.t_star:.3f} s")
PY
echo "pip install: ok"
