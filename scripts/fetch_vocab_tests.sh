#!/usr/bin/env bash
# Fetches llama.cpp's tokenizer test vocabularies and vectors (models/ggml-vocab-*.gguf with
# their .inp/.out case files, MIT) from the PyPI source distribution of llama-cpp-python,
# checks its sha256 and unpacks only those files into a cache outside the repository.
# Prints the vocabulary folder on stdout. Does nothing but print it when already unpacked.
# Usage: scripts/fetch_vocab_tests.sh [cache_dir]   (default $INFERLAB_CACHE or ~/.cache/inferlab)
set -euo pipefail
cache="${1:-${INFERLAB_CACHE:-$HOME/.cache/inferlab}}"
version="0.3.16"
sdist="llama_cpp_python-$version.tar.gz"
sha256="34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6"
dir="$cache/llama-cpp-python-$version"
vocab="$dir/vendor/llama.cpp/models"

if [ -f "$dir/.complete" ]; then
  echo "$vocab"
  exit 0
fi
mkdir -p "$cache"
if ! { [ -f "$cache/$sdist" ] && echo "$sha256  $cache/$sdist" | sha256sum -c --status; }; then
  # --no-binary for this package only: its build requirements may still come as wheels (pip
  # prepares the sdist's metadata, which builds nothing of llama.cpp).
  if ! python3 -m pip download --no-binary llama-cpp-python --no-deps "llama-cpp-python==$version" \
       -d "$cache" -q >&2; then
    echo "fetch_vocab_tests: could not download llama-cpp-python==$version from PyPI (offline or" \
         "package gone); the tokenizer vector tests will be skipped" >&2
    exit 1
  fi
fi
if ! echo "$sha256  $cache/$sdist" | sha256sum -c --status; then
  echo "fetch_vocab_tests: sha256 mismatch for $sdist (expected $sha256, got" \
       "$(sha256sum "$cache/$sdist" | cut -d' ' -f1)); not unpacked" >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$cache"
tar -xzf "$cache/$sdist" -C "$cache" --wildcards \
  "llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-*.gguf" \
  "llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-*.inp" \
  "llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-*.out"
[ "$cache/llama_cpp_python-$version" = "$dir" ] || mv "$cache/llama_cpp_python-$version" "$dir"
touch "$dir/.complete"
echo "fetch_vocab_tests: unpacked $(ls "$vocab" | wc -l) files into $vocab" >&2
echo "$vocab"
