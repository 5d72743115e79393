#!/usr/bin/env bash
# Cluster tests (ctest runs one CASE per test):
#   cluster_test.sh CASE LAUNCHER CLUSTER_WORKER MP_WORKER [TRANSPORT]
# CASE is lifecycle (cluster.sh itself), identity (ranks and groups on every host), collectives
# (every mp_worker scenario across hosts over TRANSPORT) or cut (a host's link drops everything
# mid-job: the job must fail naming a rank within the collective timeout, leaving nothing behind)
# or algorithm (the allreduce's halving-doubling switch point on 1 Gbit/s links).
# Each run brings up its own cluster, named after its process id so that concurrent runs (other
# build trees) never meet, and removes it on exit; clusters of runs that died are removed first.
# Where network namespaces cannot be made the test says so and fails.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/cluster.sh
CASE=${1:?case}
LAUNCHER=${2:?launcher}
WORKER=${3:?cluster worker}
MP_WORKER=${4:?mp worker}
TRANSPORT=${5:-tcp}
PREFIX="hc$$-"
NET="${PREFIX}net"
COLLECTIVE_TIMEOUT=3
FAILED=0

fail() {
  echo "FAIL: $*" >&2
  FAILED=1
}

now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# Removes the clusters of earlier runs whose process is gone (a run killed by ctest's timeout).
reap_stale_clusters() {
  local prefix
  for prefix in $(ip netns list 2>/dev/null | awk '{print $1}' |
                  sed -nE 's/^(hc[0-9]+-[a-z]?)h[0-9]+$/\1/p' | sort -u); do
    local pid=${prefix#hc}
    pid=${pid%%-*}
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "removing cluster $prefix of dead run $pid"
      "$CLUSTER" down --prefix "$prefix" || true
    fi
  done
}

cleanup() {
  "$CLUSTER" down --prefix "$PREFIX" >/dev/null 2>&1 || "$CLUSTER" down --prefix "$PREFIX"
}

# Brings up a cluster of $1 hosts (extra cluster.sh flags after it) or ends the test.
cluster_up() {
  local start
  start=$(now)
  if ! "$CLUSTER" up --prefix "$PREFIX" --hosts "$@"; then
    echo "FAIL: the test cluster could not come up (see above). These tests need root and" \
      "network namespaces (ip netns add), a bridge, veth pairs and tc htb; they do not skip." >&2
    exit 1
  fi
  echo "cluster up in $(since "$start") s"
}

# Runs the launcher on the cluster with a deadline and the variables in JOB_ENV; output in $OUT,
# exit code in $RC.
JOB_ENV=()
run_job() {
  local start
  start=$(now)
  local where=(--network-interfaces "$NET")
  [[ -n "${RENDEZVOUS_ADDR:-}" ]] && where=(--rendezvous-addr "$RENDEZVOUS_ADDR")
  OUT=$(env "${JOB_ENV[@]}" timeout -k 5 60 "$LAUNCHER" run --rsh "ip netns exec" \
        "${where[@]}" "$@" 2>&1)
  RC=$?
  JOB_SECONDS=$(since "$start")
}

host_addr() { ip -n "$1" -4 -o addr show dev "$NET" | awk '{split($4, a, "/"); print a[1]}'; }

# ---- identity: rank, local_rank, cross_rank and sizes as horovodrun assigns them ----

# Expects the line of rank r: "r size local_rank local_size cross_rank cross_size host".
expect_identity() {
  local r=$1 size=$2 lr=$3 ls=$4 cr=$5 cs=$6 host=$7
  local want="IDENTITY rank=$r size=$size local_rank=$lr local_size=$ls cross_rank=$cr"
  want+=" cross_size=$cs host=${PREFIX}$host addr=$(host_addr "${PREFIX}$host")"
  grep -qxF "[$r]<stdout>:$want" <<<"$OUT" || fail "rank $r: expected '$want'"
}

case_identity() {
  cluster_up 3
  run_job -np 4 -H "${PREFIX}h0:2,${PREFIX}h1:2" "$WORKER" identity
  echo "2 hosts x 2 slots: exit $RC in $JOB_SECONDS s"
  [[ $RC -eq 0 ]] || fail "job exited $RC"
  expect_identity 0 4 0 2 0 2 h0
  expect_identity 1 4 1 2 0 2 h0
  expect_identity 2 4 0 2 1 2 h1
  expect_identity 3 4 1 2 1 2 h1
  [[ $FAILED -eq 0 ]] || echo "$OUT" >&2
  # Uneven hosts: cross groups differ in size per local rank.
  run_job -np 5 -H "${PREFIX}h0:2,${PREFIX}h1:1,${PREFIX}h2:2" "$WORKER" identity
  echo "hosts of 2, 1, 2 slots: exit $RC in $JOB_SECONDS s"
  [[ $RC -eq 0 ]] || fail "job exited $RC"
  expect_identity 0 5 0 2 0 3 h0
  expect_identity 1 5 1 2 0 2 h0
  expect_identity 2 5 0 1 1 3 h1
  expect_identity 3 5 0 2 2 3 h2
  expect_identity 4 5 1 2 1 2 h2
  [[ $FAILED -eq 0 ]] || echo "$OUT" >&2
  # Only the store's address given (no interface): each worker must listen on the address its
  # store connection leaves from, not on loopback, or the hosts never connect (the job would
  # fail after the 3 s collective timeout).
  RENDEZVOUS_ADDR=$(ip -4 -o addr show dev "$NET" | awk '{split($4, a, "/"); print a[1]}')
  JOB_ENV=(HVDSPARSE_GLOO_TIMEOUT_SECONDS=$COLLECTIVE_TIMEOUT)
  run_job -np 4 -H "${PREFIX}h0:2,${PREFIX}h1:2" "$WORKER" identity
  RENDEZVOUS_ADDR=
  JOB_ENV=()
  echo "2 hosts x 2 slots, --rendezvous-addr only: exit $RC in $JOB_SECONDS s"
  [[ $RC -eq 0 ]] || fail "job exited $RC"
  local r
  for r in 0 1 2 3; do
    grep -q "^\[$r\]<stdout>:IDENTITY rank=$r size=4 " <<<"$OUT" || fail "rank $r: no identity line"
  done
  [[ $FAILED -eq 0 ]] || echo "$OUT" >&2
}

# ---- collectives: the multi-process scenarios with ranks on two hosts ----

case_collectives() {
  cluster_up 2
  local s
  local scenarios=(basics allgather broadcast alltoall reducescatter barrier join errors reinit
                   process_sets)
  # Over Gloo's pairs the full allreduce matrix takes 7-10 s even on loopback (two cores); the
  # multi-process suite runs it there, and here join, errors, reinit and process_sets allreduce
  # across the hosts. The default transport runs the matrix, flat and hierarchical.
  [[ "$TRANSPORT" == gloo ]] || scenarios+=(allreduce allreduce:hierarchical)
  for s in "${scenarios[@]}"; do
    local name=${s%%:*}
    JOB_ENV=(HVDSPARSE_TRANSPORT="$TRANSPORT")
    [[ "$s" == *:hierarchical ]] && JOB_ENV+=(HVDSPARSE_HIERARCHICAL_ALLREDUCE=1)
    run_job -np 4 -H "${PREFIX}h0:2,${PREFIX}h1:2" "$MP_WORKER" "$name"
    local passes
    passes=$(grep -c "PASS $name rank" <<<"$OUT")
    echo "$s over $TRANSPORT: exit $RC, $passes of 4 ranks passed, $JOB_SECONDS s"
    if [[ $RC -ne 0 || $passes -ne 4 ]]; then
      fail "$s over $TRANSPORT"
      echo "$OUT" >&2
    fi
  done
}

# ---- algorithm: the halving-doubling switch point follows the link measured at init ----

# Prints the algorithm rank 0's timeline (file $1) names for an allreduce of $2 bytes.
timeline_algorithm() {
  grep -o "\"algorithm\":\"[a-z_]*\",\"fused_tensors\":1,\"bytes\":$2\b" "$1" |
    sed -E 's/.*"algorithm":"([a-z_]+)".*/\1/' | sort -u | tr '\n' ' '
}

case_algorithm() {
  local perf
  perf="$(dirname "$LAUNCHER")/hvdsparse-perf"
  [[ -x "$perf" ]] || { fail "$perf not built"; return; }
  cluster_up 4 --rate 1gbit
  local dir
  dir=$(mktemp -d)
  local knob want128
  for knob in "" 1048576; do
    JOB_ENV=(HVDSPARSE_TIMELINE="$dir/tl$knob.json")
    [[ -n "$knob" ]] && JOB_ENV+=(HVDSPARSE_RHD_MAX_BYTES="$knob")
    run_job -np 4 -H "${PREFIX}h0:1,${PREFIX}h1:1,${PREFIX}h2:1,${PREFIX}h3:1" "$perf" allreduce \
      -b 64K -e 128K -f 2 -n 3 -w 1 -c 1
    local at64 at128
    at64=$(timeline_algorithm "$dir/tl$knob.json" 65536)
    at128=$(timeline_algorithm "$dir/tl$knob.json" 131072)
    echo "1 Gbit/s links, RHD_MAX_BYTES=${knob:-unset}: exit $RC; 64 KiB: $at64; 128 KiB: $at128"
    [[ $RC -eq 0 ]] || { fail "job exited $RC"; echo "$OUT" >&2; }
    # Unset: the wire is the limit, so the ring from 128 KiB; the knob still wins.
    want128=ring
    [[ -n "$knob" ]] && want128=rhd
    [[ "$at64" == "rhd " ]] || fail "64 KiB ran '$at64', not rhd"
    [[ "$at128" == "$want128 " ]] || fail "128 KiB ran '$at128', not $want128"
  done
  rm -rf "$dir"
}

# ---- cut: a host whose link drops every packet fails the job, it does not hang ----

case_cut() {
  cluster_up 2
  local log
  log=$(mktemp)
  local start
  start=$(now)
  timeout -k 5 90 "$LAUNCHER" run -np 4 -H "${PREFIX}h0:2,${PREFIX}h1:2" --rsh "ip netns exec" \
    --network-interfaces "$NET" --gloo-timeout-seconds "$COLLECTIVE_TIMEOUT" \
    "$WORKER" cut >"$log" 2>&1 &
  local job=$!
  local i
  for ((i = 0; i < 300 && $(grep -c READY "$log") == 0; i++)); do sleep 0.1; done
  grep -q READY "$log" || fail "the job never got ready"
  echo "job ready after $(since "$start") s; cutting ${PREFIX}h1"
  local cut
  cut=$(now)
  "$CLUSTER" shape "${PREFIX}h1" --loss 100%
  wait "$job"
  local rc=$? took
  took=$(since "$cut")
  echo "launcher exited $rc, $took s after the cut (collective timeout $COLLECTIVE_TIMEOUT s)"
  cat "$log"
  [[ $rc -eq 1 ]] || fail "launcher exit code $rc (1 expected)"
  awk -v t="$took" -v max="$((COLLECTIVE_TIMEOUT + 12))" 'BEGIN { exit !(t < max) }' ||
    fail "the job took $took s to fail (more than the timeout plus the launcher's grace)"
  # A rank on the healthy host names a rank on the cut one.
  grep -qE "rank [01]: timed out after $((COLLECTIVE_TIMEOUT * 1000)) ms waiting for rank [23]" \
    "$log" || fail "no error of a rank on ${PREFIX}h0 naming a rank on ${PREFIX}h1"
  grep -q "The first process to do so was" "$log" || fail "the launcher did not name a process"
  local ns
  for ns in "${PREFIX}h0" "${PREFIX}h1"; do
    [[ -z "$(ip netns pids "$ns")" ]] || fail "processes left in $ns: $(ip netns pids "$ns")"
  done
  rm -f "$log"
}

# ---- lifecycle: cluster.sh up, shape, status, flags, down ----

# Counts links and namespaces named with prefix $1.
leftovers() {
  { ip netns list | awk '{print $1}'; ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//'; } |
    grep -cE "^$1(h[0-9]+|net)$"
}

case_lifecycle() {
  cluster_up 2 --rate 100mbit
  "$CLUSTER" up --prefix "$PREFIX" --hosts 2 >/dev/null 2>&1 && fail "a second up succeeded"
  local flags
  flags=$("$CLUSTER" flags --prefix "$PREFIX" --slots 2)
  local want="-H ${PREFIX}h0:2,${PREFIX}h1:2 --rsh 'ip netns exec' --network-interfaces $NET"
  [[ "$flags" == "$want" ]] || fail "flags: $flags"
  # Shaping: the rate on both ends, loss as a BPF filter, changed one value at a time.
  tc class show dev "${PREFIX}h1" | grep -q "rate 100Mbit" || fail "no 100Mbit on the bridge side"
  tc -n "${PREFIX}h1" class show dev "$NET" | grep -q "rate 100Mbit" || fail "no 100Mbit in host"
  "$CLUSTER" shape "${PREFIX}h1" --loss 100% || fail "shape --loss 100%"
  tc -n "${PREFIX}h1" filter show dev "$NET" | grep -q "bytecode '1,6 0 0 2'" ||
    fail "no drop filter"
  tc class show dev "${PREFIX}h1" | grep -q "rate 100Mbit" || fail "shape lost the rate"
  "$CLUSTER" status --prefix "$PREFIX" | grep -q "^${PREFIX}h1 .* loss=100%" || fail "status"
  "$CLUSTER" shape "${PREFIX}h1" --loss 0 --rate 1gbit >/dev/null || fail "shape back"
  [[ -z "$(tc filter show dev "${PREFIX}h1")" ]] || fail "the drop filter stayed"
  # A second cluster gets its own subnet.
  local other="hc$$-b"
  "$CLUSTER" up --prefix "$other" --hosts 1 >/dev/null || fail "second cluster"
  local a b
  a=$(host_addr "${PREFIX}h0")
  b=$(ip -n "${other}h0" -4 -o addr show dev "${other}net" | awk '{split($4, x, "/"); print x[1]}')
  [[ "${a%.*}" != "${b%.*}" ]] || fail "two clusters share a subnet: $a $b"
  "$CLUSTER" down --prefix "$other" || fail "down of the second cluster"
  # Down is idempotent and removes everything, also what a crash left half made.
  local start
  start=$(now)
  "$CLUSTER" down --prefix "$PREFIX" || fail "down"
  echo "cluster down in $(since "$start") s"
  "$CLUSTER" down --prefix "$PREFIX" || fail "second down"
  ip netns add "${PREFIX}h7" && ip link add "${PREFIX}net" type bridge
  "$CLUSTER" down --prefix "$PREFIX" || fail "down after a crash"
  [[ $(leftovers "$PREFIX") -eq 0 && $(leftovers "$other") -eq 0 ]] || fail "leftovers"
  "$CLUSTER" status --prefix "$PREFIX" >/dev/null && fail "status of a removed cluster succeeded"
  return 0
}

main() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "FAIL: the cluster tests need root (network namespaces, bridge, tc); they do not skip." >&2
    exit 1
  fi
  reap_stale_clusters
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  local start
  start=$(now)
  case "$CASE" in
    lifecycle) case_lifecycle ;;
    identity) case_identity ;;
    collectives) case_collectives ;;
    cut) case_cut ;;
    algorithm) case_algorithm ;;
    *) echo "unknown case $CASE" >&2; exit 2 ;;
  esac
  echo "case $CASE took $(since "$start") s"
  [[ $FAILED -eq 0 ]] && echo "PASS $CASE"
  exit "$FAILED"
}

main
