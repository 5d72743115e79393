#!/usr/bin/env bash
# Calibrates hvdsparse-sim on the namespace test cluster and compares its predictions with
# hvdsparse-perf's measurements.
#
#   bench/sim/calibrate.sh [--build build-sim] [--out bench/sim/results] [--hosts "2 4 8"]
#                          [--rate 1gbit] [--prefix simx-] [--quick]
#
# 1. gamma: `hvdsparse-sim gamma` times the float32 sum kernel here (1 MiB segments).
# 2. For each host count H: test/cluster/cluster.sh brings up H namespace hosts (1 rank each) with
#    links shaped to --rate, and hvdsparse-perf measures allreduce (4 B..64 MiB), reducescatter,
#    allgather and broadcast (1..64 MiB). The cluster is torn down after each H and on any exit.
# 3. `hvdsparse-sim fit` fits the runtime overhead and alpha (small allreduces at the smallest H),
#    alpha at every other H (scheduling latency grows with ranks per core), beta (the largest
#    allreduce at the smallest H) and the runtime's copy cost (the largest allgather there), then
#    predicts every row.
# Writes OUT/measurements.csv (hvdsparse-perf rows), OUT/fit.csv and OUT/fit.md (prediction vs
# measurement), OUT/calibrate.log. Needs root (network namespaces). --quick: fewer sizes.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build-sim
OUT=$ROOT/bench/sim/results
HOSTS="2 4 8"
RATE=1gbit
PREFIX=simx-
QUICK=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "calibrate.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

CLUSTER=$ROOT/test/cluster/cluster.sh
SIM=$BUILD/bin/hvdsparse-sim
PERF=$BUILD/bin/hvdsparse-perf
RUN=$BUILD/bin/hvdsparse
for b in "$SIM" "$PERF" "$RUN"; do
  [[ -x "$b" ]] || { echo "calibrate.sh: $b missing; build hvdsparse_sim hvdsparse_perf" \
    "hvdsparse_cli in $BUILD" >&2; exit 1; }
done
mkdir -p "$OUT"
CSV=$OUT/measurements.csv
LOG=$OUT/calibrate.log
: >"$LOG"

teardown() { "$CLUSTER" down --prefix "$PREFIX" >>"$LOG" 2>&1 || true; }
trap teardown EXIT
trap 'exit 130' INT TERM

log() { echo "$*" | tee -a "$LOG"; }

# Runs hvdsparse-perf on every host of the cluster; its CSV rows go to $CSV.
run_perf() {
  local h=$1
  shift
  local hostlist
  hostlist=$(seq -s, -f "${PREFIX}h%g:1" 0 $((h - 1)))
  log "  hvdsparse-perf $*"
  timeout 900 "$RUN" run -np "$h" -H "$hostlist" --rsh "ip netns exec" \
    --network-interfaces "${PREFIX}net" "$PERF" "$@" --csv 2>>"$LOG" |
    sed 's/^\[[0-9]*\]<std[a-z]*>://' | tee -a "$LOG" | grep -E '^[^#].*,' | grep -v '^impl,' \
    >>"$CSV" || { log "  (failed; see $LOG)"; return 1; }
}

measure() {
  local h=$1
  log "== $h hosts at $RATE"
  teardown
  "$CLUSTER" up --hosts "$h" --rate "$RATE" --prefix "$PREFIX" >>"$LOG" 2>&1
  if [[ $QUICK == 1 ]]; then
    run_perf "$h" allreduce -b 4 -e 1K -f 256 -n 20 -w 3
    run_perf "$h" allreduce -b 1M -e 64M -f 8 -n 3 -w 1
    run_perf "$h" allgather -b 16M -e 16M -n 3 -w 1
  else
    run_perf "$h" allreduce -b 4 -e 1M -f 4 -n 20 -w 3
    run_perf "$h" allreduce -b 4M -e 64M -f 4 -n 5 -w 1
    run_perf "$h" reducescatter -b 1M -e 64M -f 8 -n 5 -w 1
    run_perf "$h" allgather -b 1M -e 64M -f 8 -n 5 -w 1
    run_perf "$h" broadcast -b 1M -e 64M -f 8 -n 3 -w 1
  fi
  teardown
}

log "# calibrate.sh $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n), $(nproc) cores, load" \
  "$(cut -d' ' -f1-3 /proc/loadavg); hosts $HOSTS at $RATE, prefix $PREFIX"
GAMMA=$("$SIM" gamma | tee -a "$LOG" | awk '/^gamma.*1024 KiB/ {print $2}')
log "gamma $GAMMA s/B"
echo "impl,coll,np,bytes,count,dtype,redop,time_us,min_us,algbw_gbs,busbw_gbs,wrong,max_err,max_us,first_us" >"$CSV"
for h in $HOSTS; do measure "$h"; done

log "== fit"
"$SIM" fit "$CSV" --gamma "$GAMMA" --cores "$(nproc)" --csv "$OUT/fit.csv" \
  --md-out "$OUT/fit.md" | tee -a "$LOG"
log "wrote $CSV, $OUT/fit.csv, $OUT/fit.md"
