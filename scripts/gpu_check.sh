#!/usr/bin/env bash
# The CUDA backend's checks and the side-by-side table on a GPU machine, as ONE prepared run of
# at most GPU_CHECK_BUDGET_S seconds (default 540: the device tool's 9 minutes). Everything comes
# from folders packed here: inferlab's portable CUDA build (scripts/pack_gpu_build.sh) and,
# optionally, llama.cpp's CUDA build (scripts/build_llama_cuda_peer.sh). Prepare and call:
#   cmake -S . -B build-portable -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERLAB_CUDA=ON -DINFERLAB_NATIVE=OFF \
#     && ninja -C build-portable && scripts/pack_gpu_build.sh build-portable
#   scripts/build_llama_cuda_peer.sh                  (build-peer/llama-cuda.tar.xz; optional)
#   device tool: run(command="bash scripts/gpu_check.sh build-gpu", carry=["build-gpu", "build-peer"],
#                    timeout_s=600)
#   bash scripts/gpu_check.sh --plan [build-gpu]      the plan within the budget, runs nothing
#
# Steps, in the order they run, which is also the order of priority (docs/testing.md, "The GPU
# run"): 1. correctness: nvidia-smi; every CUDA test binary of the pack (test_cuda,
# test_cuda_kernels, then any other test_cuda*; test_cuda holds the token choice on the device
# against the host path through the engine); the f16/bf16 CUDA linears; the conformance
# suites' cuda cases; the quickstart on cuda; CUDA graphs on vs off and fused vs unfused decode
# token-identical (`inferlab run`, greedy, tokens_hash of every cell; f32, bf16 and f16 KV; graphs
# on must replay and choose tokens on the device: graph_replays, device_choice_steps); 2. the
# side-by-side table:
# the ceilings (cuda_roofline: copy bandwidth, bf16 GEMM peak), then per shape (TinyLlama-1.1B,
# then the 8B-class llama-3-8b, both seeded random weights) the GGUF export (`inferlab export
# --format gguf`, the very bytes both tools bench), inferlab eager / graphs / graphs+fused
# (`inferlab bench --device cuda`, pp512, decode at batch 1 and 32 at depth 512), llama.cpp CUDA
# (llama-bench -p 512 -n N, llama-batched-bench at 1 and 32 sequences), HF transformers
# `generate` (bf16, sdpa); then cuda_kernel_roofline; 3. compute-sanitizer memcheck and racecheck.
#
# The budget: before each step, the time left (budget - elapsed - GPU_CHECK_RESERVE_S, default 20,
# kept for the table and summary) is compared with the step's estimate; the first step that does
# not fit is trimmed, and so is every step after it: sanitizers go first, then the table's last
# rows (8B before TinyLlama, HF before llama.cpp before inferlab), correctness last. A step runs
# under `timeout` of min(its limit, the time left), so the whole run ends inside the budget.
# A step whose binary, key or peer is absent says "not built (...)" and costs nothing: the slots
# for CUDA graphs (`[device] cuda_graphs`, bench GPU_CHECK_GRAPHS_ARGS, default --cuda-graphs),
# fused decode (`[device] fuse` on cuda, bench GPU_CHECK_FUSED_ARGS, default --fuse --device-choice:
# the greedy token chosen on the device, only ids downloaded), GGUF on CUDA
# (`inferlab plugins` lists cuda for quantization/gguf) and llama.cpp run when those exist.
#
# Knobs: GPU_CHECK_BUDGET_S (30..3600), GPU_CHECK_RESERVE_S, GPU_CHECK_ONLY=REGEX (only the steps
# whose names match, e.g. a rerun of what failed), GPU_CHECK_NEW (decode tokens, default 128),
# GPU_CHECK_REPEATS (3), GPU_CHECK_ATTENTION (flash), GPU_CHECK_QUANT (tinyllama preset stacks,
# bf16,int8,int4), GPU_CHECK_8B_QUANT (bf16), GPU_CHECK_8B_LAYERS (default 8 of 32; 0 = all), GPU_CHECK_GGUF_TYPES
# (q4_0 q8_0), GPU_CHECK_PEER (the llama.cpp tarball; default build-peer/llama-cuda.tar.xz),
# GPU_CHECK_RACECHECK_FILTER.
# The pack may be the folder or `pack_gpu_build.sh --xz`'s compressed one (unpacked into
# GPU_CHECK_WORK, default /tmp/gpu_check_work). Output under $OUT (else pack/out): gpu_check.log (every step's output, appended as it runs, so a
# call cut short still returns what finished), gpu_table.md (the side-by-side table: each row with
# date, card and copy bandwidth), gpu_table_rows.jsonl. Exit status: the number of failed steps.
set -uo pipefail
self="${BASH_SOURCE[0]}"
root="$(cd "$(dirname "$self")/.." && pwd)"
dry=0 step_fn=""
if [ "${1:-}" = "--step" ]; then step_fn="$2" && set -- "$3"; fi  # one step, run by the loop below
if [ "${1:-}" = "--plan" ]; then dry=1; shift; fi
[ -n "${GPU_CHECK_DRY_RUN:-}" ] && dry=1
budget="${GPU_CHECK_BUDGET_S:-540}"
reserve="${GPU_CHECK_RESERVE_S:-20}"
if ! [[ "$budget" =~ ^[0-9]+$ ]] || ((budget < 30 || budget > 3600)); then
  echo "gpu_check: GPU_CHECK_BUDGET_S = '$budget'; allowed: whole seconds 30 .. 3600" >&2
  exit 2
fi
if ! [[ "$reserve" =~ ^[0-9]+$ ]] || ((reserve >= budget)); then
  echo "gpu_check: GPU_CHECK_RESERVE_S = '$reserve'; allowed: whole seconds below GPU_CHECK_BUDGET_S ($budget)" >&2
  exit 2
fi
work="${GPU_CHECK_WORK:-/tmp/gpu_check_work}"
if ((dry)); then
  pack="${1:-$root/build-gpu}"
else
  pack="$(cd "${1:-$root/build-gpu}" 2>/dev/null && pwd)" ||
    { echo "gpu_check: no pack folder ${1:-$root/build-gpu} (scripts/pack_gpu_build.sh makes it)" >&2; exit 2; }
  # A pack compressed by `pack_gpu_build.sh --xz`: unpacked once into the work folder.
  if [ ! -x "$pack/run" ] && [ -f "$pack/pack.tar.xz" ]; then
    rm -rf "$work/pack"
    mkdir -p "$work/pack" && tar -C "$work/pack" -xJf "$pack/pack.tar.xz" ||
      { echo "gpu_check: could not unpack $pack/pack.tar.xz" >&2; exit 2; }
    pack="$work/pack"
  fi
fi
new="${GPU_CHECK_NEW:-128}"
reps="${GPU_CHECK_REPEATS:-3}"
attention="${GPU_CHECK_ATTENTION:-flash}"
peer_tar="${GPU_CHECK_PEER:-$root/build-peer/llama-cuda.tar.xz}"
rows="$work/rows.jsonl"
table="python3 $root/scripts/gpu_table.py"
export GPU_CHECK_WORK="$work"

# ---- the steps: name, phase, estimate (s, what the plan counts), limit (s, the step's timeout),
# function. The order is the priority order; do not move a step across phases.
S_NAME=() S_PHASE=() S_EST=() S_LIMIT=() S_FN=()
add() { S_NAME+=("$1") S_PHASE+=("$2") S_EST+=("$3") S_LIMIT+=("$4") S_FN+=("$5"); }
add "nvidia-smi" correctness 3 20 gpu
add "test_cuda" correctness 30 150 test_cuda
add "test_cuda_kernels" correctness 30 120 test_cuda_kernels
add "other CUDA test binaries" correctness 30 150 more_cuda_tests
add "f16/bf16 CUDA linears" correctness 10 60 half_linears
add "gguf CUDA linears and models" correctness 30 90 gguf_cuda
add "conformance on cuda" correctness 40 120 conformance
add "quickstart on cuda" correctness 15 60 quickstart
add "graphs on vs off token-identical" correctness 20 90 graphs_identity
add "fused vs unfused token-identical" correctness 20 90 fused_identity
add "ceilings (cuda_roofline)" table 15 60 ceilings
add "export GGUF tinyllama-1.1b" table 15 90 export_tl
add "inferlab eager tinyllama-1.1b" table 35 120 eager_tl
add "inferlab graphs tinyllama-1.1b" table 25 90 graphs_tl
add "inferlab graphs+fused tinyllama-1.1b" table 25 90 fused_tl
add "llama.cpp CUDA tinyllama-1.1b" table 25 90 llama_tl
add "HF generate tinyllama-1.1b" table 35 120 hf_tl
add "export GGUF llama-3-8b" table 40 120 export_8b
add "inferlab eager llama-3-8b" table 45 150 eager_8b
add "inferlab graphs llama-3-8b" table 35 120 graphs_8b
add "inferlab graphs+fused llama-3-8b" table 35 120 fused_8b
add "llama.cpp CUDA llama-3-8b" table 25 90 llama_8b
add "HF generate llama-3-8b" table 40 150 hf_8b
add "cuda_kernel_roofline" table 15 60 kernel_roofline
add "compute-sanitizer memcheck" sanitizer 100 150 memcheck
add "compute-sanitizer racecheck" sanitizer 60 100 racecheck
add "compute-sanitizer racecheck (tensor-core linears)" sanitizer 60 90 racecheck_tc

# ---- helpers (also used by the steps, which run as `bash gpu_check.sh --step FN PACK`)
have() { [ -x "$pack/bin/$1" ] || { echo "no $1 in $pack/bin"; return 1; }; }
run() { "$pack/run" "$@"; }
cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
copy_gbs() { cat "$work/copy_gbs" 2>/dev/null; }
# The 8B shape's first 8 of 32 layers by default: every matrix and the vocabulary are
# llama-3-8b's, so the bandwidth fractions are its, while the export, the seeded weights and the
# benches take a quarter of the time the budget could not spare (0 = all 32).
layers_8b="${GPU_CHECK_8B_LAYERS:-8}"
preset_of() { case "$1" in tl) echo tinyllama-1.1b ;; 8b) echo llama-3-8b ;; esac; }
layers_of() { case "$1" in tl) echo 0 ;; 8b) echo "$layers_8b" ;; esac; }
label_of() {
  local l
  l="$(layers_of "$1")"
  if [ "$l" = 0 ]; then preset_of "$1"; else echo "$(preset_of "$1") ($l layers)"; fi
}
quant_of() { case "$1" in tl) echo "${GPU_CHECK_QUANT:-bf16,int8,int4}" ;; 8b) echo "${GPU_CHECK_8B_QUANT:-bf16}" ;; esac; }
gguf_types() { echo "${GPU_CHECK_GGUF_TYPES:-q4_0 q8_0}"; }
gguf_file() { echo "$work/$(preset_of "$1")-$2.gguf"; }

# inferlab validates an experiment that turns a [device] key on, on cuda: the key is built.
identity_toml() {
  cat >"$work/identity.toml" <<'TOML'
# scripts/gpu_check.sh: greedy decode of a burst of requests of mixed lengths (so decode batches
# of several sizes, hence several graph buckets), every cell's tokens hashed into metrics.csv.
[experiment]
name = "gpu_identity"
seed = 1
repeats = 1
[model]
preset = "stories15m"
[device]
kind = "cuda"
[workload]
num_requests = 24
arrival = "poisson"
rate = 400.0
prompt_len = { dist = "uniform", min = 4, max = 96 }
output_len = { dist = "uniform", min = 8, max = 48 }
[baseline]
attention = "flash"
quantization = "none"
scheduler = { name = "continuous", max_batch = 16, max_tokens = 256 }
decoding = { name = "sampling", temperature = 0.0 }
[[variant]]
name = "split_k+bf16+bf16_kv"
attention = "split_k"
quantization = "bf16"
kv = { dtype = "bf16" }
[[variant]]
name = "naive+int8+f16_kv"
attention = "naive"
quantization = "int8"
kv = { dtype = "f16" }
TOML
}
key_built() {  # KEY: inferlab validate accepts KEY=true on cuda
  identity_toml
  run inferlab validate "$work/identity.toml" --set "$1=true" >"$work/validate.txt" 2>&1 ||
    { echo "inferlab validate refuses $1 = true on cuda: $(tail -n 1 "$work/validate.txt")"; return 1; }
}
metrics_column() {  # DIR COLUMN: variant,repeat,COLUMN of every cell (OUT/<experiment>/<stamp>/metrics.csv)
  find "$1" -name metrics.csv -exec python3 -c '
import csv, sys
for path in sys.argv[2:]:
    for row in csv.DictReader(open(path)):
        print(row["variant"] + "," + row["repeat"] + "," + row.get(sys.argv[1], ""))' "$2" {} + | sort
}
cell_hashes() { metrics_column "$1" tokens_hash; }
identity() {  # KEY: the tokens of every cell with KEY=false and KEY=true
  identity_toml
  local v
  for v in false true; do
    rm -rf "$work/identity_$v"
    run inferlab run "$work/identity.toml" --set "$1=$v" --out "$work/identity_$v" --log warn || return 1
  done
  local a b
  a="$(cell_hashes "$work/identity_false")" b="$(cell_hashes "$work/identity_true")"
  echo "$1 = false:"; echo "$a"; echo "$1 = true:"; echo "$b"
  [ -n "$a" ] || { echo "no tokens_hash read from metrics.csv"; return 1; }
  if [ "$a" != "$b" ] || grep -q ',$' <<<"$a"; then echo "$1: tokens DIFFER (or a cell failed)"; return 1; fi
  echo "$1: every cell's tokens identical ($(wc -l <<<"$a") cells)"
}

bench_probe() {  # ARGS...: a tiny cuda bench with these flags runs
  run inferlab bench --preset stories260k --device cuda --quantization none -p 8 -n 2 -r 1 "$@" >"$work/probe.txt" 2>&1 ||
    { echo "inferlab bench --device cuda $* is refused: $(tail -n 1 "$work/probe.txt")"; return 1; }
}
graphs_args() { echo "${GPU_CHECK_GRAPHS_ARGS:---cuda-graphs}"; }
fused_args() { echo "${GPU_CHECK_FUSED_ARGS:---fuse --device-choice}"; }
gguf_on_cuda() {
  local listing  # read whole first: `grep -q` closing a pipe early would fail it under pipefail
  listing="$(run inferlab plugins --kind quantization 2>/dev/null)"
  grep -A1 '^quantization/gguf ' <<<"$listing" | grep -q 'devices:.* cuda' ||
    { echo "quantization/gguf does not list cuda"; return 1; }
}
bench_shape() {  # SHAPE MODE [FLAGS...]: the preset's stacks, then each GGUF file when gguf runs on cuda
  local shape="$1" mode="$2" rc=0 bw t f
  shift 2
  bw=()
  [ -n "$(copy_gbs)" ] && bw=(--bandwidth "$(copy_gbs)")
  local common=(--device cuda --attention "$attention" -p 512 -n "$new" --batch 1,32 --context 512 -r "$reps" -o json
    ${bw[@]+"${bw[@]}"} "$@")
  run inferlab bench --preset "$(preset_of "$shape")" --n-layers "$(layers_of "$shape")" \
    --quantization "$(quant_of "$shape")" "${common[@]}" >"$work/bench.json" &&
    $table inferlab "$rows" "$work/bench.json" --stack "inferlab $mode" --shape "$(label_of "$shape")" || rc=1
  cat "$work/bench.json"
  if gguf_on_cuda >/dev/null; then
    for t in $(gguf_types); do
      f="$(gguf_file "$shape" "$t")"
      [ -f "$f" ] || { echo "no $f (export step)"; rc=1; continue; }
      run inferlab bench --model "$f" --quantization gguf "${common[@]}" >"$work/bench.json" &&
        $table inferlab "$rows" "$work/bench.json" --stack "inferlab $mode" --shape "$(label_of "$shape")" \
          --weights "${t^^}" || rc=1
      cat "$work/bench.json"
    done
  else
    echo "GGUF rows: $(gguf_on_cuda) (not built on CUDA yet)"
  fi
  return $rc
}
export_shape() {
  local t rc=0
  for t in $(gguf_types); do
    run inferlab export --preset "$(preset_of "$1")" --n-layers "$(layers_of "$1")" --format gguf --type "$t" \
      --out "$(gguf_file "$1" "$t")" || rc=1
  done
  ls -l "$work"/*.gguf
  return $rc
}
peer_dir="$work/llama-cuda"
peer_ready() {
  [ -x "$peer_dir/bin/llama-bench" ] && return 0
  [ -f "$peer_tar" ] || { echo "no llama.cpp peer at $peer_tar (scripts/build_llama_cuda_peer.sh; carry build-peer)"; return 1; }
  tar -C "$work" -xJf "$peer_tar" || { echo "could not unpack $peer_tar"; return 1; }
}
llama() {  # PROGRAM ARGS...: the pack's wrapper sets the CUDA library path; the peer's own libraries first
  local p="$1"
  shift
  LD_LIBRARY_PATH="$peer_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" run "$peer_dir/bin/$p" "$@"
}
llama_shape() {
  local t f rc=0
  peer_ready || return 1
  cat "$peer_dir/VERSION"
  for t in $(gguf_types); do
    f="$(gguf_file "$1" "$t")"
    [ -f "$f" ] || { echo "no $f (export step)"; rc=1; continue; }
    llama llama-bench -m "$f" -p 512 -n "$new" -ngl 99 -r "$reps" -o jsonl >"$work/lb.jsonl" 2>"$work/lb.err" &&
      $table llama-bench "$rows" "$work/lb.jsonl" --shape "$(label_of "$1")" --weights "${t^^}" ||
      { rc=1; tail -n 20 "$work/lb.err"; }
    cat "$work/lb.jsonl"
    llama llama-batched-bench -m "$f" -c $((32 * (512 + new) + 64)) -b 2048 -ub 512 -npp 512 -ntg "$new" -npl 1,32 \
      -ngl 99 --output-format jsonl >"$work/bb.jsonl" 2>&1 &&
      $table batched-bench "$rows" "$work/bb.jsonl" --shape "$(label_of "$1")" --weights "${t^^}" --model "$f" ||
      { rc=1; tail -n 20 "$work/bb.jsonl"; }
    grep '^{' "$work/bb.jsonl"
  done
  return $rc
}
hf_shape() {
  local l
  l="$(layers_of "$1")"
  PYTHONUNBUFFERED=1 python3 "$root/scripts/gpu_peers.py" --sections generate --shape "$(preset_of "$1")" \
    --layers "$l" --label "$(label_of "$1")" --batches 1,32 --prompt 512 --new "$new" --jsonl "$work/hf.jsonl" &&
    $table hf "$rows" "$work/hf.jsonl"
}

# ---- the step functions (each: need_X prints why it cannot run and fails; X runs it)
X_gpu() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv &&
    nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 >"$work/card"
}
need_test_cuda() { have test_cuda; }
X_test_cuda() { run test_cuda --gtest_brief=0; }
need_test_cuda_kernels() { have test_cuda_kernels; }
X_test_cuda_kernels() { run test_cuda_kernels --gtest_brief=0; }
other_cuda_tests() {
  local f
  for f in "$pack"/bin/test_cuda*; do
    case "$(basename "$f")" in test_cuda | test_cuda_kernels) ;; *) [ -x "$f" ] && basename "$f" ;; esac
  done
}
need_more_cuda_tests() {
  [ -n "$(other_cuda_tests)" ] ||
    { echo "no test_cuda_* binary besides test_cuda and test_cuda_kernels in the pack"; return 1; }
}
X_more_cuda_tests() {
  local b rc=0
  for b in $(other_cuda_tests); do echo "--- $b"; run "$b" --gtest_brief=0 || rc=1; done
  return $rc
}
need_half_linears() { have test_quantization_f16 && have test_quantization_bf16; }
X_half_linears() { run test_quantization_f16 --gtest_filter='*Cuda*' && run test_quantization_bf16 --gtest_filter='*Cuda*'; }
# quantization/gguf on cuda: its linears and the committed GGUF models against the CPU plugin.
need_gguf_cuda() { have test_quantization_gguf; }
X_gguf_cuda() { run test_quantization_gguf --gtest_filter='GgufCuda*' --gtest_brief=0; }
need_conformance() { have test_conformance; }
X_conformance() { run test_conformance --gtest_filter='*_cuda_*' --gtest_brief=0; }
X_quickstart() {
  rm -rf "$work/quickstart"
  (cd "$root" && run inferlab run experiments/quickstart.toml --set device.kind=cuda --out "$work/quickstart" --log warn) &&
    head -n 40 "$work"/quickstart/*/results.md
}
need_graphs_identity() { key_built device.cuda_graphs; }
X_graphs_identity() {  # the same tokens, and graphs replayed (else the check proves nothing)
  identity device.cuda_graphs || return 1
  local replays
  replays="$(metrics_column "$work/identity_true" graph_replays | awk -F, '{ n += $3 } END { print n + 0 }')"
  echo "graph_replays with cuda_graphs = true: $replays"
  [ "$replays" -gt 0 ] || { echo "no decode step was replayed from a graph"; return 1; }
  # Greedy on cuda chooses its tokens on the device, inside the captured step (only ids downloaded).
  local chosen
  chosen="$(metrics_column "$work/identity_true" device_choice_steps | awk -F, '{ n += $3 } END { print n + 0 }')"
  echo "device_choice_steps with cuda_graphs = true: $chosen"
  [ "$chosen" -gt 0 ] || { echo "no step chose its tokens on the device"; return 1; }
}
need_fused_identity() { key_built device.fuse; }
X_fused_identity() { identity device.fuse; }
need_ceilings() { have cuda_roofline; }
X_ceilings() {
  run cuda_roofline --repeats 7 --iters 20 | tee "$work/roofline.txt"
  $table ceilings "$rows" --roofline "$work/roofline.txt" &&
    sed -n 's/^peak copy bandwidth measured: \([0-9.]*\) GB\/s.*/\1/p' "$work/roofline.txt" >"$work/copy_gbs" &&
    [ -s "$work/copy_gbs" ]
}
X_export_tl() { export_shape tl; }
X_eager_tl() { bench_shape tl eager; }
need_graphs_tl() { bench_probe $(graphs_args); }
X_graphs_tl() { bench_shape tl graphs $(graphs_args); }
need_fused_tl() { bench_probe $(graphs_args) $(fused_args); }
X_fused_tl() { bench_shape tl graphs+fused $(graphs_args) $(fused_args); }
need_llama_tl() { peer_ready; }
X_llama_tl() { llama_shape tl; }
X_hf_tl() { hf_shape tl; }
X_export_8b() { export_shape 8b; }
X_eager_8b() { bench_shape 8b eager; }
need_graphs_8b() { need_graphs_tl; }
X_graphs_8b() { bench_shape 8b graphs $(graphs_args); }
need_fused_8b() { need_fused_tl; }
X_fused_8b() { bench_shape 8b graphs+fused $(graphs_args) $(fused_args); }
need_llama_8b() { peer_ready; }
X_llama_8b() { llama_shape 8b; }
X_hf_8b() { hf_shape 8b; }
need_kernel_roofline() { have cuda_kernel_roofline; }
X_kernel_roofline() { run cuda_kernel_roofline; }
need_memcheck() {
  have test_cuda_kernels || return 1
  [ -x "$cs" ] || { echo "no compute-sanitizer"; return 1; }
}
X_memcheck() { "$cs" --tool memcheck --error-exitcode 9 "$pack/run" test_cuda_kernels; }
need_racecheck() { need_memcheck; }
X_racecheck() {
  "$cs" --tool racecheck --error-exitcode 9 "$pack/run" test_cuda_kernels \
    --gtest_filter="${GPU_CHECK_RACECHECK_FILTER:-CudaAttention.LongContext*}"
}
# The shared-memory tiles of the tensor-core linears (kernels/cuda/int4_mma.cu, int8_mma.cu).
need_racecheck_tc() { need_memcheck; }
X_racecheck_tc() {
  "$cs" --tool racecheck --error-exitcode 9 "$pack/run" test_cuda_kernels \
    --gtest_filter='CudaTensorCoreLinears.Int4WeightOnly*:CudaTensorCoreLinears.Int8Activation*'
}

# One step, inside `timeout` (which runs programs, not shell functions).
if [ -n "$step_fn" ]; then
  "X_$step_fn"
  exit $?
fi

# ---- the plan and the run
out="${OUT:-$pack/out}"
if ((!dry)); then
  mkdir -p "$out" "$work"
  rm -f "$rows" "$work/copy_gbs" "$work/card"
  all="$out/gpu_check.log"
  : >"$all"
  logs="$(mktemp -d)"
fi
declare -a summary
failed=0 sim=0 trimmed_at="" t0=0  # SECONDS counts from the script's start, unpacking included
elapsed() { if ((dry)); then echo "$sim"; else echo $((SECONDS - t0)); fi; }
echo "gpu_check plan: budget ${budget} s, reserve ${reserve} s$( ((dry)) && echo ' (dry run: every step assumed built, each taking its estimate)')"
for i in "${!S_NAME[@]}"; do
  name="${S_NAME[$i]}" phase="${S_PHASE[$i]}" est="${S_EST[$i]}" limit="${S_LIMIT[$i]}" fn="${S_FN[$i]}"
  if [ -n "${GPU_CHECK_ONLY:-}" ] && ! [[ "$name" =~ $GPU_CHECK_ONLY ]]; then
    summary+=("| $name | $phase | not selected (GPU_CHECK_ONLY) | 0 s |")
    continue
  fi
  if ((!dry)) && declare -F "need_$fn" >/dev/null; then
    if ! why="$("need_$fn" 2>&1)"; then
      summary+=("| $name | $phase | not built ($(tr '\n' ' ' <<<"$why" | cut -c1-160)) | 0 s |")
      echo "=== $name: not built: $why" | tee -a "$all"
      continue
    fi
  fi
  left=$((budget - reserve - $(elapsed)))
  if [ -n "$trimmed_at" ] || ((est > left)); then
    [ -n "$trimmed_at" ] || trimmed_at="$name"
    printf 'plan trim %-11s est %4d s  %s\n' "$phase" "$est" "$name"
    summary+=("| $name | $phase | trimmed (budget: ${left} s left at '$trimmed_at') | 0 s |")
    continue
  fi
  t=$((limit < left ? limit : left))
  printf 'plan run  %-11s est %4d s  limit %4d s  %s\n' "$phase" "$est" "$t" "$name"
  if ((dry)); then
    sim=$((sim + est))
    continue
  fi
  s0=$SECONDS rc=0
  echo "=== $name"
  timeout --kill-after=5 "$t" bash "$self" --step "$fn" "$pack" >"$logs/$fn.txt" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    summary+=("| $name | $phase | ok | $((SECONDS - s0)) s |")
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    summary+=("| $name | $phase | TIMED OUT after ${t} s | $((SECONDS - s0)) s |")
    failed=$((failed + 1))
  else
    summary+=("| $name | $phase | FAILED (exit $rc) | $((SECONDS - s0)) s |")
    failed=$((failed + 1))
  fi
  { echo "=== $name (exit $rc, $((SECONDS - s0)) s)"; cat "$logs/$fn.txt"; } >>"$all"
  # gtest logs: only failures and the totals on the console; the whole log is in $all.
  if grep -q '^\[==========\]' "$logs/$fn.txt"; then
    grep -E '^\[  FAILED  \]|^\[  PASSED  \]|^\[  SKIPPED \] [0-9]|Failure|error:|Expected|Which is|actual|CUDA error|cuBLAS error' \
      "$logs/$fn.txt" | head -n 40
  else
    tail -n 15 "$logs/$fn.txt"
  fi
done
if ((dry)); then
  echo "plan total ${sim} s of ${budget} s"
  exit 0
fi

card="$(cat "$work/card" 2>/dev/null || echo 'unknown card')"
$table render "$rows" --out "$out/gpu_table.md" --card "$card" --date "$(date -u +%FT%TZ)" >"$logs/table.txt" 2>&1 ||
  { echo "gpu_table render failed:"; cat "$logs/table.txt"; failed=$((failed + 1)); }
[ -f "$rows" ] && cp "$rows" "$out/gpu_table_rows.jsonl"
count() { grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]' "$logs/$1.txt" 2>/dev/null | tr '\n' ' '; }
{
  echo
  echo "## gpu_check summary ($(date -u +%FT%TZ), $card, budget ${budget} s, used $((SECONDS - t0)) s)"
  echo "| step | phase | result | time |"
  echo "|---|---|---|---|"
  printf '%s\n' "${summary[@]}"
  for t in test_cuda test_cuda_kernels more_cuda_tests half_linears conformance; do echo "$t: $(count $t)"; done
  for t in memcheck racecheck; do echo "$t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$t.txt" 2>/dev/null | tr '\n' ' ')"; done
  echo
  echo "## roofline (from cuda_roofline)"
  sed -n '/^| op /,$p' "$work/roofline.txt" 2>/dev/null
  echo
  echo "## attention and quantized-linear kernels (from cuda_kernel_roofline)"
  sed -n '/^| op /,$p' "$logs/kernel_roofline.txt" 2>/dev/null
  echo
  cat "$out/gpu_table.md" 2>/dev/null
} | tee -a "$all"
exit "$failed"
