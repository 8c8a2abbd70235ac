#!/usr/bin/env bash
# How the simulator's cost grows with the workload (docs/simulation.md, "Speed"): requests per
# second of simulation at 10k, 100k and 1M requests in two regimes, on
# experiments/sim_continuous_20k.toml (llama-2-7b shape, H100 profile, continuous batching,
# max_batch 256; prompts lognormal ~256, outputs 16-256), whose capacity is ~48 requests/s:
#   keeping up  - Poisson arrivals at 40/s: the queue stays short (TTFT p50 ~30 ms);
#   overloaded  - Poisson arrivals at 400/s: the queue grows to most of the workload.
# Each row is one whole `inferlab run` (workload, engine, metrics, results files): wall and CPU
# seconds (user + system; on a shared machine the wall clock also measures the other jobs),
# simulated requests per CPU second, steps, TTFT p50 (which regime it was) and peak memory.
# Usage: scripts/bench_sim_scale.sh [BUILD_DIR] [SIZES]   (run from the repository root;
# SIZES default "10000 100000 1000000")
set -euo pipefail
build=${1:-build}
sizes=${2:-10000 100000 1000000}
bin="$build/bin/inferlab"
[[ -x "$bin" ]] || { echo "bench_sim_scale.sh: no $bin; build first" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The value of column NAME in the first data row of a metrics.csv.
column() { awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i } NR == 2 { print $c }' "$1"; }

echo "| regime | requests | wall | CPU | requests / CPU s | steps | TTFT p50 | peak RSS |"
echo "|---|---|---|---|---|---|---|---|"
for n in $sizes; do
  for regime in keeping-up overloaded; do
    rate=40
    [[ $regime == overloaded ]] && rate=400
    /usr/bin/time -f '%e %U %S %M' -o "$out/time" "$bin" run experiments/sim_continuous_20k.toml \
      --set workload.num_requests="$n" --set workload.rate="$rate" --out "$out/r" --log warn >/dev/null
    csv=$(ls -d "$out"/r/*/*/ | tail -1)metrics.csv
    read -r wall user sys rss <"$out/time"
    awk -v g="$regime ($rate/s)" -v n="$n" -v w="$wall" -v c="$(echo "$user + $sys" | bc)" -v rss="$rss" \
      -v steps="$(column "$csv" steps)" -v ttft="$(column "$csv" ttft_ms_p50)" \
      'BEGIN { printf "| %s | %d | %.1f s | %.1f s | %.0f | %d | %.0f ms | %.0f MB |\n", g, n, w, c, n / c, steps, ttft, rss / 1024 }'
    rm -rf "$out/r"
  done
done
