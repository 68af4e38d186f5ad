#!/bin/bash
# GX_FAULT end to end on 4 ranks: each injected fault ends in a status that
# names the faulty rank, never a hang and never a silently wrong result.
#   fault_test.sh BIN_DIR kill|stop|drop|delay|close|regfail|grammar
set -u
bin=$1
what=$2
dir=$(mktemp -d /tmp/gx-fault-test.XXXXXX)
stopped=
cleanup() { [ -n "$stopped" ] && kill -KILL "$stopped" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }
export FAULT_DIR=$dir GX_TIMEOUT=8 FAULT_ITERS=20
run() { # run the job in the background, its output in $dir/log
    "$bin/gx-run" -n 4 --timeout 60 --keep-going "$bin/fault_check" > "$dir/log" 2>&1 &
    job=$!
}
survivors_fail_naming() { # RANK: the other three failed, each naming RANK
    for r in 0 1 2 3; do
        [ "$r" = "$1" ] && continue
        grep -q "^FAILED rank $r " "$dir/log" || fail "rank $r did not fail"
        grep "^FAILED rank $r " "$dir/log" | grep -q "rank $1" || fail "rank $r's error does not name rank $1"
    done
}
no_wrong() { ! grep -q "^WRONG" "$dir/log" || fail "a wrong value was returned"; }
case $what in
kill)
    GX_FAULT="kill:rank=2,coll=5" run; wait $job
    grep -q "GX_FAULT: kill at collective #5" "$dir/log" || fail "the fault did not fire"
    survivors_fail_naming 2
    ;;
stop)
    GX_STALL_WARN=1 GX_FAULT="stop:rank=1,coll=3" run
    for _ in $(seq 300); do [ "$(grep -c '^FAILED' "$dir/log")" -ge 3 ] && break; sleep 0.1; done
    stopped=$(cat "$dir/pid.1" 2>/dev/null)
    [ -n "$stopped" ] && kill -KILL "$stopped"
    wait $job
    grep -q "stall survey of allreduce #3 .*no answer from ranks 1 " "$dir/log" || fail "the stall survey did not name stopped rank 1"
    for r in 0 2 3; do grep -q "^FAILED rank $r " "$dir/log" || fail "rank $r did not fail"; done
    grep "^FAILED" "$dir/log" | grep -q "GX_ETIMEOUT\|rank 1" || fail "no failure names rank 1 or a timeout"
    ;;
drop)
    GX_FAULT="drop:rank=0,coll=3,step=2" run; wait $job
    grep -q "GX_FAULT: drop at collective #3" "$dir/log" || fail "the fault did not fire"
    [ "$(grep -c '^FAILED rank' "$dir/log")" -ge 1 ] || fail "a dropped message did not fail the collective"
    grep -q "^OK rank" "$dir/log" && fail "a rank completed every all-reduce although a message was lost"
    ;;
delay)
    FAULT_ITERS=10 GX_FAULT="delay:rank=1,ms=5,prob=0.5" run; wait $job || fail "the job failed under delays"
    [ "$(grep -c '^OK rank' "$dir/log")" -eq 4 ] || fail "not every rank completed under delays"
    ;;
close)
    GX_FAULT="close:rank=0,coll=4,step=2" run; wait $job
    grep -q "GX_FAULT: close at collective #4" "$dir/log" || fail "the fault did not fire"
    grep "^FAILED rank 0 " "$dir/log" | grep -q "closed (injected by GX_FAULT)\|rank" || fail "rank 0 does not say its link closed"
    for r in 1 2 3; do grep -q "^FAILED rank $r " "$dir/log" || fail "rank $r did not fail"; done
    ;;
regfail)
    # The arena moves no messages: the ring posts rendezvous sends, which register.
    GX_ALGO=ring FAULT_COUNT=262144 GX_FAULT="regfail:rank=1,coll=3,step=2" run; wait $job
    grep -q "registration failed (injected by GX_FAULT)" "$dir/log" || fail "the injected registration failure was not reported"
    for r in 0 2 3; do grep -q "^FAILED rank $r " "$dir/log" || fail "rank $r did not fail"; done
    ;;
arena-kill)
    # Inside the node arena's all-reduce (1024 floats: one small round; step
    # 4 is the first flag a rank raises: descriptor send and receive, the
    # wait for a free slot, the staging copy come before it), rank
    # 1 stops and rank 2 dies. Ranks 0 and 3 wait for both flags; the first
    # one they lack is stopped rank 1's, so only checking every awaited rank
    # finds dead rank 2 before GX_TIMEOUT runs out (20 s here: the survivors
    # report at once, so a long deadline costs nothing and leaves a loaded
    # machine its margin).
    GX_TIMEOUT=20 GX_ALGO=shm GX_FAULT="stop:rank=1,coll=3,step=4;kill:rank=2,coll=3,step=4" run
    start=$(date +%s)
    for _ in $(seq 400); do [ "$(grep -c '^FAILED rank [03] ' "$dir/log")" -ge 2 ] && break; sleep 0.1; done
    took=$(( $(date +%s) - start ))
    stopped=$(cat "$dir/pid.1" 2>/dev/null)
    [ -n "$stopped" ] && kill -KILL "$stopped"
    wait $job
    grep -q "GX_FAULT: kill at collective #3, arena flag step 4" "$dir/log" || fail "the kill did not fire at the arena flag"
    grep -q "GX_FAULT: stop at collective #3, arena flag step 4" "$dir/log" || fail "the stop did not fire at the arena flag"
    for r in 0 3; do
        grep "^FAILED rank $r " "$dir/log" | grep -q "rank 2 (pid [0-9]*) exited while rank [03] waited for it in the shared-memory arena" ||
            fail "rank $r did not name dead rank 2 in the arena"
    done
    [ "$took" -lt 20 ] || fail "the dead rank was named after ${took} s, not before GX_TIMEOUT (20 s)"
    no_wrong
    ;;
grammar)
    GX_FAULT="explode:rank=1" run; wait $job
    for r in 0 1 2 3; do grep "^FAILED rank $r " "$dir/log" | grep -q "GX_EINVAL.*GX_FAULT: cannot use the rule 'explode:rank=1'" || fail "rank $r did not reject GX_FAULT naming it"; done
    ;;
corrupt)
    # Two fake nodes over tcp (the arena inside a node moves no messages).
    # Without checksums the flipped bit reaches the result (this proves the
    # fault acts); with GX_CHECKSUM=1 the receiver catches it and every rank
    # fails, the receiver naming the sender; no value is ever wrong.
    nodes() { "$bin/gx-run" -n 4 --timeout 60 --keep-going sh -c 'GX_NODE_ID=n$((GX_RANK / 2)) exec "$0" "$@"' "$bin/fault_check" > "$dir/log" 2>&1; }
    export GX_NET=tcp GX_ALGO=ring
    GX_FAULT="corrupt:rank=1,coll=3,step=3" nodes
    grep -q "GX_FAULT: corrupted byte" "$dir/log" || fail "the fault did not corrupt a message"
    grep -q "^WRONG" "$dir/log" || fail "a corrupted message without checksums did not change a result (is the fault acting?)"
    GX_CHECKSUM=1 GX_FAULT="corrupt:rank=1,coll=3,step=3" nodes
    grep -q "GX_FAULT: corrupted byte" "$dir/log" || fail "the fault did not corrupt a message"
    grep "^FAILED rank 1 " "$dir/log" | grep -q "checksum" || fail "rank 1 did not fail with a checksum error"
    for r in 0 2 3; do grep -q "^FAILED rank $r " "$dir/log" || fail "rank $r did not fail"; done
    no_wrong
    # The same for a rendezvous message (written into the receive buffer).
    FAULT_COUNT=262144 GX_CHECKSUM=1 GX_FAULT="corrupt:rank=1,coll=3,step=3" nodes
    grep -q "GX_FAULT: corrupted byte .* of a 262144-byte message" "$dir/log" || fail "the fault did not corrupt a rendezvous message"
    grep "^FAILED rank 1 " "$dir/log" | grep -q "fail their checksum" || fail "rank 1 did not fail with a checksum error for the rendezvous message"
    ;;
shrink|shrink-coordinator)
    # A rank is killed; the three survivors shrink and run 100 more checked
    # all-reduces. Killing rank 0 also kills the first coordinator.
    victim=2; [ $what = shrink-coordinator ] && victim=0
    FAULT_SHRINK=100 GX_FAULT="kill:rank=$victim,coll=5,comm=world" run; wait $job
    grep -q "GX_FAULT: kill at collective #5" "$dir/log" || fail "the fault did not fire"
    survivors_fail_naming $victim
    for r in 0 1 2 3; do
        [ $r = $victim ] && continue
        grep -q "^SHRUNK rank $r: now rank [0-2] of 3, lost $victim," "$dir/log" || fail "rank $r did not shrink to the 3 survivors without rank $victim"
        grep -q "^OK rank $r: 100 all-reduces correct after shrink" "$dir/log" || fail "rank $r did not finish 100 all-reduces after the shrink"
    done
    ;;
revoke)
    # Rank 0 revokes from a second thread while its main thread waits in an
    # all-reduce (GX_TIMEOUT 600 s); every rank fails at once naming rank 0,
    # then all four shrink (nobody is gone) and go on.
    GX_TIMEOUT=600 FAULT_REVOKE=1 FAULT_SHRINK=20 run; wait $job
    for r in 0 1 2 3; do
        grep "^REVOKED rank $r " "$dir/log" | grep -q "GX_EABORTED.*rank 0 revoked" || fail "rank $r's call did not fail with GX_EABORTED naming rank 0"
        secs=$(grep "^REVOKED rank $r " "$dir/log" | sed 's/.* after \([0-9.]*\) s.*/\1/')
        [ "${secs%%.*}" -lt 5 ] || fail "rank $r waited $secs s after the revoke"
        grep -q "^SHRUNK rank $r: now rank $r of 4, lost ," "$dir/log" || fail "rank $r did not shrink to all 4 ranks"
        grep -q "^OK rank $r: 20 all-reduces correct after shrink" "$dir/log" || fail "rank $r did not go on after the shrink"
    done
    ;;
*) echo "usage: $0 BIN_DIR kill|stop|drop|delay|close|regfail|grammar|corrupt|shrink|shrink-coordinator|revoke"; exit 2 ;;
esac
no_wrong
echo "PASS fault $what"; grep "^FAILED\|^OK\|^SHRUNK\|^REVOKED\|stall survey" "$dir/log" | cut -c1-300
