#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/fuzz_*.cpp, built by INFERLAB_FUZZ=ON in build-san)
# for a bounded time, starting from its committed seeds in tests/fuzz/corpus/<target>/ (the
# inputs libFuzzer finds grow a scratch copy, not the repository). Fails on any finding: a
# crash, a sanitizer report, an exception other than inferlab::Error, an input slower than
# 30 s (the first includes loading three vocabularies under ASan on a loaded machine) or a
# process past 2 GB; the reproducer is written to <build>/fuzz-findings/<target>/.
# Fix it, add a regression test to the normal suite, and keep the file in the target's corpus.
# Usage: scripts/fuzz.sh [build_dir] [target ...]  (INFERLAB_FUZZ_SECONDS per target, default 15;
# INFERLAB_JOBS targets at once, default 2: each fuzzer is one process on one core)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-san}"
shift || true
seconds="${INFERLAB_FUZZ_SECONDS:-15}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi
# Real vocabularies for fuzz_tokenize beside stories260K's: byte-level BPE (GPT-2, Qwen2) and
# SentencePiece (Llama), from llama.cpp's test vocabularies when they can be fetched.
if vocab="$(bash scripts/fetch_vocab_tests.sh 2>/dev/null)"; then
  vocabs=""
  for v in gpt-2 qwen2 llama-spm; do
    [ -f "$vocab/ggml-vocab-$v.gguf" ] && vocabs="$vocabs${vocabs:+:}$vocab/ggml-vocab-$v.gguf"
  done
  export INFERLAB_FUZZ_VOCABS="$vocabs"
fi
export INFERLAB_PLUGIN_PATH="$PWD/$build/lib/inferlab"
# Leaks in a loader are findings too; UBSan reports abort (the tree has -fno-sanitize-recover).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# One target: its report goes to $work/<name>.report and its verdict to $work/<name>.failed.
fuzz_one() {
  local t="$1" name="${1#fuzz_}"
  local bin="$build/bin/$t" seeds="tests/fuzz/corpus/$name" findings="$build/fuzz-findings/$name"
  mkdir -p "$work/$name" "$findings"
  # A target's dictionary (tests/fuzz/<target>.dict: the keys and values its parser knows).
  local dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  {
    echo "fuzz: $t for ${seconds}s from $(ls "$seeds" | wc -l) seeds${dict:+ with tests/fuzz/$name.dict}"
    if ! "$bin" "${dict[@]}" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$findings/" "$work/$name" "$seeds" >"$work/$name.log" 2>&1; then
      tail -n 40 "$work/$name.log"
      echo "fuzz: $t FOUND A PROBLEM; reproducer(s): $(ls "$findings")"
      touch "$work/$name.failed"
    else
      echo "fuzz: $t ok: $(grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)" "$work/$name.log" |
        sed 's/^stat:://; s/: */=/' | tr '\n' ' ')$(grep -oE "cov: [0-9]+ ft: [0-9]+" "$work/$name.log" | tail -n 1)"
    fi
  } >"$work/$name.report" 2>&1
}
jobs="${INFERLAB_JOBS:-2}"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  cat "$work/${t#fuzz_}.report"
  [ -e "$work/${t#fuzz_}.failed" ] && failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (see $build/fuzz-findings)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s), no finding"
