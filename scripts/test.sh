#!/usr/bin/env bash
# Builds everything and runs the whole test suite (GoogleTest through ctest), compiles the
# portable CPU build (what a GPU machine runs), then the core, loader and plugin tests again
# under ASan + UBSan and the libFuzzer targets (scripts/test_sanitized.sh;
# INFERLAB_SKIP_SANITIZERS=1 skips that part). docs/testing.md describes each step.
# Two cores are kept busy: downloads and package installs run beside the release build, and the
# portable and sanitizer builds run at the lowest priority beside the release build and tests,
# taking only the CPU those leave idle. Their logs: build/test-downloads.log, build/test-builds.log.
# Shared data is read from $INFERLAB_DATA (default ../shared); missing files skip visibly.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${INFERLAB_JOBS:-2}"
start=$(date +%s)
elapsed() { echo "$(( $(date +%s) - start )) s"; }
background=()
trap 'for p in "${background[@]}"; do kill -- -"$p" 2>/dev/null || true; done' EXIT

bash scripts/setup.sh --test
mkdir -p build
# The portable build (-DINFERLAB_NATIVE=OFF: baseline x86-64, so the CPU kernels' non-SIMD
# fallbacks) is what scripts/pack_gpu_build.sh carries to a GPU machine; compile its CPU code
# (core, kernels, plugins, the CLI; no CUDA, no test binaries) so it cannot rot between the rare
# sessions lent a GPU: INFERLAB_PORTABLE_CHECK compiles the sources -march changes as usual and
# the rest at -O0, only to link (CMakeLists.txt). Then the sanitizer build. Both at nice 19 from the start: the release build
# and tests below keep the CPU, and these take what they leave idle (links, configures, waits).
skip_san="${INFERLAB_SKIP_SANITIZERS:-0}"
setsid nice -n 19 bash -c '
  set -euo pipefail
  s=$(date +%s)
  cmake -S . -B build-portable-check -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERLAB_NATIVE=OFF \
    -DINFERLAB_CUDA=OFF -DINFERLAB_TESTS=OFF -DINFERLAB_BENCH=OFF -DINFERLAB_PORTABLE_CHECK=ON >/dev/null
  cmake --build build-portable-check -j "$1" --target inferlab_core inferlab_plugins inferlab
  echo "test: portable build took $(( $(date +%s) - s )) s"
  if [ "$2" != 1 ]; then bash scripts/test_sanitized.sh build; fi' _ "$jobs" "$skip_san" >build/test-builds.log 2>&1 &
builds=$!
background+=("$builds")

# The SmolLM2 model (real-model tests), Slurm and MUNGE (the Slurm test; ctest label slurm: it
# skips, or fails on CI, without them) and llama.cpp's tokenizer vectors wait on the network.
setsid bash -c '
  bash scripts/fetch_smollm2.sh || echo "test: SmolLM2 model unavailable; its tests will skip"
  bash scripts/slurm_setup.sh ||
    echo "test: Slurm could not be installed; the slurm test will skip (or fail when CI is set)"
  bash scripts/fetch_vocab_tests.sh >/dev/null ||
    echo "test: llama.cpp tokenizer vectors unavailable; VocabVectors will skip"' >build/test-downloads.log 2>&1 &
downloads=$!
background+=("$downloads")
bash scripts/build.sh
echo "test: release build done at $(elapsed)"
wait "$downloads" || true
cat build/test-downloads.log

data="${INFERLAB_DATA:-$(cd .. && pwd)/shared}"
if [ ! -f "$data/models/stories260K/stories260K.bin" ]; then
  echo "test: shared data not found at $data (set INFERLAB_DATA); tests that need it are reported as Skipped"
fi
# Published claims that must hold on any machine (arithmetic and simulated rankings; seconds).
echo "test: inferlab reproduce --class exact"
build/bin/inferlab reproduce --class exact --log warn
# The same vectors through the CLI: `inferlab tokenize` must print every .out line exactly.
echo "test: inferlab tokenize against llama.cpp's tokenizer vectors"
bash scripts/check_vocab_vectors.sh build/bin/inferlab
# The whole GoogleTest suite.
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900
echo "test: release tests done at $(elapsed); waiting for the portable and sanitizer builds"

if ! wait "$builds"; then
  tail -n 60 build/test-builds.log
  echo "test: the portable or the sanitizer build failed (whole log: build/test-builds.log)" >&2
  exit 1
fi
grep '^test: ' build/test-builds.log || true
# Then the core, loader and plugin tests under ASan + UBSan and the fuzz targets (build-san).
# CI runs them; INFERLAB_SKIP_SANITIZERS=1 skips them locally.
if [ "$skip_san" = 1 ]; then
  echo "test: sanitizer build, its tests and fuzzing skipped (INFERLAB_SKIP_SANITIZERS=1)"
else
  bash scripts/test_sanitized.sh run
fi
echo "test: all done in $(elapsed)"
