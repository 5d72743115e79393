#!/usr/bin/env bash
# A test cluster on one machine: H hosts as network namespaces on one bridge, each link shaped.
#
#   cluster.sh up [--hosts 2] [--prefix hvds-] [--subnet auto|K] [--rate 1gbit] [--delay 0]
#                 [--loss 0]
#   cluster.sh shape HOST [--rate R] [--delay D] [--loss L]   (e.g. --loss 100% cuts HOST off)
#   cluster.sh status [--prefix hvds-]
#   cluster.sh flags [--prefix hvds-] [--slots 1]             (the matching `hvdsparse run` flags)
#   cluster.sh down [--prefix hvds-]
#
# Layout for prefix P and subnet K (198.18.K.0/24, inside the benchmarking range 198.18.0.0/15):
#   root namespace:  bridge "Pnet" 198.18.K.1, one veth "Ph<i>" per host enslaved to it
#   namespace Ph<i>: lo, and the veth's peer, also called "Pnet", 198.18.K.<10+i>
# The namespace is named like the host, so `hvdsparse run --rsh "ip netns exec" -H Ph0:2,...`
# reaches it, and the cluster interface has one name everywhere, so `--network-interfaces Pnet`
# puts the rendezvous store on the bridge and has every worker bind its own host's address.
# Namespaces get no default route: their traffic goes only to the cluster subnet and loopback.
#
# Shaping, on both ends of each host's link (egress of "Pnet" inside the namespace is the host's
# upload, egress of "Ph<i>" on the bridge its download):
#   htb root, one class 1:1 at the rate       the rate (a token bucket that holds for 64 KiB GSO
#                                               packets, and takes a leaf for the delay)
#   leaf 10: netem delay D (only when D > 0)  the delay; netem queues behind the rate, as Mininet
#                                               arranges it, so rate and delay both hold
#   classic-BPF filter on 1: (loss > 0 only)  drops a random fraction (SKF_AD_RANDOM) or, at 100%,
#                                               every packet, silently, like a lossy wire
# Loss uses the BPF filter rather than netem's loss so that it works on kernels built without
# sch_netem (cls_bpf and htb are nearly always there); a delay needs sch_netem and is refused
# with a clear message where the kernel lacks it.
#
# Each host's settings live in the alias of its bridge-side veth, so they vanish with the link
# and `shape` can change one value and keep the others. `down` removes every namespace and link
# named with its prefix, and nothing else; it is idempotent and works after a crash (it reads
# only what the kernel has). Processes still inside a host are killed first (they would linger
# in a detached namespace otherwise).
set -euo pipefail

PREFIX=hvds-
SUBNET=auto
HOSTS=2
SLOTS=1
RATE=1gbit
DELAY=0
LOSS=0
LOCK=/run/lock/hvds-cluster.lock

die() { echo "cluster.sh: $*" >&2; exit 1; }

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }

# The prefix goes into regular expressions and 15-byte interface names: keep it plain and short.
check_prefix() {
  [[ "$PREFIX" =~ ^[A-Za-z0-9_-]{1,11}$ ]] ||
    die "prefix '$PREFIX' must be 1-11 characters of [A-Za-z0-9_-]"
}

host_name() { echo "${PREFIX}h$1"; }
net_name() { echo "${PREFIX}net"; }

# ---- discovery: only kernel state, so it works after a crash ----

# Hosts, plus the namespace `up` makes to probe for permission (left only by a crash).
own_namespaces() {
  ip netns list | awk '{print $1}' | grep -E "^${PREFIX}(h[0-9]+|probe[0-9]+)$" | sort -V || true
}

own_hosts() { own_namespaces | grep -E "^${PREFIX}h[0-9]+$" || true; }

own_links() {
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep -E "^${PREFIX}(h[0-9]+|net)$" || true
}

bridge_addr() { ip -4 -o addr show dev "$(net_name)" 2>/dev/null | awk '{print $4}' | head -1; }

# ---- link settings: "rate=R delay=D loss=L" kept in the bridge-side veth's alias ----

read_settings() {
  local alias
  alias=$(ip -d link show dev "$1" 2>/dev/null | awk '$1 == "alias" {print $2, $3, $4}' || true)
  [[ -n "$alias" ]] || die "host $1 is not part of a cluster (no link named $1)"
  local kv
  for kv in $alias; do
    case "$kv" in
      rate=*) RATE=${kv#rate=} ;;
      delay=*) DELAY=${kv#delay=} ;;
      loss=*) LOSS=${kv#loss=} ;;
    esac
  done
}

is_zero_delay() { [[ "$1" =~ ^0*(\.0*)?(s|ms|us|usec|msec)?$ ]]; }

# Stops before anything changes when a rate, delay or loss is not one tc takes.
check_settings() {
  [[ "$RATE" =~ ^[0-9]+(\.[0-9]+)?([KkMmGgTt]i?)?(bit|bps)$ ]] ||
    die "rate '$RATE' is not a tc rate (e.g. 100mbit, 1gbit)"
  [[ "$DELAY" =~ ^[0-9]+(\.[0-9]+)?(s|sec|ms|msec|us|usec)?$ ]] ||
    die "delay '$DELAY' is not a tc time (e.g. 0.1ms, 100us)"
  loss_percent "$LOSS" >/dev/null
}

# Loss as a percentage in [0, 100] ("0.5", "30%", "100%"); prints the number without "%".
loss_percent() {
  local v=${1%\%}
  [[ "$v" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "loss '$1' is not a percentage"
  awk -v v="$v" 'BEGIN { if (v > 100) exit 1 }' || die "loss '$1' is over 100%"
  echo "$v"
}

# The classic-BPF drop filter as tc's bytecode: ld rand; jge T -> pass; else drop. In direct-action
# mode -1 (TC_ACT_UNSPEC) lets the packet on to class 1:1 and 2 (TC_ACT_SHOT) drops it.
loss_bytecode() {
  local threshold
  threshold=$(awk -v p="$1" 'BEGIN { printf "%.0f", p / 100 * 4294967296 }')
  if [[ "$threshold" -ge 4294967296 ]]; then
    echo "1,6 0 0 2"
  else
    echo "4,32 0 0 4294963256,53 0 1 $threshold,6 0 0 4294967295,6 0 0 2"
  fi
}

# Shapes the egress of dev (inside netns ns when ns is not empty) with RATE, DELAY, LOSS.
shape_dev() {
  local dev=$1 ns=$2
  local tcn=(tc)
  [[ -n "$ns" ]] && tcn=(tc -n "$ns")
  local pct
  pct=$(loss_percent "$LOSS")
  # htb cannot be changed in place: add it once, then change its class and leaf.
  "${tcn[@]}" qdisc show dev "$dev" root | grep -q '^qdisc htb 1: ' ||
    "${tcn[@]}" qdisc replace dev "$dev" root handle 1: htb default 1
  "${tcn[@]}" class replace dev "$dev" parent 1: classid 1:1 htb rate "$RATE" ceil "$RATE" \
    quantum 65536
  if is_zero_delay "$DELAY"; then
    "${tcn[@]}" qdisc replace dev "$dev" parent 1:1 handle 10: pfifo limit 1000
  elif ! "${tcn[@]}" qdisc replace dev "$dev" parent 1:1 handle 10: netem delay "$DELAY" \
      limit 100000 2>/dev/null; then
    die "cannot add a delay of $DELAY on $dev: this kernel has no sch_netem" \
      "(CONFIG_NET_SCH_NETEM); use --delay 0"
  fi
  "${tcn[@]}" filter del dev "$dev" parent 1: 2>/dev/null || true
  if awk -v p="$pct" 'BEGIN { exit !(p > 0) }'; then
    "${tcn[@]}" filter add dev "$dev" parent 1: protocol all prio 1 handle 1 bpf \
      bytecode "$(loss_bytecode "$pct")" direct-action
  fi
}

# Applies the current RATE, DELAY, LOSS to both ends of host's link and records them.
shape_host() {
  local host=$1
  shape_dev "$(net_name)" "$host"
  shape_dev "$host" ""
  ip link set dev "$host" alias "rate=$RATE delay=$DELAY loss=$LOSS"
}

# ---- up ----

# The lowest K whose 198.18.K.0/24 no interface of the root namespace uses.
free_subnet() {
  local k
  for k in $(seq 0 255); do
    if [[ -z "$(ip -4 -o addr show to "198.18.$k.0/24")" ]]; then
      echo "$k"
      return
    fi
  done
  die "every 198.18.K.0/24 is in use"
}

check_subnet() {
  [[ "$1" =~ ^[0-9]+$ && "$1" -le 255 ]] || die "subnet '$1' must be auto or 0..255"
  local used
  used=$(ip -4 -o addr show to "198.18.$1.0/24" | awk '{print $2}' | head -1)
  [[ -z "$used" ]] || die "198.18.$1.0/24 is already used by $used"
}

add_host() {
  local i=$1 k=$2
  local host
  host=$(host_name "$i")
  ip netns add "$host"
  ip link add "$host" type veth peer name "$(net_name)" netns "$host"
  ip link set dev "$host" master "$(net_name)" up
  ip -n "$host" addr add "198.18.$k.$((10 + i))/24" dev "$(net_name)"
  ip -n "$host" link set dev "$(net_name)" up
  ip -n "$host" link set dev lo up
  shape_host "$host"
}

up_failed() {
  echo "cluster.sh: bring-up failed; removing what it made" >&2
  cmd_down || true
}

# Creates the bridge and the hosts; on any failure removes what it made.
cmd_up() {
  [[ "$HOSTS" =~ ^[0-9]+$ && "$HOSTS" -ge 1 && "$HOSTS" -le 240 ]] ||
    die "--hosts must be 1..240"
  [[ ${#PREFIX} -le $((15 - 1 - ${#HOSTS})) ]] ||
    die "prefix '$PREFIX' too long for $HOSTS hosts (interface names hold 15 characters)"
  check_settings
  ip netns add "${PREFIX}probe$$" 2>/dev/null ||
    die "cannot create network namespaces here (ip netns add failed: need root with" \
      "CAP_SYS_ADMIN and CONFIG_NET_NS); the cluster cannot come up"
  ip netns del "${PREFIX}probe$$"
  [[ -z "$(own_namespaces)$(own_links)" ]] ||
    die "a cluster with prefix '$PREFIX' is already up; run: cluster.sh down --prefix $PREFIX"
  trap up_failed EXIT
  # The subnet is chosen and claimed under a lock so that concurrent clusters never share one.
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  flock 9
  local k=$SUBNET
  [[ "$k" == auto ]] && k=$(free_subnet)
  check_subnet "$k"
  ip link add "$(net_name)" type bridge
  ip addr add "198.18.$k.1/24" dev "$(net_name)"
  ip link set dev "$(net_name)" up
  flock -u 9
  local i
  for ((i = 0; i < HOSTS; i++)); do add_host "$i" "$k"; done
  trap - EXIT
  cmd_status
}

# ---- down, status, flags, shape ----

cmd_down() {
  local ns link pid
  for ns in $(own_namespaces); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  # Links first (a veth takes its peer along); a namespace's own cleanup is asynchronous.
  for link in $(own_links); do ip link del "$link" 2>/dev/null || true; done
  for ns in $(own_namespaces); do ip netns del "$ns" 2>/dev/null || true; done
  [[ -z "$(own_namespaces)$(own_links)" ]] || die "could not remove: $(own_namespaces) $(own_links)"
}

# Packets sent and dropped by the root qdisc of dev (in netns ns when not empty).
qdisc_counts() {
  local dev=$1 ns=$2
  local tcn=(tc)
  [[ -n "$ns" ]] && tcn=(tc -n "$ns")
  "${tcn[@]}" -s qdisc show dev "$dev" root 2>/dev/null |
    awk '/Sent/ { s = $4; d = $7; sub(/,/, "", d); print "sent " s " dropped " d; exit }'
}

cmd_status() {
  local hosts
  hosts=$(own_hosts)
  [[ -n "$hosts" ]] || { echo "no cluster with prefix '$PREFIX'"; return 1; }
  echo "bridge $(net_name) $(bridge_addr)"
  local host addr
  for host in $hosts; do
    addr=$(ip -n "$host" -4 -o addr show dev "$(net_name)" | awk '{print $4}')
    read_settings "$host"
    printf '%s %s rate=%s delay=%s loss=%s up[%s] down[%s]\n' "$host" "$addr" "$RATE" "$DELAY" \
      "$LOSS" "$(qdisc_counts "$(net_name)" "$host")" \
      "$(qdisc_counts "$host" "")"
  done
}

cmd_flags() {
  local hosts=() host
  for host in $(own_hosts); do hosts+=("$host:$SLOTS"); done
  [[ ${#hosts[@]} -gt 0 ]] || die "no cluster with prefix '$PREFIX'"
  local list
  list=$(IFS=,; echo "${hosts[*]}")
  echo "-H $list --rsh 'ip netns exec' --network-interfaces $(net_name)"
}

cmd_shape() {
  local host=$1
  read_settings "$host"
  RATE=${NEW_RATE:-$RATE}
  DELAY=${NEW_DELAY:-$DELAY}
  LOSS=${NEW_LOSS:-$LOSS}
  check_settings
  PREFIX=${host%h*}
  shape_host "$host"
  echo "$host rate=$RATE delay=$DELAY loss=$LOSS"
}

main() {
  [[ $# -ge 1 ]] || { usage; exit 2; }
  local cmd=$1 host=""
  shift
  if [[ "$cmd" == shape ]]; then
    [[ $# -ge 1 ]] || die "shape needs a host"
    host=$1
    shift
  fi
  while [[ $# -gt 0 ]]; do
    [[ $# -ge 2 ]] || die "$1 needs a value"
    case "$1" in
      --hosts) HOSTS=$2 ;;
      --prefix) PREFIX=$2 ;;
      --subnet) SUBNET=$2 ;;
      --slots) SLOTS=$2 ;;
      --rate) RATE=$2 NEW_RATE=$2 ;;
      --delay) DELAY=$2 NEW_DELAY=$2 ;;
      --loss) LOSS=$2 NEW_LOSS=$2 ;;
      *) die "unknown flag $1" ;;
    esac
    shift 2
  done
  check_prefix
  case "$cmd" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    flags) cmd_flags ;;
    shape) cmd_shape "$host" ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
