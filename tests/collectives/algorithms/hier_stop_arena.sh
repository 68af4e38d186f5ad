#!/bin/sh
# hier_stop_arena.sh GX_RUN FAULT_CHECK FAKE_NODES - rank 3 of 2 fake nodes x
# 2 ranks is stopped (SIGSTOP by GX_FAULT) at its first arena flag of the
# node reduce-scatter of hierarchical all-reduce #3 (the step from a first
# run's trace, arena_node.c). With GX_TIMEOUT=3 (seconds) every other
# rank must fail within 2 x GX_TIMEOUT, and rank 2, its node peer waiting in
# the node arena, must name the shared-memory flag of comm rank 3 (the arena
# index is mapped to the comm rank).
set -u
run=$1 chk=$2 fn=$3
dir=$(mktemp -d /tmp/gxhierarena-stop.XXXXXX)
cleanup() {
    p=$(cat "$dir/pid.3" 2>/dev/null)
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; grep -v ' TRACE ' "$dir/log" 2>/dev/null | tail -12; exit 1; }
export GX_ALGO=hier FAULT_DIR=$dir FAULT_COUNT=262144 FAULT_ITERS=6
GX_DEBUG=trace GX_DEBUG_SUBSYS=coll "$run" -n 4 --timeout 120 sh "$fn" 2+2 "$chk" >"$dir/log0" 2>&1 ||
    { tail -5 "$dir/log0"; echo "FAIL: the first run failed"; exit 1; }
step=$(grep '\[3\] .*allreduce #3: hier arena reduce-scatter: first flag step' "$dir/log0" |
    sed -n 's/.* first flag step \([0-9]*\).*/\1/p' | head -1)
[ -n "$step" ] || fail "no arena reduce-scatter flag step for rank 3 in the trace"
echo "rank 3's first arena reduce-scatter flag of all-reduce #3 is step $step"
GX_TIMEOUT=3 GX_FAULT="stop:rank=3,coll=3,step=$step" "$run" -n 4 --timeout 60 --keep-going \
    sh "$fn" 2+2 "$chk" >"$dir/log" 2>&1 &
job=$!
for _ in $(seq 300); do [ "$(grep -c '^FAILED rank [012] ' "$dir/log")" -ge 3 ] && break; sleep 0.1; done
p=$(cat "$dir/pid.3" 2>/dev/null)
[ -n "$p" ] && kill -KILL "$p" 2>/dev/null
wait $job
grep -q "GX_FAULT: stop at collective #3, arena flag step $step" "$dir/log" || fail "the stop did not fire at the arena flag"
for r in 0 1 2; do
    line=$(grep "^FAILED rank $r " "$dir/log") || fail "rank $r did not fail"
    s=$(echo "$line" | sed -n 's/.* after \([0-9]*\)\.[0-9]* s: .*/\1/p')
    [ -n "$s" ] && [ "$s" -lt 6 ] || fail "rank $r failed after ${s:-?} s, not within 2 x GX_TIMEOUT (6 s): $line"
done
grep "^FAILED rank 2 " "$dir/log" | grep -q "shared-memory flag of rank 3" ||
    fail "rank 2 does not name the shared-memory flag of rank 3"
grep '^FAILED rank' "$dir/log"
echo "PASS: rank 3 stopped in the node arena; ranks 0-2 failed within 2 x GX_TIMEOUT, rank 2 naming it"
