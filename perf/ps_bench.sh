#!/usr/bin/env bash
# ps_bench.sh - examples/param_server.py's steps per second on gx_torch.rpc
# against the same program on torch.distributed.rpc (TensorPipe), on the
# same 4 ranks of this machine (2 servers + 2 trainers; issue 31). RUNS runs
# (default 5), the two backends alternating in each; each run's figure is
# the program's own "RESULT steps_per_s" (the steps after its first 5 over
# the slowest trainer's time), and the run must pass the program's loss
# check. Prints every run, the medians, the ratio gx/TensorPipe per run and
# its median (goal: >= 1.5), the load average before and after and the
# build's commit.
#
# usage: perf/ps_bench.sh [-r RUNS] [-s STEPS] [-b BUILD_DIR] [--record]
#   STEPS: training steps per run (default 200). --record writes
#   perf/results/<date>-ps.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/perf_lib.sh"
runs=5 steps=200 build=$root/build record=0
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -s) steps=$2; shift 2 ;;
    -b) build=$(cd "$2" && pwd); shift 2 ;;
    --record) record=1; shift ;;
    *) echo "usage: $0 [-r RUNS] [-s STEPS] [-b BUILD_DIR] [--record]" >&2; exit 2 ;;
  esac
done
run=$build/bin/gx-run
lib=$(ls "$build"/lib/libgx.so 2>/dev/null || true)
[ -x "$run" ] && [ -n "$lib" ] || { echo "ps_bench.sh: build $build first (needs bin/gx-run and lib/libgx.so)" >&2; exit 2; }
/usr/bin/python3 -c "import torch.distributed.rpc" 2>/dev/null ||
    { echo "ps_bench.sh: /usr/bin/python3 has no torch.distributed.rpc (apt-get install python3-torch)" >&2; exit 2; }
export GX_LIBRARY=$lib PYTHONPATH=$root/python
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
out=$(mktemp /tmp/gx-ps-bench.XXXXXX)
log=$(mktemp /tmp/gx-ps-bench-log.XXXXXX)
trap 'rm -f "$out" "$out.head" "$log"' EXIT
perf_begin "$root" | tee "$out.head"
for i in $(seq "$runs"); do
    for b in gx tensorpipe; do
        if ! MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) "$run" -n 4 --timeout 300 \
                /usr/bin/python3 "$root/examples/param_server.py" --backend $b --steps "$steps" \
                --quiet >"$log" 2>&1; then
            grep -v '^I2\|^WARNING: Logging' "$log" | tail -20 >&2
            echo "ps_bench.sh: run $i, $b failed" >&2; exit 1
        fi
        sps=$(sed -n 's/^RESULT steps_per_s //p' "$log")
        loss=$(sed -n 's/^LOSS \([^ ]*\) .*/\1/p' "$log")
        [ -n "$sps" ] || { echo "ps_bench.sh: run $i, $b: no figure" >&2; exit 1; }
        echo "$i $b $sps $loss" | tee -a "$out"
    done
done
perf_end | tee -a "$out.head"
report=$(/usr/bin/python3 - "$out" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from perf_stats import cell, ratio_cell
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
g = [float(r[2]) for r in rows if r[1] == "gx"]
t = [float(r[2]) for r in rows if r[1] == "tensorpipe"]
print("| figure | gx_torch.rpc | torch.distributed.rpc, TensorPipe | gx / TensorPipe | goal |")
print("|---|---|---|---|---|")
print(f"| param_server.py steps/s, 2 servers + 2 trainers | {cell(g, 1)} | {cell(t, 1)} | {ratio_cell(g, t)} | >= 1.5 |")
PY
)
echo "$report"
if [ $record -eq 1 ]; then
    perf_record "$root/perf/results/$(date +%Y-%m-%d)-ps.md" "param_server.py: gx_torch.rpc vs torch.distributed.rpc" "; torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')" \
        "perf/ps_bench.sh -r $runs -s $steps --record (build $(basename "$build")); 4 ranks under gx-run" \
        "run backend steps_per_s final_loss" "$report" "$out"
fi
