#!/usr/bin/env bash
# tcp_variants.sh - same-run comparison of gx tcp variants (environment
# settings or another libgx) against Open MPI btl tcp on 2 network-namespace
# nodes x 2 ranks (the netns scenario of compare.sh, one veth pair), for
# judging a change on a loaded machine: every run executes every variant in
# rotating order; each output line is gx-perf's / mpi_allreduce_bench's CSV
# row prefixed with variant and run, suffixed with cpu=<user+sys seconds of
# that tool run's 4 ranks>, each rank timed by /usr/bin/time (the launchers,
# gx-run and mpirun/orted, are left out: a shell's `time` around mpirun sees
# only node A's ranks, as node B's orted is not its child). At the end, per
# size and gx variant, the busbw and its ratio to Open MPI's in the same run
# (median, then every run), the commit and the load average before and after.
#
# usage: perf/tcp_variants.sh RUNS VARIANT...
#   VARIANT: ompi, or NAME:ENV=V,ENV=V (gx with GX_PROVIDER=tcp plus those
#   variables; BIN=DIR takes gx-run/gx-perf from DIR/bin, LD_LIBRARY_PATH=DIR
#   another libgx). Example:
#     perf/tcp_variants.sh 5 one: two:GX_TCP_NSTREAMS=2 ompi
#   Environment: B (build dir with bin/gx-run, gx-perf, mpi_allreduce_bench;
#   default /tmp/gx-perf-compare), MIN/MAX sizes (1M/16M), ITERS/WARM (20/5).
#   Needs root (ip netns); the namespaces are always removed.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d;s/^# \{0,1\}//'; exit 2; }
[ "$(id -u)" = 0 ] || { echo "tcp_variants.sh: needs root (network namespaces)" >&2; exit 77; }
B=${B:-/tmp/gx-perf-compare}
runs=$1; shift
vars=("$@")
source "$(dirname "$0")/netns_lib.sh"
nsA=gxtcpvA$$; nsB=gxtcpvB$$
tmp=$(mktemp -d)
netns_cleanup_on_exit $tmp
netns_pair_create $nsA $nsB
netns_veth $nsA $nsB gxtva$$ gxtvb$$ gxp0 10.232.0
netns_agent_write $tmp/ns-agent.sh 10.232.0.1 $nsA 10.232.0.2 $nsB
command -v /usr/bin/time >/dev/null || { echo "tcp_variants.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
# Each rank's user+sys seconds, appended to $tmp/rcpu.
cat >$tmp/rt.sh <<EOA
#!/bin/sh
exec /usr/bin/time -f "%U %S" -a -o $tmp/rcpu "\$@"
EOA
chmod +x $tmp/rt.sh
ITERS=${ITERS:-20}; WARM=${WARM:-5}
sizes=(-b ${MIN:-1M} -e ${MAX:-16M} -f 4)
gx(){ local envs=(env GX_SOCKET_IFNAME=gxp0 GX_PROVIDER=tcp $1) port=$((20000+RANDOM%20000)); shift
  local B=$B; for e in "${envs[@]}"; do case $e in BIN=*) B=${e#BIN=};; esac; done
  ip netns exec $nsB "${envs[@]}" $B/bin/gx-run -n 2 --nnodes 2 --node-rank 1 --master 10.232.0.1:$port --job-key k$port --node-id nodeB --timeout 300 $tmp/rt.sh $B/bin/gx-perf all_reduce "${sizes[@]}" -n $ITERS -w $WARM -z 2 -c 0 -d float -o sum --csv --no-progress >/dev/null 2>$tmp/e1 &
  local p=$!
  ip netns exec $nsA "${envs[@]}" $B/bin/gx-run -n 2 --nnodes 2 --node-rank 0 --master 10.232.0.1:$port --job-key k$port --node-id nodeA --timeout 300 $tmp/rt.sh $B/bin/gx-perf all_reduce "${sizes[@]}" -n $ITERS -w $WARM -z 2 -c 0 -d float -o sum --csv --no-progress
  wait $p; }
ompi(){ ip netns exec $nsA mpirun --allow-run-as-root --oversubscribe -np 4 --host 10.232.0.1:2,10.232.0.2:2 --mca plm_rsh_agent $tmp/ns-agent.sh --mca oob_tcp_if_include gxp0 --bind-to none --mca mpi_yield_when_idle 1 --mca btl self,tcp --mca btl_tcp_if_include gxp0 $tmp/rt.sh $B/bin/mpi_allreduce_bench "${sizes[@]}" -n $ITERS -w $WARM -z 1 -c 0 -d float -o sum --csv; }
source "$(dirname "$0")/perf_lib.sh"
perf_begin "$(dirname "$0")/.."
k=${#vars[@]}
: >$tmp/all
for ((r=0;r<runs;r++)); do
  echo "# run $r load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((i=0;i<k;i++)); do v=${vars[$(((i+r)%k))]}
    name=${v%%:*}; envs=${v#*:}; [ "$envs" = "$v" ] && envs=
    rm -f $tmp/rcpu
    if [ $name = ompi ]; then ompi >$tmp/out 2>$tmp/err || true; else gx "GX_BENCH_DUMMY=1 ${envs//,/ }" >$tmp/out 2>$tmp/err || true; fi
    cpu=$(awk '/^[0-9.]+ [0-9.]+$/ {s += $1 + $2; n++} END {printf "%.2f%s", s, n == 4 ? "" : "(" n " ranks)"}' $tmp/rcpu 2>/dev/null)
    grep out-of-place $tmp/out | sed "s/^/$name,$r,/;s/\$/cpu=$cpu/" | tee -a $tmp/all || { echo "$name FAILED"; tail -3 $tmp/err; }
  done
done
# Per size and gx variant: busbw over Open MPI's in the same run, median and every run.
python3 - $tmp/all "$(dirname "$0")" <<'PY'
import collections, sys
sys.path.insert(0, sys.argv[2])
from perf_stats import cell
bw = collections.defaultdict(dict)  # (name, size) -> {run: busbw}
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 13:
        bw[(f[0], int(f[5]))][int(f[1])] = float(f[13])
names = sorted({n for n, _ in bw if n != "ompi"})
for size in sorted({s for _, s in bw}):
    ref = bw.get(("ompi", size), {})
    for n in names:
        mine = bw.get((n, size), {})
        rs = [mine[r] / ref[r] for r in sorted(mine) if ref.get(r)]
        print(f"# {size >> 20} MiB {n}: busbw {cell([mine[r] for r in sorted(mine)])} GB/s"
              + (f", over ompi {cell(rs)}" if rs else ""))
PY
perf_end
