#!/usr/bin/env bash
# Requantises the fetched SmolLM2-135M Q4_1 file (scripts/fetch_smollm2.sh) with llama.cpp's
# llama-quantize into the presets quantization/gguf's SmolLM2 tests read: Q4_K_M, Q3_K_M, Q2_K
# and IQ4_XS (their 576-wide rows make llama.cpp mix in Q5_0, Q5_1, Q8_0, IQ4_NL, ...), and
# Q2_K_ffn_down: the Q2_K preset with every ffn_down (1536-wide rows) forced to Q2_K, since the
# plain Q2_K preset writes no Q2_K tensor on this model. Optional: the tests that read these files
# skip, naming the file, where they are absent. Needs a
# llama-quantize: $LLAMA_QUANTIZE, else one on PATH, else /tmp/llamacpp-build/bin/llama-quantize
# (build it from llama.cpp's sources; this script never builds it). Does nothing for files already
# there. Usage: scripts/requantize_smollm2.sh [models_dir]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
models="${1:-${INFERLAB_MODELS:-$root/models}}"
src="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
quant="${LLAMA_QUANTIZE:-$(command -v llama-quantize || echo /tmp/llamacpp-build/bin/llama-quantize)}"
if [ ! -x "$quant" ]; then
  echo "requantize_smollm2: no llama-quantize (set LLAMA_QUANTIZE to one); the requantised SmolLM2" \
       "tests will be skipped" >&2
  exit 1
fi
if [ ! -f "$src" ]; then
  echo "requantize_smollm2: $src is missing (run scripts/fetch_smollm2.sh first)" >&2
  exit 1
fi
for preset in Q4_K_M Q3_K_M Q2_K IQ4_XS Q2_K_ffn_down; do
  out="$models/SmolLM2-135M-Instruct.$preset.gguf"
  args=("$preset")
  [ "$preset" = Q2_K_ffn_down ] && args=(--tensor-type ffn_down=q2_k Q2_K)
  if [ -f "$out" ]; then
    echo "requantize_smollm2: $out present" >&2
    continue
  fi
  # The source is already quantised (Q4_1): llama-quantize wants --allow-requantize for that.
  "$quant" --allow-requantize "${args[@]:0:${#args[@]}-1}" "$src" "$out.tmp" "${args[-1]}" > "$out.log" 2>&1 || {
    echo "requantize_smollm2: llama-quantize $preset failed; see $out.log" >&2
    rm -f "$out.tmp"
    exit 1
  }
  mv "$out.tmp" "$out"
  rm -f "$out.log"
  echo "requantize_smollm2: wrote $out" >&2
done
