#!/bin/sh
# Two "nodes" on one machine: network namespaces joined by a veth pair, each
# process with its own SOFTVERBS_ADDR, so packets are routed by the GID.
#   run_netns.sh <libsoftverbs.so> <tcp-port> <result-regex> <program> [args...]
# Needs root and iproute2; exits 77 (skip) when namespaces are unavailable.
lib=$1 port=$2 regex=$3 prog=$4
shift 4
command -v "$prog" >/dev/null 2>&1 || { echo "SKIP: $prog not installed"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "SKIP: iproute2 (ip) not installed"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
tag=sv$$
a=${tag}a b=${tag}b
net=10.$(( $$ % 200 + 20 )).$(( ($$ / 200) % 250 + 1 ))
dir=$(mktemp -d /tmp/sv-netns.XXXXXX)
cleanup() {
	ip netns del "$a" 2>/dev/null
	ip netns del "$b" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
if ! ip netns add "$a" 2>"$dir/err" || ! ip netns add "$b" 2>>"$dir/err" ||
   ! ip link add "${a}0" type veth peer name "${b}0" 2>>"$dir/err"; then
	echo "SKIP: cannot create namespaces / veth: $(cat "$dir/err")"
	exit 77
fi
ip link set "${a}0" netns "$a" && ip link set "${b}0" netns "$b" &&
ip -n "$a" addr add "$net.1/24" dev "${a}0" && ip -n "$b" addr add "$net.2/24" dev "${b}0" &&
ip -n "$a" link set "${a}0" up && ip -n "$b" link set "${b}0" up &&
ip -n "$a" link set lo up && ip -n "$b" link set lo up || { echo "FAIL: namespace setup"; exit 1; }

preload="$lib"
[ -n "$SV_SANITIZER_PRELOAD" ] && preload="$SV_SANITIZER_PRELOAD $lib" &&
	export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
ip netns exec "$a" env SOFTVERBS_ADDR="$net.1" LD_PRELOAD="$preload" \
	timeout -k 2 40 "$prog" "$@" -p "$port" >"$dir/server" 2>&1 &
server=$!
i=0
while [ $i -lt 100 ] && ! ip netns exec "$a" grep -q ":$(printf '%04X' "$port") 00000000:0000 0A" /proc/net/tcp 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
ip netns exec "$b" env SOFTVERBS_ADDR="$net.2" LD_PRELOAD="$preload" \
	timeout -k 2 30 "$prog" "$@" -p "$port" "$net.1" >"$dir/client" 2>&1
crc=$?
wait $server
src=$?
echo "---- server ($net.1: $prog $*, exit $src)"; cat "$dir/server"
echo "---- client ($net.2: $prog $* $net.1, exit $crc)"; cat "$dir/client"
[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: exit codes server=$src client=$crc"; exit 1; }
for side in server client; do
	grep -Eq "$regex" "$dir/$side" || { echo "FAIL: $side printed no result"; exit 1; }
done
echo "PASS: $prog $* across namespaces"
