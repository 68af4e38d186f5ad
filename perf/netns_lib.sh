# netns_lib.sh - two network-namespace "nodes" on one host, for the perf
# scripts (sourced, bash): compare.sh, hier_bench.sh, hier_arena_bench.sh,
# tcp_variants.sh, dpdk_bench.sh.
#
# What it owns: namespaces A and B joined by one veth pair per link (A's end
# NET.1/24, B's end NET.2/24, loopback up), an optional tc tbf cap on a link,
# the mpirun launch agent that starts Open MPI's daemon in the namespace of a
# host address instead of over ssh, and the deletion of every namespace it
# made. What it leaves to the caller: the names (put $$ in them so parallel
# runs never collide; an interface name has at most 15 characters), the root
# check and its message. Cleanup: netns_cleanup_on_exit "$tmp" (or the
# caller's own EXIT trap calling netns_cleanup). Deleting a namespace deletes
# the veth ends inside it, so nothing is left behind once a pair was moved.
#
# Every function stops at its first failing command and returns its status,
# so it aborts a `set -e` script and can stand in an `if` where a missing
# capability should only skip a part.

NETNS_MADE=() # the namespaces netns_pair_create made, for netns_cleanup

# netns_pair_create NS_A NS_B: adds both namespaces and sets their loopback up.
netns_pair_create() {
    local ns
    for ns in "$@"; do
        ip netns add "$ns" || return
        NETNS_MADE+=("$ns")
    done
    for ns in "$@"; do
        ip -n "$ns" link set lo up || return
    done
}

# netns_veth NS_A NS_B END_A END_B IFNAME NET: a veth pair END_A <-> END_B,
# END_A moved into NS_A and END_B into NS_B, both renamed IFNAME (the same
# name on both nodes, so one GX_SOCKET_IFNAME or *_if_include fits every
# rank; IFNAME "" keeps END_A and END_B), NET.1/24 on A's end and NET.2/24 on
# B's, both up. A pair that could not be moved is deleted again.
netns_veth() {
    local nsa=$1 nsb=$2 enda=$3 endb=$4 ifname=$5 net=$6
    ip link add "$enda" type veth peer name "$endb" || return
    if ! { ip link set "$enda" netns "$nsa" && ip link set "$endb" netns "$nsb"; }; then
        ip link del "$endb" 2>/dev/null # still here; takes its peer along
        return 1
    fi
    if [ -n "$ifname" ]; then
        ip -n "$nsa" link set "$enda" name "$ifname" || return
        ip -n "$nsb" link set "$endb" name "$ifname" || return
        enda=$ifname endb=$ifname
    fi
    ip -n "$nsa" addr add "$net.1/24" dev "$enda" &&
        ip -n "$nsb" addr add "$net.2/24" dev "$endb" &&
        ip -n "$nsa" link set "$enda" up &&
        ip -n "$nsb" link set "$endb" up
}

# netns_tbf NS IFNAME RATE: caps what IFNAME in NS sends at RATE (tc tbf, e.g.
# 500mbit). On one host a veth is no bandwidth limit (the CPUs copying are):
# a rate below what they move stands in for a NIC's line rate. Burst 256kb: a
# few ms at such rates, and at least the 64K of one large segment.
netns_tbf() {
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst 256kb latency 100ms
}

# netns_agent_write FILE HOST_A NS_A HOST_B NS_B [uts]: writes FILE, an
# executable for mpirun's `--mca plm_rsh_agent`. Called as ssh would be
# ([OPTIONS] HOST COMMAND...), it runs COMMAND in NS_A for HOST_A and in NS_B
# for HOST_B. With "uts" COMMAND also gets a UTS namespace whose host name is
# its namespace's name: with the same host name on both "nodes" Open MPI takes
# all ranks for one node, and its shared-memory btl crashes across them.
netns_agent_write() {
    local file=$1 hosta=$2 nsa=$3 hostb=$4 nsb=$5 uts=${6:-}
    # Single quotes: $ns and $* are the agent's, expanded when it runs.
    # shellcheck disable=SC2016
    local run='sh -c "$*"'
    # shellcheck disable=SC2016
    [ "$uts" = uts ] && run='unshare --uts sh -c "hostname $ns; $*"'
    cat >"$file" <<EOF || return
#!/bin/sh
# ns-agent (perf/netns_lib.sh): mpirun's rsh agent for namespace "nodes".
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case "\$host" in
$hosta) ns=$nsa ;;
$hostb) ns=$nsb ;;
*) echo "ns-agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" $run
EOF
    chmod +x "$file"
}

# netns_cleanup: deletes every namespace netns_pair_create made (and the veth
# ends in them). For the caller's EXIT trap: never fails, may run twice.
netns_cleanup() {
    local ns
    for ns in "${NETNS_MADE[@]}"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    NETNS_MADE=()
}

# netns_cleanup_on_exit [DIR]: on exit, netns_cleanup and then remove DIR
# (the caller's temporary folder); INT and TERM exit 130, so that runs too.
# Replaces the caller's EXIT, INT and TERM traps.
netns_cleanup_on_exit() {
    NETNS_TMPDIR=${1:-}
    trap netns_exit_trap EXIT
    trap 'exit 130' INT TERM
}
netns_exit_trap() {
    netns_cleanup
    [ -z "${NETNS_TMPDIR:-}" ] || rm -rf "$NETNS_TMPDIR"
}
