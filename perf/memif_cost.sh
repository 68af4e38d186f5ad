#!/usr/bin/env bash
# memif_cost.sh - CPU cost of the dpdk memif data path per GiB moved, for
# each side of a 4 MiB write-with-imm gx-bw run, from the provider's own
# account (GX_DPDK_COST=1, GX_DEBUG=info "data-path work": the thread's CPU
# time in the polls that received frames and the endpoint turns that sent;
# a descheduled thread does not count; idle polling does not count either). Unlike bandwidth, this holds on a loaded machine: use it to
# compare variants there (e.g. GX_DPDK_ZCOPY=0 vs 1, GX_DPDK_MTU=9000 vs
# 64000). Each variant runs RUNS times, interleaved; medians.
#
# memif runs at gx's defaults (64000-byte frames, the client in zero-copy
# mode) with the receiver as the memif client, as perf/dpdk_bench.sh; -R makes
# the sender the client. A variant's ENV may set GX_DPDK_MTU, GX_DPDK_ZCOPY,
# or MEMIF_CLIENT_ARGS=zero-copy=no (appended to the client's vdev string).
#
# usage: perf/memif_cost.sh [-r RUNS] [-b BUILD_DIR] [-n ITERS] [-R] "ENV A" "ENV B" ...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=5 build=/tmp/gx-memif-bench iters=200 recv_role=client
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -R) recv_role=server; shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- ""
pkg-config --exists libdpdk || { echo "libdpdk not found (apt-get install dpdk-dev)" >&2; exit 77; }
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGX_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target gx-bw >/dev/null
bw="$build/bin/gx-bw"
port=$((19500 + $$ % 400))
out=$(mktemp -d)
source "$here/perf_lib.sh"
perf_begin "$root"
send_role=server
[ $recv_role = server ] && send_role=client
echo "the receiver is the memif $recv_role"
for r in $(seq 1 "$runs"); do
  v=0
  for venv in "$@"; do
    v=$((v + 1)); port=$((port + 1))
    base="GX_SOCKET_IFNAME=lo GX_DEBUG=info GX_DPDK_COST=1"
    sock=/tmp/gx-memif-cost-$port.sock
    cargs=$(echo "$venv" | sed -n 's/.*MEMIF_CLIENT_ARGS=\([^ ]*\).*/,\1/p')
    rv=net_memif0,role=$recv_role,socket=$sock sv=net_memif0,role=$send_role,socket=$sock
    if [ $recv_role = client ]; then rv=$rv$cargs; else sv=$sv$cargs; fi
    env $base GX_DPDK_VDEV=$rv $venv "$bw" -p "$port" 2>"$out/s" >/dev/null &
    sleep 0.5
    env $base GX_DPDK_VDEV=$sv $venv "$bw" --json -p "$port" \
      --provider dpdk -s 4M -n "$iters" 127.0.0.1 2>"$out/c" >"$out/j" || true
    wait || true
    s=$(sed -n 's/.*data-path work \([0-9.]*\) ms.*/\1/p' "$out/s" | tail -1)
    c=$(sed -n 's/.*data-path work \([0-9.]*\) ms.*/\1/p' "$out/c" | tail -1)
    b=$(python3 -c "import json; print(json.load(open('$out/j'))['results'][0]['bw_avg_mbs'])" 2>/dev/null || echo 0)
    echo "$v ${c:-0} ${s:-0} $b $(cut -d' ' -f1 /proc/loadavg)" >> "$out/rows"
    echo "variant $v [${venv:-default}] run $r: sender ${c:-?} ms, receiver ${s:-?} ms, $b MB/s"
  done
done
python3 - "$out/rows" "$iters" "$here" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from perf_stats import cell
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
gib = int(sys.argv[2]) * 4 / 1024  # 4 MiB messages
print("each figure: the median, then every run's")
for v, name in enumerate(sys.argv[4:], 1):
    r = [list(map(float, x[1:])) for x in rows if int(x[0]) == v]
    print(f"variant {v} [{name or 'default'}]: CPU ms per GiB sender {cell([x[0] / gib for x in r], 1)}, "
          f"receiver {cell([x[1] / gib for x in r], 1)}; bandwidth {cell([x[2] for x in r], 0)} MB/s "
          f"(load {cell([x[3] for x in r], 1)})")
PY
perf_end
rm -rf "$out"
