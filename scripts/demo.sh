#!/usr/bin/env bash
# The main job on bundled data: the frontier and frequency plans of Bloom 176B on 8 A100-SXM
# stages, 1F1B with 12 microbatches, written to out/bloom-a100-mb12/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/perseus optimize --profile data/profiles/bloom-176b+a100-sxm.csv --schedule 1f1b \
  --stages 8 --microbatches 12 --p-blocking 83.64 --unit-time 0.001 \
  --out out/bloom-a100-mb12 --force "$@"
