#!/usr/bin/env bash
# The installed package end to end: installs this build into a temporary prefix, builds
# example_plugin/ against it with find_package(inferlab) and inferlab_add_plugin alone, then runs
# the installed CLI on a tiny experiment whose variant uses that plugin (found through
# [plugins] paths) and whose baseline uses built-in plugins (found beside the installed core); then
# builds the attention example of docs/writing-a-plugin.md (onepass_attention/) the same way and
# runs the installed `inferlab conformance` on it (it passes) and on a copy that drops the last
# K/V block (it fails, naming the case).
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
[[ -x $prefix/libexec/inferlab/test_conformance ]] || fail "no $prefix/libexec/inferlab/test_conformance"
if readelf -d "$prefix/bin/inferlab" "$prefix"/lib*/libinferlab_core.so "$prefix/libexec/inferlab/test_conformance" |
   grep -q "$build"; then
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

# The conformance suites on an out-of-tree attention plugin, through the installed CLI.
onepass=$here/onepass_attention
step configure_onepass "$cmake" -S "$onepass" -B "$tmp/onepass-build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix"
step build_onepass "$cmake" --build "$tmp/onepass-build"
step conformance_onepass "$prefix/bin/inferlab" conformance "$tmp/onepass-build/libinferlab_attention_onepass.so"
grep -q 'OK \] Plugins/AttentionConformance.ContextsAroundBlockEdgesMatchReference/onepass_cpu_default' \
  "$tmp/conformance_onepass.log" || { cat "$tmp/conformance_onepass.log"; fail "onepass: no passing conformance case"; }
mkdir -p "$tmp/broken"
cp "$onepass/CMakeLists.txt" "$tmp/broken/"
sed 's/for (int b = 0; b \* bs <= pos; ++b)/for (int b = 0; (b + 1) * bs <= pos; ++b)/' "$onepass/onepass.cpp" > "$tmp/broken/onepass.cpp"
cmp -s "$onepass/onepass.cpp" "$tmp/broken/onepass.cpp" && fail "the broken copy of onepass.cpp is unchanged (its block loop moved?)"
step configure_broken "$cmake" -S "$tmp/broken" -B "$tmp/broken-build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix"
step build_broken "$cmake" --build "$tmp/broken-build"
rc=0
"$prefix/bin/inferlab" conformance "$tmp/broken-build/libinferlab_attention_onepass.so" > "$tmp/conformance_broken.log" 2>&1 || rc=$?
((rc == 1)) || { cat "$tmp/conformance_broken.log"; fail "the broken onepass exited $rc, not 1"; }
grep -q 'FAILED  \] Plugins/AttentionConformance.ContextsAroundBlockEdgesMatchReference/onepass_cpu_default' \
  "$tmp/conformance_broken.log" || { cat "$tmp/conformance_broken.log"; fail "the broken onepass's failing case is not named"; }
echo "ok: out-of-tree plugins built against $prefix and run by the installed CLI; conformance passes onepass and fails its broken copy"
