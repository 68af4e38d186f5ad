#!/bin/bash
# The stall report (GX_STALL_WARN): waiting ranks log what they wait for,
# and rank 0's survey over the bootstrap names the rank that never entered
# the collective (late) or did not answer (stopped with SIGSTOP).
#   stall_test.sh BIN_DIR late|stopped
set -u
bin=$1
what=$2
dir=$(mktemp -d /tmp/gx-stall-test.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }
export GX_STALL_WARN=1 GX_TIMEOUT=60 LATE_PID_FILE=$dir/pid LATE_SLEEP=5
"$bin/gx-run" -n 4 --timeout 90 --tag-output "$bin/flight_check" late > "$dir/log" 2>&1 &
run=$!
if [ "$what" = stopped ]; then
    for _ in $(seq 100); do [ -s "$dir/pid" ] && break; sleep 0.1; done
    pid=$(cat "$dir/pid" 2>/dev/null)
    [ -n "$pid" ] || fail "the late rank never wrote its pid"
    kill -STOP "$pid" || fail "cannot stop pid $pid"
    sleep 4.5
    kill -CONT "$pid"
fi
wait $run || fail "the job failed (exit $?)"
survey=$(grep "stall survey of allreduce #3" "$dir/log")
[ -n "$survey" ] || fail "rank 0 logged no stall survey of allreduce #3"
echo "$survey"
grep -q "has waited .* s (GX_STALL_WARN); .*waiting on: " "$dir/log" || fail "no waiting rank logged what it waits for"
case $what in
late)
    echo "$survey" | grep -q "rank 3 never entered it (last completed allreduce #2" \
        || fail "the survey does not name rank 3 as never entered, with its last completed call"
    ;;
stopped)
    echo "$survey" | grep -q "no answer from ranks 3 (stopped" || fail "the survey does not name stopped rank 3"
    ;;
esac
echo "$survey" | grep -q "ranks waiting in it: 0,1,2" || fail "the survey does not list ranks 0-2 as waiting"
grep -c "PASS rank" "$dir/log" | grep -qx 4 || fail "not every rank completed"
echo "PASS stall $what"
