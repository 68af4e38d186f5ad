#!/bin/bash
# msgfaults.sh - message faults in streams of checked all-reduces: TRIALS
# jobs of 2 fake nodes x 2 ranks each get one GX_FAULT message fault at a
# random rank, collective and step, and one outcome is never allowed: a
# wrong value returned as if all was well.
#   drop     a lost message: every rank completes or fails (no hang)
#   delay    30% of one rank's sends held 5 ms: every rank completes
#   corrupt  a flipped bit with GX_CHECKSUM=1: the receiver fails naming
#            the checksum (and the run never completes with the bit in it)
#
#   msgfaults.sh BIN_DIR PROVIDER(tcp|verbs) drop|delay|corrupt TRIALS [--report FILE]
set -u
bin=$1 provider=$2 fault=$3 trials=$4 report=
[ "${5:-}" = --report ] && report=$6
timeout_s=6
export GX_TIMEOUT=$timeout_s GX_STALL_WARN=0 GX_ALGO=ring
case $provider in
tcp) export GX_NET=tcp ;;
verbs)
    [ -n "${SOFTVERBS_LIB:-}" ] || { echo "SKIP: SOFTVERBS_LIB is not set"; exit 77; }
    export GX_NET=verbs GX_IBVERBS_LIB=$SOFTVERBS_LIB GX_SOCKET_IFNAME=lo ;;
*) echo "msgfaults.sh: provider tcp or verbs"; exit 2 ;;
esac
work=$(mktemp -d /tmp/gx-msgfault.XXXXXX) && trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
pass=0 fired=0 caught=0 hangs=0 wrong=0
for t in $(seq "$trials"); do
    victim=$((RANDOM % 4)) coll=$((1 + RANDOM % 10)) step=$((1 + RANDOM % 6))
    count=$((1 + (RANDOM * 32768 + RANDOM) % 200000))
    case $fault in
    drop) rule="drop:rank=$victim,coll=$coll,step=$step" ;;
    delay) rule="delay:rank=$victim,ms=5,prob=0.3" ;;
    corrupt) rule="corrupt:rank=$victim,coll=$coll,step=$step"; export GX_CHECKSUM=1 ;;
    *) echo "msgfaults.sh: drop, delay or corrupt"; exit 2 ;;
    esac
    dir=$work/t$t && mkdir -p "$dir"
    FAULT_DIR=$dir FAULT_ITERS=12 FAULT_COUNT=$count GX_FAULT=$rule \
        timeout -k 5 $((2 * timeout_s + 20)) "$bin/gx-run" -n 4 --keep-going \
        sh -c "GX_NODE_ID=node\$((GX_RANK / 2)) exec $bin/fault_check $dir" > "$dir/log" 2>&1
    rc=$?
    ok=1 why=""
    oks=$(grep -c '^OK rank' "$dir/log") fails=$(grep -c '^FAILED rank' "$dir/log")
    [ $rc -eq 124 ] && { hangs=$((hangs + 1)); ok=0; why="hang"; }
    grep -q '^WRONG' "$dir/log" && { wrong=$((wrong + 1)); ok=0; why="$why wrong value"; }
    [ $((oks + fails)) -eq 4 ] || { ok=0; why="$why only $((oks + fails)) of 4 ranks reported"; }
    if grep -q "GX_FAULT: \(drop at\|corrupted byte\)" "$dir/log" || [ $fault = delay ]; then
        fired=$((fired + 1))
        case $fault in
        delay) [ "$oks" -eq 4 ] || { ok=0; why="$why delays failed the job"; } ;;
        corrupt) if grep '^FAILED' "$dir/log" | grep -q checksum; then caught=$((caught + 1))
                 else ok=0; why="$why the corruption was not reported as a checksum failure"; fi ;;
        drop) [ "$fails" -gt 0 ] && caught=$((caught + 1)) ;;
        esac
    fi
    [ $ok -eq 1 ] && pass=$((pass + 1))
    printf 'trial %3d: %s rank %d #%d step %d count %6d: %d ok, %d failed %s\n' "$t" "$fault" \
        "$victim" "$coll" "$step" "$count" "$oks" "$fails" "$([ $ok -eq 1 ] && echo ok || echo "FAIL:$why")"
    [ $ok -eq 1 ] || grep -E '^(FAILED|WRONG|OK)|GX_FAULT' "$dir/log" | cut -c1-240 | sed 's/^/    | /'
done
summary="message faults $provider $fault: $trials trials, $pass passed, fault acted in $fired, failure reported in $caught, $hangs hangs, $wrong wrong values"
echo "$summary"
[ -n "$report" ] && echo "$summary" >> "$report"
[ $pass -eq "$trials" ]
