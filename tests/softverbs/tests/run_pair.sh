#!/bin/sh
# Runs an unmodified verbs program as two processes (server, then client to
# localhost) over softverbs with LD_PRELOAD, each under a hard timeout, and
# checks that both printed results.
#   run_pair.sh <libsoftverbs.so> <tcp-port> <result-regex> <program> [args...]
# Exit: 0 pass, 1 fail, 77 skip (program not installed).
lib=$1 port=$2 regex=$3 prog=$4
shift 4
if ! command -v "$prog" >/dev/null 2>&1; then
	echo "SKIP: $prog is not installed (apt-get install ibverbs-utils perftest)"
	exit 77
fi
[ -f "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }
preload="$lib"
if [ -n "$SV_SANITIZER_PRELOAD" ]; then
	# the library is sanitized, the program is not: load the runtime first
	preload="$SV_SANITIZER_PRELOAD $lib"
	export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
fi
# The given port is only a hint: other checkouts may run the same test at the
# same time, so take a random TCP port nobody listens on (a client connecting
# to another test's server would fail both).
# Below the kernel's ephemeral range (32768-60999), and not bound by any TCP
# socket (a TIME_WAIT one blocks perftest's bind too).
listening() { grep -q ":$(printf '%04X' "$1") 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null; }
port_used() { grep -q "^ *[0-9]*: [0-9A-F]*:$(printf '%04X' "$1") " /proc/net/tcp /proc/net/tcp6 2>/dev/null; }
tries=0
while :; do
	port=$(( (port + $(od -An -N2 -tu2 /dev/urandom)) % 12000 + 20000 ))
	port_used "$port" || break
	tries=$((tries + 1))
	[ $tries -lt 50 ] || { echo "FAIL: no free TCP port found"; exit 1; }
done
dir=$(mktemp -d /tmp/sv-pair.XXXXXX)
trap 'rm -rf "$dir"' EXIT

LD_PRELOAD="$preload" timeout -k 2 40 "$prog" "$@" -p "$port" >"$dir/server" 2>&1 &
server=$!
# wait until the server listens (at most 10 s)
i=0
while [ $i -lt 100 ]; do
	if listening "$port"; then
		break
	fi
	sleep 0.1
	i=$((i + 1))
done
LD_PRELOAD="$preload" timeout -k 2 30 "$prog" "$@" -p "$port" localhost >"$dir/client" 2>&1
crc=$?
wait $server
src=$?
echo "---- server ($prog $*, exit $src)"
cat "$dir/server"
echo "---- client ($prog $* localhost, exit $crc)"
cat "$dir/client"
if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
	echo "FAIL: exit codes server=$src client=$crc (124 = timed out)"
	exit 1
fi
for side in server client; do
	if ! grep -Eq "$regex" "$dir/$side"; then
		echo "FAIL: $side printed no result matching /$regex/"
		exit 1
	fi
done
echo "PASS: $prog $*"
exit 0
