#!/usr/bin/env bash
# Builds inferlab and runs the default experiment (random-weight preset, no download).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/bin/inferlab run experiments/quickstart.toml "$@"
