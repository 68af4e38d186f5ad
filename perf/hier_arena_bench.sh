#!/usr/bin/env bash
# hier_arena_bench.sh - hier's intra-node engine A/B: the node arena
# (GX_HIER_ARENA=auto) against the ring of messages over the shm provider
# (GX_HIER_ARENA=off), 2 network-namespace nodes x 2 ranks joined by a veth
# pair, GX_ALGO=allreduce:hier, float32 sum, out of place, blocking, at 1, 4
# and 16 MiB. Per run and size both engines run, in alternating order (A B,
# then B A), each twice (ITERS_LO and ITERS_HI timed iterations), so the CPU
# cost of one all-reduce is (cpu(hi) - cpu(lo)) / (hi - lo): user+sys seconds
# of all ranks (the rusage of gx-run's children), start-up cancelled out.
# Prints per size the median busbw (rank 0's, at ITERS_HI) and median CPU ms
# per all-reduce for each engine and the median of per-run ratios; the load
# average before every run. Loaded machines disturb busbw far more than CPU.
#
# usage: perf/hier_arena_bench.sh [-r RUNS] [-l RANKS_PER_NODE] [-b BUILD_DIR]
#   BUILD_DIR: a gx build with gx-run and gx-perf (default: build)
#   RANKS_PER_NODE: 2 (default) or more (2 x 4: 3/4 of the vector crosses
#   the node arena per phase, 1/4 the network)
# Needs root (network namespaces); they are always removed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=5 per=2 build=$here/../build lo=${ITERS_LO:-5} hi=${ITERS_HI:-25}
while [ $# -gt 0 ]; do
    case "$1" in
    -r) runs=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -l) per=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "hier_arena_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "hier_arena_bench.sh: network namespaces need root" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "hier_arena_bench.sh: /usr/bin/time needed (apt-get install time)" >&2; exit 1; }
gxrun=$build/bin/gx-run gxperf=$build/bin/gx-perf
source "$here/netns_lib.sh"
source "$here/perf_lib.sh"
tmp=$(mktemp -d)
nsA=gxarenaA$$ nsB=gxarenaB$$
netns_cleanup_on_exit "$tmp"
netns_pair_create "$nsA" "$nsB"
netns_veth "$nsA" "$nsB" "gxara$$" "gxarb$$" gxar0 10.239.0

# job MODE SIZE ITERS: prints "busbw cpu_seconds" (rank 0's busbw; user+sys of both nodes)
job() {
    local mode=$1 size=$2 iters=$3 port=$((20000 + RANDOM % 20000)) key="arenabench-$$-$RANDOM"
    local envs=(env GX_SOCKET_IFNAME==gxar0 GX_ALGO=allreduce:hier GX_HIER_ARENA="$mode")
    local args=(all_reduce -b "$size" -e "$size" -n "$iters" -w 2 -z 1 -c 0 -d float -o sum --csv --no-progress)
    ip netns exec "$nsB" /usr/bin/time -f "%U %S" -o "$tmp/tB" "${envs[@]}" "$gxrun" -n "$per" --nnodes 2 \
        --node-rank 1 --master 10.239.0.1:$port --job-key "$key" --node-id nodeB --timeout 300 \
        "$gxperf" "${args[@]}" >/dev/null 2>"$tmp/errB" &
    local pid=$!
    ip netns exec "$nsA" /usr/bin/time -f "%U %S" -o "$tmp/tA" "${envs[@]}" "$gxrun" -n "$per" --nnodes 2 \
        --node-rank 0 --master 10.239.0.1:$port --job-key "$key" --node-id nodeA --timeout 300 \
        "$gxperf" "${args[@]}" >"$tmp/out" 2>"$tmp/errA" || { cat "$tmp/errA" >&2; return 1; }
    wait "$pid" || { cat "$tmp/errB" >&2; return 1; }
    local bw cpu
    bw=$(grep -E '^all_reduce,' "$tmp/out" | grep ',out-of-place,' | head -1 | cut -d, -f12)
    cpu=$(cat "$tmp/tA" "$tmp/tB" | awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { s += $1 + $2 } END { print s }')
    echo "$bw $cpu"
}
perf_begin "$here/.."
: >"$tmp/rows"
for ((run = 0; run < runs; run++)); do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "== run $((run + 1))/$runs (load average $load)" >&2
    echo "load $run $load" >>"$tmp/rows"
    for size in 1M 4M 16M; do
        order=(auto off)
        [ $((run % 2)) = 1 ] && order=(off auto)
        for mode in "${order[@]}"; do
            read -r _ c_lo < <(job "$mode" "$size" "$lo")
            read -r bw c_hi < <(job "$mode" "$size" "$hi")
            echo "row $run $size $mode $bw $c_lo $c_hi" >>"$tmp/rows"
            echo "   $size $mode busbw $bw GB/s, cpu $c_lo s ($lo iters) $c_hi s ($hi iters)" >&2
        done
    done
done
echo "load end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$tmp/rows"
python3 - "$tmp/rows" "$lo" "$hi" "$per" <<'PY'
import statistics, sys
rows, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def cell(v, f):
    return (f % statistics.median(v)) + " (runs " + " ".join(f % x for x in v) + ")" if v else "-"
d, loads = {}, []
for line in open(rows):
    f = line.split()
    if f[0] == "load":
        loads.append(" ".join(f[2:5]))
        continue
    _, run, size, mode, bw, clo, chi = f
    d[(int(run), size, mode)] = (float(bw), (float(chi) - float(clo)) / (hi - lo) * 1e3)
runs = sorted({k[0] for k in d})
print("| size | busbw arena | busbw ring | arena/ring busbw | CPU ms/op arena | CPU ms/op ring | arena/ring CPU |")
print("|---|---|---|---|---|---|---|")
for size in ["1M", "4M", "16M"]:
    a = [d[(r, size, "auto")] for r in runs if (r, size, "auto") in d]
    o = [d[(r, size, "off")] for r in runs if (r, size, "off") in d]
    bwr = [d[(r, size, "auto")][0] / d[(r, size, "off")][0] for r in runs]
    cr = [d[(r, size, "auto")][1] / d[(r, size, "off")][1] for r in runs if d[(r, size, "off")][1] > 0]
    c = lambda v, f="%.3f": cell(v, f)
    print("| %s | %s | %s | %s | %s | %s | %s |" % (size, c([x[0] for x in a]), c([x[0] for x in o]),
          c(bwr, "%.2f"), c([x[1] for x in a], "%.1f"), c([x[1] for x in o], "%.1f"), c(cr, "%.2f")))
print()
print("each cell: the median, then every run's figure")
print("load average (1/5/15 min) before each run and at the end: " + "; ".join(loads))
print("2 nodes x %s ranks; runs: %d, CPU per op from %d and %d timed iterations (2 warm-up)" % (sys.argv[4], len(runs), lo, hi))
PY
perf_end
