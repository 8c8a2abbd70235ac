#!/usr/bin/env bash
# Installs what inferlab needs to build and test, from Debian's packages; does nothing when
# everything is already present. Safe to run repeatedly.
set -euo pipefail
packages=(cmake ninja-build g++ ccache libboost-dev libboost-program-options-dev
          libtomlplusplus-dev libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev
          libpcre2-dev pkg-config python3-matplotlib clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
