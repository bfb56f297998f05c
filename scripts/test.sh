#!/usr/bin/env bash
# Builds everything and runs every test: GoogleTest suites under CTest, then the Python tests,
# then `pip install .` into a fresh virtual environment (scripts/test_pip_install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure --parallel "${PERSEUS_JOBS:-2}" --timeout 600
# The figures in docs/ are perseus's own output: stale ones fail here (regenerate with the script).
/usr/bin/python3 scripts/regenerate_docs.py --check
if [ -d python/tests ]; then
  PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 -m pytest -q python/tests
fi
# The install path users take: `pip install .` into a fresh venv, then import and solve.
bash scripts/test_pip_install.sh
