#!/usr/bin/env bash
# A host lost mid-job on the namespace cluster of test/cluster/cluster.sh:
#   cluster_faults.sh CASE LAUNCHER REL_WORKER
# CASE is one of
#   drop    the host's link drops every packet (cluster.sh shape --loss 100%)
#   down    the host's own interface goes down (ip link set down inside its namespace)
#   vanish  the host disappears from the network (its veth pair is deleted)
# Two hosts of two ranks run the mixed workload of rel_worker until a collective fails; the second
# host is then lost. Every rank on the first host must fail within the collective timeout (plus
# slack) with an error naming a rank of the lost host, the launcher must exit 1, and no process
# may be left in either namespace. Prints one line of figures ("FIGURES ...") for
# docs/reliability.md. Needs root and network namespaces; it fails, never skips, without them.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../cluster/cluster.sh
CASE=${1:?case}
LAUNCHER=${2:?launcher}
WORKER=${3:?rel_worker}
PREFIX="rf$$-"
NET="${PREFIX}net"
TIMEOUT_S=3
SLACK_S=3
FAILED=0

fail() {
  echo "FAIL: $*" >&2
  FAILED=1
}

now() { echo "$EPOCHREALTIME"; }

cleanup() { "$CLUSTER" down --prefix "$PREFIX" >/dev/null 2>&1 || "$CLUSTER" down --prefix "$PREFIX"; }

# Removes clusters of earlier runs of this script whose process is gone.
reap_stale() {
  local prefix pid
  for prefix in $(ip netns list 2>/dev/null | awk '{print $1}' |
                  sed -nE 's/^(rf[0-9]+-)h[0-9]+$/\1/p' | sort -u); do
    pid=${prefix#rf}
    pid=${pid%-}
    kill -0 "$pid" 2>/dev/null || "$CLUSTER" down --prefix "$prefix" || true
  done
}

# Loses host h1 the way CASE says.
lose_host() {
  local host="${PREFIX}h1"
  # A Linux bridge takes the lowest MAC address of its ports unless given one: deleting h1's
  # port could change the bridge's address under h0's ARP cache and stall h0's traffic to the
  # store for a minute of TCP retransmissions. A real switch keeps its address; so does this one.
  ip link set dev "$NET" address "$(cat "/sys/class/net/$NET/address")"
  case "$CASE" in
    drop) "$CLUSTER" shape "$host" --loss 100% >/dev/null ;;
    down) ip -n "$host" link set dev "$NET" down ;;
    vanish) ip link del "$host" ;;
    *) echo "unknown case $CASE" >&2; exit 2 ;;
  esac
}

# The time stamp and error of rank $1's FAILED line in $LOG, as "t<TAB>message".
failure_of() {
  grep -m1 "FAILED rank=$1 " "$LOG" | sed -E 's/.*FAILED rank=[0-9]+ t=([0-9.]+) [^:]*: (.*)/\1\t\2/'
}

# The launcher's store listens on the cluster bridge's address only, and no worker listens on
# every interface of its host.
check_listeners() {
  local port bridge got ns
  port=$(sed -nE 's/.*STORE port=([0-9]+).*/\1/p' "$LOG" | head -1)
  bridge=$(ip -4 -o addr show dev "$NET" | awk '{split($4, a, "/"); print a[1]}')
  got=$(ss -Hltn "sport = :$port" | awk '{print $4}' | tr '\n' ' ')
  [[ "$got" == "$bridge:$port " ]] || fail "the store listens on '$got', not on $bridge:$port only"
  for ns in "${PREFIX}h0" "${PREFIX}h1"; do
    got=$(ip netns exec "$ns" ss -Hltn | awk '{print $4}' | grep -E '^(0\.0\.0\.0|\*|\[::\]):' || true)
    [[ -z "$got" ]] || fail "a worker in $ns listens on every interface: $got"
  done
  echo "store on $bridge:$port only; workers bound to their host's cluster address"
}

# No 16 consecutive characters of the job's secret (written by rank 0 to a file) in the output.
check_secret() {
  local secret i
  secret=$(cat "$SECRET_FILE")
  [[ ${#secret} -ge 32 ]] || { fail "no secret recorded"; return; }
  for ((i = 0; i + 16 <= ${#secret}; i += 8)); do
    ! grep -qF "${secret:i:16}" "$LOG" || fail "the secret appears in the job's output"
  done
  echo "secret absent from $(wc -l <"$LOG") lines of verbose, TRACE-level output"
  rm -f "$SECRET_FILE"
}

main() {
  [[ $(id -u) -eq 0 ]] || { echo "FAIL: needs root (network namespaces); it does not skip" >&2; exit 1; }
  reap_stale
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  "$CLUSTER" up --prefix "$PREFIX" --hosts 2 >/dev/null ||
    { echo "FAIL: the cluster could not come up (root, ip netns, bridge, tc htb needed)" >&2; exit 1; }
  LOG=$(mktemp)
  SECRET_FILE=$(mktemp)
  # Verbose and TRACE-logged: the secret must still appear nowhere in the output.
  HVDSPARSE_LOG_LEVEL=TRACE REL_SECRET_FILE=$SECRET_FILE timeout -k 5 120 "$LAUNCHER" run \
    --verbose -np 4 -H "${PREFIX}h0:2,${PREFIX}h1:2" --rsh "ip netns exec" \
    --network-interfaces "$NET" --gloo-timeout-seconds "$TIMEOUT_S" \
    "$WORKER" mixed 0 >"$LOG" 2>&1 &
  local job=$! i
  for ((i = 0; i < 600 && $(grep -c "READY rank=" "$LOG") < 4; i++)); do sleep 0.1; done
  [[ $(grep -c "READY rank=" "$LOG") -eq 4 ]] || { cat "$LOG"; fail "the job never got ready"; exit 1; }
  check_listeners
  sleep 0.$((RANDOM % 10))
  local t_lost
  t_lost=$(now)
  lose_host
  wait "$job"
  local rc=$? t_end
  t_end=$(now)
  cat "$LOG"
  local took
  took=$(awk -v a="$t_lost" -v b="$t_end" 'BEGIN { printf "%.2f", b - a }')
  [[ $rc -eq 1 ]] || fail "launcher exit code $rc (1 expected)"
  awk -v t="$took" -v max="$((TIMEOUT_S + 2 + 5 + 5))" 'BEGIN { exit !(t < max) }' ||
    fail "the launcher took $took s to end"
  local r line t msg detect worst=0 seen=""
  for r in 0 1; do
    line=$(failure_of "$r")
    [[ -n "$line" ]] || { fail "rank $r (healthy host) printed no failure"; continue; }
    t=${line%%$'\t'*}
    msg=${line#*$'\t'}
    detect=$(awk -v a="$t_lost" -v b="$t" 'BEGIN { printf "%.3f", b - a }')
    worst=$(awk -v a="$worst" -v b="$detect" 'BEGIN { print (b > a ? b : a) }')
    # "rank 3 stopped responding", or "ranks 2 and 3 reported no error" when this rank timed out
    # on its own host's peer, which waited for the lost host (hierarchical allreduce).
    grep -qE "\branks? [23]\b|\branks [0-9, ]*and [23]\b" <<<"$msg" ||
      fail "rank $r's error names no rank of the lost host: $msg"
    awk -v t="$detect" -v max="$((TIMEOUT_S + SLACK_S))" 'BEGIN { exit !(t < max) }' ||
      fail "rank $r failed $detect s after the host was lost"
    seen=$msg
  done
  for r in 2 3; do
    line=$(failure_of "$r")
    echo "lost host, rank $r: ${line:+${line#*$'\t'}}${line:-no error printed (it was ended by the launcher)}"
  done
  local ns
  for ns in "${PREFIX}h0" "${PREFIX}h1"; do
    [[ -z "$(ip netns pids "$ns" 2>/dev/null)" ]] || fail "processes left in $ns: $(ip netns pids "$ns")"
  done
  check_secret
  echo "FIGURES case=$CASE detect_s=$worst launcher_end_s=$took launcher_rc=$rc message=$seen"
  rm -f "$LOG"
  [[ $FAILED -eq 0 ]] && echo "PASS $CASE"
  exit "$FAILED"
}

main
