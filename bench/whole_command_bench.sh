#!/usr/bin/env bash
# Whole `perseus optimize` commands as a user runs them (process start to exit, output
# written), the cases of the README's performance table: median wall time over N runs, peak
# memory, output size per frontier point, the in-process breakdown (--timings) of the median
# run, and whether each case meets its target (or by how much it misses).
#   bash bench/whole_command_bench.sh [--runs N] [--csv] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_args.sh
bench_init runs 5 6 "$@"

# name | profile | microbatches | p_blocking | unit time | target (issue 17): the median wall
# time at most this many seconds ("wall S"), or at most this times the solve and at most this
# many bytes of output per frontier point ("solve F bytes B")
cases=(
  "bloom-a100-8x12|data/profiles/bloom-176b+a100-sxm.csv|12|83.64|0.001|wall 0.030"
  "gpt3-a40-8x12|data/profiles/gpt3-175b+a40.csv|12|70.38|0.0001|wall 0.3"
  "gpt3-a40-8x96|data/profiles/gpt3-175b+a40.csv|96|70.38|0.0001|solve 1.2 bytes 2048"
)
# Whether the median run meets its case's target, or by how much it misses: "met" or
# "missed: ...".
verdict() {
  local target=$1 wall=$2 solve=$3 per_point=$4
  awk -v t="$target" -v wall="$wall" -v solve="$solve" -v pp="$per_point" 'BEGIN {
    n = split(t, f, " "); miss = ""
    for (i = 1; i < n; i += 2) {
      if (f[i] == "wall" && wall > f[i + 1]) miss = miss sprintf(" %.3f s against %s s (%.1fx);", wall, f[i + 1], wall / f[i + 1])
      if (f[i] == "solve" && wall > f[i + 1] * solve) miss = miss sprintf(" %.2fx the solve against %sx;", wall / solve, f[i + 1])
      if (f[i] == "bytes" && pp > f[i + 1]) miss = miss sprintf(" %d B per point against %d;", pp, f[i + 1])
    }
    if (miss == "") print "met"; else { sub(/;$/, "", miss); print "missed:" miss }
  }'
}
if [ "$csv" = 1 ]; then
  echo "case,runs,median_wall_s,min_wall_s,peak_rss_mb,points,output_bytes,bytes_per_point,solve_s,target,verdict,median_timings"
else
  printf "%-16s %5s %10s %10s %8s %7s %12s %9s %8s  %s\n" case runs "median s" "min s" "RSS MB" points "output B" "B/point" "solve s" "--timings of the median run"
  verdicts=()
fi
for spec in "${cases[@]}"; do
  IFS='|' read -r name profile microbatches p_blocking unit_time target <<<"$spec"
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
  met=$(verdict "$target" "$wall" "$solve" $((bytes / points)))
  if [ "$csv" = 1 ]; then
    echo "$name,$runs,$wall,$min_wall,$((rss / 1024)),$points,$bytes,$((bytes / points)),$solve,$target,\"$met\",\"$timings\""
  else
    printf "%-16s %5d %10s %10s %8d %7d %12d %9d %8s  %s\n" "$name" "$runs" "$wall" "$min_wall" $((rss / 1024)) "$points" "$bytes" $((bytes / points)) "$solve" "$timings"
    verdicts+=("$(printf "  %-16s %-22s %s" "$name" "$target" "$met")")
  fi
done
if [ "$csv" = 0 ]; then
  echo "targets (median run):"
  printf "%s\n" "${verdicts[@]}"
fi
