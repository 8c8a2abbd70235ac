#!/usr/bin/env bash
# `inferlab submit --slurm` on a real Slurm: a single-node cluster (this host as controller and
# compute node) whose munged, slurmctld and slurmd this script starts from a slurm.conf it writes
# under a temporary folder, and stops on exit. It submits a 4-shard job array of a small greedy
# experiment (3 variants x 2 repeats), waits for the merge job's results folder (bounded; it
# polls the files, not squeue), and checks the merged folder against a local `inferlab run` of
# the same file: same variants, repeats, request counts and output tokens per request. Then a
# sweep whose second variant fails: its array task ends FAILED, the merge job runs all the same
# (afterany) and names the failed cell with its error.
#
# usage: slurm_test.sh BUILD_DIR. Slurm and MUNGE come from scripts/slurm_setup.sh (Debian's
# slurm-wlm and munge). Where the services cannot start the test fails when $CI is set, and
# otherwise skips (exit 77) saying why.
set -euo pipefail
build=$(cd "${1:?usage: slurm_test.sh BUILD_DIR}" && pwd)
inferlab="$build/bin/inferlab"
timeout_s="${INFERLAB_SLURM_TIMEOUT:-300}"

cannot_start() {
  if [ -n "${CI:-}" ]; then
    echo "slurm_test: FAILED: $* (CI is set, so this is a failure, not a skip)" >&2
    exit 1
  fi
  echo "slurm_test: SKIPPED: $*" >&2
  exit 77
}
fail() {
  echo "slurm_test: FAILED: $*" >&2
  exit 1
}

for b in munged mungekey slurmctld slurmd sbatch scontrol sinfo; do
  command -v "$b" >/dev/null || cannot_start "$b is not installed (scripts/slurm_setup.sh installs slurm-wlm and munge)"
done
[ "$(id -u)" -eq 0 ] || cannot_start "slurmd must run as root to start jobs (this user: $(id -un))"
[ -x "$inferlab" ] || fail "$inferlab not built"

tmp=$(mktemp -d /tmp/inferlab_slurm.XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
  local rc=$?
  for ((k = ${#pids[@]} - 1; k >= 0; k--)); do kill "${pids[k]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    for f in slurmctld.log slurmd.log munged.log; do
      [ -f "$tmp/$f" ] && { echo "--- end of $f" >&2; tail -n 15 "$tmp/$f" >&2; }
    done
    for f in "$tmp"/res/*/*-slurm/logs/*.err; do
      [ -s "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }
    done
  fi
  [ -n "${INFERLAB_SLURM_KEEP:-}" ] && echo "slurm_test: kept $tmp" >&2 || rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

# MUNGE (Slurm's authentication) with its own key and socket.
mkdir -p "$tmp/munge" && chmod 700 "$tmp/munge"
mungekey --create --keyfile="$tmp/munge/munge.key" >/dev/null 2>&1 || cannot_start "mungekey could not create a key"
chmod 400 "$tmp/munge/munge.key"
munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.socket" \
  --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/munged.seed" --log-file="$tmp/munged.log" \
  >>"$tmp/munged.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$tmp/munge/munge.socket" ] && break; sleep 0.1; done
[ -S "$tmp/munge/munge.socket" ] || cannot_start "munged did not start: $(tail -n 3 "$tmp/munged.log" | tr '\n' ' ')"

# slurm.conf: this host is the controller and the one compute node; no cgroups, no accounting.
host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
cpus=$(nproc)
mkdir -p "$tmp/state" "$tmp/spool"
export SLURM_CONF="$tmp/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=inferlabtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -f "$SLURM_CONF" >>"$tmp/slurmctld.log" 2>&1 &
pids+=($!)
slurmd -D -N "$host" -f "$SLURM_CONF" >>"$tmp/slurmd.log" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
  [ "$state" = "idle" ] && break
  sleep 0.5
done
[ "$state" = "idle" ] || cannot_start "the single-node cluster did not come up (node state '${state:-none}'): $(tail -n 2 "$tmp/slurmctld.log" "$tmp/slurmd.log" | tr '\n' ' ')"
echo "slurm_test: cluster up (controller and node $host, $cpus CPUs, port $port)"

# 3 variants x 2 repeats of stories260K, greedy: 6 cells in 4 shards.
cat >"$tmp/sweep.toml" <<EOF
[experiment]
name = "sweep"
repeats = 2
[model]
preset = "stories260k"
[device]
threads = 1
[workload]
num_requests = 3
prompt_len = 6
output_len = 8
[[variant]]
name = "blocks8"
kv = { block_size = 8 }
[[variant]]
name = "blocks4"
kv = { block_size = 4 }
EOF
cd "$tmp"
submitted=$("$inferlab" submit sweep.toml --slurm --array-size 4 --time 10 --out "$tmp/res" --log warn) ||
  fail "inferlab submit failed"
echo "$submitted" | sed 's/^/slurm_test: /'
merged=$(echo "$submitted" | sed -n 's/^results: //p')
[ -n "$merged" ] || fail "inferlab submit printed no results folder"
job=$(dirname "$merged")

# The local run while Slurm runs the shards.
"$inferlab" run sweep.toml --out "$tmp/local" --log warn >/dev/null || fail "the local run failed"
local_dir=$(ls -d "$tmp"/local/sweep/*)

# Waits for a submission's merge job: its results line closes logs/merge.out.
wait_for_merge() {
  local job=$1 start=$SECONDS
  until grep -q '^results: ' "$job/logs/merge.out" 2>/dev/null; do
    if grep -q 'inferlab: error\|inferlab merge job:' "$job/logs/merge.err" 2>/dev/null; then
      fail "the merge job failed: $(cat "$job/logs/merge.err")"
    fi
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a Slurm daemon (pid $p) exited"; done
    [ $((SECONDS - start)) -lt "$timeout_s" ] || fail "no merged results in $job after ${timeout_s}s"
    sleep 1
  done
}
start=$SECONDS
wait_for_merge "$job"
echo "slurm_test: merged results $((SECONDS - start))s after the local run ended"

# Every shard ran as its own array task (its log is Slurm's), and merge saw all four.
for i in 0 1 2 3; do
  [ -f "$job/logs/shard-$i.err" ] || fail "no Slurm log for array task $i"
  ls -d "$job"/shards/sweep/*-shard${i}of4 >/dev/null 2>&1 || fail "shard $i/4 wrote no results folder"
done
grep -q 'merged from 4 of 4 shard(s)' "$merged/summary.md" || fail "summary.md does not say 4 of 4 shards"

python3 - "$local_dir" "$merged" <<'EOF' || fail "the merged folder differs from the local run (above)"
import csv, json, sys
local, merged = sys.argv[1], sys.argv[2]
def rows(d, f):
    with open(f"{d}/{f}", newline="") as h:
        return list(csv.DictReader(h))
def cells(d):
    return sorted((r["variant"], r["repeat"], r["status"]) for r in rows(d, "metrics.csv"))
def requests(d):
    return sorted((r["variant"], r["repeat"], r["request_id"], r["prompt_tokens"], r["output_tokens"], r["output_hash"])
                  for r in rows(d, "requests.csv"))
a, b = cells(local), cells(merged)
assert a == b, f"variant x repeat cells differ:\n local  {a}\n merged {b}"
assert len(a) == 6 and all(s == "ok" for _, _, s in a), a
ra, rb = requests(local), requests(merged)
assert len(ra) == 18, len(ra)
assert ra == rb, "requests (counts or greedy output tokens) differ:\n" + "\n".join(
    f" local {x}\n merged {y}" for x, y in zip(ra, rb) if x != y)
manifest = json.load(open(f"{merged}/manifest.json"))
assert manifest["run"]["status"] == "complete", manifest["run"]["status"]
assert len(manifest["run"]["merged_from"]) == 4
print(f"slurm_test: merged folder equals the local run: {len(a)} cells, {len(ra)} requests, same output tokens")
EOF

# A shard whose variant fails exits 3, so Slurm marks its task FAILED: the merge job must still
# run (afterany), keep the failed row and name it with its error.
cat >"$tmp/broken.toml" <<EOF
[experiment]
name = "broken"
[model]
preset = "stories260k"
[device]
threads = 1
[workload]
num_requests = 2
prompt_len = 6
output_len = 8
[plugins]
paths = ["$build/test_plugins/throwing"]
[[variant]]
name = "throws"
decoding = { name = "throwing", after = 2 }
EOF
submitted=$("$inferlab" submit broken.toml --slurm --out "$tmp/res" --log warn) || fail "inferlab submit broken.toml failed"
merged=$(echo "$submitted" | sed -n 's/^results: //p')
job=$(dirname "$merged")
wait_for_merge "$job"
grep -q '1 failed: throws repeat 0: throwing decoder: deliberate failure' "$job/logs/merge.err" ||
  fail "merge did not report the failed shard with its error: $(cat "$job/logs/merge.err")"
grep -q '^throws,0,failed,' "$merged/metrics.csv" || fail "the merged metrics.csv has no failed row for the failing variant"
array_job=$(echo "$submitted" | sed -n 's/^array job: \([0-9]*\).*/\1/p')
scontrol show job "$array_job" | grep -q 'JobState=FAILED Reason=NonZeroExitCode' ||
  fail "Slurm did not record the failing shard's task as FAILED: $(scontrol show job "$array_job" | grep JobState)"
echo "slurm_test: a FAILED array task is merged after it (afterany) and reported with its error"
echo "slurm_test: PASSED"
