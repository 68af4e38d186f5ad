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
#   -m MTU         memif GX_DPDK_MTU (default 64000; 9000 = Ethernet jumbo size)
#   -N NICE        run every gx-bw (tcp and memif alike) at this nice level;
#                  on a shared machine -N -20 keeps other work from
#                  descheduling the busy-polling ranks (root only)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=5 build=/tmp/gx-memif-bench iters=200 mtu=64000 extra="" alt="" nice=0
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -a) alt=$2; shift 2 ;;
    -N) nice=$2; shift 2 ;;
    -m) mtu=$2; shift 2 ;;
    --) shift; extra="$*"; break ;;
    *) echo "usage: $0 [-r RUNS] [-b BUILD_DIR] [-n ITERS] [-a ENV] [-m MTU] [-N NICE] [-- ENV=VALUE...]" >&2; exit 2 ;;
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
memif() { echo "GX_SOCKET_IFNAME=lo GX_DPDK_MTU=$mtu GX_DPDK_VDEV=net_memif0,role=$1,socket=/tmp/gx-memif-bw-$port.sock $extra"; }
lo="GX_SOCKET_IFNAME=lo"
echo "commit $(git -C "$root" rev-parse --short HEAD); extra env: ${extra:-none}; B env: ${alt:-none}; memif MTU $mtu; nice $nice; loadavg before: $(cat /proc/loadavg)"
rows=$(mktemp)
for r in $(seq 1 "$runs"); do
  t=$(gxbw "$lo" "$lo" --provider tcp -s 4M -n "$iters")
  m=$(gxbw "$(memif server)" "$(memif client)" --provider dpdk -s 4M -n "$iters")
  a=0
  [ -n "$alt" ] && a=$(gxbw "$(memif server) $alt" "$(memif client) $alt" --provider dpdk -s 4M -n "$iters")
  echo "$t $m $a $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$rows"
done
python3 - "$rows" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
print("columns: tcp_MBps memif_MBps memif_B_MBps load1")
print(f"median tcp {st.median(r[0] for r in rows):.0f} MB/s, memif {st.median(r[1] for r in rows):.0f} MB/s, "
      f"per-run ratios {' '.join(f'{r[1]/r[0]:.2f}' for r in rows if r[0])}, "
      f"median ratio {st.median(r[1]/r[0] for r in rows if r[0]):.2f} (goal >= 2)")
if any(r[2] for r in rows):
    print(f"memif with B env: median {st.median(r[2] for r in rows):.0f} MB/s, "
          f"ratio to tcp {st.median(r[2]/r[0] for r in rows if r[0]):.2f}, "
          f"memif/memif-B per run {' '.join(f'{r[1]/r[2]:.2f}' for r in rows if r[2])}, "
          f"median {st.median(r[1]/r[2] for r in rows if r[2]):.2f}")
PY
echo "loadavg after: $(cat /proc/loadavg)"
rm -f "$rows"
