# netns_bridge.sh - sourced by the tests that build "nodes" out of network
# namespaces joined by a bridge (hier_netns.sh, accept_netns.sh). The caller
# names everything (so parallel tests never collide) and deletes the
# namespaces in its own cleanup trap.

# netns_bridge_create BRIDGE_NS BRIDGE ERRFILE: a namespace holding a bridge
# that is up. Returns 1 (its error in ERRFILE) when namespaces or bridges
# cannot be made here, so the caller can skip with 77.
netns_bridge_create() {
    local brns=$1 br=$2 err=$3
    { ip netns list | grep -qw "$brns" || ip netns add "$brns"; } 2>>"$err" &&
        ip -n "$brns" link add "$br" type bridge 2>>"$err" &&
        ip -n "$brns" link set "$br" up 2>>"$err"
}

# netns_bridge_join NODE_NS BRIDGE_NS BRIDGE HOST_END NODE_END IFNAME ADDR/LEN:
# creates NODE_NS if needed, a veth pair HOST_END (on the bridge) <-> NODE_END
# (moved into NODE_NS, renamed IFNAME, given ADDR/LEN), and brings up both ends
# and the node's loopback.
netns_bridge_join() {
    local ns=$1 brns=$2 br=$3 host=$4 node=$5 ifname=$6 addr=$7
    { ip netns list | grep -qw "$ns" || ip netns add "$ns"; } &&
        ip link add "$host" type veth peer name "$node" &&
        ip link set "$host" netns "$brns" &&
        ip link set "$node" netns "$ns" &&
        ip -n "$brns" link set "$host" master "$br" &&
        ip -n "$brns" link set "$host" up &&
        ip -n "$ns" link set "$node" name "$ifname" &&
        ip -n "$ns" addr add "$addr" dev "$ifname" &&
        ip -n "$ns" link set "$ifname" up &&
        ip -n "$ns" link set lo up
}
