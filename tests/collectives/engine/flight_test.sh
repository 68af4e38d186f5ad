#!/bin/bash
# The flight recorder end to end: ranks dump to GX_FLIGHT_DIR, gx-info
# --flight merges the dumps and names the first divergence.
#   flight_test.sh BIN_DIR mismatch|signal|files
set -u
bin=$1
what=$2
dir=$(mktemp -d /tmp/gx-flight-test.XXXXXX) && trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
export GX_FLIGHT_DIR=$dir GX_TIMEOUT=20
case $what in
mismatch)
    "$bin/gx-run" -n 4 --timeout 60 --keep-going "$bin/flight_check" mismatch || fail "flight_check mismatch failed"
    [ "$(ls "$dir" | grep -c '^gx-flight-.*-r[0-3]\.txt$')" -eq 4 ] || fail "expected 4 dumps, got: $(ls "$dir")"
    out=$("$bin/gx-info" --flight "$dir"); rc=$?
    echo "$out"
    [ $rc -eq 1 ] || fail "gx-info --flight exited $rc, expected 1 (divergence)"
    echo "$out" | grep -q "first divergence at #6" || fail "divergence at #6 not named"
    echo "$out" | grep -q "rank 2: broadcast #6" || fail "rank 2's broadcast not named"
    echo "$out" | grep -q "rank 0: allreduce #6" || fail "rank 0's all-reduce not named"
    ;;
signal)
    "$bin/gx-run" -n 4 --timeout 60 "$bin/flight_check" signal || fail "flight_check signal failed"
    f=$(ls "$dir"/gx-flight-*-r0.txt 2>/dev/null | head -1)
    [ -n "$f" ] || fail "rank 0 wrote no dump on SIGUSR1"
    grep -q "reason SIGUSR1" "$f" || fail "the dump does not say SIGUSR1"
    grep -q "^op 4 allreduce 64 float32 sum -1 [a-z]* issued " "$f" || fail "#4 is not in flight in the dump"
    grep -q "^op 3 allreduce 64 float32 sum -1 [a-z]* done " "$f" || fail "#3 is not done in the dump"
    [ "$(stat -c %a "$f")" = 600 ] || fail "dump mode $(stat -c %a "$f"), expected 600"
    ls "$dir" | grep -q -- '-r[123]\.txt$' && fail "ranks that were not signalled dumped"
    out=$("$bin/gx-info" --flight "$dir"); rc=$?
    echo "$out"
    [ $rc -eq 0 ] || fail "gx-info --flight exited $rc on one agreeing dump"
    echo "$out" | grep -q "no dump from rank(s): 1 2 3" || fail "missing dumps not named"
    ;;
files)
    # A planted symlink and a file that is not ours are refused.
    "$bin/gx-run" -n 3 --timeout 60 --keep-going "$bin/flight_check" mismatch >/dev/null 2>&1
    id=$(ls "$dir" | sed -n 's/^gx-flight-\(.*\)-r0\.txt$/\1/p')
    [ -n "$id" ] || fail "no dump to learn the communicator id from"
    rm -f "$dir"/gx-flight-*
    echo secret > "$dir/target"
    ln -s "$dir/target" "$dir/gx-flight-$id-r0.txt"
    touch "$dir/gx-flight-$id-r1.txt"; chmod 666 "$dir/gx-flight-$id-r1.txt"
    # a file planted by user nobody (as root only)
    [ "$(id -u)" -eq 0 ] && install -o nobody -m 644 /dev/null "$dir/gx-flight-$id-r2.txt"
    "$bin/gx-run" -n 3 --timeout 60 --keep-going "$bin/flight_check" mismatch > "$dir/log" 2>&1
    [ "$(cat "$dir/target")" = secret ] || fail "the dump followed a planted symlink"
    [ -s "$dir/gx-flight-$id-r1.txt" ] && fail "the dump wrote into a group/other-writable file"
    grep -q "symbolic link" "$dir/log" || fail "no warning names the symlink"
    grep -q "refusing" "$dir/log" || fail "no warning names the refused file"
    if [ "$(id -u)" -eq 0 ]; then
        [ -s "$dir/gx-flight-$id-r2.txt" ] && fail "the dump wrote into a file owned by nobody"
        grep -q "gx-flight-$id-r2.txt' (owner uid 65534, mode 0644" "$dir/log" || fail "nobody's file not named with owner and mode"
    fi
    ;;
*) echo "usage: $0 BIN_DIR mismatch|signal|files"; exit 2 ;;
esac
echo "PASS flight $what"
