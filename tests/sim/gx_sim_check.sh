#!/bin/sh
# gx_sim_check.sh CASE GX_SIM - gx-sim's answers checked against what can be
# worked out without it (ctest: tools.gx-sim.*). Exit 77 when gx-sim was
# not built (no libsimgrid-dev at configure time).
#
#   hand    2 GPUs, one per node, one link: the time worked out below
#   scale   bigger N behaves as the algorithms' costs say it must
#   args    bad arguments fail with a message naming the argument; --regret
#           keeps to --algo's candidates
set -u
case_name=$1
sim=${2:-}
if [ -z "$sim" ] || [ ! -x "$sim" ]; then
    echo "SKIP: gx-sim was not built (configure found no usable simgrid: apt-get install libsimgrid-dev, then reconfigure)"
    exit 77
fi
fail=0
die() { echo "FAIL: $*"; fail=1; }

# The time column (us) of algorithm $2's row of size $3 in gx-sim's table $1.
time_of() { printf '%s\n' "$1" | awk -v a="$2" -v s="$3" '!/^#/ && $1 == s && $6 == a { print $7 }'; }
busbw_of() { printf '%s\n' "$1" | awk -v a="$2" -v s="$3" '!/^#/ && $1 == s && $6 == a { print $9 }'; }
# $1 within $3 (a fraction) of $2?
near() { awk -v x="$1" -v y="$2" -v t="$3" 'BEGIN { d = x - y; if (d < 0) d = -d; exit !(x != "" && d <= t * y) }'; }
between() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x != "" && x >= lo && x <= hi) }'; }

case $case_name in
hand)
    # Two ranks on two nodes (one GPU each), one link of B = 8 Gb/s = 1 GB/s
    # each way, one-way latency L = 10 us, reductions at M = 100 GB/s of
    # memory traffic; S = 256 KiB = 262144 bytes.
    #
    # ring: the vector is cut into n = 2 blocks of S/2 = 131072 bytes (under
    # the 256 KiB pipelining chunk: one chunk each). Reduce-scatter: each
    # rank sends its peer one block, both directions at once (full duplex):
    # L + (S/2)/B; then reduces the block it got into its own, 3 * S/2 bytes
    # of memory traffic (two reads, one write) at M. All-gather: it sends
    # its reduced block: L + (S/2)/B. So
    #   T = 2 (n-1)/n S/B + 2 L + 3 (S/2)/M
    #     = 262.144 + 20 + 3.93216 = 286.076 us
    # tree (n = 2: rank 1 is rank 0's child): rank 1 sends the whole vector
    # (L + S/B), rank 0 reduces it (3 S/M), and sends the sum back (L + S/B):
    #   T = 2 S/B + 2 L + 3 S/M = 524.288 + 20 + 7.86432 = 552.152 us
    out=$("$sim" --gpus 2 --gpus-per-node 1 --nic-gbps 8 --nic-lat-us 10 --mem-GBps 100 \
          --algo ring,tree --sizes 256K) || die "gx-sim failed"
    printf '%s\n' "$out"
    t=$(time_of "$out" ring 262144)
    near "$t" 286.076 0.005 || die "ring: $t us, worked out 286.076 us"
    t=$(time_of "$out" tree 262144)
    near "$t" 552.152 0.005 || die "tree: $t us, worked out 552.152 us"
    # busbw of the ring: algbw * 2(n-1)/n = S / T = 262144 / 286.076 us = 0.916 GB/s
    b=$(busbw_of "$out" ring 262144)
    near "$b" 0.92 0.02 || die "ring busbw: $b GB/s, worked out 0.92 GB/s"
    ;;
scale)
    # 8 nodes of one GPU: a ring's busbw at large S approaches the NIC's
    # 400 Gb/s = 50 GB/s (every link carries 2(n-1)/n S at most), never
    # above it.
    out=$("$sim" --gpus 8 --gpus-per-node 1 --algo ring --sizes 1M,256M) || die "gx-sim failed"
    printf '%s\n' "$out"
    big=$(busbw_of "$out" ring 268435456)
    small=$(busbw_of "$out" ring 1048576)
    between "$big" 40 50.01 || die "ring busbw at 256 MiB: $big GB/s, expected 40-50 (the NIC's 50)"
    awk -v a="$small" -v b="$big" 'BEGIN { exit !(a < b) }' ||
        die "ring busbw does not grow with the size: $small GB/s at 1 MiB, $big at 256 MiB"
    # 1 KiB on 8 and 64 GPUs, one per node, every pair one leaf apart (equal
    # latencies): the tree's time is latency, about 2 log2(n) hops, so 8 ->
    # 64 ranks doubles it (3 -> 6 levels); the ring's 2 (n-1) steps grow
    # nine-fold (7 -> 63).
    out=$("$sim" --gpus 8,64 --gpus-per-node 1 --nodes-per-leaf 4096 --algo tree,ring \
          --sizes 1K) || die "gx-sim failed"
    printf '%s\n' "$out"
    tree=$(printf '%s\n' "$out" | awk '!/^#/ && $6 == "tree" { printf "%s ", $7 }')
    ring=$(printf '%s\n' "$out" | awk '!/^#/ && $6 == "ring" { printf "%s ", $7 }')
    set -- $tree
    [ $# -eq 2 ] && between "$(awk -v a="$1" -v b="$2" 'BEGIN { print b / a }')" 1.6 2.5 ||
        die "tree at 1 KiB, 8 -> 64 ranks: $tree us, expected about 2x (log2 n)"
    set -- $ring
    [ $# -eq 2 ] && between "$(awk -v a="$1" -v b="$2" 'BEGIN { print b / a }')" 6 12 ||
        die "ring at 1 KiB, 8 -> 64 ranks: $ring us, expected about 9x (n - 1)"
    ;;
args)
    for bad in "--gpus 1:--gpus" "--gpus 5000:--gpus" "--algo spiral:--algo" \
               "--sizes 1X:--sizes" "--coll allsum:--coll" "--nic-gbps fast:--nic-gbps" \
               "--algo ring/rhd:--algo" "--frobnicate:--frobnicate"; do
        args=${bad%%:*}
        want=${bad#*:}
        # shellcheck disable=SC2086
        err=$("$sim" $args 2>&1 >/dev/null)
        rc=$?
        [ $rc -eq 2 ] || die "gx-sim $args: exit $rc, expected 2"
        case $err in *"$want"*) ;; *) die "gx-sim $args: '$err' does not name $want" ;; esac
    done
    "$sim" --help | grep -q -- "--oversub" || die "--help does not document --oversub"
    # --regret with --algo: only those are candidates (the skipped column
    # names none of the others); the model's choice past --max-steps is
    # N/A and the best listed one's time is printed; given the steps, the
    # model's choice (not among them here) is simulated and counts as a
    # candidate, so the regret is never negative.
    row=$("$sim" --gpus 16 --sizes 1M --regret --algo rd,rhd --max-steps 500 | awk '!/^#/ && NF')
    printf '%s\n' "$row"
    set -- $row
    [ "${3:-}" = N/A ] && { [ "${4:-}" = rd ] || [ "${4:-}" = rhd ]; } && between "${5:-}" 1 100000 &&
        [ "${7:-}" = - ] || die "--regret --algo rd,rhd --max-steps 500: '$row'"
    row=$("$sim" --gpus 16 --sizes 1M --regret --algo rd,rhd | awk '!/^#/ && NF')
    printf '%s\n' "$row"
    set -- $row
    between "${3:-}" 1 100000 && between "${6%%%}" 0 1000 ||
        die "--regret --algo rd,rhd: '$row' (a model time and a regret >= 0)"
    ;;
*)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
[ $fail -eq 0 ] && echo "PASS: gx-sim $case_name"
exit $fail
