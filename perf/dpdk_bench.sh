#!/usr/bin/env bash
# dpdk_bench.sh - the dpdk provider's speed figures (issues 15 and 33), each
# ratio taken in the same run as its reference, medians over repeated runs
# with every run's figure beside them:
#   memif 4 MiB write-with-imm bandwidth   vs the tcp provider over loopback (goal >= 2x)
#   memif 256 KiB bandwidth                vs the tcp provider (goal >= 1.5x)
#   memif 8 B one-way latency              vs the tcp provider over loopback (goal <= 1/3)
#   memif 4 MiB at 10% injected loss       vs memif loss-free, same run (goal >= 0.5)
#   memif 4 MiB the other way (the sender is the memif client; no goal)
#   af_packet over a veth between two netns vs tcp over the same veth (no goal; root only)
# memif runs at gx's defaults (no GX_DPDK_MTU: 64000-byte frames; the memif
# client in zero-copy mode). The receiving gx-bw (its server) is the memif
# client: memif's zero copy saves the copy on the client's receive side, the
# layout gx's defaults favour (docs/dpdk.md, "memif defaults"); the reverse
# row shows the other direction. -m MTU sets GX_DPDK_MTU for memif (the
# 2026-11-25 records ran -m 64000 with the receiver as memif server).
#
# usage: perf/dpdk_bench.sh [-r RUNS] [-b BUILD_DIR] [-m MEMIF_MTU] [--record]
#   --record writes perf/results/<date>-dpdk.md (a second one the same day
#   gets -2, -3, ...)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/perf_lib.sh"
runs=5
mtu=
build=/tmp/gx-dpdk-bench
record=0
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -m) mtu=$2; shift 2 ;;
    --record) record=1; shift ;;
    *) echo "usage: $0 [-r RUNS] [-b BUILD_DIR] [-m MEMIF_MTU] [--record]" >&2; exit 2 ;;
  esac
done
pkg-config --exists libdpdk || { echo "libdpdk not found (apt-get install dpdk-dev)" >&2; exit 77; }
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGX_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target gx-bw >/dev/null
bw="$build/bin/gx-bw"
port=$((18800 + $$ % 400 * 2))
# gxbw SERVER_ENV CLIENT_ENV NETNS_S NETNS_C HOST args... -> JSON of the client
gxbw() {
  local senv=$1 cenv=$2 nss=$3 nsc=$4 host=$5; shift 5
  port=$((port + 1))
  local ns_s=() ns_c=()
  [ -n "$nss" ] && ns_s=(ip netns exec "$nss")
  [ -n "$nsc" ] && ns_c=(ip netns exec "$nsc")
  env $senv "${ns_s[@]}" "$bw" -p "$port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  env $cenv "${ns_c[@]}" "$bw" --json -p "$port" "$@" "$host" 2>/dev/null || echo '{}'
  wait "$spid" || true
}
field() { python3 -c "import json,sys
try: print(json.load(sys.stdin)['results'][0]['$1'])
except Exception: print(0)"; }
memif() { # role -> env for one side of a memif pair
  echo "GX_SOCKET_IFNAME=lo ${mtu:+GX_DPDK_MTU=$mtu} GX_DPDK_VDEV=net_memif0,role=$1,socket=/tmp/gx-dpdk-bench-$port.sock"
}
lo="GX_SOCKET_IFNAME=lo"

# af_packet: two namespaces joined by a veth pair (root only), each end
# named as its namespace.
source "$here/netns_lib.sh"
veth=0
tag=gxdkb$$
trap netns_cleanup EXIT
if [ "$(id -u)" = 0 ] && netns_pair_create "${tag}a" "${tag}b" 2>/dev/null &&
   netns_veth "${tag}a" "${tag}b" "${tag}a" "${tag}b" "" 10.77.1; then
  veth=1
fi

head=$(perf_begin "$root")
echo "$head"
rows=$(mktemp)
for r in $(seq 1 "$runs"); do
  tcp=$(gxbw "$lo" "$lo" "" "" 127.0.0.1 --provider tcp -s 4M -n 200 | field bw_avg_mbs)
  dbw=$(gxbw "$(memif client)" "$(memif server)" "" "" 127.0.0.1 --provider dpdk -s 4M -n 200 | field bw_avg_mbs)
  t256=$(gxbw "$lo" "$lo" "" "" 127.0.0.1 --provider tcp -s 256K -n 2000 | field bw_avg_mbs)
  d256=$(gxbw "$(memif client)" "$(memif server)" "" "" 127.0.0.1 --provider dpdk -s 256K -n 2000 | field bw_avg_mbs)
  tlat=$(gxbw "$lo" "$lo" "" "" 127.0.0.1 --provider tcp --lat -s 8 -n 5000 | field t_typical_us)
  dlat=$(gxbw "$(memif client)" "$(memif server)" "" "" 127.0.0.1 --provider dpdk --lat -s 8 -n 5000 | field t_typical_us)
  dloss=$(gxbw "$(memif client) GX_DPDK_DROP=10%" "$(memif server) GX_DPDK_DROP=10%" "" "" 127.0.0.1 --provider dpdk -s 4M -n 200 | field bw_avg_mbs)
  drev=$(gxbw "$(memif server)" "$(memif client)" "" "" 127.0.0.1 --provider dpdk -s 4M -n 200 | field bw_avg_mbs)
  vt=0 va=0
  if [ $veth = 1 ]; then
    ve="GX_SOCKET_IFNAME=$tag"
    vt=$(gxbw "$ve" "$ve" "${tag}a" "${tag}b" 10.77.1.1 --provider tcp -s 4M -n 100 | field bw_avg_mbs)
    va=$(gxbw "$ve GX_DPDK_VDEV=net_af_packet0,iface=${tag}a" "$ve GX_DPDK_VDEV=net_af_packet0,iface=${tag}b" \
         "${tag}a" "${tag}b" 10.77.1.1 --provider dpdk -s 4M -n 100 | field bw_avg_mbs)
  fi
  echo "$tcp $dbw $t256 $d256 $tlat $dlat $dloss $drev $vt $va $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$rows" >&2
done
tail=$(perf_end)

report=$(python3 - "$rows" "$runs" "$veth" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[4])
from perf_stats import cell, ratio_cell, ratios, median
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
col = lambda i: [r[i] for r in rows]
def ok(b): return "met" if b else "NOT met"
bw4, bw256, lat, loss = (median(ratios(col(1), col(0))), median(ratios(col(3), col(2))),
                         median(ratios(col(5), col(4))), median(ratios(col(6), col(1))))
print(f"runs: {sys.argv[2]}; each cell: the median, then every run's figure; each ratio is the "
      "median of the per-run ratios\n")
print("| figure | measured | reference (same run) | ratio | goal |")
print("|---|---|---|---|---|")
print(f"| memif write-with-imm BW, 4 MiB (MB/s) | {cell(col(1), 0)} | tcp provider, loopback: {cell(col(0), 0)} | {ratio_cell(col(1), col(0))} | >= 2: {ok(bw4 >= 2)} |")
print(f"| memif write-with-imm BW, 256 KiB (MB/s) | {cell(col(3), 0)} | tcp provider, loopback: {cell(col(2), 0)} | {ratio_cell(col(3), col(2))} | >= 1.5: {ok(bw256 >= 1.5)} |")
print(f"| memif one-way latency, 8 B, t_typical (us) | {cell(col(5))} | tcp provider, loopback: {cell(col(4))} | {ratio_cell(col(5), col(4))} | <= 0.33: {ok(lat <= 1/3)} |")
print(f"| memif BW at 10% injected loss, 4 MiB (MB/s) | {cell(col(6), 0)} | loss-free memif: {cell(col(1), 0)} | {ratio_cell(col(6), col(1))} | >= 0.5: {ok(loss >= 0.5)} |")
print(f"| memif BW, 4 MiB, sender is the memif client (MB/s) | {cell(col(7), 0)} | tcp provider, loopback: {cell(col(0), 0)} | {ratio_cell(col(7), col(0))} | none (copy mode's path) |")
if sys.argv[3] == "1":
    print(f"| af_packet over veth (2 netns), 4 MiB (MB/s) | {cell(col(9), 0)} | tcp provider, same veth: {cell(col(8), 0)} | {ratio_cell(col(9), col(8))} | none (kernel copy path) |")
print("\nMB/s = 2^20 bytes per second, as perftest. Load average (1 min) after each run: "
      + ", ".join(f"{r[10]:.2f}" for r in rows))
PY
)
echo "$report"
echo "$tail"
if [ "$record" = 1 ]; then
  out="$here/results/$(date +%Y-%m-%d)-dpdk.md"
  k=2
  while [ -e "$out" ]; do out="$here/results/$(date +%Y-%m-%d)-dpdk-$k.md"; k=$((k + 1)); done
  {
    echo "# dpdk provider speed figures, $(date +%Y-%m-%d)"
    echo
    echo "CPU: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores"
    echo "Kernel: $(uname -r); DPDK $(pkg-config --modversion libdpdk); $head"
    echo "Command: perf/dpdk_bench.sh -r $runs${mtu:+ -m $mtu} --record (memif ${mtu:+GX_DPDK_MTU=$mtu}${mtu:-defaults}; the receiving gx-bw is the memif client)"
    echo
    echo "$report"
    echo
    echo "$tail"
    echo
    echo "Per-run rows (tcp_bw memif_bw tcp_256k memif_256k tcp_lat_us memif_lat_us memif_loss10_bw memif_reverse_bw veth_tcp_bw veth_afpacket_bw load1):"
    echo '```'
    cat "$rows"
    echo '```'
  } > "$out"
  echo "recorded in $out"
fi
rm -f "$rows"
