#!/usr/bin/env bash
# compare.sh - gx all-reduce side by side with Open MPI and Gloo (issue 4,
# "Peers side by side" and "Speed goals"): float32 sum, the same rank counts,
# sizes, iterations and warm-up for every tool, medians over repeated runs,
# each ratio the median of the per-run ratios (peers measured in the same run,
# in rotating order so a burst of load does not always hit the same tool).
#
# Scenarios (--scenarios, comma separated; default all):
#   2x1    2 ranks, one node: 4K..256K (-n 200 -w 20, for the time per op)
#          and 1M..64M (-n ITERS -w WARMUP); Open MPI --mca btl self,vader
#   4x1    4 ranks, one node, 1M..64M; Open MPI --mca btl self,vader
#   netns  2 "nodes" of 2 ranks: two network namespaces joined by a veth
#          pair, 1M..16M. gx over tcp only (GX_PROVIDER=tcp) against Open MPI
#          --mca btl self,tcp, plus gx's default (shm inside a node, tcp
#          between) and Gloo. Needs root; the namespaces are always removed.
#
# usage: perf/compare.sh [-r RUNS] [-n ITERS] [-w WARMUP] [-z 0|1]
#                        [-b BUILD_DIR] [--scenarios LIST] [--no-record]
#   -z 1 (default) times blocking calls in every tool (gx_allreduce,
#   MPI_Allreduce, all_reduce); -z 0 non-blocking ones, 64 in flight.
#   Writes perf/results/<date>-allreduce.md unless --no-record.
#   --gx-run PATH --gx-perf PATH use those binaries instead of building gx.
#   --max SIZE caps the sweeps (default 64M); --quick = -r 1 -n 5 -w 1 --max 4M.
#   --netns-tools LIST: the netns scenario's tools (default gx-tcp,ompi-tcp,gx,gloo);
#   e.g. gx-tcp,ompi-tcp for the flat tcp comparison alone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=5
iters=20
warmup=5
blocking=1
build=/tmp/gx-perf-compare
scenarios=2x1,4x1,netns
maxsize=64M
record=1
netns_tools=gx-tcp,ompi-tcp,gx,gloo
gxrun=
gxperf=
python=/usr/bin/python3 # Debian's, with python3-torch; another python3 may lack torch

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
    -r) runs=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -z) blocking=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --no-record) record=0; shift ;;
    --max) maxsize=$2; shift 2 ;;
    --netns-tools) netns_tools=$2; shift 2 ;;
    --quick) runs=1; iters=5; warmup=1; maxsize=4M; shift ;;
    --gx-run) gxrun=$2; shift 2 ;;
    --gx-perf) gxperf=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

command -v mpirun >/dev/null || { echo "compare.sh: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
"$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    { echo "compare.sh: $python has no torch with gloo (apt-get install python3-torch)" >&2; exit 1; }

echo "== building (Release) in $build" >&2
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGX_BUILD_TESTS=OFF >/dev/null
if [ -n "$gxrun" ] && [ -n "$gxperf" ]; then
    cmake --build "$build" --target mpi_allreduce_bench >/dev/null
else
    cmake --build "$build" --target gx-perf gx-run mpi_allreduce_bench >/dev/null
    gxrun="$build/bin/gx-run"
    gxperf="$build/bin/gx-perf"
fi
mpibench="$build/bin/mpi_allreduce_bench"
gloo="$here/gloo_allreduce_bench.py"

source "$here/netns_lib.sh"
source "$here/perf_lib.sh"
tmp=$(mktemp -d)
nsA="gxperfA$$"
nsB="gxperfB$$"
netns_cleanup_on_exit "$tmp"

mpirun_base=(mpirun --allow-run-as-root --oversubscribe)
common=(-n "$iters" -w "$warmup" -z "$blocking" -c 0 -d float -o sum)
# gx-perf's -z follows nccl-tests: 2 is "wait for each, no barrier", what -z 1
# means to the MPI and Gloo benchmarks.
gx_common=(-n "$iters" -w "$warmup" -z "$([ "$blocking" = 1 ] && echo 2 || echo 0)" -c 0 -d float -o sum)
T=900 # seconds before one tool's run is stopped

# run_tool SCEN TOOL RUN SIZEARGS... -- CMD...: CMD's CSV (sizes appended)
# lands in $tmp/SCEN__TOOL__RUN.csv; a failing tool is reported, not fatal.
run_tool() {
    local scen=$1 tool=$2 run=$3
    shift 3
    local out="$tmp/${scen}__${tool}__${run}.csv"
    echo "   $tool" >&2
    # Functions (the two-namespace launchers) bound themselves with --timeout.
    local bound=(timeout "$T")
    if declare -F "$1" >/dev/null; then bound=(); fi
    if ! "${bound[@]}" "$@" >"$out.raw" 2>"$out.err"; then
        echo "   $tool FAILED:" >&2
        tail -n 5 "$out.err" | sed 's/^/     | /' >&2
        rm -f "$out.raw"
        return 0
    fi
    grep -E '^(collective|[a-z_]+,)' "$out.raw" >"$out" || true
    rm -f "$out.raw"
}

# rotate N ITEMS...: the items rotated left by N.
rotate() {
    local n=$1
    shift
    local a=("$@") k=${#a[@]} i
    for ((i = 0; i < k; i++)); do echo "${a[$(((i + n) % k))]}"; done
}

scenario_2x1() {
    local run=$1 part sizes extra tool
    for part in small large; do
        if [ $part = small ]; then
            sizes=(-b 4K -e 256K -f 4)
            extra=(-n 200 -w 20)
        else
            sizes=(-b 1M -e "$maxsize" -f 4)
            extra=()
        fi
        for tool in $(rotate "$run" gx ompi gloo); do
            case $tool in
            gx) run_tool "2x1-$part" gx "$run" "$gxrun" -n 2 "$gxperf" all_reduce "${sizes[@]}" \
                    "${gx_common[@]}" "${extra[@]}" --csv --no-progress ;;
            ompi) run_tool "2x1-$part" ompi "$run" "${mpirun_base[@]}" -np 2 --mca btl self,vader \
                    "$mpibench" "${sizes[@]}" "${common[@]}" "${extra[@]}" --csv ;;
            gloo) run_tool "2x1-$part" gloo "$run" "$python" "$gloo" --nproc 2 "${sizes[@]}" \
                    "${common[@]}" "${extra[@]}" --csv ;;
            esac
        done
    done
}

scenario_4x1() {
    local run=$1 sizes=(-b 1M -e "$maxsize" -f 4) tool
    for tool in $(rotate "$run" gx ompi gloo); do
        case $tool in
        gx) run_tool 4x1 gx "$run" "$gxrun" -n 4 "$gxperf" all_reduce "${sizes[@]}" \
                "${gx_common[@]}" --csv --no-progress ;;
        ompi) run_tool 4x1 ompi "$run" "${mpirun_base[@]}" -np 4 --mca btl self,vader \
                "$mpibench" "${sizes[@]}" "${common[@]}" --csv ;;
        gloo) run_tool 4x1 gloo "$run" "$python" "$gloo" --nproc 4 "${sizes[@]}" \
                "${common[@]}" --csv ;;
        esac
    done
}

netns_up() {
    [ "$(id -u)" = 0 ] || { echo "compare.sh: the netns scenario needs root" >&2; return 1; }
    netns_pair_create "$nsA" "$nsB"
    # The same interface name in both, so one *_IF_INCLUDE fits every rank.
    netns_veth "$nsA" "$nsB" "gxpa$$" "gxpb$$" gxp0 10.231.0
    # mpirun starts the second node's daemon through this instead of ssh.
    netns_agent_write "$tmp/ns-agent.sh" 10.231.0.1 "$nsA" 10.231.0.2 "$nsB"
}

# gx on two "nodes": one gx-run per namespace, rank 0's CSV on node 0.
# gx_netns PORT PROVIDER CMD...: PROVIDER "" is gx's default choice.
gx_netns() {
    local port=$1 prov=$2
    shift 2
    local key="compare-$$-$port" envs=(env GX_SOCKET_IFNAME=gxp0)
    [ -n "$prov" ] && envs+=("GX_PROVIDER=$prov")
    ip netns exec "$nsB" "${envs[@]}" "$gxrun" -n 2 --nnodes 2 --node-rank 1 \
        --master "10.231.0.1:$port" --job-key "$key" --node-id nodeB --timeout "$T" "$@" \
        >/dev/null 2>"$tmp/node1.err" &
    local pid=$! rc=0
    ip netns exec "$nsA" "${envs[@]}" "$gxrun" -n 2 --nnodes 2 --node-rank 0 \
        --master "10.231.0.1:$port" --job-key "$key" --node-id nodeA --timeout "$T" "$@" || rc=$?
    wait "$pid" || { [ $rc -ne 0 ] || rc=1; cat "$tmp/node1.err" >&2; }
    return $rc
}

gloo_netns() {
    local port=$1
    shift
    ip netns exec "$nsB" env GLOO_SOCKET_IFNAME=gxp0 "$python" "$gloo" --nproc 2 --nnodes 2 \
        --node-rank 1 --master-addr 10.231.0.1 --master-port "$port" --timeout "$T" "$@" \
        >/dev/null &
    local pid=$! rc=0
    ip netns exec "$nsA" env GLOO_SOCKET_IFNAME=gxp0 "$python" "$gloo" --nproc 2 --nnodes 2 \
        --node-rank 0 --master-addr 10.231.0.1 --master-port "$port" --timeout "$T" "$@" || rc=$?
    wait "$pid" || { [ $rc -ne 0 ] || rc=1; }
    return $rc
}

scenario_netns() {
    # veth tcp runs at a tenth of shm: stop at 16 MiB to keep a run short.
    local cap=$maxsize
    [ "$(numfmt --from=iec "$cap")" -gt $((16 << 20)) ] && cap=16M
    local run=$1 sizes=(-b 1M -e "$cap" -f 4) tool port
    # Each namespace "node" believes it has 2 cores of its own; both share the
    # same 2. Left to its defaults Open MPI binds ranks 0,1 and 2,3 to the same
    # two cores and spins without yielding: 30x slower (340 ms per 1 MiB
    # all-reduce instead of 9 ms). Tell it the truth, as gx and Gloo yield.
    local mpins=("${mpirun_base[@]}" -np 4 --host 10.231.0.1:2,10.231.0.2:2
        --mca plm_rsh_agent "$tmp/ns-agent.sh" --mca oob_tcp_if_include gxp0
        --bind-to none --mca mpi_yield_when_idle 1)
    local list
    IFS=, read -r -a list <<<"$netns_tools"
    for tool in $(rotate "$run" "${list[@]}"); do
        port=$((20000 + (RANDOM % 20000)))
        case $tool in
        gx-tcp) run_tool netns gx-tcp "$run" gx_netns "$port" tcp "$gxperf" all_reduce \
                "${sizes[@]}" "${gx_common[@]}" --csv --no-progress ;;
        gx) run_tool netns gx "$run" gx_netns "$port" "" "$gxperf" all_reduce "${sizes[@]}" \
                "${gx_common[@]}" --csv --no-progress ;;
        ompi-tcp) run_tool netns ompi-tcp "$run" ip netns exec "$nsA" "${mpins[@]}" \
                --mca btl self,tcp --mca btl_tcp_if_include gxp0 "$mpibench" "${sizes[@]}" \
                "${common[@]}" --csv ;;
        gloo) run_tool netns gloo "$run" gloo_netns "$port" "${sizes[@]}" "${common[@]}" --csv ;;
        *) echo "compare.sh: unknown netns tool '$tool' (gx-tcp, ompi-tcp, gx, gloo)" >&2; exit 2 ;;
        esac
    done
}

load_now() { perf_load; }

echo "load before: $(load_now)" >"$tmp/load.txt"
IFS=, read -r -a scen_list <<<"$scenarios"
for s in "${scen_list[@]}"; do
    case $s in
    2x1|4x1) ;;
    netns) netns_up ;;
    *) echo "compare.sh: unknown scenario '$s' (2x1, 4x1, netns)" >&2; exit 2 ;;
    esac
done
start=$(date +%s)
for ((run = 1; run <= runs; run++)); do
    for s in "${scen_list[@]}"; do
        echo "== run $run/$runs, scenario $s (load $(load_now), $(($(date +%s) - start)) s)" >&2
        echo "run $run $s: load $(load_now)" >>"$tmp/load.txt"
        "scenario_$s" "$run"
    done
done
echo "load after: $(load_now)" >>"$tmp/load.txt"

out=/dev/null
if [ "$record" = 1 ]; then
    mkdir -p "$here/results"
    out="$here/results/$(date +%Y-%m-%d)-allreduce.md"
    k=2
    while [ -e "$out" ]; do # a second run the same day keeps the first
        out="$here/results/$(date +%Y-%m-%d)-allreduce-$k.md"
        k=$((k + 1))
    done
fi
commit=$(perf_commit "$root")
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
"$python" "$here/compare_report.py" --dir "$tmp" --runs "$runs" --cpu "$cpu" \
    --cores "$(nproc)" --iters "$iters" --warmup "$warmup" --blocking "$blocking" \
    --ompi "$(mpirun --version 2>/dev/null | head -n 1)" --elapsed "$(($(date +%s) - start))" \
    --gx-commit "$commit" \
    --load "$tmp/load.txt" | tee "$out"
[ "$record" = 1 ] && echo "written to $out" >&2
exit 0
