#!/bin/bash
# init_kill.sh - a rank killed during init: TRIALS jobs of 4 ranks where one
# random rank sends itself SIGKILL at a random moment in its first MAX_MS
# milliseconds (rendezvous, transport set-up, the first barriers). A trial
# passes when no survivor crashes or hangs and every survivor returns
# GX_EPEER naming the victim or GX_ETIMEOUT within GX_INIT_TIMEOUT (+ a quarter
# of it for the report after the deadline), or GX_OK when the victim finished
# first.
#
#   init_kill.sh BIN_DIR TRIALS [--min-ms N] [--max-ms N] [--report FILE] [--netns]
# Default: one node, gx-run, shm between the ranks. --netns: two "machines"
# of 2 ranks, each a network namespace with its own hostname (a UTS
# namespace), tcp between them over a bridge: a survivor on the other
# machine cannot see the victim's process and must hear who died. Needs
# root; exits 77 saying why when namespaces cannot be made.
# Prints one line per trial and a summary; exits 1 when any trial failed.
set -u
bin=$1 trials=$2
shift 2
min_ms=0 max_ms=60 report='' netns=0
while [ $# -gt 0 ]; do
    case $1 in
    --min-ms) min_ms=$2; shift ;;
    --max-ms) max_ms=$2; shift ;;
    --report) report=$2; shift ;;
    --netns) netns=1 ;;
    *) echo "init_kill.sh: unknown option $1"; exit 2 ;;
    esac
    shift
done
init_s=4
export GX_INIT_TIMEOUT=$init_s GX_TIMEOUT=$init_s
# A survivor's own clock starts at its gx_comm_init: it must be done within
# GX_INIT_TIMEOUT plus a quarter of it for the report and settle after the
# deadline (docs/testing.md, "Timed assertions").
slack_ms=$((init_s * 1000 / 4))
work=$(mktemp -d /tmp/gx-initkill.XXXXXX)
tag=gxik$$
cleanup() {
    if [ $netns = 1 ]; then
        for ns in "${tag}n0" "${tag}n1" "${tag}br"; do ip netns del "$ns" 2>/dev/null; done
    fi
    rm -rf "$work"
}
trap cleanup EXIT
where="shm, 4 ranks"
if [ $netns = 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
    command -v unshare >/dev/null 2>&1 || { echo "SKIP: unshare (util-linux) not installed"; exit 77; }
    source "$(dirname "${BASH_SOURCE[0]}")/../lib/netns_bridge.sh"
    net=10.$(( $$ % 200 + 30 )).$(( ($$ / 200) % 250 + 1 ))
    netns_bridge_create "${tag}br" br0 "$work/err" ||
        { echo "SKIP: cannot create a namespace with a bridge: $(cat "$work/err")"; exit 77; }
    for k in 0 1; do
        netns_bridge_join "${tag}n$k" "${tag}br" br0 "${tag}h$k" "${tag}p$k" gxk0 "$net.$((k + 1))/24" ||
            { echo "FAIL: namespace setup for node $k"; exit 1; }
    done
    where="2 netns machines x 2 ranks, tcp between them"
fi

# netns_job LOG: the 4 ranks, 2 per namespace machine, each machine with its
# own hostname; prints what gx-run would about ranks that died.
netns_job() {
    local log=$1 port=$((20000 + RANDOM % 40000)) key="gxik-$$-$RANDOM" pids=() r rc
    for r in 0 1 2 3; do
        local k=$((r / 2))
        ip netns exec "${tag}n$k" unshare --uts sh -c 'hostname "$0" && exec "$@"' "gxik-host$k" \
            env GX_RANK=$r GX_SIZE=4 GX_LOCAL_RANK=$((r % 2)) GX_LOCAL_SIZE=2 \
            GX_MASTER_ADDR="$net.1" GX_MASTER_PORT=$port GX_JOB_KEY="$key" \
            GX_NODE_ID="gxik-host$k" GX_SOCKET_IFNAME=gxk0 \
            timeout -k 2 $((init_s + 10)) "$bin/init_kill_check" >"$work/out$r" 2>&1 &
        pids+=($!)
    done
    for r in 0 1 2 3; do
        { wait "${pids[r]}"; } 2>/dev/null # no "Killed" notice: the victim's is expected
        rc=$?
        if [ $rc -eq 124 ] || { [ $rc -eq 137 ] && [ $r -ne "$victim" ]; }; then
            echo "netns: rank $r timed out or was killed (status $rc)" >>"$work/extra"
        elif [ $rc -gt 128 ]; then
            echo "netns: rank $r (pid ${pids[r]}) was killed by signal $((rc - 128))" >>"$work/extra"
        elif [ $rc -ne 0 ]; then
            echo "netns: rank $r (pid ${pids[r]}) exited with status $rc" >>"$work/extra"
        fi
    done
    cat "$work"/out* "$work/extra" >"$log" 2>/dev/null
    rm -f "$work"/out* "$work/extra"
}
pass=0 crashes=0 hangs=0 unnamed=0 slow=0 maxt=0 timeouts=0 epeer=0 okruns=0
for t in $(seq "$trials"); do
    victim=$((RANDOM % 4)) us=$(( min_ms * 1000 + (RANDOM * 32768 + RANDOM) % ((max_ms - min_ms) * 1000 + 1) ))
    log=$work/t$t.log
    if [ $netns = 1 ]; then
        : >"$work/extra"
        INIT_KILL_RANK=$victim INIT_KILL_US=$us netns_job "$log"
        rc=0
        grep -q "timed out or was killed" "$log" && rc=124
    else
        INIT_KILL_RANK=$victim INIT_KILL_US=$us timeout -k 2 $((init_s + 10)) \
            "$bin/gx-run" -n 4 --keep-going "$bin/init_kill_check" >"$log" 2>&1
        rc=$?
    fi
    ok=1 why="" worst=0
    if [ $rc -eq 124 ]; then
        hangs=$((hangs + 1)); ok=0; why="hang (gx-run stopped after $((init_s + 10)) s)"
    elif grep "was killed by signal\|exited with status" "$log" | grep -v "rank $victim (pid [0-9]*) was killed by signal 9" | grep -q .; then
        crashes=$((crashes + 1)); ok=0; why="$why crash: $(grep 'was killed by signal\|exited with status' "$log" | grep -v "rank $victim " | head -2 | tr '\n' ' ')"
    fi
    for r in 0 1 2 3; do
        [ $r -eq $victim ] && continue
        line=$(grep "^RESULT rank $r " "$log")
        [ -n "$line" ] || { ok=0; why="$why rank $r gave no result"; continue; }
        ms=$(echo "$line" | sed -n 's/.* ms \([0-9]*\):.*/\1/p')
        [ "${ms:-0}" -gt $worst ] && worst=$ms
        [ "${ms:-0}" -gt $((init_s * 1000 + slack_ms)) ] && { slow=$((slow + 1)); ok=0; why="$why rank $r took $ms ms"; }
        case "$line" in
        *"status GX_OK"*) okruns=$((okruns + 1)) ;;
        *"status GX_ETIMEOUT"*) timeouts=$((timeouts + 1)) ;;
        *"status GX_EPEER"*)
            epeer=$((epeer + 1))
            echo "$line" | grep -q "rank $victim\b" || { unnamed=$((unnamed + 1)); ok=0; why="$why rank $r: GX_EPEER not naming rank $victim"; } ;;
        *) ok=0; why="$why rank $r: $(echo "$line" | cut -c1-160)" ;;
        esac
    done
    [ $worst -gt $maxt ] && maxt=$worst
    [ $ok -eq 1 ] && pass=$((pass + 1))
    printf 'trial %3d: kill rank %d at %5.1f ms: slowest survivor %5d ms %s\n' "$t" "$victim" \
        "$(echo "$us / 1000" | bc -l)" "$worst" "$([ $ok -eq 1 ] && echo ok || echo "FAIL:$why")"
    [ $ok -eq 1 ] || sed 's/^/    | /' "$log" | tail -12
done
summary="init kills ($where, $min_ms-$max_ms ms): $trials trials, $pass passed; $crashes crashes, $hangs hangs, $unnamed GX_EPEER not naming the victim, $slow past GX_INIT_TIMEOUT; survivors: $epeer GX_EPEER, $timeouts GX_ETIMEOUT, $okruns GX_OK; slowest survivor $maxt ms (GX_INIT_TIMEOUT=$init_s s)"
echo "$summary"
[ -n "$report" ] && echo "$summary" >> "$report"
[ $pass -eq "$trials" ]
