#!/bin/bash
# Observability end to end (docs/observability.md): GX_TRACE timelines merged
# by gx-info --trace, gx_comm_stats and GX_METRICS_FILE.
#   observe_test.sh BIN_DIR SRC_DIR ring|kill|stats|ddp|viewer
set -u
bin=$1
src=$2
what=$3
here=$src/tests/observe
dir=$(mktemp -d /tmp/gx-observe-test.XXXXXX) && trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/log" ] && tail -30 "$dir/log"; exit 1; }
export GX_TIMEOUT=30
case $what in
ring)
    # A 4-rank ring all-reduce: the merged trace holds exactly the schedule's
    # steps, receives ending after their sends began; the clock offsets are
    # measured (GX_TRACE_CLOCK=exchange) though the ranks share a machine.
    GX_ALGO=ring GX_TRACE=$dir/trace GX_TRACE_CLOCK=exchange \
        "$bin/gx-run" -n 4 --timeout 120 "$bin/observe_check" ring "$dir" > "$dir/log" 2>&1 ||
        fail "observe_check ring failed"
    "$bin/gx-info" --trace "$dir/trace" > "$dir/merge.log" || { cat "$dir/merge.log"; fail "gx-info --trace exited $?"; }
    cat "$dir/merge.log"
    grep -q "merged 4 rank(s)" "$dir/merge.log" || fail "not 4 ranks merged"
    python3 "$here/trace_verify.py" "$dir/trace/gx-trace.json" "$dir" 4 || fail "trace_verify.py"
    for r in 1 2 3; do
        grep -q '"clock_rtt_ns":[1-9]' "$dir/trace/gx-trace-r$r.json" ||
            fail "rank $r measured no clock offset with GX_TRACE_CLOCK=exchange"
    done
    ;;
kill)
    # Rank 2 is killed inside the 5th all-reduce: the survivors fail, and
    # their traces are complete JSON with the failure in them; the merge
    # still works and says what it has.
    GX_TRACE=$dir/trace GX_FAULT="kill:rank=2,coll=5" GX_TRACE_FLUSH_MS=50 \
        "$bin/gx-run" -n 4 --timeout 120 --keep-going "$bin/observe_check" kill > "$dir/log" 2>&1
    [ "$(grep -c '^FAILED rank' "$dir/log")" -eq 3 ] || fail "expected 3 survivors to fail"
    for r in 0 1 3; do
        python3 - "$dir/trace/gx-trace-r$r.json" "$here" <<'PY' || fail "rank $r's trace"
import json, sys
sys.path.insert(0, sys.argv[2])
import trace_format
doc = trace_format.load(sys.argv[1])
bad = trace_format.check(doc, sys.argv[1])
assert not bad, bad[:5]
names = {e["name"] for e in doc["traceEvents"]}
assert "failure" in names, "no failure event"
failed = [e for e in doc["traceEvents"] if e["name"] == "allreduce" and e["ph"] == "b"
          and e["args"]["status"] != 0]
assert failed, "no failed all-reduce span"
print(sys.argv[1], "valid,", len(doc["traceEvents"]), "events, failure recorded")
PY
    done
    "$bin/gx-info" --trace "$dir/trace" > "$dir/merge.log"; rc=$?
    cat "$dir/merge.log"
    [ $rc -le 1 ] || fail "gx-info --trace exited $rc"
    python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/trace/gx-trace.json" ||
        fail "the merged trace is not JSON"
    # A file cut in the middle of a line (a rank killed while writing): the
    # merge leaves the line out, says so and exits 1.
    mkdir "$dir/cut" && cp "$dir/trace/gx-trace-r0.json" "$dir/cut/"
    head -c $(( $(stat -c %s "$dir/trace/gx-trace-r1.json") - 300 )) "$dir/trace/gx-trace-r1.json" \
        > "$dir/cut/gx-trace-r1.json"
    "$bin/gx-info" --trace "$dir/cut" > "$dir/cut.log"; rc=$?
    cat "$dir/cut.log"
    [ $rc -eq 1 ] || fail "a cut file: gx-info --trace exited $rc, expected 1"
    grep -q "rank 1: .*the rank died while writing" "$dir/cut.log" || fail "the cut file is not named"
    python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/cut/gx-trace.json" ||
        fail "merging a cut file gave invalid JSON"
    ;;
stats)
    # Counters against the bytes moved (observe_check), then the metrics
    # file: it parses as the textfile format and says what gx_comm_stats said.
    # GX_ALGO=ring: the node arena moves data through shared memory, not as
    # messages, and would leave only the descriptors to count.
    GX_ALGO=ring GX_METRICS_FILE=$dir/gx-%r.prom GX_METRICS_INTERVAL=1 \
        "$bin/gx-run" -n 3 --timeout 120 "$bin/observe_check" stats "$dir" > "$dir/log" 2>&1 ||
        fail "observe_check stats failed"
    python3 "$here/prom_check.py" "$dir" 3 || fail "prom_check.py"
    "$bin/gx-info" --stats "$dir" > "$dir/table" || fail "gx-info --stats exited $?"
    cat "$dir/table"
    [ "$(grep -c ' world ' "$dir/table")" -eq 3 ] || fail "gx-info --stats: not one row per rank"
    # Without %r, the rank goes before the extension.
    GX_ALGO=ring GX_METRICS_FILE=$dir/plain.prom "$bin/gx-run" -n 2 --timeout 120 "$bin/observe_check" stats "$dir" \
        > "$dir/log" 2>&1 || fail "observe_check stats (plain name) failed"
    [ -f "$dir/plain-r0.prom" ] && [ -f "$dir/plain-r1.prom" ] || fail "no plain-r<N>.prom: $(ls "$dir")"
    [ "$(stat -c %a "$dir/plain-r0.prom")" = 600 ] || fail "metrics file mode $(stat -c %a "$dir/plain-r0.prom")"
    ;;
ddp)
    # The C DDP example traced: every bucket's all-reduce is on the timeline
    # and, on every rank, the first bucket of some iteration began inside the
    # backward pass (the overlap DDP exists for).
    GX_TRACE=$dir/trace "$bin/gx-run" -n 4 --timeout 200 "$bin/ddp_mlp" > "$dir/log" 2>&1 ||
        fail "ddp_mlp failed"
    "$bin/gx-info" --trace "$dir/trace" > "$dir/merge.log" || fail "gx-info --trace exited $?"
    python3 "$here/ddp_overlap.py" "$dir/trace/gx-trace.json" 4 || fail "ddp_overlap.py"
    ;;
viewer)
    # The bundled viewer page draws the merged trace in headless Chromium.
    command -v chromium > /dev/null || { echo "SKIP: chromium is not installed"; exit 77; }
    GX_ALGO=ring GX_TRACE=$dir/trace \
        "$bin/gx-run" -n 4 --timeout 120 "$bin/observe_check" ring "$dir" > "$dir/log" 2>&1 ||
        fail "observe_check ring failed"
    "$bin/gx-info" --trace "$dir/trace" -o "$dir/merged.json" > "$dir/merge.log" ||
        fail "gx-info --trace exited $?"
    cp "$src/tools/gx-info/trace_viewer.html" "$dir/view.html"
    { printf 'window.GX_TRACE_DATA = '; cat "$dir/merged.json"; printf ';\n'; } > "$dir/trace-data.js"
    timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --allow-file-access-from-files \
        --virtual-time-budget=10000 --dump-dom "file://$dir/view.html?data=trace-data.js" \
        > "$dir/dom.html" 2> "$dir/chromium.log" || fail "chromium exited $?"
    grep -o 'id="summary"[^<]*' "$dir/dom.html" | head -1
    grep -q 'data-status="ok"' "$dir/dom.html" || fail "the viewer did not draw the trace: $(grep -o 'id="summary"[^<]*' "$dir/dom.html")"
    grep -q 'data-ranks="4"' "$dir/dom.html" || fail "the viewer did not find 4 ranks"
    ;;
*) echo "usage: $0 BIN_DIR SRC_DIR ring|kill|stats|ddp|viewer"; exit 2 ;;
esac
echo "PASS observe $what"
