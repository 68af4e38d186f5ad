#!/usr/bin/env bash
# rpc_bench.sh - gx_torch.rpc against torch.distributed.rpc (TensorPipe) on
# the same 2 ranks of this machine (issue 31): rpc_sync round trip of an
# empty call and of a 1 MiB tensor (sent and returned). RUNS runs (default
# 5), the two backends alternating in each; each run's figure is the median
# round trip over its calls (2000 empty, 200 tensor). Prints every run beside
# the medians, the ratio gx/TensorPipe per run and its median (goal: <= 0.5),
# the load average before and after and the build's commit.
#
# usage: perf/rpc_bench.sh [-r RUNS] [-b BUILD_DIR] [--record]
#   BUILD_DIR holds bin/gx-run and lib/libgx.so (default: build, the test
#   build; a Release build is what users get). --record writes
#   perf/results/<date>-rpc.md.
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
run=$build/bin/gx-run
lib=$(ls "$build"/lib/libgx.so 2>/dev/null || ls "$build"/*/libgx.so 2>/dev/null | head -1 || true)
[ -x "$run" ] && [ -n "$lib" ] || { echo "rpc_bench.sh: build $build first (needs bin/gx-run and libgx.so)" >&2; exit 2; }
/usr/bin/python3 -c "import torch.distributed.rpc" 2>/dev/null ||
    { echo "rpc_bench.sh: /usr/bin/python3 has no torch.distributed.rpc (apt-get install python3-torch)" >&2; exit 2; }
export GX_LIBRARY=$lib PYTHONPATH=$root/python
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
out=$(mktemp /tmp/gx-rpc-bench.XXXXXX)
trap 'rm -f "$out"' EXIT
perf_begin "$root" | tee "$out.head"
for i in $(seq "$runs"); do
    for b in gx torch; do
        lines=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) "$run" -n 2 --timeout 300 \
                /usr/bin/python3 "$here/rpc_bench.py" "$b" 2>&1 | grep '^RESULT' || true)
        [ -n "$lines" ] || { echo "rpc_bench.sh: run $i, $b: no figures" >&2; exit 1; }
        echo "$lines" | sed "s/^RESULT/$i $b/" | tee -a "$out"
    done
done
perf_end | tee -a "$out.head"
report=$(/usr/bin/python3 - "$out" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from perf_stats import cell, ratio_cell
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def fig(b, k): return [float(r[3]) for r in rows if r[1] == b and r[2] == k]
print("| figure | gx_torch.rpc (us) | torch.distributed.rpc, TensorPipe (us) | gx / TensorPipe | goal |")
print("|---|---|---|---|---|")
for k, label in (("empty", "rpc_sync round trip, empty call"), ("tensor_1MiB", "rpc_sync round trip, 1 MiB tensor there and back")):
    g, t = fig("gx", k), fig("torch", k)
    print(f"| {label} | {cell(g, 1)} | {cell(t, 1)} | {ratio_cell(g, t)} | <= 0.5 |")
PY
)
echo "$report"
if [ $record -eq 1 ]; then
    perf_record "$root/perf/results/$(date +%Y-%m-%d)-rpc.md" "gx_torch.rpc vs torch.distributed.rpc" "; torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')" \
        "perf/rpc_bench.sh -r $runs --record (build $(basename "$build")); 2 ranks under gx-run; each run's figure the median of its calls" \
        "run backend kind median_us p10_us p90_us" "$report" "$out"
fi
rm -f "$out.head"
