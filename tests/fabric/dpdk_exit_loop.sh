#!/usr/bin/env bash
# dpdk_exit_loop.sh - gx-bw over net_memif RUNS times, as perf/memif_bw.sh
# runs it (a server process, a client process, ITERS x 4 MiB write-with-
# immediate): both processes must exit 0 every time, and the
# memif client must not connect its port again once its link has been up.
#
# DPDK 22.11 aborted the memif server here at the end of such runs ("sendmsg
# fail: Broken pipe", then "PANIC in eal_intr_thread_main(): Error adding fd N
# epoll_ctl, Bad file descriptor") and sometimes crashed the client (SIGSEGV,
# "EAL: Error: Invalid memory"): the client, still sending while the server
# exited, restarted its port and reconnected to the exiting server. See
# docs/dpdk.md "memif and DPDK 22.11's interrupt thread".
#
# usage: dpdk_exit_loop.sh GX_BW [RUNS] [ITERS]
set -u
bw=${1:?usage: $0 GX_BW [RUNS] [ITERS]}
runs=${2:-10} iters=${3:-200}
dir=$(mktemp -d /tmp/gx-memif-exit-XXXXXX)
trap 'rm -rf "$dir"' EXIT
port=$((23000 + $$ % 1000 * 2))
eal="--no-huge -m 512 --no-pci --no-shconf --no-telemetry --log-level=pmd.net.memif:debug"
fails=0
for i in $(seq 1 "$runs"); do
  port=$((port + 1))
  sock=$dir/memif.sock
  common=(GX_SOCKET_IFNAME=lo GX_DEBUG=warn GX_DPDK_MTU=64000 "GX_DPDK_EAL_ARGS=$eal")
  env "${common[@]}" GX_DPDK_VDEV="net_memif0,role=server,socket=$sock" \
    timeout 60 "$bw" -p "$port" >"$dir/s.out" 2>"$dir/s.err" &
  spid=$!
  sleep 0.3
  env "${common[@]}" GX_DPDK_VDEV="net_memif0,role=client,socket=$sock" \
    timeout 60 "$bw" -p "$port" --provider dpdk -s 4M -n "$iters" 127.0.0.1 \
    >"$dir/c.out" 2>"$dir/c.err"
  crc=$?
  [ "$crc" = 0 ] || kill "$spid" 2>/dev/null
  wait "$spid"
  src=$?
  # connections after the link was first up (a restart before that, while
  # the server's port is not started yet, is expected)
  conns=$(awk '/memif_connect\(\): Connected\./ { up = 1 }
               up && /Memif socket: .* connected/ { n++ } END { print n + 0 }' "$dir/c.err")
  why=""
  [ "$src" = 0 ] || why="server exit $src"
  [ "$crc" = 0 ] || why="$why client exit $crc"
  [ "$conns" = 0 ] || why="$why client reconnected $conns times after its link was up"
  if [ -n "$why" ]; then
    fails=$((fails + 1))
    echo "run $i: $why"
    grep -E "PANIC|Error adding|sendmsg fail|Invalid memory|gx (WARN|ERROR)" "$dir/s.err" "$dir/c.err" | head -8
  fi
  rm -f "$sock"
done
echo "memif exit loop: $fails of $runs runs failed"
[ "$fails" = 0 ]
