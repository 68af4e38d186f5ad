#!/usr/bin/env bash
# dpdk_bench.sh - the dpdk provider's speed figures of issue 15, each ratio
# taken in the same run as its reference, medians over repeated runs:
#   memif 4 MiB write-with-imm bandwidth   vs the tcp provider over loopback (goal >= 2x)
#   memif 8 B one-way latency              vs the tcp provider over loopback (goal <= 1/3)
#   memif 4 MiB at 10% injected loss       vs memif loss-free, same run (goal >= 0.5)
#   af_packet over a veth between two netns vs tcp over the same veth (no goal; root only)
# memif runs with GX_DPDK_MTU=64000 (memif has no MTU: one 64000-byte frame
# per memif buffer; -m 9000 for Ethernet jumbo-sized frames, as before
# 2026-11-25 evening).
#
# usage: perf/dpdk_bench.sh [-r RUNS] [-b BUILD_DIR] [-m MEMIF_MTU] [--record]
#   --record writes perf/results/<date>-dpdk.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=3
mtu=64000
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
port=18800
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
  env $cenv "${ns_c[@]}" "$bw" --json -p "$port" "$@" "$host" 2>/dev/null
  wait "$spid" || true
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['$1'])"; }
memif() { # role -> env for one side of a memif pair
  echo "GX_SOCKET_IFNAME=lo GX_DPDK_MTU=$mtu GX_DPDK_VDEV=net_memif0,role=$1,socket=/tmp/gx-dpdk-bench-$port.sock"
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

load0=$(cut -d" " -f1-3 /proc/loadavg)
rows=$(mktemp)
for r in $(seq 1 "$runs"); do
  tcp=$(gxbw "$lo" "$lo" "" "" 127.0.0.1 --provider tcp -s 4M -n 200 | field bw_avg_mbs)
  tlat=$(gxbw "$lo" "$lo" "" "" 127.0.0.1 --provider tcp --lat -s 8 -n 5000 | field t_typical_us)
  dbw=$(gxbw "$(memif server)" "$(memif client)" "" "" 127.0.0.1 --provider dpdk -s 4M -n 200 | field bw_avg_mbs)
  dlat=$(gxbw "$(memif server)" "$(memif client)" "" "" 127.0.0.1 --provider dpdk --lat -s 8 -n 5000 | field t_typical_us)
  dloss=$(gxbw "$(memif server) GX_DPDK_DROP=10%" "$(memif client) GX_DPDK_DROP=10%" "" "" 127.0.0.1 --provider dpdk -s 4M -n 200 | field bw_avg_mbs)
  vt=0 va=0
  if [ $veth = 1 ]; then
    ve="GX_SOCKET_IFNAME=$tag"
    vt=$(gxbw "$ve" "$ve" "${tag}a" "${tag}b" 10.77.1.1 --provider tcp -s 4M -n 100 | field bw_avg_mbs)
    va=$(gxbw "$ve GX_DPDK_VDEV=net_af_packet0,iface=${tag}a" "$ve GX_DPDK_VDEV=net_af_packet0,iface=${tag}b" \
         "${tag}a" "${tag}b" 10.77.1.1 --provider dpdk -s 4M -n 100 | field bw_avg_mbs)
  fi
  echo "$tcp $tlat $dbw $dlat $dloss $vt $va $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$rows" >&2
done

report=$(python3 - "$rows" "$runs" "$veth" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
med = [st.median(c) for c in zip(*rows)]
bw_ratio = st.median([r[2] / r[0] for r in rows if r[0]])
lat_ratio = st.median([r[3] / r[1] for r in rows if r[1]])
loss_ratio = st.median([r[4] / r[2] for r in rows if r[2]])
def ok(b): return "met" if b else "NOT met"
print(f"runs: {sys.argv[2]} (medians; each ratio is the median of per-run ratios)\n")
print("| figure | measured | reference (same run) | ratio | goal |")
print("|---|---|---|---|---|")
print(f"| dpdk memif write-with-imm BW, 4 MiB | {med[2]:.0f} MB/s | tcp provider, loopback: {med[0]:.0f} MB/s | {bw_ratio:.2f} | >= 2: {ok(bw_ratio >= 2)} |")
print(f"| dpdk memif one-way latency, 8 B (t_typical) | {med[3]:.2f} us | tcp provider, loopback: {med[1]:.2f} us | {lat_ratio:.2f} | <= 0.33: {ok(lat_ratio <= 1/3)} |")
print(f"| dpdk memif BW at 10% injected loss, 4 MiB | {med[4]:.0f} MB/s | loss-free memif: {med[2]:.0f} MB/s | {loss_ratio:.2f} | >= 0.5: {ok(loss_ratio >= 0.5)} |")
if sys.argv[3] == "1":
    va_ratio = st.median([r[6] / r[5] for r in rows if r[5]])
    print(f"| dpdk af_packet over veth (2 netns), 4 MiB | {med[6]:.0f} MB/s | tcp provider, same veth: {med[5]:.0f} MB/s | {va_ratio:.2f} | none (kernel copy path) |")
print("\nMB/s = 2^20 bytes per second, as perftest. Load average (1 min) after each run: "
      + ", ".join(f"{r[7]:.2f}" for r in rows))
PY
)
echo "$report"
if [ "$record" = 1 ]; then
  out="$here/results/$(date +%Y-%m-%d)-dpdk.md"
  {
    echo "# dpdk provider speed figures, $(date +%Y-%m-%d)"
    echo
    echo "CPU: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores"
    echo "Kernel: $(uname -r); DPDK $(pkg-config --modversion libdpdk); commit $(git -C "$root" rev-parse --short HEAD)"
    echo "Load average at the start: $load0 (other work on the machine skews two-process figures)"
    echo "Command: perf/dpdk_bench.sh -r $runs -m $mtu --record (memif GX_DPDK_MTU=$mtu)"
    echo
    echo "$report"
    echo
    echo "Per-run rows (tcp_bw tcp_lat_us memif_bw memif_lat_us memif_loss10_bw veth_tcp_bw veth_afpacket_bw load1):"
    echo '```'
    cat "$rows"
    echo '```'
  } > "$out"
  echo "recorded in $out"
fi
rm -f "$rows"
