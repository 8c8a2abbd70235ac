#!/usr/bin/env bash
# Configures and builds inferlab into ./build (Release, CPU; CUDA kernels when nvcc is found).
#   scripts/build.sh           everything: the CLI, the core, the plugins, the tests and benchmarks
#   scripts/build.sh --quick   only what `inferlab run` needs: the CLI, the core and the plugins
#                              (scripts/quickstart.sh; tests and benchmarks are not configured,
#                              and the CUDA kernels only where a GPU is visible)
# Env: INFERLAB_JOBS (default 2), INFERLAB_CMAKE_ARGS (extra configure arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${INFERLAB_JOBS:-2}"
if [ "${1:-}" = --quick ]; then
  bash scripts/setup.sh
  # Explicit ON/OFF both ways: the cache remembers, and the other script must not inherit it.
  # No GPU visible: the CUDA kernels are not built (the run could not use them; about a fifth of
  # the build). scripts/build.sh without --quick builds them again where nvcc is found.
  cuda=AUTO
  if ! nvidia-smi -L >/dev/null 2>&1; then cuda=OFF; fi
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERLAB_TESTS=OFF -DINFERLAB_BENCH=OFF \
    -DINFERLAB_CUDA=$cuda ${INFERLAB_CMAKE_ARGS:-} >/dev/null
  cmake --build build -j "$jobs" --target inferlab inferlab_plugins
elif [ -z "${1:-}" ]; then
  bash scripts/setup.sh --test
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERLAB_TESTS=ON -DINFERLAB_BENCH=ON \
    -DINFERLAB_CUDA=AUTO ${INFERLAB_CMAKE_ARGS:-} >/dev/null
  cmake --build build -j "$jobs"
else
  echo "build: unknown argument '$1' (allowed: --quick)" >&2
  exit 2
fi
