#!/usr/bin/env bash
# Builds everything and runs the whole test suite (GoogleTest through ctest), compiles the
# portable CPU build (what a GPU machine runs), then the core,
# loader and plugin tests again under ASan + UBSan and the libFuzzer targets
# (scripts/test_sanitized.sh; INFERLAB_SKIP_SANITIZERS=1 skips that part).
# Shared data is read from $INFERLAB_DATA (default ../shared); missing files skip visibly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
if [ -f scripts/fetch_smollm2.sh ]; then
  bash scripts/fetch_smollm2.sh || echo "test: SmolLM2 model unavailable; its tests will skip"
fi
# Slurm and MUNGE for the single-node Slurm test (ctest label slurm); it skips, or fails on CI, without them.
bash scripts/slurm_setup.sh || echo "test: Slurm could not be installed; the slurm test will skip (or fail when CI is set)"
# llama.cpp's tokenizer vectors (vocabularies + .inp/.out cases) from PyPI's llama-cpp-python sdist.
bash scripts/fetch_vocab_tests.sh >/dev/null ||
  echo "test: llama.cpp tokenizer vectors unavailable; VocabVectors will skip"
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
ctest --test-dir build --output-on-failure -j "${INFERLAB_JOBS:-2}" --timeout 900
# The portable build (-DINFERLAB_NATIVE=OFF: baseline x86-64, so the CPU kernels' non-SIMD
# fallbacks) is what scripts/pack_gpu_build.sh carries to a GPU machine; compile its CPU code
# (core, kernels, plugins, the CLI; no CUDA, no test binaries) so its CPU code cannot rot between
# the rare sessions lent a GPU.
echo "test: compiling the portable CPU build (build-portable-check)"
start_portable=$(date +%s)
cmake -S . -B build-portable-check -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERLAB_NATIVE=OFF -DINFERLAB_CUDA=OFF \
  -DINFERLAB_BENCH=OFF >/dev/null
cmake --build build-portable-check -j "${INFERLAB_JOBS:-2}" --target inferlab_core inferlab_plugins inferlab
echo "test: portable build took $(( $(date +%s) - start_portable )) s"
# Then the core, loader and plugin tests under ASan + UBSan and the fuzz targets (build-san).
# CI runs them; INFERLAB_SKIP_SANITIZERS=1 skips them locally.
if [ "${INFERLAB_SKIP_SANITIZERS:-0}" = 1 ]; then
  echo "test: sanitizer build, its tests and fuzzing skipped (INFERLAB_SKIP_SANITIZERS=1)"
else
  bash scripts/test_sanitized.sh
fi
