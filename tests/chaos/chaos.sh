#!/bin/bash
# chaos.sh - the never-hang figures: TRIALS jobs of 4 ranks run a stream of
# checked all-reduces of random sizes; GX_FAULT kills one random rank at a
# random collective (or stops it: --stop). Each trial passes when every
# survivor returns a status naming the victim (stop: the stall survey names
# it and the survivors fail) within 2 x GX_TIMEOUT, nobody returns a wrong
# value, and no process, /dev/shm file or fd of the job is left behind.
#
# --shrink: after the kill the survivors gx_comm_shrink and run 100 more
# checked all-reduces; the trial passes when all three shrink to the same
# three ranks without the victim and finish them.
#
#   chaos.sh BIN_DIR PROVIDER TRIALS [--stop|--shrink] [--report FILE]
# PROVIDER: shm (one node), tcp (two fake nodes, shm inside, tcp between),
#           verbs (two fake nodes over softverbs; SOFTVERBS_LIB must be set)
# Prints one line per trial and a summary; exits 1 when any trial failed.
set -u
bin=$1 provider=$2 trials=$3
shift 3
mode=kill report=
while [ $# -gt 0 ]; do
    case $1 in
    --stop) mode=stop ;;
    --shrink) mode=shrink ;;
    --report) report=$2; shift ;;
    *) echo "chaos.sh: unknown option $1"; exit 2 ;;
    esac
    shift
done
timeout_s=8
export GX_TIMEOUT=$timeout_s GX_STALL_WARN=2
case $provider in
shm) nodes="" ;;
tcp) nodes='GX_NODE_ID=node$((GX_RANK / 2))'; export GX_NET=tcp ;;
verbs)
    [ -n "${SOFTVERBS_LIB:-}" ] || { echo "SKIP: SOFTVERBS_LIB is not set"; exit 77; }
    nodes='GX_NODE_ID=node$((GX_RANK / 2))'
    export GX_NET=verbs GX_IBVERBS_LIB=$SOFTVERBS_LIB GX_SOCKET_IFNAME=lo ;;
*) echo "chaos.sh: provider shm, tcp or verbs"; exit 2 ;;
esac
work=$(mktemp -d /tmp/gx-chaos.XXXXXX) && trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
pass=0 named=0 hangs=0 wrong=0 leaks=0 maxt=0
shm_before=$(ls /dev/shm | grep -c '^gx')  # gx maps memfds: none expected
for t in $(seq "$trials"); do
    victim=$((RANDOM % 4)) coll=$((1 + RANDOM % 12)) count=$((1 + (RANDOM * 32768 + RANDOM) % 300000))
    dir=$work/t$t && mkdir -p "$dir"
    start=$(date +%s%N)
    action=$mode shrink=0 limit=$((2 * timeout_s + 10))
    [ $mode = shrink ] && action=kill shrink=100 limit=$((2 * timeout_s + 40))
    FAULT_DIR=$dir FAULT_ITERS=15 FAULT_COUNT=$count FAULT_SHRINK=$shrink \
        GX_FAULT="$action:rank=$victim,coll=$coll,comm=world" \
        timeout -k 5 $limit "$bin/gx-run" -n 4 --keep-going \
        sh -c "$nodes exec $bin/fault_check $dir" > "$dir/log" 2>&1 &
    job=$!
    if [ $mode = stop ]; then
        # The stopped rank never resumes: kill it once the others gave up.
        for _ in $(seq $((20 * (2 * timeout_s + 5)))); do
            [ "$(grep -c '^FAILED' "$dir/log")" -ge 3 ] && break
            sleep 0.05
        done
        [ -s "$dir/pid.$victim" ] && kill -KILL "$(cat "$dir/pid.$victim")" 2>/dev/null
    fi
    wait $job
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    secs=$((ms / 1000)).$(( (ms % 1000) / 100 ))
    ok=1 why=""
    [ $rc -eq 124 ] && { hangs=$((hangs + 1)); ok=0; why="hang (killed after $limit s)"; }
    grep -q '^WRONG' "$dir/log" && { wrong=$((wrong + 1)); ok=0; why="$why wrong value"; }
    if grep -q "GX_FAULT: $action at" "$dir/log"; then
        n=0
        for r in 0 1 2 3; do
            [ $r -eq $victim ] && continue
            line=$(grep "^FAILED rank $r " "$dir/log")
            if [ $mode = stop ]; then [ -n "$line" ] && n=$((n + 1))
            else echo "$line" | grep -q "rank $victim" && n=$((n + 1)); fi
            if [ $mode = shrink ]; then
                grep -q "^SHRUNK rank $r: now rank [0-2] of 3, lost $victim," "$dir/log" || { ok=0; why="$why rank $r did not shrink to 3 without rank $victim"; }
                grep -q "^OK rank $r: 100 all-reduces correct after shrink" "$dir/log" || { ok=0; why="$why rank $r did not finish after the shrink"; }
            fi
        done
        if [ $mode = stop ]; then
            grep -q "no answer from ranks $victim " "$dir/log" || { ok=0; why="$why stall survey did not name rank $victim"; }
        fi
        [ $n -eq 3 ] && named=$((named + 1)) || { ok=0; why="$why only $n of 3 survivors named rank $victim"; }
    else
        # The stream ended before the fault's collective: every rank must be OK.
        [ "$(grep -c '^OK rank' "$dir/log")" -eq 4 ] || { ok=0; why="$why no fault fired yet ranks failed"; }
        named=$((named + 1))
    fi
    pgrep -f "fault_check $dir" >/dev/null && { leaks=$((leaks + 1)); ok=0; why="$why processes left"; pkill -KILL -f "fault_check $dir"; }
    [ "$(ls /dev/shm | grep -c '^gx')" -gt "$shm_before" ] && { leaks=$((leaks + 1)); ok=0; why="$why gx files left in /dev/shm: $(ls /dev/shm | grep '^gx')"; }
    [ $ms -gt $maxt ] && maxt=$ms
    [ $ok -eq 1 ] && pass=$((pass + 1))
    printf 'trial %3d: %s rank %d at #%-2d count %6d: %5s s %s\n' "$t" "$mode" "$victim" "$coll" \
        "$count" "$secs" "$([ $ok -eq 1 ] && echo ok || echo "FAIL:$why")"
    [ $ok -eq 1 ] || sed 's/^/    | /' "$dir/log" | tail -20
done
summary="chaos $provider $mode: $trials trials, $pass passed, named by every survivor in $named, $hangs hangs, $wrong wrong values, $leaks leaks; slowest trial $((maxt / 1000)).$(( (maxt % 1000) / 100 )) s (GX_TIMEOUT=$timeout_s s)"
echo "$summary"
[ -n "$report" ] && echo "$summary" >> "$report"
[ $pass -eq "$trials" ]
