#!/bin/bash
# gx-run --max-restarts: a rank of the DDP example dies after epoch 2 of 5;
# gx-run restarts the job, the example resumes from its checkpoint and ends
# with the weights of an uninterrupted run. A job that always fails is run
# 1 + N times and exits with the failure; a --timeout is never restarted.
#   restart_test.sh BIN_DIR
set -u
bin=$1
dir=$(mktemp -d /tmp/gx-restart-test.XXXXXX) && trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null; exit 1; }
"$bin/gx-run" -n 4 --max-restarts 1 --timeout 120 "$bin/ddp_mlp" --checkpoint "$dir" \
    --crash-rank 1 --crash-epoch 2 > "$dir/log" 2>&1 || fail "the restarted job failed"
grep -q "rank 1 .* exited with status 3" "$dir/log" || fail "rank 1 did not crash in the first run"
grep -q "restarting the job (restart 1 of 1, GX_RESTART_COUNT=1)" "$dir/log" || fail "no restart"
grep -q "resumed from the checkpoint after epoch 2 (run 1)" "$dir/log" || fail "did not resume from epoch 2"
grep -q "after 20 steps the weights match the single-process run" "$dir/log" || fail "weights differ"
grep -q "unknown variable GX_RESTART_COUNT" "$dir/log" && fail "GX_RESTART_COUNT is not a declared variable"
"$bin/gx-run" -n 2 --max-restarts 2 sh -c 'exit 5' > "$dir/log" 2>&1
rc=$?
[ $rc -eq 5 ] || fail "an always-failing job exited $rc, expected 5"
[ "$(grep -c 'restarting the job' "$dir/log")" -eq 2 ] || fail "expected exactly 2 restarts"
"$bin/gx-run" -n 2 --max-restarts 2 --timeout 1 sleep 30 > "$dir/log" 2>&1
rc=$?
[ $rc -eq 124 ] || fail "a timed-out job exited $rc, expected 124"
grep -q "restarting the job" "$dir/log" && fail "a timed-out job was restarted"
echo "PASS: crashed, restarted, resumed and matched; restart budget and timeout respected"
