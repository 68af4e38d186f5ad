#!/usr/bin/env bash
# win_bench.sh - one-sided put/get against send/receive on 2 ranks, per
# provider: shm, tcp and verbs over softverbs (issue 31). RUNS runs (default
# 5), the providers alternating in each; each run is one build/bin/win_bench
# (each of its figures the median of 5 repetitions). Prints every run, then
# per provider and size the medians over the runs and the ratios put/send and
# get/send (goal: put >= 0.9x send over shm and verbs), latencies at 8 bytes,
# the load average before and after and the build's commit.
#
# usage: perf/win_bench.sh [-r RUNS] [-b BUILD_DIR] [--record]
#   --record writes perf/results/<date>-win.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/perf_lib.sh"
runs=5 build=$root/build record=0
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -b) build=$(cd "$2" && pwd); shift 2 ;;
    --record) record=1; shift ;;
    *) echo "usage: $0 [-r RUNS] [-b BUILD_DIR] [--record]" >&2; exit 2 ;;
  esac
done
run=$build/bin/gx-run bench=$build/bin/win_bench
[ -x "$run" ] && [ -x "$bench" ] || { echo "win_bench.sh: build $build first (bin/gx-run, bin/win_bench)" >&2; exit 2; }
sv=$build/lib/libsoftverbs.so
provs="shm tcp"
[ -e "$sv" ] && provs="$provs verbs"
out=$(mktemp /tmp/gx-win-bench.XXXXXX)
trap 'rm -f "$out" "$out.head"' EXIT
perf_begin "$root" | tee "$out.head"
for i in $(seq "$runs"); do
    for p in $provs; do
        env=(GX_PROVIDER=$p)
        [ "$p" = verbs ] && env+=(GX_IBVERBS_LIB="$sv" GX_SOCKET_IFNAME=lo)
        lines=$(env "${env[@]}" "$run" -n 2 --timeout 300 "$bench" 2>&1 | grep '^RESULT' || true)
        [ -n "$lines" ] || { echo "win_bench.sh: run $i, $p: no figures" >&2; exit 1; }
        echo "$lines" | sed "s/^RESULT/$i $p/" | tee -a "$out"
    done
done
perf_end | tee -a "$out.head"
report=$(/usr/bin/python3 - "$out" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from perf_stats import cell, ratio_cell
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
provs = list(dict.fromkeys(r[1] for r in rows))
def fig(p, op, size):
    return [float(r[5]) for r in rows if r[1] == p and r[3] == op and r[4] == size]
print("| provider (path) | bytes | put GB/s | get GB/s | send/recv GB/s | put / send | get / send |")
print("|---|---|---|---|---|---|---|")
for p in provs:
    path = next(r[2] for r in rows if r[1] == p)
    for size in dict.fromkeys(r[4] for r in rows if r[3] == "put"):
        pu, ge, se = fig(p, "put", size), fig(p, "get", size), fig(p, "send", size)
        print(f"| {p} ({path}) | {size} | {cell(pu, 3)} | {cell(ge, 3)} | {cell(se, 3)} | "
              f"{ratio_cell(pu, se)} | {ratio_cell(ge, se)} |")
print()
print("| provider | put + flush, 8 B (us) | get, 8 B (us) | send/recv half round trip, 8 B (us) |")
print("|---|---|---|---|")
for p in provs:
    print(f"| {p} | {cell(fig(p, 'put_lat', '8'), 1)} | {cell(fig(p, 'get_lat', '8'), 1)} | "
          f"{cell(fig(p, 'send_lat', '8'), 1)} |")
PY
)
echo "$report"
if [ $record -eq 1 ]; then
    perf_record "$root/perf/results/$(date +%Y-%m-%d)-win.md" "One-sided put/get vs send/receive" "" \
        "perf/win_bench.sh -r $runs --record (build $(basename "$build")); 2 ranks under gx-run" \
        "run provider path op bytes GB/s-or-us" "$report" "$out"
fi
