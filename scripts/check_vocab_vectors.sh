#!/usr/bin/env bash
# Runs `inferlab tokenize` over llama.cpp's tokenizer test vectors (fetched by
# scripts/fetch_vocab_tests.sh) and requires every .out line of every case, ids and all, for
# each vocabulary whose tokenizer model inferlab supports (llama, gpt2); prints the pass counts.
# Encodes as llama.cpp's test-tokenizer-0 does: no BOS/EOS, control tokens not parsed.
# Usage: scripts/check_vocab_vectors.sh [inferlab binary]   (default build/bin/inferlab)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/build/bin/inferlab}"
if ! vocab="$(bash "$root/scripts/fetch_vocab_tests.sh")"; then
  echo "check_vocab_vectors: vocabulary files unavailable; skipped" >&2
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failed=0
for gguf in "$vocab"/ggml-vocab-*.gguf; do
  [ -f "$gguf.inp" ] || continue
  name="$(basename "$gguf")"
  rm -rf "$tmp/cases" && mkdir -p "$tmp/cases"
  # One file per case: .inp separates cases by a line __ggml_vocab_test__ (the file ends with one).
  n="$(python3 - "$gguf.inp" "$tmp/cases" <<'PY'
import sys
raw = open(sys.argv[1], "rb").read()
parts = raw.split(b"\n__ggml_vocab_test__\n")
if parts and parts[-1] == b"":
    parts.pop()
for i, p in enumerate(parts):
    open(f"{sys.argv[2]}/{i:04d}", "wb").write(p)
print(len(parts))
PY
)"
  files=()
  for f in "$tmp"/cases/*; do files+=(--file "$f"); done
  if ! "$bin" tokenize --model "$gguf" --ids --no-bos --no-parse-special --log error "${files[@]}" \
       > "$tmp/got" 2> "$tmp/err"; then
    if grep -q "not supported" "$tmp/err"; then
      echo "  $name: tokenizer model not supported, not run"
    else
      echo "  $name: FAILED to run: $(head -1 "$tmp/err")"
      failed=1
    fi
    continue
  fi
  sed 's/^ *//; s/ *$//' "$gguf.out" > "$tmp/want"
  same="$(paste -d '\n' "$tmp/got" "$tmp/want" | paste - - | awk -F'\t' '$1 == $2' | wc -l)"
  echo "  $name: $same/$n cases identical"
  [ "$same" -eq "$n" ] || { failed=1; diff "$tmp/want" "$tmp/got" | head -6; }
done
exit $failed
