#!/bin/sh
# hier_dead_rail.sh GX_RUN COLL_CHECK FAKE_NODES - rank 2 of 2 fake nodes x 2
# ranks is killed exactly when the inter-node (rail) phase of a hierarchical
# all-reduce starts: a first run's trace gives the index of rank 2's first
# rail step in collective #3 (schedules are built from the same facts every
# time), a second run kills rank 2 there with GX_FAULT; every survivor must
# fail naming rank 2 within 2 x GX_TIMEOUT (coll_check dead).
# HIER_LAYOUT (default 2+2) and HIER_N (its rank count, default 4) change the
# layout; GX_HIER_RAIL (other than auto) must then be the rail the trace names.
set -u
run=$1 chk=$2 fn=$3
layout=${HIER_LAYOUT:-2+2} n=${HIER_N:-4}
export GX_ALGO=hier GX_TIMEOUT=10
out=$(GX_DEBUG=trace GX_DEBUG_SUBSYS=coll "$run" --keep-going -n "$n" --timeout 120 \
    sh "$fn" "$layout" "$chk" dead 2>&1)
line=$(echo "$out" | grep '\[2\] .*allreduce #3: hier segment 1 of ' | head -1)
step=$(echo "$line" | sed -n 's/.* rails (shards [0-9-]*, [a-z]*) steps \([0-9]*\)-.*/\1/p')
[ -n "$step" ] || { echo "FAIL: no rail step range for rank 2 in the trace"; echo "$out" | tail -5; exit 1; }
rail=${GX_HIER_RAIL:-auto}
if [ "$rail" != auto ]; then
    echo "$line" | grep -q ", $rail) steps" || { echo "FAIL: the rails are not $rail: $line"; exit 1; }
fi
echo "rank 2's rail phase of all-reduce #3 starts at step $step"
out=$(GX_FAULT="kill:rank=2,coll=3,step=$step" "$run" --keep-going -n "$n" --timeout 120 \
    sh "$fn" "$layout" "$chk" dead 2>&1)
echo "$out" | grep -v ' WARN topo: '
echo "$out" | grep -q "GX_FAULT: kill at collective #3" || { echo "FAIL: the fault did not fire"; exit 1; }
ok=$(echo "$out" | grep -c 'DEADCHECK ok')
[ "$ok" = $((n - 1)) ] || { echo "FAIL: $ok of $((n - 1)) survivors named rank 2"; exit 1; }
echo "PASS: killed at its first rail step ($rail rails, $layout), rank 2 is named by all $((n - 1)) survivors"
