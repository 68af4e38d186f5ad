#!/bin/bash
# One rank's mistake is named at once: with GX_TIMEOUT=600, the peers of a
# rank whose call was rejected (NULL sendbuf, broadcast root 7), that called
# gx_barrier or that finalized instead of calling the collective get
# GX_EMISMATCH naming it within 1 s. Usage: onesided_test.sh BIN_DIR CASE N
set -u
bin=$1 what=$2 n=$3
out=$(mktemp) && trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }
GX_TIMEOUT=600 timeout 60 "$bin/gx-run" -n "$n" --keep-going "$bin/onesided_check" "$what" >"$out" 2>&1 \
    || fail "the job failed or hung (exit $?)"
case $what in
null-sendbuf) bad="GX_EINVAL"; peer="rank 1's call #2 (allreduce) was rejected there with GX_EINVAL.*sendbuf is NULL" ;;
bad-root) bad="GX_EINVAL"; peer="rank 1's call #2 (broadcast) was rejected there with GX_EINVAL.*root 7" ;;
finalize) bad="GX_E"; peer="rank 1 finalized after #1, so it never takes part in #2" ;;
barrier) bad="GX_EMISMATCH"; peer="rank 1 called gx_barrier as #2" ;;
esac
grep -q "^RESULT rank 1 status $bad" "$out" || fail "rank 1 did not get $bad"
grep -q "^RESULT rank 1 .*\(sendbuf is NULL\|root 7 is out of range\|finalize\|barrier\)" "$out" || fail "rank 1 lost its own error"
worst=0 named=0
for ((r = 0; r < n; r++)); do
    [ $r -eq 1 ] && continue
    line=$(grep "^RESULT rank $r " "$out")
    # a broadcast rank that never needed rank 1 may finish with its data
    if [ "$what" = bad-root ] && echo "$line" | grep -q "status GX_OK"; then continue; fi
    echo "$line" | grep -q "status GX_EMISMATCH .*$peer" || fail "rank $r: ${line:-no result}"
    named=$((named + 1))
    ms=$(echo "$line" | sed -n 's/.* ms \([0-9]*\):.*/\1/p')
    [ "$ms" -gt $worst ] && worst=$ms
done
grep "^RESULT" "$out"
[ $named -ge 1 ] || fail "no peer named rank 1"
[ $worst -le 1000 ] || fail "the peers took $worst ms, want <= 1000"
echo "PASS onesided $what $n: peers named rank 1 within $worst ms"
