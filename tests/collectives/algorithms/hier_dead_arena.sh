#!/bin/sh
# hier_dead_arena.sh PHASE GX_RUN COLL_CHECK FAKE_NODES [NETNS] - rank 2 of 2
# nodes x 2 ranks is killed inside the node arena phase PHASE
# (reduce-scatter or all-gather) of a hierarchical all-reduce: a first run's
# trace gives the step of rank 2's first arena flag of that phase in
# collective #3 (arena_node.c; schedules are built from the same facts
# every time), a second run kills rank 2 there with GX_FAULT. Every survivor
# must fail naming rank 2 within 2 x GX_TIMEOUT (coll_check dead). The first
# run must also show every rank on the arena engine (not the ring fallback).
# With NETNS (hier_netns.sh) the nodes are network namespaces (exits 77
# there when they cannot be made), else fake nodes (FAKE_NODES). KEEP_LOG=F
# keeps the second run's whole output in F (the ASan test greps it).
set -u
phase=$1 run=$2 chk=$3 fn=$4 netns=${5:-}
export GX_ALGO=hier GX_TIMEOUT=10
log=$(mktemp /tmp/gxhierarena-dead.XXXXXX)
trap 'rm -f "$log"' EXIT
job() { # writes every rank's output to $log; returns the job's status
    if [ -n "$netns" ]; then
        HIER_LOG=$log EXPECT=dead bash "$netns" 2+2 "$chk" dead > "$log.out" 2>&1
        rc=$?
        [ -s "$log" ] || cp "$log.out" "$log"
        rm -f "$log.out"
        return $rc
    fi
    "$run" --keep-going -n 4 --timeout 120 sh "$fn" 2+2 "$chk" dead > "$log" 2>&1
}
GX_DEBUG=trace GX_DEBUG_SUBSYS=coll job
[ $? = 77 ] && { cat "$log"; exit 77; }
arena=$(grep -c 'allreduce #3: hier intra-node engine arena' "$log")
[ "$arena" = 4 ] || { echo "FAIL: $arena of 4 ranks ran all-reduce #3 on the node arena"; grep 'intra-node engine' "$log" | head -4; exit 1; }
step=$(grep "\[2\] .*allreduce #3: hier arena $phase: first flag step" "$log" |
    sed -n 's/.* first flag step \([0-9]*\).*/\1/p' | head -1)
[ -n "$step" ] || { echo "FAIL: no arena $phase flag step for rank 2 in the trace"; tail -5 "$log"; exit 1; }
echo "rank 2's first arena $phase flag of all-reduce #3 is step $step"
GX_FAULT="kill:rank=2,coll=3,step=$step" job
grep -v ' WARN topo: ' "$log" | grep -v ' TRACE ' | tail -20
[ -z "${KEEP_LOG:-}" ] || cp "$log" "$KEEP_LOG"
grep -q "GX_FAULT: kill at collective #3, arena flag step $step" "$log" || { echo "FAIL: the fault did not fire at the arena flag"; exit 1; }
ok=$(grep -c 'DEADCHECK ok' "$log")
[ "$ok" = 3 ] || { echo "FAIL: $ok of 3 survivors named rank 2"; exit 1; }
echo "PASS: killed at its first arena $phase flag, rank 2 is named by all 3 survivors"
