#!/usr/bin/env bash
# Installs Debian's Slurm (slurmctld, slurmd, sbatch, ...) and MUNGE for the single-node Slurm
# test (tests/slurm/slurm_test.sh). Does nothing when they are already installed; quiet then.
set -euo pipefail
packages=(slurm-wlm munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "slurm_setup: installing ${missing[*]}" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
