#!/usr/bin/env bash
# Installs what inferlab needs from Debian's packages; does nothing when everything is already
# present. Safe to run repeatedly.
#   scripts/setup.sh          what building and running the CLI and the plugins needs (quickstart)
#   scripts/setup.sh --test   also GoogleTest, Google Benchmark, clang's sanitizer and libFuzzer
#                             runtimes with llvm-symbolizer (scripts/test_sanitized.sh), python3 (the
#                             docs check), matplotlib (`inferlab plot`) and chromium (the report.html test)
set -euo pipefail
# Boost 1.81, not Debian's default 1.74: Boost.JSON (header-only here) needs 1.75+. Its -dev
# packages replace 1.74's (they conflict), so python3-munkres is named for matplotlib's fonttools,
# whose other choice (scipy, through pythran) would pull libboost-dev 1.74 back.
packages=(cmake ninja-build g++ ccache libboost1.81-dev libboost-program-options1.81-dev
          libtomlplusplus-dev libeigen3-dev libpcre2-dev pkg-config)
if [ "${1:-}" = --test ]; then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev python3 python3-munkres python3-matplotlib chromium clang
            libclang-rt-14-dev llvm-14)
elif [ -n "${1:-}" ]; then
  echo "setup: unknown argument '$1' (allowed: --test)" >&2
  exit 2
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  # --no-install-recommends: clang's recommends alone (llvm-14-dev) are 270 MB that no step uses;
  # llvm-14, which ASan needs to symbolize its reports, is named above instead.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
