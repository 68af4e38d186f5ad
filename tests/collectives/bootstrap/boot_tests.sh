#!/usr/bin/env bash
# Multi-process bootstrap tests. Usage: boot_tests.sh BIN_DIR CASE [ARGS...]
# Each case prints what it checked and exits non-zero on the first surprise.
set -u
BIN=$1
CASE=$2
shift 2
RUN="$BIN/gx-run"
CHECK="$BIN/boot_check"
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
export GX_INIT_TIMEOUT=${GX_INIT_TIMEOUT:-60} GX_TIMEOUT=${GX_TIMEOUT:-60}

fail() { echo "FAIL: $*"; for f in "$TMP"/*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# A port P with P+1 free too, below the ephemeral range (where other tests'
# connections take their local ports, so P+1 could be taken by the time gx binds it).
free_port_pair() { python3 -c '
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass'; }
count_pass() { grep -c '^.*PASS' "$1" || true; }

# Start N ranks by hand (no gx-run) with the given init method; wait for all.
start_ranks() { # n method key mode...
    local n=$1 method=$2 key=$3; shift 3
    local pids=()
    for ((r = 0; r < n; r++)); do
        GX_RANK=$r GX_SIZE=$n GX_INIT_METHOD=$method GX_JOB_KEY=$key \
            timeout 90 "$CHECK" "$@" >"$TMP/rank$r.log" 2>&1 &
        pids+=($!)
    done
    local bad=0
    for p in "${pids[@]}"; do wait "$p" || bad=1; done
    return $bad
}

case "$CASE" in
env) # gx-run sets GX_* (env://)
    n=$1
    "$RUN" -n "$n" --timeout 90 "$CHECK" basic >"$TMP/out.log" 2>&1 || fail "gx-run -n $n exited $?"
    [ "$(count_pass "$TMP/out.log")" -eq "$n" ] || fail "expected $n PASS lines"
    ;;
torchrun) # torchrun's variables only (gx listens on MASTER_PORT + 1)
    n=$1; port=$(free_port_pair); pids=()
    for ((r = 0; r < n; r++)); do
        env -u GX_RANK RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            GX_SIZE=$n GX_RANK=$r timeout 90 "$CHECK" basic >"$TMP/rank$r.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || fail "a rank failed"; done
    ;;
torchrun-store) # torch's store already listens on MASTER_PORT: gx takes MASTER_PORT + 1
    n=$1; port=$(free_port_pair)
    python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',$port)); s.listen(); time.sleep(60)" &
    blocker=$!
    # the store must listen before the ranks look (python starts slowly on a loaded machine)
    for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
    pids=()
    for ((r = 0; r < n; r++)); do
        env -u GX_RANK -u GX_SIZE -u GX_MASTER_PORT -u GX_MASTER_ADDR -u GX_INIT_METHOD RANK=$r \
            WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port BOOT_CHECK_RANK=$r \
            BOOT_CHECK_SIZE=$n timeout 90 "$CHECK" basic \
            >"$TMP/rank$r.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || fail "a rank failed beside torch's store"; done
    kill $blocker
    ;;
np) # mpirun's spelling -np N; torch's MASTER_PORT is not gx's GX_MASTER_PORT
    "$RUN" -np 3 --timeout 60 sh -c 'echo "rank $GX_RANK of $GX_SIZE torch $MASTER_PORT gx $GX_MASTER_PORT"' \
        >"$TMP/np.log" 2>&1 || fail "gx-run -np 3 exited $?"
    [ "$(grep -c 'of 3 torch' "$TMP/np.log")" -eq 3 ] || fail "gx-run -np 3 did not start 3 ranks"
    awk '$5 == $7 { bad = 1 } END { exit bad }' "$TMP/np.log" || fail "MASTER_PORT equals GX_MASTER_PORT"
    "$RUN" --np 2 --timeout 60 "$CHECK" basic >"$TMP/np2.log" 2>&1 || fail "gx-run --np 2 exited $?"
    [ "$(count_pass "$TMP/np2.log")" -eq 2 ] || fail "expected 2 PASS lines from --np 2"
    ;;
mpirun-in-slurm) # Open MPI's ranks inside an allocation that set SLURM_PROCID=0 for all
    n=$1; port=$(free_port); pids=()
    for ((r = 0; r < n; r++)); do
        env -u GX_RANK -u GX_SIZE -u RANK -u WORLD_SIZE SLURM_PROCID=0 SLURM_NTASKS=1 \
            OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n GX_INIT_METHOD=tcp://127.0.0.1:$port \
            GX_JOB_KEY=k5 BOOT_CHECK_RANK=$r BOOT_CHECK_SIZE=$n timeout 90 "$CHECK" basic >"$TMP/rank$r.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || fail "a rank failed (SLURM_PROCID taken over OMPI_COMM_WORLD_RANK?)"; done
    [ "$(cat "$TMP"/rank*.log | count_pass /dev/stdin)" -eq "$n" ] || fail "expected $n PASS lines"
    ;;
tcp)
    n=$1; port=$(free_port)
    start_ranks "$n" "tcp://127.0.0.1:$port" k1 basic || fail "tcp:// with $n ranks"
    ;;
file)
    n=$1
    start_ranks "$n" "file://$TMP/rendezvous" k2 basic || fail "file:// with $n ranks"
    [ -e "$TMP/rendezvous" ] && fail "the rendezvous file was left behind after the job"
    ;;
nodes) # two fake nodes via GX_NODE_ID, one gx-run per node
    port=$(free_port)
    BOOT_CHECK_NODES=2 "$RUN" -n 2 --nnodes 2 --node-rank 0 --master 127.0.0.1:$port --job-key kk \
        --node-id nodeA --timeout 90 "$CHECK" basic >"$TMP/a.log" 2>&1 &
    a=$!
    BOOT_CHECK_NODES=2 "$RUN" -n 2 --nnodes 2 --node-rank 1 --master 127.0.0.1:$port --job-key kk \
        --node-id nodeB --timeout 90 "$CHECK" basic >"$TMP/b.log" 2>&1 || fail "node 1 failed"
    wait $a || fail "node 0 failed"
    ;;
kill) # a rank killed during barrier: the others fail naming it
    n=$1; victim=$2
    GX_TIMEOUT=10 "$RUN" --keep-going -n "$n" --timeout 60 "$CHECK" kill "$victim" >"$TMP/out.log" 2>&1
    rc=$?
    [ $rc -eq 137 ] || fail "gx-run exit $rc, expected 137 (victim killed)"
    grep -q "rank $victim (pid [0-9]*) was killed by signal 9" "$TMP/out.log" || fail "gx-run did not name the victim"
    [ "$(count_pass "$TMP/out.log")" -eq $((n - 1)) ] || fail "expected $((n - 1)) ranks to fail naming rank $victim"
    ;;
launcher-stops) # without --keep-going, one failing rank stops the rest
    "$RUN" -n 4 --timeout 60 sh -c 'if [ "$GX_RANK" = 2 ]; then exit 3; fi; sleep 50' >"$TMP/out.log" 2>&1
    rc=$?
    [ $rc -eq 3 ] || fail "gx-run exit $rc, expected rank 2's status 3"
    grep -q "rank 2 (pid [0-9]*) exited with status 3" "$TMP/out.log" || fail "gx-run did not name rank 2"
    ;;
wrong-key)
    port=$(free_port)
    GX_INIT_TIMEOUT=5 GX_RANK=0 GX_SIZE=2 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=right \
        "$CHECK" expect-init-fail GX_ETIMEOUT "ranks 1" >"$TMP/rank0.log" 2>&1 &
    r0=$!
    GX_INIT_TIMEOUT=5 GX_RANK=1 GX_SIZE=2 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=wrong \
        "$CHECK" expect-init-fail GX_EAUTH "job key" >"$TMP/rank1.log" 2>&1 || fail "rank 1 with the wrong key"
    wait $r0 || fail "rank 0 did not time out naming rank 1"
    grep -q "rejected bootstrap connection from 127.0.0.1:[0-9]*: wrong job key" "$TMP/rank0.log" \
        || fail "rank 0 did not log the rejected connection with its address"
    ;;
side-by-side) # two jobs at once, plus an intruder and garbage aimed at job A
    port=$(free_port)
    "$RUN" -n 4 --master 127.0.0.1:$port --timeout 90 "$CHECK" loop 300 "$TMP/go" >"$TMP/a.log" 2>&1 &
    a=$!
    "$RUN" -n 4 --timeout 90 "$CHECK" loop 300 >"$TMP/b.log" 2>&1 &
    b=$!
    sleep 0.3
    GX_INIT_TIMEOUT=5 GX_RANK=1 GX_SIZE=4 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=intruder \
        "$CHECK" expect-init-fail GX_EAUTH "job key" >"$TMP/intruder.log" 2>&1 || fail "intruder was not refused"
    head -c 4096 /dev/urandom >"/dev/tcp/127.0.0.1/$port" 2>/dev/null || true
    touch "$TMP/go"
    wait $a || fail "job A failed"
    wait $b || fail "job B failed"
    [ "$(count_pass "$TMP/a.log")" -eq 4 ] && [ "$(count_pass "$TMP/b.log")" -eq 4 ] || fail "missing PASS lines"
    ;;
bad-count)
    "$RUN" -n 0 true >"$TMP/n0.log" 2>&1 && fail "gx-run -n 0 accepted"
    grep -q -- "-n '0' is not a number from 1" "$TMP/n0.log" || fail "gx-run -n 0 message"
    "$RUN" -n abc true >"$TMP/nabc.log" 2>&1 && fail "gx-run -n abc accepted"
    "$RUN" true >"$TMP/none.log" 2>&1 && fail "gx-run without -n accepted"
    grep -q "rank count is required" "$TMP/none.log" || fail "gx-run without -n message"
    env -u GX_SIZE -u WORLD_SIZE -u SLURM_NTASKS -u OMPI_COMM_WORLD_SIZE GX_RANK=0 \
        "$CHECK" expect-init-fail GX_EINVAL "world size unknown" >"$TMP/a.log" 2>&1 || fail "missing size"
    GX_RANK=0 GX_SIZE=0 "$CHECK" expect-init-fail GX_EINVAL "GX_SIZE=0" >"$TMP/b.log" 2>&1 || fail "size 0"
    GX_RANK=5 GX_SIZE=4 "$CHECK" expect-init-fail GX_EINVAL "GX_RANK=5 is out of range" >"$TMP/c.log" 2>&1 || fail "rank 5 of 4"
    GX_RANK=0 GX_SIZE=x2 "$CHECK" expect-init-fail GX_EINVAL "GX_SIZE='x2'" >"$TMP/d.log" 2>&1 || fail "size x2"
    ;;
missing-rank) # a rank that never arrives is named when the deadline fires
    port=$(free_port)
    GX_INIT_TIMEOUT=2 GX_RANK=0 GX_SIZE=3 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=m \
        "$CHECK" expect-init-fail GX_ETIMEOUT "ranks 2)" >"$TMP/rank0.log" 2>&1 &
    r0=$!
    GX_INIT_TIMEOUT=2 GX_RANK=1 GX_SIZE=3 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=m \
        "$CHECK" expect-init-fail GX_E "rank 0" >"$TMP/rank1.log" 2>&1 || fail "rank 1 did not fail naming rank 0"
    wait $r0 || fail "rank 0 did not name missing rank 2"
    ;;
size-mismatch) # ranks disagree on the world size
    port=$(free_port)
    GX_RANK=0 GX_SIZE=2 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=s \
        "$CHECK" expect-init-fail GX_EMISMATCH "world size" >"$TMP/rank0.log" 2>&1 &
    r0=$!
    GX_RANK=1 GX_SIZE=3 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=s \
        "$CHECK" expect-init-fail GX_E "world size" >"$TMP/rank1.log" 2>&1 || fail "rank 1 not told"
    wait $r0 || fail "rank 0 did not report the mismatch"
    ;;
bad-param)
    GX_RANK=0 GX_SIZE=1 GX_TIMEOUT=abc "$CHECK" expect-init-fail GX_EINVAL "GX_TIMEOUT='abc' is malformed" \
        >"$TMP/a.log" 2>&1 || fail "malformed GX_TIMEOUT"
    GX_RANK=0 GX_SIZE=1 GX_TIMEOUTT=5 "$CHECK" loop 1 >"$TMP/b.log" 2>&1 || fail "single rank with a typo variable"
    grep -q "unknown variable GX_TIMEOUTT ignored; did you mean GX_TIMEOUT?" "$TMP/b.log" || fail "no did-you-mean warning"
    GX_RANK=0 GX_SIZE=1 GX_DEBUG=loud "$CHECK" expect-init-fail GX_EINVAL "GX_DEBUG='loud'" >"$TMP/c.log" 2>&1 \
        || fail "malformed GX_DEBUG"
    ;;
bad-ifname) # a mistyped GX_SOCKET_IFNAME between two fake nodes: a clear error
    # naming the variable and the interfaces that exist on every rank, no crash
    GX_SOCKET_IFNAME=eht0 "$RUN" -n 2 --keep-going --timeout 60 sh -c \
        "GX_NODE_ID=node\$GX_RANK exec $CHECK expect-init-fail GX_EINVAL \"GX_SOCKET_IFNAME='eht0'; the interfaces that are up: \"" \
        >"$TMP/a.log" 2>&1 || fail "a rank crashed or did not name GX_SOCKET_IFNAME and the interfaces"
    grep -q "Segmentation\|signal 11" "$TMP/a.log" && fail "a rank crashed"
    ;;
debug-file) # GX_DEBUG_FILE with %h and %p, GX_DEBUG=info, GX_DEBUG_SUBSYS filter
    GX_DEBUG=info GX_DEBUG_SUBSYS=init GX_DEBUG_FILE="$TMP/gx.%h.%p.log" "$RUN" -n 2 --timeout 60 \
        "$CHECK" loop 3 >"$TMP/out.log" 2>&1 || fail "run with GX_DEBUG_FILE"
    n=$(ls "$TMP"/gx."$(hostname)".*.log 2>/dev/null | wc -l)
    [ "$n" -eq 2 ] || fail "expected one log file per rank named by host and pid, found $n"
    grep -q "INFO init: init done" "$TMP"/gx.*.log || fail "no init lines in the log files"
    grep -q " boot: " "$TMP"/gx.*.log && fail "GX_DEBUG_SUBSYS=init let boot lines through"
    ;;
unauth-probe) # what a connector without the key receives from three jobs (A1 and A2 share a
    # key, B has another) is the same 32-byte challenge with random contents: no key fingerprint
    P=$(dirname "$0")/probe_challenge.py; pids=(); args=()
    for job in A1:correct-horse-battery-staple A2:correct-horse-battery-staple B:hunter2; do
        name=${job%%:*}; key=${job#*:}; port=$(free_port)
        GX_RANK=0 GX_SIZE=2 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=$key \
            timeout 60 "$CHECK" basic >"$TMP/$name.0.log" 2>&1 &
        pids+=($!); args+=("$name=$port"); eval "port_$name=$port key_$name=$key"
    done
    sleep 0.5
    python3 "$P" 10 "${args[@]}" >"$TMP/probe.log" 2>&1; prc=$?
    cat "$TMP/probe.log"
    for name in A1 A2 B; do
        eval "port=\$port_$name key=\$key_$name"
        GX_RANK=1 GX_SIZE=2 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=$key \
            timeout 60 "$CHECK" basic >"$TMP/$name.1.log" 2>&1 || fail "job $name rank 1 failed"
    done
    for p in "${pids[@]}"; do wait "$p" || fail "a rank 0 failed after the probes"; done
    [ $prc -eq 0 ] || fail "an unauthenticated connector received something that depends on the key"
    ;;
key-warnings) # no key / a short key: one warning per rank saying how to set one; key files
    port=$(free_port)
    start_ranks 2 "tcp://127.0.0.1:$port" "" loop 2 || fail "a job without a key"
    for r in 0 1; do
        [ "$(grep -c "no job key: any process that can reach this job's ports can join it" "$TMP/rank$r.log")" -eq 1 ] \
            || fail "rank $r: expected one warning about running without a key"
    done
    port=$(free_port)
    start_ranks 2 "tcp://127.0.0.1:$port" hunter2 loop 2 || fail "a job with a short key"
    [ "$(grep -c "the job key is 7 characters long.*GX_JOB_KEY_FILE" "$TMP/rank0.log")" -eq 1 ] \
        || fail "expected one warning about the short key"
    "$RUN" -n 2 --timeout 60 "$CHECK" loop 2 >"$TMP/gen.log" 2>&1 || fail "gx-run with a generated key"
    grep -q "job key" "$TMP/gen.log" && fail "a generated key drew a warning"
    printf 'a-long-enough-job-key-from-a-file\n' >"$TMP/key"; chmod 644 "$TMP/key"
    "$RUN" -n 2 --timeout 60 --job-key-file "$TMP/key" "$CHECK" loop 1 >"$TMP/f1.log" 2>&1 && fail "gx-run took a 0644 key file"
    grep -q -- "--job-key-file: refusing '$TMP/key' (owner uid [0-9]*, mode 0644): group or others may read" "$TMP/f1.log" \
        || fail "gx-run did not name the readable key file and its mode"
    GX_RANK=0 GX_SIZE=1 GX_JOB_KEY_FILE="$TMP/key" "$CHECK" expect-init-fail GX_EINVAL \
        "GX_JOB_KEY_FILE: refusing '$TMP/key'" >"$TMP/f2.log" 2>&1 || fail "init took a 0644 GX_JOB_KEY_FILE"
    chmod 600 "$TMP/key"
    "$RUN" -n 2 --timeout 60 --job-key-file "$TMP/key" "$CHECK" loop 1 >"$TMP/f3.log" 2>&1 || fail "gx-run --job-key-file"
    port=$(free_port)
    GX_JOB_KEY_FILE="$TMP/key" start_ranks 2 "tcp://127.0.0.1:$port" "" loop 1 || fail "ranks with GX_JOB_KEY_FILE"
    grep -q "job key" "$TMP/rank0.log" && fail "a key from GX_JOB_KEY_FILE drew a warning"
    "$RUN" --help | grep -q "visible to every.*ps\|user in ps" || fail "--job-key help does not say ps shows it"
    ;;
dup-rank) # a second process started as rank 1 is told at once that rank 0 refused it
    # ("at once": before half of its GX_INIT_TIMEOUT, which a process that was
    # not refused would wait out)
    port=$(free_port); m=tcp://127.0.0.1:$port init_s=20
    GX_RANK=0 GX_SIZE=3 GX_INIT_METHOD=$m GX_JOB_KEY=dup-rank-test-key-1234 "$CHECK" basic >"$TMP/rank0.log" 2>&1 &
    r0=$!
    GX_RANK=1 GX_SIZE=3 GX_INIT_METHOD=$m GX_JOB_KEY=dup-rank-test-key-1234 "$CHECK" basic >"$TMP/rank1.log" 2>&1 &
    r1=$!
    sleep 0.5
    t0=$(date +%s%N)
    GX_INIT_TIMEOUT=$init_s GX_RANK=1 GX_SIZE=3 GX_INIT_METHOD=$m GX_JOB_KEY=dup-rank-test-key-1234 "$CHECK" expect-init-fail GX_EINVAL \
        "rank 0 refused this process as rank 1: rank 1 is already taken" >"$TMP/dup.log" 2>&1 \
        || fail "the duplicate rank 1 was not told that rank 0 refused it"
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "the duplicate failed after $ms ms"
    [ $ms -lt $((init_s * 1000 / 2)) ] || fail "the duplicate took $ms ms to fail (GX_INIT_TIMEOUT $init_s s)"
    GX_RANK=2 GX_SIZE=3 GX_INIT_METHOD=$m GX_JOB_KEY=dup-rank-test-key-1234 "$CHECK" basic >"$TMP/rank2.log" 2>&1 \
        || fail "rank 2 failed: the duplicate disturbed the job"
    wait $r0 || fail "rank 0 failed"; wait $r1 || fail "rank 1 failed"
    ;;
log-flood) # 200 hostile connections (garbage, probes, wrong MACs) at rank 0's bootstrap port:
    # one full line for the source, then summaries by reason; every connection is counted
    port=$(free_port)
    GX_LOG_REJECT_INTERVAL=1 GX_RANK=0 GX_SIZE=2 GX_INIT_METHOD=tcp://127.0.0.1:$port \
        GX_JOB_KEY=flood-test-key-0123456789 timeout 60 "$CHECK" basic >"$TMP/rank0.log" 2>&1 &
    r0=$!
    sleep 0.3
    python3 "$(dirname "$0")/hostile_conns.py" $port 200 || fail "the hostile client failed"
    GX_RANK=1 GX_SIZE=2 GX_INIT_METHOD=tcp://127.0.0.1:$port GX_JOB_KEY=flood-test-key-0123456789 \
        timeout 60 "$CHECK" basic >"$TMP/rank1.log" 2>&1 || fail "rank 1 failed after the flood"
    wait $r0 || fail "rank 0 failed after the flood"
    lines=$(grep -c "bootstrap connection from\|bootstrap: rejected .* more connection" "$TMP/rank0.log")
    full=$(grep -c "bootstrap connection from 127.0.0.1" "$TMP/rank0.log")
    summed=$(sed -n 's/.*rejected \([0-9]*\) more connection(s) from 127.0.0.1 .*/\1/p' "$TMP/rank0.log" | paste -sd+ | bc)
    echo "201 hostile connections: $lines log lines ($full in full), $((full + ${summed:-0})) counted"
    grep "more connection" "$TMP/rank0.log" | head -3
    [ "$full" -eq 1 ] || fail "expected one full line for the source, got $full"
    [ "$lines" -le 8 ] || fail "$lines log lines for 200 connections"
    # 201: the client's first probe waits for the port to listen
    [ $((full + ${summed:-0})) -eq 201 ] || fail "counted $((full + ${summed:-0})) of 201 connections"
    grep -q "closed before the handshake (probes)" "$TMP/rank0.log" || fail "probes not counted"
    grep -q "[0-9]* wrong job key" "$TMP/rank0.log" || fail "wrong keys not counted"
    ;;
launcher-killed) # kill -9 of gx-run: its ranks are gone at once (the parent-death
    # signal, not their own end: each would sleep 50 s, so "at once" is before
    # half of that); SIGTERM and SIGINT to gx-run still reach every rank (set -m:
    # a background job keeps SIGINT)
    "$RUN" -n 3 --timeout 60 sh -c "echo \$\$ > $TMP/pid.\$GX_RANK; exec sleep 50" >"$TMP/a.log" 2>&1 &
    launcher=$!
    for i in $(seq 100); do [ "$(cat "$TMP"/pid.* 2>/dev/null | wc -l)" -eq 3 ] && break; sleep 0.05; done
    pids=$(cat "$TMP"/pid.*); [ "$(echo "$pids" | wc -w)" -eq 3 ] || fail "ranks did not start"
    trap 'kill $pids 2>/dev/null; rm -rf "$TMP"' EXIT
    kill -9 $launcher; t0=$(date +%s%N)
    # a dead rank may stay a zombie (state Z) when init does not reap: that is gone too
    while ps -o stat= -p "$(echo $pids | tr ' ' ,)" | grep -qv '^Z'; do
        [ $(( ($(date +%s%N) - t0) / 1000000 )) -gt 25000 ] && { ps -f -p "$(echo $pids | tr ' ' ,)"; fail "ranks still alive 25 s after gx-run was killed"; }
        sleep 0.02
    done
    echo "ranks gone $(( ($(date +%s%N) - t0) / 1000000 )) ms after kill -9 of gx-run"
    for sig in TERM INT; do
        rm -f "$TMP"/got.*
        set -m
        "$RUN" -n 3 --timeout 60 sh -c "trap 'echo \$GX_RANK > $TMP/got.\$GX_RANK; exit 0' $sig; echo > $TMP/up.\$GX_RANK; while :; do sleep 0.05; done" >"$TMP/b.log" 2>&1 &
        launcher=$!
        set +m
        for i in $(seq 100); do [ "$(ls "$TMP"/up.* 2>/dev/null | wc -l)" -eq 3 ] && break; sleep 0.05; done
        sleep 0.1
        kill -$sig $launcher
        wait $launcher
        [ "$(ls "$TMP"/got.* 2>/dev/null | wc -l)" -eq 3 ] || fail "SIG$sig to gx-run did not reach every rank"
        rm -f "$TMP"/up.*
    done
    ;;
planted-files) # a sticky world-writable directory (as /tmp) where user nobody planted a
    # symlink and a file of its own at the log and rendezvous paths: gx refuses both
    [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to plant a file owned by user nobody"; exit 77; }
    S="$TMP/sticky"; mkdir -m 1777 "$S"
    echo secret >"$TMP/target"; chmod 600 "$TMP/target"
    ln -s "$TMP/target" "$S/gx.log"
    GX_DEBUG=info GX_DEBUG_FILE="$S/gx.log" "$RUN" -n 2 --timeout 60 "$CHECK" loop 1 >"$TMP/a.log" 2>&1 \
        || fail "a job with a planted GX_DEBUG_FILE link failed"
    [ "$(cat "$TMP/target")" = secret ] || fail "log lines were appended through the planted symlink"
    grep -q "GX_DEBUG_FILE: refusing '$S/gx.log' (owner uid 0, mode 0777.*symbolic link; logging to stderr" \
        "$TMP/a.log" || fail "no warning naming the symlinked GX_DEBUG_FILE"
    install -o nobody -m 644 /dev/null "$S/nobody.log"
    GX_DEBUG=info GX_DEBUG_FILE="$S/nobody.log" "$RUN" -n 2 --timeout 60 "$CHECK" loop 1 >"$TMP/b.log" 2>&1 \
        || fail "a job with a foreign GX_DEBUG_FILE failed"
    [ -s "$S/nobody.log" ] && fail "log lines went into a file owned by nobody"
    grep -q "refusing '$S/nobody.log' (owner uid 65534, mode 0644.*another user" "$TMP/b.log" \
        || fail "no warning naming the foreign GX_DEBUG_FILE's owner and mode"
    GX_DEBUG=info GX_DEBUG_FILE="$S/mine.log" "$RUN" -n 1 --timeout 60 "$CHECK" loop 1 >"$TMP/c.log" 2>&1
    [ "$(stat -c %a "$S/mine.log")" = 600 ] || fail "GX_DEBUG_FILE created with mode $(stat -c %a "$S/mine.log")"
    # file:// rendezvous: a pre-created 0666 file of nobody's, then a planted symlink
    install -o nobody -m 666 /dev/null "$S/rdv"
    GX_INIT_TIMEOUT=10 start_ranks 2 "file://$S/rdv" k expect-init-fail GX_ESYSTEM \
        "refusing '$S/rdv' (owner uid 65534, mode 0666" || fail "the ranks did not refuse nobody's rendezvous file"
    [ -s "$S/rdv" ] && fail "records were written into nobody's rendezvous file"
    ln -s "$TMP/target" "$S/rdv2"
    GX_INIT_TIMEOUT=10 start_ranks 2 "file://$S/rdv2" k expect-init-fail GX_ESYSTEM "symbolic link" \
        || fail "the ranks did not refuse a symlinked rendezvous file"
    [ "$(cat "$TMP/target")" = secret ] || fail "records were written through the planted symlink"
    ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
echo "ok: $CASE $*"
