#!/usr/bin/env bash
# Configures and builds inferlab into ./build (Release, CPU; CUDA kernels when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs="${INFERLAB_JOBS:-2}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${INFERLAB_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$jobs"
