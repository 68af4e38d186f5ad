#!/bin/sh
# gx_perf_check.sh CASE GX_RUN GX_PERF - tests of gx-perf (label "tools"),
# registered from tools/gx-perf/CMakeLists.txt. Cases:
#   sweep-check  every collective, 3 ranks, blocking and not, small sweep with
#                -c; then all_reduce over every datatype and op on 2 ranks:
#                exit 0 and "#wrong" 0 everywhere
#   format       the column header and rows read exactly like nccl-tests'
#   min-bw       an impossible --min-bw exits 1 and says why
#   bad-flags    bad command lines exit 2 with a message naming the flag
#   json         --json is one valid JSON document with the figures
#   csv          --csv has a header and one row per size and placement
set -u
case_name=$1
run=$2
perf=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# run_ok DESCRIPTION CMD...: the command exits 0; output in $tmp/out, $tmp/err.
run_ok() {
    what=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$what: exit status $rc (command: $*)"
        sed 's/^/  | /' "$tmp/out" "$tmp/err" | tail -n 30
        return 1
    fi
    return 0
}

# no_wrong: every data row of $tmp/out has #wrong 0 (or N/A for no in-place).
no_wrong() {
    bad=$(awk '!/^#/ && NF >= 9 {
                 if ($9 != "0") print;
                 else if (NF >= 13 && $13 != "0" && $13 != "N/A") print }' "$tmp/out")
    rows=$(grep -vc '^#' "$tmp/out")
    if [ -n "$bad" ] || [ "$rows" -eq 0 ]; then
        fail "$1: rows with wrong elements (or no rows):"
        echo "$bad" | head -n 10
        return 1
    fi
    grep -q '^# Out of bounds values : 0 OK' "$tmp/out" || fail "$1: footer does not say 0 OK"
}

case "$case_name" in
sweep-check)
    for coll in all_reduce broadcast reduce all_gather reduce_scatter alltoall gather scatter; do
        for z in 0 1; do
            what="$coll -z $z, 3 ranks"
            run_ok "$what" "$run" -n 3 --timeout 60 "$perf" "$coll" -b 0 -e 100K -f 7 -n 3 -w 1 \
                -c 2 -z "$z" -r 1 --no-progress && no_wrong "$what"
        done
    done
    what="all_reduce, every datatype and op, 2 ranks"
    run_ok "$what" "$run" -n 2 --timeout 60 "$perf" all_reduce -b 8 -e 64K -f 16 -n 2 -w 1 \
        -c 1 -o all -d all --no-progress && no_wrong "$what"
    rows=$(grep -vc '^#' "$tmp/out")
    [ "$rows" -eq 200 ] || fail "$what: $rows rows, expected 10 types x 5 ops x 4 sizes = 200"
    ;;
format)
    run_ok "format" "$run" -n 2 --timeout 60 "$perf" all_reduce -b 8 -e 64K -f 4 -n 5 -w 1 \
        --no-progress || exit 1
    # The three header lines of nccl-tests' all_reduce_perf, byte for byte.
    cat >"$tmp/want" <<'HDR'
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
HDR
    grep -A2 'out-of-place' "$tmp/out" >"$tmp/got"
    if ! cmp -s "$tmp/want" "$tmp/got"; then
        fail "column header differs from nccl-tests':"
        diff "$tmp/want" "$tmp/got"
    fi
    # Rows: "%12li  %12li  %8s  %6s  %6i" + 2 x "  %7s  %6.2f  %6.2f  %5g".
    num='[ 0-9.]\{7\}  [ 0-9.]\{6\}  [ 0-9.]\{6\}      0'
    rowre="^[ 0-9]\{12\}  [ 0-9]\{12\}     float     sum      -1  $num  $num\$"
    nrows=$(grep -vc '^#' "$tmp/out")
    nmatch=$(grep -c "$rowre" "$tmp/out")
    [ "$nrows" -eq 7 ] || fail "expected 7 sizes (8 B .. 64 KiB, factor 4), got $nrows rows"
    [ "$nmatch" -eq "$nrows" ] || { fail "rows not in nccl-tests' format:"; grep -v '^#' "$tmp/out" | grep -v "$rowre"; }
    grep -q '^           8             2     float     sum      -1 ' "$tmp/out" ||
        fail "first row is not size 8, count 2"
    grep -q '^# Avg bus bandwidth    : [0-9.e+-]* $' "$tmp/out" || fail "no '# Avg bus bandwidth' footer"
    # busbw = algbw * 2(n-1)/n = algbw for 2 ranks.
    awk '!/^#/ && $7 != $8 { print "busbw != algbw for 2 ranks: " $0; exit 1 }' "$tmp/out" ||
        fail "busbw factor"
    ;;
min-bw)
    "$run" -n 2 --timeout 60 "$perf" all_reduce -b 1K -e 4K -f 2 -n 2 -w 1 --min-bw 1e9 \
        --no-progress >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -ne 0 ] || fail "--min-bw 1e9 exited 0"
    grep -q 'below --min-bw' "$tmp/err" || { fail "no 'below --min-bw' message"; cat "$tmp/err"; }
    grep -q '^# Avg bus bandwidth    : .* FAILED' "$tmp/out" || fail "footer does not say FAILED"
    run_ok "--min-bw 0" "$run" -n 2 --timeout 60 "$perf" all_reduce -b 1K -e 4K -f 2 -n 2 -w 1 \
        --min-bw 0 --no-progress
    ;;
bad-flags)
    # expect_bad "ARGS" "TEXT": exit status 2 and stderr contains TEXT.
    expect_bad() {
        # shellcheck disable=SC2086
        "$perf" $1 >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ "$rc" -eq 2 ] || fail "gx-perf $1: exit status $rc, expected 2"
        grep -qF -- "$2" "$tmp/err" || { fail "gx-perf $1: stderr lacks '$2':"; cat "$tmp/err"; }
    }
    expect_bad "all_reduce -b 12Q" "-b/--minbytes: '12Q' is not a size"
    expect_bad "all_reduce -e -5" "-e/--maxbytes"
    expect_bad "all_reduce -n 0" "-n/--iters: '0' is not a whole number"
    expect_bad "all_reduce -w many" "-w/--warmup_iters"
    expect_bad "all_reduce -d float7" "-d/--datatype: unknown datatype 'float7'"
    expect_bad "all_reduce -o median" "-o/--op: unknown op 'median'"
    expect_bad "all_reduce -z 4" "-z/--blocking"
    expect_bad "all_reduce --min-bw fast" "--min-bw: 'fast'"
    expect_bad "all_reduce --compute_us -3" "--compute_us: '-3'"
    expect_bad "all_reduce --bogus" "unknown option '--bogus'"
    expect_bad "all_reduce -x 1" "not supported in gx-perf"
    expect_bad "all_reduce -Q 1" "unknown option '-Q'"
    expect_bad "all_reduce -n" "-n needs a value"
    expect_bad "all_reduc" "unknown collective 'all_reduc'"
    expect_bad "" "no collective given"
    expect_bad "all_reduce -b 2M -e 1M" "larger than -e/--maxbytes"
    expect_bad "all_reduce -t 4" "-t/--nthreads"
    # Under gx-run: one message, not one per rank.
    "$run" -n 3 --timeout 30 "$perf" all_reduce -b 12Q >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] || fail "under gx-run: exit status $rc, expected 2"
    n=$(grep -c "is not a size" "$tmp/err")
    [ "$n" -eq 1 ] || fail "under gx-run: the message appears $n times, expected once"
    "$run" -n 2 --timeout 30 "$perf" broadcast -r 2 -b 8 -e 8 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] || fail "-r 2 with 2 ranks: exit status $rc, expected 2"
    grep -qF -- "-r/--root 2 is out of range for 2 ranks" "$tmp/err" || { fail "-r 2 message"; cat "$tmp/err"; }
    "$perf" --help >"$tmp/out" 2>&1 || fail "--help exited non-zero"
    grep -q '^usage: ' "$tmp/out" || fail "--help prints no usage"
    ;;
json)
    run_ok "json" "$run" -n 2 --timeout 60 "$perf" reduce_scatter -b 64 -e 64K -f 8 -n 2 -w 1 \
        --json --no-progress || exit 1
    python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["collective"] == "reduce_scatter" and d["ranks"] == 2, d
rows = d["results"]
assert len(rows) == 4, len(rows)
for r in rows:
    for p in ("out_of_place", "in_place"):
        assert r[p]["wrong"] == 0 and r[p]["time_us"] > 0, r
assert d["pass"] is True and d["avg_busbw_gbs"] >= 0
' <"$tmp/out" || { fail "--json output does not parse or lacks figures:"; head -c 2000 "$tmp/out"; }
    ;;
csv)
    run_ok "csv" "$run" -n 2 --timeout 60 "$perf" all_gather -b 64 -e 64K -f 8 -n 2 -w 1 \
        --csv --no-progress || exit 1
    head -n 1 "$tmp/out" | grep -q '^collective,ranks,nodes,size,count,type,redop,root,placement,time_us,algbw_gbs,busbw_gbs,wrong$' ||
        fail "csv header"
    n=$(awk -F, 'NR > 1 && NF == 13 && $13 == "0"' "$tmp/out" | wc -l)
    [ "$n" -eq 8 ] || { fail "csv: $n good rows, expected 4 sizes x 2 placements"; cat "$tmp/out"; }
    ;;
*)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
[ "$fails" -eq 0 ] || exit 1
echo "PASS $case_name"
