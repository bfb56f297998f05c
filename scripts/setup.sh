#!/usr/bin/env bash
# Installs every Debian package perseus needs to build, test and run. Idempotent:
# packages already present are skipped, so it is cheap to call before every build.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  time                      # /usr/bin/time: whole commands' wall time and peak memory (bench/whole_command_bench.sh)
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  liblemon-dev              # the LP relaxation's network simplex; Preflow, compared with our max flow
  coinor-libclp-dev         # LP solver under CBC (the exact MILP reference in tests and benchmarks)
  libeigen3-dev             # Levenberg-Marquardt (MINPACK port) for the cost fits
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libcpp-httplib-dev libsqlite3-dev chromium   # client HTTP, server store (chromium: headless test of its web page)
  libboost-dev              # the server's event-driven HTTP front end (Boost.Beast, Boost.Asio)
  pybind11-dev python3-dev python3-pytest python3-numpy
  python3-venv python3-setuptools python3-wheel   # `pip install .` offline: venv, build backend
  coinor-libcbc-dev coinor-cbc        # exact MILP reference in tests and benchmarks
  zlib1g-dev                # decodes headless Chromium's screenshots in the report and web page tests
  librsvg2-dev              # the report's figures as PNG and PDF (librsvg on cairo)
  libxgboost-dev            # Kareus's MBO surrogates (gradient-boosted trees, C API)
  libslurm-dev slurmctld slurmd slurm-client   # the cluster scheduler's Slurm backend; a real local cluster in its test
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
