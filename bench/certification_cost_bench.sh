#!/usr/bin/env bash
# What the certification adds to whole `perseus optimize` commands (process start to exit,
# output written) over the 16 published cases (the four bundled profiles, 8 stages, 12, 24, 48
# and 96 microbatches, each profile at its reference unit time and p_blocking): per round, all
# 16 at the defaults, then all 16 with --no-certify, so each round is a pair measured under the
# same load. Prints each round's sums and ratio, then the median ratio and the median sums, and
# whether the target (at most 50% added) is met or by how much it is missed.
#   bash bench/certification_cost_bench.sh [--rounds N] [--csv] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_args.sh
bench_init rounds 5 8 "$@"

# profile | p_blocking | unit time (src/perseus/profile/bundled_profiles.hpp)
profiles=(
  "bloom-176b+a100-sxm|83.64|0.001"
  "gpt3-175b+a100-sxm|83.64|0.001"
  "bloom-176b+a40|70.38|0.0001"
  "gpt3-175b+a40|70.38|0.0001"
)
now() { date +%s.%N; }
# All 16 cases once, with the given extra flags; prints the seconds they took together.
all_cases() {
  local start end
  start=$(now)
  for spec in "${profiles[@]}"; do
    IFS='|' read -r profile p_blocking unit_time <<<"$spec"
    for m in 12 24 48 96; do
      "$perseus" optimize --profile "data/profiles/$profile.csv" --microbatches "$m" --p-blocking "$p_blocking" \
        --unit-time "$unit_time" --out "$work/out" --force -q "$@" >/dev/null 2>"$work/stderr" ||
        { echo "failed: $profile x $m $*" >&2; cat "$work/stderr" >&2; exit 1; }
    done
  done
  end=$(now)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }'
}

if [ "$csv" = 1 ]; then echo "round,default_s,no_certify_s,ratio"; else printf "%-6s %12s %15s %8s\n" round "default s" "--no-certify s" ratio; fi
results=()
for ((r = 1; r <= rounds; r++)); do
  with=$(all_cases)
  without=$(all_cases --no-certify)
  ratio=$(awk -v a="$with" -v b="$without" 'BEGIN { printf "%.3f", a / b }')
  results+=("$with $without $ratio")
  if [ "$csv" = 1 ]; then echo "$r,$with,$without,$ratio"; else printf "%-6d %12s %15s %8s\n" "$r" "$with" "$without" "$ratio"; fi
done
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
med_ratio=$(printf "%s\n" "${results[@]}" | cut -d' ' -f3 | median)
med_with=$(printf "%s\n" "${results[@]}" | cut -d' ' -f1 | median)
med_without=$(printf "%s\n" "${results[@]}" | cut -d' ' -f2 | median)
if [ "$csv" = 0 ]; then
  added=$(awk -v r="$med_ratio" 'BEGIN { printf "%.0f", 100 * (r - 1) }')
  echo "median over $rounds rounds: ${med_with} s at the defaults, ${med_without} s with --no-certify;" \
    "the certification adds ${added}% (median of the rounds' ratios, $med_ratio)"
  # The target (issue 18): the certification adds at most 50%.
  if [ "$added" -le 50 ]; then
    echo "target: adds <= 50%: met"
  else
    echo "target: adds <= 50%: missed by $((added - 50)) percentage points"
  fi
fi
