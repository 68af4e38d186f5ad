#!/usr/bin/env bash
# duplex_netns.sh ALGO LAYOUT FACTOR GX_PERF - both directions of a node's
# link carry data at once: a rendezvous's clear-to-send does not wait behind
# the bulk data its rank is writing the same way (GX_WRITE_WINDOW,
# GX_TCP_NOTSENT_LOWAT; docs/scale.md "Calibration").
#
# Runs gx-perf all_reduce of 4 MiB (checked) with GX_ALGO=ALGO between
# network-namespace nodes (hier_netns.sh LAYOUT), each node's link capped at
# 100 Mbit/s each way (tc tbf), and fails when the fastest of its runs takes
# more than FACTOR times what the cap allows for the schedule's bytes on the
# busiest direction of a node link (the bound comes from the cap, not from
# this machine's speed: at 12 MB/s the CPUs are idle):
#   tree on 1+1: the vector goes up and comes down; overlapped, S/B
#     (without the window the broadcast waited for the reduction: 2 S/B);
#   rhd on 2+2: two cross-node halving and doubling steps, 2 S/B
#     (without pieces a step's answer waited for the other side's half: 3 S/B).
# B is the payload rate of 100 Mbit/s framed as 1514-byte packets carrying
# 1448 bytes. Skips (77) where hier_netns.sh does (no root, no tc).
set -u
algo=$1 layout=$2 factor=$3 perf=$4
here=$(cd "$(dirname "$0")" && pwd)
netns=$here/../algorithms/hier_netns.sh
case $algo/$layout in
tree/1+1) passes=1 ;;
rhd/2+2) passes=2 ;;
*) echo "duplex_netns.sh: no bound known for $algo on $layout" >&2; exit 2 ;;
esac
bytes=4194304
out=$(env GX_ALGO="$algo" TBF_RATE=100mbit RANK_TIMEOUT=120 bash "$netns" "$layout" "$perf" \
      all_reduce -b 4M -e 4M -n 1 -w 0 -N 2 -c 1 --csv --no-progress 2>&1)
rc=$?
echo "$out" | tail -8
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || { echo "FAIL: the job failed (exit $rc)"; exit 1; }
# CSV rows: all_reduce,ranks,nodes,bytes,count,type,op,root,place,time_us,algbw,busbw,errors
best=$(echo "$out" | awk -F, '$1 == "all_reduce" && $4 == '"$bytes"' {
           if ($13 != "" && $13 + 0 != 0) { bad = 1 }
           if (min == "" || $10 + 0 < min) min = $10 + 0 }
       END { if (bad) print "wrong"; else print min }')
[ -n "$best" ] || { echo "FAIL: no all_reduce row of $bytes bytes in gx-perf's output"; exit 1; }
[ "$best" != wrong ] || { echo "FAIL: gx-perf found wrong results"; exit 1; }
awk -v t="$best" -v s="$bytes" -v k="$passes" -v f="$factor" -v a="$algo" -v l="$layout" 'BEGIN {
    b = 100e6 / 8 * 1448 / 1514          # payload bytes/s of the capped link
    bound = k * s / b * 1e6              # us
    printf "%s on %s, %d bytes: fastest %.0f us; the cap allows %.0f us (%d x S/B); %.2fx, limit %.2fx\n",
           a, l, s, t, bound, k, t / bound, f
    if (t > f * bound) { print "FAIL: slower than the limit: the two directions of a link ran one after the other"; exit 1 }
    print "PASS"
}'
