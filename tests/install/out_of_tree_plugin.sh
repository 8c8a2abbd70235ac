#!/usr/bin/env bash
# The installed package end to end: installs this build into a temporary prefix, builds
# example_plugin/ against it with find_package(inferlab) and inferlab_add_plugin alone, then runs
# the installed CLI on a tiny experiment whose variant uses that plugin (found through
# [plugins] paths) and whose baseline uses built-in plugins (found beside the installed core).
# Usage: out_of_tree_plugin.sh <build dir> <cmake> <generator> <c++ compiler>
set -euo pipefail
build=$(cd "$1" && pwd) cmake=$2 generator=$3 cxx=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(cd "$(mktemp -d "${TMPDIR:-/tmp}/inferlab-install-test.XXXXXX")" && pwd -P)
# INFERLAB_KEEP_TMP=1 keeps the folder (install, builds, logs, results) for a look afterwards.
if [[ ${INFERLAB_KEEP_TMP:-0} == 1 ]]; then echo "keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
unset INFERLAB_PLUGIN_PATH  # built-in plugins must come from the prefix

fail() { echo "FAIL: $*" >&2; exit 1; }
# step <name> <command...>: runs quietly, shows the command's output only when it fails.
step() {
  local name=$1; shift
  echo "== $name"
  local rc=0
  "$@" > "$tmp/$name.log" 2>&1 || rc=$?
  if ((rc != 0)); then cat "$tmp/$name.log"; fail "$name (exit $rc)"; fi
}

prefix=$tmp/prefix
step install "$cmake" --install "$build" --prefix "$prefix"
[[ -x $prefix/bin/inferlab ]] || fail "no $prefix/bin/inferlab"
ls "$prefix"/lib*/inferlab/libinferlab_scheduling_continuous.so > /dev/null || fail "built-in plugins not installed"
ls "$prefix"/lib*/cmake/inferlab/inferlabConfig.cmake > /dev/null || fail "no CMake package"
if readelf -d "$prefix/bin/inferlab" "$prefix"/lib*/libinferlab_core.so | grep -q "$build"; then
  fail "installed binaries keep a run path into the build tree"
fi

step configure "$cmake" -S "$here/example_plugin" -B "$tmp/plugin-build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix"
step build "$cmake" --build "$tmp/plugin-build"
[[ -f $tmp/plugin-build/libinferlab_scheduling_example_fcfs.so ]] || fail "plugin library not named for the registry"

cat > "$tmp/experiment.toml" <<'TOML'
[experiment]
name = "out_of_tree"
seed = 1
repeats = 1

[plugins]
paths = ["plugin-build"]

[model]
preset = "stories260k"

[device]
threads = 1

[workload]
num_requests = 4
arrival = "all_at_once"
prompt_len = { dist = "uniform", min = 8, max = 16 }
output_len = { dist = "uniform", min = 4, max = 8 }

[baseline]
attention = "naive"
quantization = "none"
scheduler = { name = "continuous", max_batch = 4 }
decoding = "sampling"

[[variant]]
name = "fcfs"
scheduler = { name = "example_fcfs", max_batch = 2 }
TOML
cd "$tmp"  # nothing relative to the source tree or the build may be needed
step run "$prefix/bin/inferlab" run experiment.toml --out "$tmp/results" --log debug
# Every plugin the run loaded came from the prefix or the plugin's build folder.
grep -E '^\[inferlab\] debug: plugin /' "$tmp/run.log" | grep -v -e "$prefix/" -e "$tmp/plugin-build/" \
  && fail "plugins loaded from outside the install"
grep -q "scheduling/example_fcfs 0.1.0" "$tmp/run.log" || fail "example_fcfs not loaded"
csv=$(find "$tmp/results" -name metrics.csv)
[[ -n $csv ]] || fail "no metrics.csv"
grep -q '^fcfs,0,ok,' "$csv" || { cat "$csv"; fail "no ok row for variant fcfs"; }
grep -q '^baseline,0,ok,' "$csv" || { cat "$csv"; fail "no ok row for the baseline"; }
echo "ok: out-of-tree plugin built against $prefix and run by the installed CLI"
