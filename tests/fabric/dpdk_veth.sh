#!/bin/sh
# dpdk over net_af_packet on a veth pair (needs root and iproute2; exits 77,
# saying why, without them or without the binaries).
#   dpdk_veth.sh conformance <fab_conformance> <test>
#       two nodes: network namespaces joined by the veth pair, one rank in
#       each (FAB_NETNS), side channel and frames both over the veth.
#   dpdk_veth.sh coll <gx-run> <coll_check> [coll_check args...]
#       2 fake nodes x 2 ranks (GX_NODE_ID) with GX_NET=dpdk: ranks 0,1 on
#       one end of the pair, ranks 2,3 on the other (gx-run's rendezvous
#       stays on loopback, so this one runs in the root namespace).
# Names carry "gxdk" and the pid, so parallel runs do not collide.
mode=$1
shift
[ "$(id -u)" = 0 ] || { echo "SKIP: veth pairs and af_packet need root"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "SKIP: iproute2 (ip) not installed"; exit 77; }
[ -x "$1" ] || { echo "SKIP: $1 not built"; exit 77; }
[ "$mode" != coll ] || [ -x "$2" ] || { echo "SKIP: $2 not built"; exit 77; }
tag=gxdk$(( $$ % 100000 ))
a=${tag}a b=${tag}b
net=10.$(( $$ % 200 + 30 )).$(( ($$ / 200) % 250 + 1 ))
cleanup() {
	ip link del "$a" 2>/dev/null
	ip netns del "$a" 2>/dev/null
	ip netns del "$b" 2>/dev/null
}
trap cleanup EXIT
# af_packet's fanout group id is (pid ^ ifindex) & 0xffff and groups of one
# namespace must not clash across devices: ranks' pids are close together,
# so the two ends get interface indexes 8192 apart.
ia=$(( 20000 + $$ % 8000 ))
ip link add "$a" index $ia type veth peer name "$b" index $(( ia + 8192 )) 2>/tmp/$tag.err ||
	{ echo "SKIP: cannot create a veth pair: $(cat /tmp/$tag.err)"; rm -f /tmp/$tag.err; exit 77; }
rm -f /tmp/$tag.err
case $mode in
conformance)
	ip netns add "$a" && ip netns add "$b" &&
	ip link set "$a" netns "$a" && ip link set "$b" netns "$b" &&
	ip -n "$a" addr add "$net.1/24" dev "$a" && ip -n "$b" addr add "$net.2/24" dev "$b" &&
	ip -n "$a" link set "$a" up && ip -n "$b" link set "$b" up &&
	ip -n "$a" link set lo up && ip -n "$b" link set lo up || { echo "FAIL: namespace setup"; exit 1; }
	FAB_NETNS="$a;$b" GX_SOCKET_IFNAME="$tag" \
	GX_DPDK_VDEV="net_af_packet0,iface=$a;net_af_packet0,iface=$b" \
		timeout -k 2 80 "$1" dpdk "$2"
	;;
coll)
	ip link set "$a" up && ip link set "$b" up || { echo "FAIL: veth setup"; exit 1; }
	run=$1 chk=$2
	shift 2
	GX_NET=dpdk GX_SOCKET_IFNAME=lo \
	GX_DPDK_VDEV="net_af_packet0,iface=$a;net_af_packet0,iface=$a;net_af_packet0,iface=$b;net_af_packet0,iface=$b" \
		timeout -k 2 280 "$run" -n 4 --timeout 270 sh -c \
		"GX_NODE_ID=node\$((GX_RANK * 2 / GX_SIZE)) exec $chk $*"
	;;
*)
	echo "usage: $0 conformance|coll ..." >&2
	exit 2
	;;
esac
