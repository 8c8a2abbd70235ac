#!/usr/bin/env bash
# Builds what the default experiment runs (the CLI, the core and the plugins; no tests) and runs
# it (random-weight preset, no download). scripts/test.sh builds the rest into the same ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --quick
exec build/bin/inferlab run experiments/quickstart.toml "$@"
