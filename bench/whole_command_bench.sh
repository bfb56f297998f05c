#!/usr/bin/env bash
# Whole `perseus optimize` commands as a user runs them (process start to exit, output
# written), the cases of the README's performance table: median wall time over N runs, peak
# memory, output size per frontier point, and the in-process breakdown (--timings) of the
# median run.
#   bash bench/whole_command_bench.sh [--runs N] [--csv] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_args.sh
bench_init runs 5 6 "$@"

# name | profile | microbatches | p_blocking | unit time
cases=(
  "bloom-a100-8x12|data/profiles/bloom-176b+a100-sxm.csv|12|83.64|0.001"
  "gpt3-a40-8x12|data/profiles/gpt3-175b+a40.csv|12|70.38|0.0001"
  "gpt3-a40-8x96|data/profiles/gpt3-175b+a40.csv|96|70.38|0.0001"
)
if [ "$csv" = 1 ]; then
  echo "case,runs,median_wall_s,min_wall_s,peak_rss_mb,points,output_bytes,bytes_per_point,solve_s,median_timings"
else
  printf "%-16s %5s %10s %10s %8s %7s %12s %9s %8s  %s\n" case runs "median s" "min s" "RSS MB" points "output B" "B/point" "solve s" "--timings of the median run"
fi
for spec in "${cases[@]}"; do
  IFS='|' read -r name profile microbatches p_blocking unit_time <<<"$spec"
  rows=()
  for ((r = 0; r < runs; r++)); do
    out="$work/$name"
    /usr/bin/time -f "%e %M" -o "$work/time" "$perseus" optimize --profile "$profile" --microbatches "$microbatches" \
      --p-blocking "$p_blocking" --unit-time "$unit_time" --out "$out" --force -q --timings >"$work/stdout" 2>/dev/null
    read -r wall rss <"$work/time"
    timings=$(grep '^Timings' "$work/stdout" | sed 's/^Timings (s): //')
    rows+=("$wall $rss $timings")
  done
  sorted=$(printf "%s\n" "${rows[@]}" | sort -n -k1,1)
  median=$(echo "$sorted" | sed -n "$(((runs + 1) / 2))p")
  min_wall=$(echo "$sorted" | head -1 | cut -d' ' -f1)
  read -r wall rss timings <<<"$median"
  points=$(($(wc -l <"$out/frontier.csv") - 1))
  bytes=$(du -sb "$out" | cut -f1)
  solve=$(echo "$timings" | awk '{for (i = 1; i < NF; i += 2) if ($i == "crawl" || $i == "frontier") s += $(i + 1); printf "%.3f", s}')
  if [ "$csv" = 1 ]; then
    echo "$name,$runs,$wall,$min_wall,$((rss / 1024)),$points,$bytes,$((bytes / points)),$solve,\"$timings\""
  else
    printf "%-16s %5d %10s %10s %8d %7d %12d %9d %8s  %s\n" "$name" "$runs" "$wall" "$min_wall" $((rss / 1024)) "$points" "$bytes" $((bytes / points)) "$solve" "$timings"
  fi
done
