#!/bin/bash
# perf/trace_overhead.sh - what GX_TRACE costs (issue 32): the all-reduce at
# 8 B and 4 MiB with gx built without the tracer (BASE), with it but off
# (HEAD, GX_TRACE unset) and on (HEAD, GX_TRACE=DIR), in the same run:
# every round runs the three in rotating order, and the figures are medians
# over rounds with the per-round ratios' median. One command:
#
#   perf/trace_overhead.sh [-r ROUNDS] [-n RANKS] [-B BASE] [-b BUILD_ROOT] [--nice] [--record]
#
#   -r ROUNDS   rounds (default 7; the issue asks for >= 5)
#   -n RANKS    ranks on this machine (default 4: the node arena at 4 MiB,
#               the ring of shm messages at 8 B)
#   -B BASE     commit without the tracer (default: the parent of the commit
#               that added common/trace.c)
#   -b DIR      where the two Release builds go (default /tmp/gx-trace-overhead)
#   --nice      run the ranks at nice -19 (root): on a shared machine the
#               other work then waits for them instead of the other way round
#   --record    also write perf/results/<date>-trace-overhead.md
#
# Run it on an idle machine for figures that mean anything: it prints the
# load average before and after, and a shared machine's noise is far above
# the 1 % the tracer may cost when off.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
rounds=7 ranks=4 base="" root=/tmp/gx-trace-overhead record=0 nice=()
while [ $# -gt 0 ]; do
    case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    -B) base=$2; shift 2 ;;
    -b) root=$2; shift 2 ;;
    --record) record=1; shift ;;
    --nice) nice=(nice -n -19); shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "perf/trace_overhead.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
cd "$src"
if [ -z "$base" ]; then
    added=$(git log --diff-filter=A --format=%H -- common/trace.c | tail -1)
    [ -n "$added" ] || { echo "no commit adds common/trace.c: give -B BASE" >&2; exit 2; }
    base=$(git rev-parse "$added^")
fi
head=$(git rev-parse --short HEAD)
base=$(git rev-parse --short "$base")
dirty=$(git status --porcelain -- common collectives fabric gpudirect include | wc -l)
mkdir -p "$root"

build() { # build DIR: gx-run and gx-perf in Release
    cmake -S "$2" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGX_BUILD_TESTS=OFF > "$1.log" 2>&1 &&
        cmake --build "$1" -j2 --target gx-run gx-perf >> "$1.log" 2>&1 ||
        { echo "build of $2 failed: $1.log" >&2; tail -20 "$1.log" >&2; exit 1; }
}
rm -rf "$root/base-src" && mkdir -p "$root/base-src"
git archive "$base" | tar -x -C "$root/base-src"
echo "building $base (base) and $head${dirty:+ (+$dirty changed files)} (head) in Release under $root"
build "$root/base" "$root/base-src"
build "$root/head" "$src"

load() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(load)
trace_dir=$root/trace
# one BUILD SIZE ITERS WARMUP [env...]: rank 0's out-of-place time in us
one() {
    local b=$1 size=$2 iters=$3 warm=$4
    shift 4
    env "$@" ${nice[@]+"${nice[@]}"} "$root/$b/bin/gx-run" -n "$ranks" --timeout 300 "$root/$b/bin/gx-perf" all_reduce \
        -b "$size" -e "$size" -n "$iters" -w "$warm" --csv 2>/dev/null |
        awk -F, '$9 == "out-of-place" { print $10; exit }'
}
declare -A t
variants=(base off on)
for r in $(seq "$rounds"); do
    for k in 0 1 2; do
        v=${variants[$(( (k + r) % 3 ))]}
        for size in 8 4M; do
            if [ "$size" = 8 ]; then it=3000 w=300; else it=20 w=5; fi
            case $v in
            base) x=$(one base "$size" $it $w GX_TRACE=) ;;
            off) x=$(one head "$size" $it $w GX_TRACE=) ;;
            on) rm -rf "$trace_dir"; x=$(one head "$size" $it $w GX_TRACE="$trace_dir") ;;
            esac
            [ -n "$x" ] || { echo "round $r: $v at $size gave no figure" >&2; exit 1; }
            t[$v,$size,$r]=$x
        done
    done
    echo "round $r/$rounds: 8 B base ${t[base,8,$r]} off ${t[off,8,$r]} on ${t[on,8,$r]} us;" \
         "4 MiB base ${t[base,4M,$r]} off ${t[off,4M,$r]} on ${t[on,4M,$r]} us"
done
load_after=$(load)
rm -rf "$trace_dir"

args=()
for v in base off on; do for size in 8 4M; do for r in $(seq "$rounds"); do
    args+=("$v,$size,$r=${t[$v,$size,$r]}")
done; done; done
report=$(python3 - "$rounds" "$ranks" "$base" "$head" "$load_before" "$load_after" "${#nice[@]}" "${args[@]}" <<'PY'
import statistics, sys, datetime
rounds, ranks, base, head, lb, la, niced = sys.argv[1:8]
rounds = int(rounds)
t = {}
for a in sys.argv[8:]:
    k, v = a.split("=")
    t[tuple(k.split(","))] = float(v)
def med(xs): return statistics.median(xs)
def runs(xs, d=2): return " ".join(f"{x:.{d}f}" for x in xs)
print(f"# GX_TRACE overhead: all-reduce with the tracer off and on ({datetime.date.today()})\n")
print(f"- {ranks} ranks on one machine (gx-run), float32 sum, out-of-place, rank 0's time per "
      f"call (gx-perf --csv): 8 B over 3000 calls, 4 MiB over 20, after warm-up")
print(f"- base {base} (no tracer), head {head}: off = GX_TRACE unset, on = GX_TRACE=DIR")
print(f"- {rounds} rounds, each running base, off, on in rotating order; medians over rounds, "
      f"ratios the median of per-round ratios (every round's figure in brackets)")
print(f"- load average (1, 5, 15 min) before: {lb}; after: {la}"
      f"{'; ranks at nice -19' if niced != '0' else ''}\n")
print("| size | base µs | off µs | on µs | off / base | on / base |")
print("|---|---|---|---|---|---|")
for size, label in (("8", "8 B"), ("4M", "4 MiB")):
    b = [t[("base", size, str(r))] for r in range(1, rounds + 1)]
    off = [t[("off", size, str(r))] for r in range(1, rounds + 1)]
    on = [t[("on", size, str(r))] for r in range(1, rounds + 1)]
    ro = [o / x for o, x in zip(off, b)]
    rn = [o / x for o, x in zip(on, b)]
    print(f"| {label} | {med(b):.2f} (runs {runs(b)}) | {med(off):.2f} (runs {runs(off)}) | "
          f"{med(on):.2f} (runs {runs(on)}) | {med(ro):.3f} (runs {runs(ro, 3)}) | "
          f"{med(rn):.3f} (runs {runs(rn, 3)}) |")
PY
)
echo
echo "$report"
if [ $record = 1 ]; then
    out=$src/perf/results/$(date +%F)-trace-overhead.md
    { echo "$report"; echo; echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"; } > "$out"
    echo "written to $out (then run perf/report)"
fi
