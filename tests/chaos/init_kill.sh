#!/bin/bash
# init_kill.sh - a rank killed during init: TRIALS jobs of 4 ranks (shm, one
# node) where one random rank sends itself SIGKILL at a random moment in its
# first MAX_MS milliseconds (rendezvous, transport set-up, the first
# barriers). A trial passes when no survivor crashes or hangs and every
# survivor returns GX_EPEER naming the victim or GX_ETIMEOUT within
# GX_INIT_TIMEOUT (+0.5 s of slack), or GX_OK when the victim finished first.
#
#   init_kill.sh BIN_DIR TRIALS [--max-ms N] [--report FILE]
# Prints one line per trial and a summary; exits 1 when any trial failed.
set -u
bin=$1 trials=$2
shift 2
max_ms=60 report=
while [ $# -gt 0 ]; do
    case $1 in
    --max-ms) max_ms=$2; shift ;;
    --report) report=$2; shift ;;
    *) echo "init_kill.sh: unknown option $1"; exit 2 ;;
    esac
    shift
done
init_s=4
export GX_INIT_TIMEOUT=$init_s GX_TIMEOUT=$init_s
work=$(mktemp -d /tmp/gx-initkill.XXXXXX) && trap 'rm -rf "$work"' EXIT
pass=0 crashes=0 hangs=0 unnamed=0 slow=0 maxt=0 timeouts=0 epeer=0 okruns=0
for t in $(seq "$trials"); do
    victim=$((RANDOM % 4)) us=$(( (RANDOM * 32768 + RANDOM) % (max_ms * 1000 + 1) ))
    log=$work/t$t.log
    INIT_KILL_RANK=$victim INIT_KILL_US=$us timeout -k 2 $((init_s + 10)) \
        "$bin/gx-run" -n 4 --keep-going "$bin/init_kill_check" >"$log" 2>&1
    rc=$?
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
        [ "${ms:-0}" -gt $((init_s * 1000 + 500)) ] && { slow=$((slow + 1)); ok=0; why="$why rank $r took $ms ms"; }
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
summary="init kills (shm, 4 ranks, 0-$max_ms ms): $trials trials, $pass passed; $crashes crashes, $hangs hangs, $unnamed GX_EPEER not naming the victim, $slow past GX_INIT_TIMEOUT; survivors: $epeer GX_EPEER, $timeouts GX_ETIMEOUT, $okruns GX_OK; slowest survivor $maxt ms (GX_INIT_TIMEOUT=$init_s s)"
echo "$summary"
[ -n "$report" ] && echo "$summary" >> "$report"
[ $pass -eq "$trials" ]
