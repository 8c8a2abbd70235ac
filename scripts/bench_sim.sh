#!/usr/bin/env bash
# The simulator's speed benchmark (issue 13: 100,000 simulated requests in under 10 s on 2
# cores; docs/simulation.md, "Speed"): wall seconds, CPU seconds (user + system: on a shared
# machine the wall clock also measures the other jobs) and peak memory of whole `inferlab run`s,
# each the run with the median CPU time of REPEATS (default 3):
#   1. the Azure 2023 conversation trace, 19,366 requests at its own timestamps (5.5/s);
#   2. 100,000 synthetic requests at 40/s (experiments/sim_continuous_20k.toml, scaled up);
#   3. 100,000 synthetic requests at the trace's rate, 5.5/s (small batches: many more steps).
# Usage: scripts/bench_sim.sh [BUILD_DIR] [REPEATS]   (run from the repository root)
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
bin="$build/bin/inferlab"
[[ -x "$bin" ]] || { echo "bench_sim.sh: no $bin; build first" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

bench() {  # NAME ARGS...: prints NAME, wall s, CPU s and peak RSS MB of the median-CPU run
  local name=$1
  shift
  local rows=()
  for ((i = 0; i < repeats; i++)); do
    /usr/bin/time -f '%e %U %S %M' -o "$out/time" "$bin" run "$@" --out "$out/r$i" --log warn >/dev/null
    rows+=("$(cat "$out/time")")
    rm -rf "$out/r$i"
  done
  printf '%s\n' "${rows[@]}" | awk '{print $2 + $3, $0}' | sort -n | sed -n "$(((repeats + 1) / 2))p" |
    awk -v n="$name" '{printf "| %s | %.2f s | %.2f s | %.0f MB |\n", n, $2, $1, $5 / 1024}'
}

echo "| workload | wall | CPU (median of $repeats) | peak RSS |"
echo "|---|---|---|---|"
bench "Azure conv trace, 19,366 requests" experiments/sim_azure_conv.toml
bench "synthetic, 100,000 requests at 40/s" experiments/sim_continuous_20k.toml --set workload.num_requests=100000
bench "synthetic, 100,000 requests at 5.5/s" experiments/sim_continuous_20k.toml --set workload.num_requests=100000 \
  --set workload.rate=5.5
