#!/usr/bin/env bash
# The TCP goodput of a ring step on H namespace hosts with links shaped to RATE: every host h_i
# sends one stream to h_(i+1) while it receives from h_(i-1), as each step of a ring allreduce
# does (data one way, the other stream's ACKs the same way on the same shaped link). Prints each
# receiver's bit/s, lowest first: the lowest is the rate every step of the ring waits for.
#
#   sudo bench/ring_goodput.sh 16 100mbit [SECONDS=6]
set -euo pipefail
H=$1 RATE=$2 SECONDS_=${3:-6} P=rg$$-
cd "$(dirname "$0")/.."
OUT=$(mktemp -d)
test/cluster/cluster.sh up --prefix "$P" --hosts "$H" --rate "$RATE" >/dev/null
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  test/cluster/cluster.sh down --prefix "$P" >/dev/null 2>&1 || true
  rm -rf "$OUT"
}
trap cleanup EXIT
addr() { ip netns exec "${P}h$1" ip -4 -o addr show "${P}net" | awk '{print $4}' | cut -d/ -f1; }
for i in $(seq 0 $((H - 1))); do
  ip netns exec "${P}h$i" timeout 120 python3 bench/suite/linkrate.py recv 5301 >"$OUT/$i" &
  pids+=($!)
done
sleep 2
for i in $(seq 0 $((H - 1))); do
  ip netns exec "${P}h$i" timeout 120 python3 bench/suite/linkrate.py send "$(addr $(((i + 1) % H)))" 5301 "$SECONDS_" &
  pids+=($!)
done
wait "${pids[@]}"
pids=()
for i in $(seq 0 $((H - 1))); do tail -1 "$OUT/$i"; done | sort -n | tr '\n' ' '
echo
