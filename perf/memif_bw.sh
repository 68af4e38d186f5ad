#!/usr/bin/env bash
# memif_bw.sh - issue 15's bandwidth goal alone: dpdk memif 4 MiB
# write-with-immediate vs the tcp provider over loopback, interleaved in the
# same run (tcp, memif, tcp, memif, ...), median of per-run ratios.
# Faster to repeat than perf/dpdk_bench.sh (which also measures latency, loss
# and af_packet) when tuning the memif data path.
#
# usage: perf/memif_bw.sh [-r RUNS] [-b BUILD_DIR] [-n ITERS] [-a "ENV=V ..."] [-- ENV=V ...]
#   -- ENV=V ...   extra env for both memif sides
#   -a "ENV=V ..." also measure memif with these settings in each run (an A/B
#                  comparison in the same run), e.g. -a GX_DPDK_ZCOPY=0
#   -m MTU         memif GX_DPDK_MTU (default: gx's, 64000; 9000 = Ethernet jumbo size)
#   -R             the sender is the memif client (default: the receiver is,
#                  memif's zero-copy receive, as perf/dpdk_bench.sh)
#   -N NICE        run every gx-bw (tcp and memif alike) at this nice level
#                  (root only). With the kernel's autogroup scheduling (on in
#                  Debian: /proc/sys/kernel/sched_autogroup_enabled) nice
#                  only ranks tasks within one session: other sessions' work
#                  still gets its share, so this does not make a shared
#                  machine quiet
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=5 build=/tmp/gx-memif-bench iters=200 mtu= extra="" alt="" nice=0 recv_role=client
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -a) alt=$2; shift 2 ;;
    -N) nice=$2; shift 2 ;;
    -m) mtu=$2; shift 2 ;;
    -R) recv_role=server; shift ;;
    --) shift; extra="$*"; break ;;
    *) echo "usage: $0 [-r RUNS] [-b BUILD_DIR] [-n ITERS] [-a ENV] [-m MTU] [-R] [-N NICE] [-- ENV=VALUE...]" >&2; exit 2 ;;
  esac
done
pkg-config --exists libdpdk || { echo "libdpdk not found (apt-get install dpdk-dev)" >&2; exit 77; }
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGX_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target gx-bw >/dev/null
bw="$build/bin/gx-bw"
port=$((19000 + $$ % 500 * 2))
gxbw() { # SERVER_ENV CLIENT_ENV args... -> bw_avg_mbs of the client
  local senv=$1 cenv=$2; shift 2
  port=$((port + 1))
  nice -n "$nice" env $senv "$bw" -p "$port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  nice -n "$nice" env $cenv "$bw" --json -p "$port" "$@" 127.0.0.1 2>/dev/null |
    python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['bw_avg_mbs'])"
  wait "$spid" || true
}
memif() { echo "GX_SOCKET_IFNAME=lo ${mtu:+GX_DPDK_MTU=$mtu} GX_DPDK_VDEV=net_memif0,role=$1,socket=/tmp/gx-memif-bw-$port.sock $extra"; }
send_role=server
[ $recv_role = server ] && send_role=client
lo="GX_SOCKET_IFNAME=lo"
source "$here/perf_lib.sh"
perf_begin "$root"
echo "extra env: ${extra:-none}; B env: ${alt:-none}; memif MTU ${mtu:-default}; the receiver is the memif $recv_role; nice $nice"
rows=$(mktemp)
for r in $(seq 1 "$runs"); do
  t=$(gxbw "$lo" "$lo" --provider tcp -s 4M -n "$iters")
  m=$(gxbw "$(memif $recv_role)" "$(memif $send_role)" --provider dpdk -s 4M -n "$iters")
  a=0
  [ -n "$alt" ] && a=$(gxbw "$(memif $recv_role) $alt" "$(memif $send_role) $alt" --provider dpdk -s 4M -n "$iters")
  echo "$t $m $a $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$rows"
done
python3 - "$rows" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from perf_stats import cell, ratio_cell
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
col = lambda i: [r[i] for r in rows]
print("columns: tcp_MBps memif_MBps memif_B_MBps load1; each figure: the median, then every run's")
print(f"tcp {cell(col(0), 0)} MB/s; memif {cell(col(1), 0)} MB/s; memif/tcp {ratio_cell(col(1), col(0))} (goal >= 2)")
if any(col(2)):
    print(f"memif with B env {cell(col(2), 0)} MB/s; B/tcp {ratio_cell(col(2), col(0))}; "
          f"memif/memif-B {ratio_cell(col(1), col(2))}")
PY
perf_end
rm -f "$rows"
