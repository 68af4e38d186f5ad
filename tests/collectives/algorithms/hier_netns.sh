#!/bin/bash
# hier_netns.sh LAYOUT PROGRAM [ARGS...] - run one gx job over network-
# namespace "nodes": node k is namespace <tag>n<k>, joined to the others by a
# veth pair through a bridge (itself in a namespace, so nothing is added to
# the host's). Ranks of one node share its namespace (shm between them), tcp
# crosses the veth links between nodes. Every rank gets GX_RANK, GX_SIZE,
# GX_NODE_ID and the rendezvous directly, so nodes may differ in size.
#   LAYOUT  node sizes in rank order: "2+2", "2+2+2", "4+4", "2+1+3"
# The environment (GX_ALGO, GX_TIMEOUT, ...) passes through to every rank.
# EXPECT=dead: PROGRAM is `coll_check dead ...`; rank 2 dies and every other
#              rank must print DEADCHECK ok (it named rank 2 in time).
# HIER_LOG=FILE keeps every rank's output there.
# RAILS=2: a second bridge and a second veth per node (gxh1, its own
#          subnet): two rails; GX_SOCKET_IFNAME defaults to "=gxh0,gxh1" so
#          local rank i uses gxh<i mod 2>. RAIL_MIN_BYTES=B then requires
#          every node's gxh0 and gxh1 to have sent at least B bytes;
#          RAIL1_MAX_BYTES=B requires gxh1 to have sent at most B.
# TBF_RATE=RATE (tc's units, e.g. 200mbit): caps each node's link at RATE
#          each way (tbf on the node's end and on the bridge's port toward
#          it), so that rate and not the CPUs bounds what crosses nodes
#          (perf/sim_calibrate.sh). RANK_TIMEOUT=S: each rank's limit (150).
# Default: every rank must exit 0. Needs root and iproute2; exits 77 (skip)
# saying why when namespaces cannot be made.
set -u
layout=$1
shift
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "SKIP: iproute2 (ip) not installed"; exit 77; }

tag=gxhier$$
net=10.$(( $$ % 200 + 30 )).$(( ($$ / 200) % 250 + 1 ))
dir=$(mktemp -d /tmp/gxhier-netns.XXXXXX)
IFS=+ read -r -a sizes <<<"$layout"
nodes=${#sizes[@]}
rails=${RAILS:-1}
net1=192.168.$(( $$ % 250 + 1 ))
cleanup() {
    for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; done
    for ((k = 0; k < nodes; k++)); do ip netns del "${tag}n$k" 2>/dev/null; done
    ip netns del "${tag}br" 2>/dev/null
    ip netns del "${tag}bs" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

source "$(dirname "${BASH_SOURCE[0]}")/../../lib/netns_bridge.sh"
if ! netns_bridge_create "${tag}br" br0 "$dir/err"; then
    echo "SKIP: cannot create a namespace with a bridge: $(cat "$dir/err")"
    exit 77
fi
for ((k = 0; k < nodes; k++)); do
    netns_bridge_join "${tag}n$k" "${tag}br" br0 "${tag}h$k" "${tag}p$k" gxh0 "$net.$((k + 1))/24" ||
        { echo "FAIL: namespace setup for node $k"; exit 1; }
    if [ -n "${TBF_RATE:-}" ]; then
        # burst 64kb: one GSO segment, a few ms at the rates meant here
        for end in "${tag}n$k gxh0" "${tag}br ${tag}h$k"; do
            read -r tns tdev <<<"$end"
            ip netns exec "$tns" tc qdisc add dev "$tdev" root tbf rate "$TBF_RATE" burst 64kb \
                latency "${TBF_LATENCY:-200ms}" 2>>"$dir/err" ||
                { echo "SKIP: tc tbf on $tdev: $(cat "$dir/err")"; exit 77; }
        done
    fi
done
if [ "$rails" = 2 ]; then
    netns_bridge_create "${tag}bs" br1 "$dir/err" || { echo "FAIL: second bridge: $(cat "$dir/err")"; exit 1; }
    for ((k = 0; k < nodes; k++)); do
        netns_bridge_join "${tag}n$k" "${tag}bs" br1 "${tag}i$k" "${tag}q$k" gxh1 "$net1.$((k + 1))/24" ||
            { echo "FAIL: rail 1 setup for node $k"; exit 1; }
    done
    : "${GX_SOCKET_IFNAME:==gxh0,gxh1}"
fi
tx_bytes() { # NODE IFNAME: bytes the interface sent
    ip -n "${tag}n$1" -s link show dev "$2" | awk '/TX:/ { getline; print $1; exit }'
}

n=0
for s in "${sizes[@]}"; do n=$((n + s)); done
port=$((20000 + RANDOM % 40000))
key="gxhier-$$-$RANDOM"
rank=0 pids=()
for ((k = 0; k < nodes; k++)); do
    for ((i = 0; i < sizes[k]; i++)); do
        ip netns exec "${tag}n$k" env GX_RANK=$rank GX_SIZE=$n GX_LOCAL_RANK=$i \
            GX_LOCAL_SIZE="${sizes[k]}" GX_MASTER_ADDR="$net.1" GX_MASTER_PORT=$port \
            GX_JOB_KEY="$key" GX_NODE_ID="hiernode$k" GX_SOCKET_IFNAME="${GX_SOCKET_IFNAME:-gxh0}" \
            timeout "${RANK_TIMEOUT:-150}" "$@" >"$dir/out$rank" 2>&1 &
        pids+=($!)
        rank=$((rank + 1))
    done
done
fails=0
for ((r = 0; r < n; r++)); do
    wait "${pids[r]}"
    rc=$?
    if [ "${EXPECT:-}" = dead ] && [ "$r" = 2 ]; then
        continue
    fi
    if [ "$rc" != 0 ]; then
        echo "rank $r exited $rc"
        fails=$((fails + 1))
    fi
done
[ -z "${HIER_LOG:-}" ] || cat "$dir"/out* >"$HIER_LOG"
cat "$dir"/out* | grep -v ' WARN topo: ' | grep -v ' TRACE ' | tail -40
if [ "${EXPECT:-}" = dead ]; then
    ok=$(cat "$dir"/out* | grep -c 'DEADCHECK ok')
    [ "$ok" = $((n - 1)) ] || { echo "FAIL: $ok of $((n - 1)) survivors named rank 2"; exit 1; }
    echo "PASS: all $ok survivors named rank 2 (layout $layout)"
    exit 0
fi
[ "$fails" = 0 ] || { echo "FAIL: $fails rank(s) failed (layout $layout)"; exit 1; }
if [ "$rails" = 2 ]; then
    for ((k = 0; k < nodes; k++)); do
        b0=$(tx_bytes $k gxh0) b1=$(tx_bytes $k gxh1)
        echo "node $k sent: gxh0 $b0 bytes, gxh1 $b1 bytes"
        if [ -n "${RAIL_MIN_BYTES:-}" ] && { [ "$b0" -lt "$RAIL_MIN_BYTES" ] || [ "$b1" -lt "$RAIL_MIN_BYTES" ]; }; then
            echo "FAIL: node $k did not use both rails (at least $RAIL_MIN_BYTES bytes each)"
            exit 1
        fi
        if [ -n "${RAIL1_MAX_BYTES:-}" ] && [ "$b1" -gt "$RAIL1_MAX_BYTES" ]; then
            echo "FAIL: node $k sent $b1 bytes on gxh1 (at most $RAIL1_MAX_BYTES expected)"
            exit 1
        fi
    done
fi
echo "PASS: $n ranks on $nodes netns nodes ($layout)"
