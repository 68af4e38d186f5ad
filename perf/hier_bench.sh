#!/usr/bin/env bash
# hier_bench.sh - the hierarchical all-reduce against gx's flat algorithms
# and Open MPI (issue 13 "Speed goals"): 2 network-namespace "nodes" x 2
# ranks joined by a veth pair (--rails: a second veth pair, one per local
# rank, GX_SOCKET_IFNAME "=gxhb0,gxhb1"), float32 sum at 1, 4, 16 MiB,
# out of place, blocking calls, RUNS runs in rotating tool order; per tool and
# size the median busbw, and each ratio the median of the per-run ratios.
#
# Tools: gx-hier (GX_ALGO=allreduce:hier), gx-ring, gx-rhd (flat; "gx best
# flat" is the better of the two in each run), ompi-tcp (--mca btl self,tcp,
# as perf/compare.sh), ompi (btl self,vader,tcp: shared memory inside a node),
# ompi-han (the same with --mca coll_han_priority 100, Open MPI's own
# hierarchical collectives). The load average is recorded before every run.
# With --rails, gx-hier1 is the same hierarchical all-reduce with both local
# ranks on the first rail only (GX_SOCKET_IFNAME "=gxhb0"): hier/hier1 is the
# issue's "two rails against the same run on one rail".
# --rate RATE caps every veth in both directions with a tc tbf qdisc (e.g.
# 500mbit): on one host a veth is no bandwidth limit (the CPUs copying are),
# so a rate below what the CPUs move stands in for a NIC's line rate.
#
# usage: perf/hier_bench.sh [-r RUNS] [-n ITERS] [-w WARMUP] [-b BUILD_DIR]
#                           [--rails] [--rate RATE] [--no-record]
#   BUILD_DIR: an existing gx build with gx-run and gx-perf (default: build
#   Release in /tmp/gx-hier-bench); mpi_allreduce_bench is built there when
#   MPI is found (apt-get install openmpi-bin libopenmpi-dev).
#   Writes perf/results/<date>-hier[-rails].md unless --no-record.
# Needs root (network namespaces); the namespaces are always removed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=5 iters=20 warmup=5 build= rails=0 record=1 rate=
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
    -r) runs=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    --rails) rails=1; shift ;;
    --rate) rate=$2; shift 2 ;;
    --no-record) record=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "hier_bench.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "hier_bench.sh: network namespaces need root" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "hier_bench.sh: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }

if [ -z "$build" ]; then
    build=/tmp/gx-hier-bench
    echo "== building (Release) in $build" >&2
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGX_BUILD_TESTS=OFF >/dev/null
    nice cmake --build "$build" --target gx-perf gx-run >/dev/null
fi
if [ ! -x "$build/bin/mpi_allreduce_bench" ]; then
    cmake "$build" >/dev/null
    nice cmake --build "$build" --target mpi_allreduce_bench >/dev/null
fi
gxrun=$build/bin/gx-run gxperf=$build/bin/gx-perf mpibench=$build/bin/mpi_allreduce_bench

source "$here/netns_lib.sh"
source "$here/perf_lib.sh"
tmp=$(mktemp -d)
nsA=gxhierA$$ nsB=gxhierB$$
netns_cleanup_on_exit "$tmp"
netns_pair_create "$nsA" "$nsB"
links=(0)
[ "$rails" = 1 ] && links=(0 1)
for l in "${links[@]}"; do
    netns_veth "$nsA" "$nsB" "gxha$l$$" "gxhb$l$$" "gxhb$l" "10.23$((2 + l)).0"
    if [ -n "$rate" ]; then
        netns_tbf "$nsA" "gxhb$l" "$rate"
        netns_tbf "$nsB" "gxhb$l" "$rate"
    fi
done
ifname="=gxhb0"
[ "$rails" = 1 ] && ifname="=gxhb0,gxhb1"
# mpirun starts the second node's daemon through this instead of ssh.
netns_agent_write "$tmp/ns-agent.sh" 10.232.0.1 "$nsA" 10.232.0.2 "$nsB" uts

sizes=(-b "${HIER_BENCH_MIN:-1M}" -e "${HIER_BENCH_MAX:-16M}" -f 4)
common=(-n "$iters" -w "$warmup" -z 1 -c 0 -d float -o sum)
# gx_netns ALGO: one gx-run per namespace, rank 0's CSV on stdout.
gx_netns() {
    local algo=$1 port=$((20000 + RANDOM % 20000)) key="hierbench-$$-$RANDOM"
    local envs=(env GX_SOCKET_IFNAME="${2:-$ifname}" GX_ALGO="allreduce:$algo")
    ip netns exec "$nsB" "${envs[@]}" "$gxrun" -n 2 --nnodes 2 --node-rank 1 \
        --master "10.232.0.1:$port" --job-key "$key" --node-id nodeB --timeout 600 \
        "$gxperf" all_reduce "${sizes[@]}" "${common[@]}" --csv --no-progress \
        >/dev/null 2>"$tmp/node1.err" &
    local pid=$! rc=0
    ip netns exec "$nsA" "${envs[@]}" "$gxrun" -n 2 --nnodes 2 --node-rank 0 \
        --master "10.232.0.1:$port" --job-key "$key" --node-id nodeA --timeout 600 \
        "$gxperf" all_reduce "${sizes[@]}" "${common[@]}" --csv --no-progress || rc=$?
    wait "$pid" || { [ $rc -ne 0 ] || rc=1; cat "$tmp/node1.err" >&2; }
    return $rc
}
# ompi_netns BTL [MCA...]: Open MPI over both namespaces (see perf/compare.sh
# for why it must not bind and must yield on a shared 2-core machine).
ompi_netns() {
    local btl=$1
    shift
    ip netns exec "$nsA" unshare --uts timeout 600 sh -c 'hostname "$0"; exec "$@"' "$nsA" \
        mpirun --allow-run-as-root --oversubscribe -np 4 \
        --host 10.232.0.1:2,10.232.0.2:2 --mca plm_rsh_agent "$tmp/ns-agent.sh" \
        --mca oob_tcp_if_include gxhb0 --bind-to none --mca mpi_yield_when_idle 1 \
        --mca btl "$btl" --mca btl_tcp_if_include "${ifname#=}" "$@" \
        "$mpibench" "${sizes[@]}" "${common[@]}" --csv
}
run_tool() { # TOOL RUN: CSV rows in $tmp/TOOL__RUN.csv (a failure is reported, not fatal)
    local tool=$1 run=$2 out="$tmp/$1__$2.csv" rc=0
    echo "   $tool" >&2
    case $tool in
    gx-hier) gx_netns hier >"$out.raw" 2>"$out.err" || rc=$? ;;
    gx-hier1) gx_netns hier "=gxhb0" >"$out.raw" 2>"$out.err" || rc=$? ;;
    gx-ring) gx_netns ring >"$out.raw" 2>"$out.err" || rc=$? ;;
    gx-rhd) gx_netns rhd >"$out.raw" 2>"$out.err" || rc=$? ;;
    ompi-tcp) ompi_netns self,tcp >"$out.raw" 2>"$out.err" || rc=$? ;;
    ompi) ompi_netns self,vader,tcp --mca btl_vader_single_copy_mechanism none >"$out.raw" 2>"$out.err" || rc=$? ;;
    ompi-han) ompi_netns self,vader,tcp --mca btl_vader_single_copy_mechanism none --mca coll_han_priority 100 >"$out.raw" 2>"$out.err" || rc=$? ;;
    esac
    if [ $rc -ne 0 ]; then
        echo "   $tool FAILED ($rc):" >&2
        tail -n 5 "$out.err" | sed 's/^/     | /' >&2
        echo "$tool (run $((run + 1)), exit $rc): $(grep -m1 -iE 'segmentation|error|fail' "$out.err" | cut -c1-160)" >>"$tmp/failed"
        return 0
    fi
    grep -E '^(all_reduce|mpi_allreduce),' "$out.raw" | grep ',out-of-place,' >"$out" || true
}
default_tools="gx-hier gx-ring gx-rhd ompi-tcp ompi ompi-han"
[ "$rails" = 1 ] && default_tools="gx-hier gx-hier1 gx-ring gx-rhd ompi-tcp ompi ompi-han"
tools=(${HIER_BENCH_TOOLS:-$default_tools})
: >"$tmp/load"
for ((run = 0; run < runs; run++)); do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "$run $load" >>"$tmp/load"
    echo "== run $((run + 1))/$runs (load average $load)" >&2
    k=${#tools[@]}
    for ((i = 0; i < k; i++)); do
        run_tool "${tools[$(((i + run) % k))]}" "$run"
    done
done
echo "$runs $(cut -d' ' -f1-3 /proc/loadavg)" >>"$tmp/load"

report=$(python3 - "$tmp" "$runs" "$rails" <<'EOF'
import csv, glob, os, statistics, sys
tmp, runs, rails = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
bw = {}  # (tool, run) -> {size: busbw}
for path in glob.glob(os.path.join(tmp, "*__*.csv")):
    tool, run = os.path.basename(path)[:-4].split("__")
    rows = {}
    for r in csv.reader(open(path)):
        if len(r) > 11:
            rows[int(r[3])] = float(r[11])
    bw[(tool, int(run))] = rows
for run in range(runs):  # gx best flat: the better of ring and rhd in each run
    a, b = bw.get(("gx-ring", run), {}), bw.get(("gx-rhd", run), {})
    bw[("gx-flat", run)] = {s: max(a.get(s, 0), b.get(s, 0)) for s in set(a) | set(b)}
tools = ["gx-hier", "gx-hier1", "gx-flat", "gx-ring", "gx-rhd", "ompi-tcp", "ompi", "ompi-han"]
peers = ["gx-flat", "ompi-tcp", "ompi", "ompi-han"]
if not rails:
    tools.remove("gx-hier1")
else:
    peers.insert(0, "gx-hier1")
sizes = sorted({s for v in bw.values() for s in v})
def med(xs):
    xs = [x for x in xs if x > 0]
    return statistics.median(xs) if xs else None
print("| size | " + " | ".join(tools) + " | " +
      " | ".join("hier/" + p.replace("gx-", "") for p in peers) + " |")
print("|---" * (len(tools) + len(peers) + 1) + "|")
for s in sizes:
    cells = []
    for t in tools:
        m = med([bw.get((t, r), {}).get(s, 0) for r in range(runs)])
        cells.append("%.3f" % m if m else "-")
    ratios = []
    for peer in peers:
        per = [bw[("gx-hier", r)][s] / bw[(peer, r)][s] for r in range(runs)
               if bw.get(("gx-hier", r), {}).get(s) and bw.get((peer, r), {}).get(s)]
        ratios.append("%.2fx (runs %s)" % (statistics.median(per), " ".join("%.2f" % x for x in per))
                      if per else "-")
    print("| %d MiB | %s | %s |" % (s >> 20, " | ".join(cells), " | ".join(ratios)))
print("\nEvery run (busbw GB/s per size):\n")
for t in tools:
    for r in range(runs):
        row = bw.get((t, r), {})
        print("- %s run %d: %s" % (t, r + 1, ", ".join("%d MiB %.3f" % (s >> 20, row[s]) if row.get(s)
                                                    else "%d MiB -" % (s >> 20) for s in sizes)))
EOF
)
suffix= title=
if [ "$rails" = 1 ]; then suffix=-rails title=", two rails"; fi
if [ -n "$rate" ]; then suffix=$suffix-$rate title="$title, every veth capped at $rate (tc tbf)"; fi
failed="none"
[ -s "$tmp/failed" ] && failed=$(sed 's/^/- /' "$tmp/failed")
btype=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
loads=$(awk '{ printf "%s%s %s %s", (NR > 1 ? "; " : ""), $2, $3, $4 }' "$tmp/load")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
text="# Hierarchical all-reduce, 2 netns nodes x 2 ranks$title

$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu), commit $(perf_commit "$root").
perf/hier_bench.sh -r $runs -n $iters -w $warmup$([ "$rails" = 1 ] && echo " --rails" || true)$([ -n "$rate" ] && echo " --rate $rate" || true): float32 sum, out of place,
blocking; busbw in GB/s (median of $runs runs); ratios are medians of per-run ratios, every run's beside them.
GX_SOCKET_IFNAME=$ifname. gx-flat = the better of gx-ring and gx-rhd in each run.
Load average (1, 5, 15 min) before each run and after the last: $loads.
gx build: $build (CMAKE_BUILD_TYPE '${btype:-default}'); Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}').

$report

Runs that failed:
$failed
"
echo "$text"
if [ "$record" = 1 ]; then
    out="$root/perf/results/$(date -u +%Y-%m-%d)-hier$suffix.md"
    echo "$text" >"$out"
    echo "written: $out" >&2
fi
