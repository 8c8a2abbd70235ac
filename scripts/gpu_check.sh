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
#   2. the CUDA tests: test_cuda (ops vs kernels/ref, device, pool, timing, fp32 linear, int8 KV,
#      model parity vs CPU), and the CUDA cases of the f16/bf16 plugin tests;
#   3. cuda_roofline: each op's time, GB/s and TFLOP/s against peaks measured here (copy kernel,
#      8192³ GEMM);
#   4. inferlab bench --device cuda (fp32 / f16 / bf16 linears, naive attention);
#   5. inferlab run experiments/quickstart.toml --set device.kind=cuda;
# and ends with a summary table. Exit status: the number of failed steps.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pack="$(cd "${1:-$root/build-gpu}" && pwd)"
out="${OUT:-$pack/out}"
mkdir -p "$out"
run() { "$pack/run" "$@"; }
declare -a summary
failed=0
step() {  # step NAME LOGFILE COMMAND...
  local name="$1" log="$out/$2"
  shift 2
  local t0=$SECONDS
  echo "=== $name"
  if "$@" >"$log" 2>&1; then
    summary+=("| $name | ok | $((SECONDS - t0)) s |")
  else
    summary+=("| $name | FAILED (exit $?) | $((SECONDS - t0)) s |")
    failed=$((failed + 1))
  fi
  tail -n 40 "$log"
}

step "nvidia-smi" gpu.txt nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
step "test_cuda" test_cuda.txt run test_cuda --gtest_brief=0
step "f16/bf16 CUDA linears" test_half.txt bash -c \
  "'$pack/run' test_quantization_f16 --gtest_filter='*Cuda*' && '$pack/run' test_quantization_bf16 --gtest_filter='*Cuda*'"
step "cuda_roofline" roofline.txt run cuda_roofline --repeats 7 --iters 20
step "bench --device cuda" bench.txt run inferlab bench --device cuda --preset stories15m --attention naive \
  --quantization none,f16,bf16 --context 256 --batch 8 --repeats 5
step "quickstart on cuda" quickstart.txt bash -c \
  "cd '$root' && '$pack/run' inferlab run experiments/quickstart.toml --set device.kind=cuda --out /tmp/gpu_check_results --log warn"

# ---- cuda-kernels block: the attention and quantized-linear kernels (kernels/cuda/attention_*,
# quant_*) against kernels/ref, the attention/quantization conformance cases on cuda, and their
# achieved bandwidth (tests/cuda_kernels/cuda_kernel_roofline.cpp).
step "test_cuda_kernels" test_cuda_kernels.txt run test_cuda_kernels --gtest_brief=0
step "conformance on cuda" conformance_cuda.txt run test_conformance --gtest_filter='*_cuda_*' --gtest_brief=1
step "cuda_kernel_roofline" kernel_roofline.txt run cuda_kernel_roofline
# ---- end of the cuda-kernels block

# Skipped tests say why (no model file carried, no CUDA attention plugin): count them.
skips=$(grep -c "SKIPPED \]" "$out/test_cuda.txt" 2>/dev/null || true)
echo
echo "## gpu_check summary ($(date -u +%FT%TZ))"
echo "| step | result | time |"
echo "|---|---|---|"
printf '%s\n' "${summary[@]}"
echo "test_cuda: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$out/test_cuda.txt" | tr '\n' ' ') skipped lines: ${skips:-0}"
echo
echo "## roofline (from cuda_roofline)"
sed -n '/^| op /,$p' "$out/roofline.txt"
# ---- cuda-kernels block (summary)
echo
echo "## attention and quantized-linear kernels (from cuda_kernel_roofline)"
sed -n '/^| op /,$p' "$out/kernel_roofline.txt"
echo "test_cuda_kernels: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$out/test_cuda_kernels.txt" | tr '\n' ' ')"
echo "conformance on cuda: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$out/conformance_cuda.txt" | tr '\n' ' ')"
# ---- end of the cuda-kernels block (summary)
exit "$failed"
