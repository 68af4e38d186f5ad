#!/bin/bash
# perf/report: plots and the README section regenerate byte for byte from the
# records, read old and new record forms, and the committed ones are current.
#   perf_report_test.sh SRC_DIR
set -u
src=$1
py=/usr/bin/python3
$py -c 'import matplotlib' 2>/dev/null ||
    { echo "SKIP: python3-matplotlib is not installed (apt-get install python3-matplotlib)"; exit 77; }
dir=$(mktemp -d /tmp/gx-perf-report-test.XXXXXX) && trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# A few records of each kind (busbw, CPU per GiB, the hier tables) and a
# fixture in the new form: enough to draw every kind, quick to draw twice.
for side in a b; do
    mkdir -p "$dir/$side/results"
    for r in 2026-11-22-allreduce-7 2026-11-25-allreduce-tcp-idle 2026-11-25-hier-arena \
             2026-11-25-hier-idle; do
        cp "$src/perf/results/$r.md" "$dir/$side/results/"
    done
    cp "$src/tests/observe/fixtures/"*.md "$dir/$side/results/"
    cp "$src/perf/README.md" "$dir/$side/README.md"
    $py "$src/perf/report" --results "$dir/$side/results" --figures "$dir/$side/figures" \
        --readme "$dir/$side/README.md" || fail "perf/report ($side) exited $?"
done
diff -r "$dir/a/figures" "$dir/b/figures" > /dev/null || fail "two runs drew different PNGs"
cmp "$dir/a/README.md" "$dir/b/README.md" || fail "two runs wrote different README sections"
n=$(ls "$dir/a/figures" | wc -l)
[ "$n" -ge 5 ] || fail "only $n figures from 5 records"
for f in "$dir/a/figures"/*.png; do
    [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || fail "$f is not a PNG"
    grep -qa "matplotlib version\|Software" "$f" && fail "$f carries matplotlib's version"
done
# The fixture (new form, every run listed) is the latest all-reduce record:
# it is drawn, its table is beneath, and it is the headline.
grep -q "results/2030-01-01-allreduce-runs.md" "$dir/a/README.md" || fail "the fixture is not in the section"
sed -n '/headline begin/,/headline end/p' "$dir/a/README.md" | grep -q "2030-01-01-allreduce-runs" ||
    fail "the headline is not the latest all-reduce record"
grep -q "| 4 MiB | 3.21 (runs 3.10 3.30 3.21) |" "$dir/a/README.md" || fail "the fixture's table is not beneath its plot"
[ -f "$dir/a/figures/allreduce-runs--2-ranks-one-node-fixture--busbw.png" ] || fail "no plot of the fixture: $(ls "$dir/a/figures")"
# A second run over its own output changes nothing (the section is replaced, not added).
$py "$src/perf/report" --results "$dir/a/results" --figures "$dir/a/figures" \
    --readme "$dir/a/README.md" --check || fail "perf/report --check: stale right after a run"
[ "$(grep -c 'perf/report: begin' "$dir/a/README.md")" -eq 1 ] || fail "the section was added twice"
# The repository's own figures and README are current with its records.
$py "$src/perf/report" --check ||
    fail "perf/README.md or perf/figures is stale: run perf/report and commit what it writes"
echo "PASS perf/report: $n figures, byte-identical twice, committed ones current"
