#!/bin/bash
# run_sh_fake_test.sh BUILD_DIR - tests/gpu/run.sh's dry run on CI, against
# the fake libcuda and libnccl of this build (--fake --prebuilt BUILD_DIR),
# with one step made to fail (FAKECUDA_FAIL=cuModuleLoadData: gx's kernels
# do not load; in a build without nvcc there are none to load) and one made
# to hang (FAKENCCL_HANG=ncclCommInitRank: NCCL's
# init never returns, and gx's own deadline, GX_TIMEOUT, is longer than the
# step's limit). The script must mark the failure, cut the hung step at its
# limit (12 s here) with every process of it gone, go on to the steps after
# it, exit 1, and leave the report and per-step logs under $OUT.
set -u
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d /tmp/gx-runsh-fake.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out/report.txt" 2>/dev/null; exit 1; }
limit=12
steps='^(gx-info|gpudirect (query|copy)|kernels: loaded|nccl: 3 collectives|p2p x2)'
token=runsh-fake-$$-$RANDOM # marks this run's processes: other tests run nccl_check beside it
RUNSH_FAKE_TOKEN=$token OUT=$out/o GPU_RUN_STEP_S=$limit GX_TIMEOUT=600 FAKECUDA_FAIL=cuModuleLoadData \
    FAKENCCL_HANG=ncclCommInitRank bash "$src/tests/gpu/run.sh" --fake --prebuilt "$build" \
    --build "$out/b" --commit test-commit --only "$steps" >"$out/stdout" 2>&1
rc=$?
cat "$out/stdout"
[ $rc = 1 ] || fail "run.sh exited $rc, expected 1 (a failed and a hung step)"
r=$out/o/report.txt
[ -s "$r" ] || fail "no report.txt under \$OUT"
grep -q '^# gx test-commit$' "$r" || fail "the report does not carry the commit given with --commit"
for s in "gx-info lists the GPU" "gpudirect query" "gpudirect copy" "p2p x2"; do
    grep -q "^PASS  *$s " "$r" || fail "step '$s' did not pass"
done
grep -q '^FAIL  *kernels: loaded (gx-info) ' "$r" || fail "the failing step is not marked FAIL"
line=$(grep '^TIMEOUT  *nccl: 3 collectives x1' "$r") || fail "the hung step is not marked TIMEOUT"
secs=$(echo "$line" | awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "s" && $i ~ /^[0-9.]+$/) { print $i; exit } }')
# cut at its limit: TERM at the limit, KILL 5 s later at the latest
awk -v s="$secs" -v l=$limit 'BEGIN { exit !(s >= l && s < l + 10) }' ||
    fail "the hung step ran $secs s, limit $limit s"
# the step after the hung one ran (p2p x2 passed, above), and nothing of the hung one is left
for p in $(pgrep -f "$build/bin/nccl_check"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RUNSH_FAKE_TOKEN=$token" &&
        fail "processes of the hung step are still running (pid $p)"
done
# per-step logs: one file per step that ran, and steps.log with every section
n=$(tar tzf "$out/o/steps.tar.gz" | grep -c '\.log$')
[ "$n" = 6 ] || fail "steps.tar.gz has $n step logs, expected 6"
[ "$(grep -c '^==== ' "$out/o/steps.log")" = 6 ] || fail "steps.log does not have 6 sections"
grep -q '^==== .* nccl: 3 collectives x1 (GX_NCCL=on): TIMEOUT' "$out/o/steps.log" ||
    fail "steps.log does not record the timeout"
# its output: "not loaded" (FAKECUDA_FAIL), or "not built" in a build without nvcc
grep -q '^CUDA reduction kernels: .*not \(loaded\|built\)' "$out/o/steps.log" ||
    fail "steps.log lacks the failing step's output"
echo "PASS: run.sh cut the hung step at ${secs} s (limit $limit s), marked the failure, went on, left its logs"
