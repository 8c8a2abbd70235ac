#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine (issue 7), in a few minutes on an H200 with CUDA
# 13.0 and no Boost/TOML++/GoogleTest: everything comes from a folder packed here by
# scripts/pack_gpu_build.sh. Prepare and call (from the repository root, on this machine):
#   cmake -S . -B build-portable -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERLAB_CUDA=ON -DINFERLAB_NATIVE=OFF \
#     && ninja -C build-portable && scripts/pack_gpu_build.sh build-portable
#   (portable: the GPU machine's CPU may lack this machine's AVX-512)
#   device tool: run(command="bash scripts/gpu_check.sh build-gpu", carry=["build-gpu"], timeout_s=540)
# Steps, each logged to $OUT (or pack/out) and none stopping the others:
#   1. the GPU as the driver sees it (nvidia-smi);
#   2. the CUDA tests: test_cuda (ops vs kernels/ref, fused ops vs unfused and vs ref, token
#      choice, device, pool, timing, fp32 linear, int8 KV, model parity vs CPU), and the CUDA
#      cases of the f16/bf16 plugin tests; quantization/gguf on cuda (test_quantization_gguf's
#      GgufCuda cases, then tinyllama-1.1b exported as GGUF, benched);
#   3. cuda_roofline: each op's time, GB/s and TFLOP/s against peaks measured here (copy kernel,
#      8192³ GEMM);
#   4. inferlab bench --device cuda (fp32 / f16 / bf16 linears, naive attention);
#   5. inferlab run experiments/quickstart.toml --set device.kind=cuda;
#   6. inferlab bench --device cuda at a 1B-class shape (tinyllama-1.1b, seeded random weights):
#      prefill 512, decode at batch 1 and 32, fp32 / bf16 / int8 / int4 linears; then fused
#      ([device] fuse) with flash's decode split on and off;
#   7. the peers (scripts/gpu_peers.py): copy and bf16 GEMM ceilings, PyTorch SDPA at the decode
#      attention shape, HF transformers generate on the bench's own tinyllama-1.1b weights
#      (`inferlab export --format hf`);
#   8. compute-sanitizer memcheck and racecheck over the kernel tests (racecheck also over the
#      tensor-core linears' tiles);
# GPU_CHECK_1B_ATTENTION / _QUANT / _BATCH narrow the 1B-class bench (defaults flash,split_k /
# none,bf16,int8,int4 / 1,32); GPU_CHECK_RACECHECK_FILTER the racecheck's gtest filter.
# GPU_CHECK_ONLY=REGEX runs only the steps whose names match (a rerun of what failed), e.g.
#   GPU_CHECK_ONLY='kernels|conformance|sanitizer' bash scripts/gpu_check.sh build-gpu
# and ends with a summary table. Each step has its own time limit (`timeout`), so one that hangs
# costs its limit, not the lease. Every step's output is appended to $OUT/gpu_check.log as it
# runs (one file: the device tool returns at most 8), so a call cut short still returns the
# steps that finished. Exit status: the number of failed steps.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pack="$(cd "${1:-$root/build-gpu}" && pwd)"
out="${OUT:-$pack/out}"
mkdir -p "$out"
logs="$(mktemp -d)"
all="$out/gpu_check.log"
: >"$all"
declare -a summary
failed=0
step() {  # step NAME LIMIT_S LOGFILE COMMAND...
  local name="$1" limit="$2" log="$logs/$3"
  shift 3
  local t0=$SECONDS rc=0
  if [ -n "${GPU_CHECK_ONLY:-}" ] && ! [[ "$name" =~ $GPU_CHECK_ONLY ]]; then
    summary+=("| $name | not selected (GPU_CHECK_ONLY) | 0 s |")
    return 0
  fi
  [ "$1" = run ] && set -- "$pack/run" "${@:2}"  # timeout runs programs, not shell functions
  echo "=== $name"
  timeout --kill-after=5 "$limit" "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    summary+=("| $name | ok | $((SECONDS - t0)) s |")
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    summary+=("| $name | TIMED OUT after ${limit} s | $((SECONDS - t0)) s |")
    failed=$((failed + 1))
  else
    summary+=("| $name | FAILED (exit $rc) | $((SECONDS - t0)) s |")
    failed=$((failed + 1))
  fi
  { echo "=== $name (exit $rc, $((SECONDS - t0)) s)"; cat "$log"; } >>"$all"
  # gtest logs: only failures and the totals on the console; the whole log is in $all.
  if grep -q '^\[==========\]' "$log"; then
    grep -E '^\[  FAILED  \]|^\[  PASSED  \]|^\[  SKIPPED \] [0-9]|Failure|error:|Expected|Which is|actual|CUDA error|cuBLAS error' "$log" | head -n 60
  else
    tail -n 25 "$log"
  fi
}

step "nvidia-smi" 20 gpu.txt nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
step "test_cuda" 150 test_cuda.txt run test_cuda --gtest_brief=0
step "f16/bf16 CUDA linears" 60 test_half.txt bash -c \
  "'$pack/run' test_quantization_f16 --gtest_filter='*Cuda*' && '$pack/run' test_quantization_bf16 --gtest_filter='*Cuda*'"
# quantization/gguf on cuda: its linears and GGUF models against the CPU plugin, then TinyLlama's
# shape exported as GGUF (seeded weights; GPU_CHECK_GGUF_TYPES, default q4_0) benched on its blocks.
step "gguf CUDA linears" 90 test_gguf_cuda.txt run test_quantization_gguf --gtest_filter='GgufCuda*' --gtest_brief=0
step "bench gguf on cuda (tinyllama-1.1b)" 240 bench_gguf.txt bash -c \
  "for t in \$(echo '${GPU_CHECK_GGUF_TYPES:-q4_0}' | tr , ' '); do f=/tmp/gpu_check_tinyllama_\$t.gguf; \
   '$pack/run' inferlab export --preset tinyllama-1.1b --format gguf --type \$t --out \$f && \
   '$pack/run' inferlab bench --device cuda --model \$f --attention flash --quantization gguf -p 512 -n 64 \
     --batch 1,32 --context 512 --repeats 3 || exit 1; done"
# ---- cuda-kernels block: the attention and quantized-linear kernels (kernels/cuda/attention_*,
# quant_*) against kernels/ref, the attention/quantization conformance cases on cuda, and their
# achieved bandwidth (tests/cuda_kernels/cuda_kernel_roofline.cpp).
step "test_cuda_kernels" 120 test_cuda_kernels.txt run test_cuda_kernels --gtest_brief=0
step "conformance on cuda" 120 conformance_cuda.txt run test_conformance --gtest_filter='*_cuda_*' --gtest_brief=0
step "quickstart on cuda" 60 quickstart.txt bash -c \
  "cd '$root' && '$pack/run' inferlab run experiments/quickstart.toml --set device.kind=cuda --out /tmp/gpu_check_results --log warn && cat /tmp/gpu_check_results/*/results.md 2>/dev/null | head -n 40"
step "cuda_roofline" 60 roofline.txt run cuda_roofline --repeats 7 --iters 20
step "cuda_kernel_roofline" 60 kernel_roofline.txt run cuda_kernel_roofline
# ---- end of the cuda-kernels block
# ---- cuda-graphs block (issue 41 item 1): decode steps captured and replayed vs eager. The
# logits are checked by test_cuda's CudaGraphs.* cases above; here a whole run with and without
# [device] cuda_graphs (same tokens, graphs replayed) and the decode step with and without them.
step "cuda graphs: run on vs off" 90 graphs_run.txt bash "$root/scripts/gpu_check_graphs.sh" "$pack"
step "cuda graphs: bench decode (tinyllama-1.1b)" 120 graphs_bench.txt bash -c \
  "for g in '' --cuda-graphs; do '$pack/run' inferlab bench --device cuda --preset tinyllama-1.1b --attention flash \
   --quantization none,bf16 -p '' -n 64 --batch 1,32 --context 512 --repeats 3 \$g; done"
# ---- end of the cuda-graphs block
step "bench --device cuda (stories15m)" 60 bench.txt run inferlab bench --device cuda --preset stories15m --attention naive \
  --quantization none,f16,bf16 --context 200 --batch 8 --repeats 5
step "bench --device cuda (tinyllama-1.1b)" 150 bench_1b.txt run inferlab bench --device cuda --preset tinyllama-1.1b \
  --attention "${GPU_CHECK_1B_ATTENTION:-flash,split_k}" --quantization "${GPU_CHECK_1B_QUANT:-none,bf16,int8,int4}" \
  -p 512 -n 64 --batch "${GPU_CHECK_1B_BATCH:-1,32}" --context 512 --repeats 3
# Fused decode kernels ([device] fuse, kernels/cuda/fused.cu) and flash's decode split on / off
# in one call (the unfused rows are the step above's): batch 1 and 32 at a 2048-token context.
step "bench --device cuda --fuse (tinyllama-1.1b)" 120 bench_1b_fused.txt run inferlab bench --device cuda \
  --preset tinyllama-1.1b --attention flash,flash:decode_split=false --quantization none,int8:activations=int8 \
  -p '' -n 64 --batch 1,32 --context 2048 --repeats 3 --fuse
# The HF peer runs the very weights the bench ran: tinyllama-1.1b's seeded random weights
# exported as a Hugging Face folder (bf16; Q/K rows permuted to the half rotation).
hf_dir=/tmp/gpu_check_tinyllama_hf
rm -rf "$hf_dir"
step "export --format hf (tinyllama-1.1b)" 90 export_hf.txt run inferlab export --preset tinyllama-1.1b --format hf \
  --type bf16 --out "$hf_dir"
peer_model=()
[ -f "$hf_dir/config.json" ] && peer_model=(--model-dir "$hf_dir")
step "peers (torch, transformers)" 150 peers.txt env PYTHONUNBUFFERED=1 python3 "$root/scripts/gpu_peers.py" \
  --shape tinyllama-1.1b --batches 1,32 --prompt 512 --new 64 ${peer_model[@]+"${peer_model[@]}"}
# compute-sanitizer over the kernel tests: memcheck (out-of-bounds, misaligned, leaks of device
# memory) and racecheck (shared-memory hazards of the tiled attention and GEMM kernels).
cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
step "compute-sanitizer memcheck" 150 memcheck.txt "$cs" --tool memcheck --error-exitcode 9 \
  "$pack/run" test_cuda_kernels
step "compute-sanitizer racecheck" 100 racecheck.txt "$cs" --tool racecheck --error-exitcode 9 \
  "$pack/run" test_cuda_kernels --gtest_filter="${GPU_CHECK_RACECHECK_FILTER:-CudaAttention.LongContext*}"
# The shared-memory tiles of the tensor-core linears (kernels/cuda/int4_mma.cu, int8_mma.cu).
step "compute-sanitizer racecheck (tensor-core linears)" 90 racecheck_tc.txt "$cs" --tool racecheck \
  --error-exitcode 9 "$pack/run" test_cuda_kernels \
  --gtest_filter='CudaTensorCoreLinears.Int4WeightOnly*:CudaTensorCoreLinears.Int8Activation*'

count() { grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]' "$logs/$1" 2>/dev/null | tr '\n' ' '; }
{
  echo
  echo "## gpu_check summary ($(date -u +%FT%TZ))"
  echo "| step | result | time |"
  echo "|---|---|---|"
  printf '%s\n' "${summary[@]}"
  for t in test_cuda test_half test_gguf_cuda test_cuda_kernels conformance_cuda; do echo "$t: $(count $t.txt)"; done
  for t in memcheck racecheck racecheck_tc; do echo "$t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$t.txt" 2>/dev/null | tr '\n' ' ')"; done
  echo
  echo "## roofline (from cuda_roofline)"
  sed -n '/^| op /,$p' "$logs/roofline.txt" 2>/dev/null
  echo
  echo "## attention and quantized-linear kernels (from cuda_kernel_roofline)"
  sed -n '/^| op /,$p' "$logs/kernel_roofline.txt" 2>/dev/null
  echo
  echo "## CUDA graphs: runs and decode with and without (the backend column says 'graphs')"
  grep -E '^\||^FAIL|^ok' "$logs/graphs_run.txt" 2>/dev/null
  grep '^|' "$logs/graphs_bench.txt" 2>/dev/null
  echo
  echo "## inferlab bench --device cuda, tinyllama-1.1b"
  grep '^|' "$logs/bench_1b.txt" 2>/dev/null
  echo
  echo "## inferlab bench --device cuda, tinyllama-1.1b as GGUF (quantization gguf)"
  grep '^|' "$logs/bench_gguf.txt" 2>/dev/null
  echo
  echo "## inferlab bench --device cuda --fuse, tinyllama-1.1b (flash decode split on / off)"
  grep '^|' "$logs/bench_1b_fused.txt" 2>/dev/null
  echo
  sed -n '/^## peers/,$p' "$logs/peers.txt" 2>/dev/null
} | tee -a "$all"
exit "$failed"
