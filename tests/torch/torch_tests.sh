#!/usr/bin/env bash
# The torch.distributed backend "gx" under each launcher. Usage:
#   torch_tests.sh BIN_DIR CASE [ARGS...]
# Needs Debian's python3-torch for /usr/bin/python3 (exit 77 without it);
# GX_LIBRARY and PYTHONPATH come from ctest.
set -u
BIN=$1 CASE=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
RUN="$BIN/gx-run"
$PY -c 'import torch.distributed' 2>/dev/null ||
    { echo "SKIP: python3-torch is not installed for $PY (apt-get install python3-torch)"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# MASTER_PORT for torch's store; gx listens on MASTER_PORT + 1. Both free, and
# below the ephemeral range, where other tests' connections take their ports.
free_port() { $PY -c '
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass'; }

case "$CASE" in
collectives) # every c10d call against computed values
    exec "$RUN" -n "$1" --timeout 100 $PY "$HERE/collectives_test.py" ;;
collectives-tcp) # the same over tcp: two fake nodes of n/2 ranks (GX_NODE_ID)
    exec "$RUN" -n "$1" --timeout 150 sh -c \
        "GX_NODE_ID=node\$((GX_RANK / ($1 / 2))) exec $PY $HERE/collectives_test.py" ;;
rpc) # gx_torch.rpc (rpc_sync, rpc_async, remote/RRef, errors, timeouts) against computed values
    exec "$RUN" -n "$1" --timeout 100 $PY "$HERE/rpc_test.py" ;;
rpc-kill) # rank 1 dies inside a call: rank 0's pending calls raise naming it
    "$RUN" --keep-going -n 3 --timeout 100 $PY "$HERE/rpc_test.py" kill >"$TMP/out" 2>&1
    rc=$?
    cat "$TMP/out"
    [ $rc -eq 137 ] || { echo "FAIL: gx-run exited $rc, expected 137 (rank 1's SIGKILL)"; exit 1; }
    grep -q '^PASS rank 0: pending calls to the killed rank 1 failed' "$TMP/out" ||
        { echo "FAIL: rank 0 did not report its calls failing"; exit 1; } ;;
rpc-torch) # the same calls and checks on torch.distributed.rpc (TensorPipe)
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) exec "$RUN" -n "$1" --timeout 100 \
        $PY "$HERE/rpc_test.py" torch ;;
ps) # examples/param_server.py on gx_torch.rpc (shm): the loss of one process's training
    exec "$RUN" -n "$1" --timeout 100 $PY "$HERE/../../examples/param_server.py" "${@:2}" ;;
ps-torch) # the same program on torch.distributed.rpc (TensorPipe): only the import differs
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) exec "$RUN" -n "$1" --timeout 100 \
        $PY "$HERE/../../examples/param_server.py" --backend tensorpipe "${@:2}" ;;
ps-netns) # the same on gx over tcp between two network-namespace nodes: servers
    # (ranks 0, 1) on one, trainers (2, 3) on the other (hier_netns.sh; 77 without netns)
    exec bash "$HERE/../collectives/algorithms/hier_netns.sh" 2+2 \
        $PY "$HERE/../../examples/param_server.py" "$@" ;;
profiler) # torch.profiler shows gx's all-reduces beside the backward ops
    exec "$RUN" -n "$1" --timeout 100 $PY "$HERE/profiler_check.py" "$TMP" ;;
ddp) # DDP over gx equals DDP over gloo
    exec "$RUN" -n "$1" --timeout 100 $PY "$HERE/ddp_test.py" --steps 20 --tol "$2" ;;
kill) # rank 1 dies mid-training: every other rank raises an error naming it
    n=$1
    "$RUN" --keep-going -n "$n" --timeout 100 $PY "$HERE/ddp_test.py" --kill 1 --timeout 30 \
        >"$TMP/out" 2>&1
    rc=$?
    cat "$TMP/out"
    [ $rc -eq 137 ] || { echo "FAIL: gx-run exited $rc, expected 137 (rank 1's SIGKILL)"; exit 1; }
    pass=$(grep -c '^PASS rank' "$TMP/out")
    [ "$pass" -eq $((n - 1)) ] || { echo "FAIL: $pass of $((n - 1)) survivors named rank 1"; exit 1; }
    echo "ok: the $pass surviving ranks raised an error naming rank 1" ;;
exit) # a rank that raises ($1 = raise) or whose peer died ($1 = gone) leaves within
    # gx_torch's teardown grace (5 s; bound 20 s for a loaded machine), not the
    # group's 300 s timeout
    "$RUN" --keep-going -n 2 --timeout 100 $PY "$HERE/exit_test.py" "$1" >"$TMP/out" 2>&1
    cat "$TMP/out"
    grep -q '^FAIL' "$TMP/out" && exit 1
    want=2; [ "$1" = gone ] && want=1
    n=0
    for s in $(sed -n 's/^EXIT rank [0-9]* after \([0-9.]*\) s$/\1/p' "$TMP/out"); do
        awk "BEGIN { exit !($s < 20) }" || { echo "FAIL: a rank took $s s to leave"; exit 1; }
        n=$((n + 1))
    done
    [ $n -eq $want ] || { echo "FAIL: $n of $want ranks reported their exit"; exit 1; }
    echo "ok: $n rank(s) left within 20 s" ;;
torchrun) # torchrun with a fixed --master_port, nothing gx-specific set
    # --redirects/--tee 1: Debian's torch 1.13 torchrun fails on Python 3.11
    # with their default 0 (IntFlag no longer lists 0); see docs/pytorch.md.
    # A free port can be taken by someone else before torchrun binds it: retry.
    for try in 1 2 3; do
        port=$(free_port)
        env -u GX_RANK -u GX_SIZE -u GX_MASTER_PORT -u GX_MASTER_ADDR -u GX_BOOT_LISTEN_FD \
            timeout 100 $PY -m torch.distributed.run --redirects 1 --tee 1 \
            --log_dir "$TMP/logs$try" --nproc_per_node="$1" --master_addr=127.0.0.1 \
            --master_port="$port" "$HERE/torchrun_check.py" >"$TMP/out" 2>&1
        rc=$?
        grep -q "failed to bind to .*:$port (errno: 98" "$TMP/out" || break
        echo "torchrun: port $port was taken before torchrun bound it; again"
    done
    grep -v 'OMP_NUM_THREADS\|^\*\*\*' "$TMP/out"
    [ $rc -eq 0 ] || { echo "FAIL: torchrun exited $rc"; exit 1; }
    [ "$(grep -c 'PASS rank' "$TMP/out")" -eq "$1" ] || { echo "FAIL: expected $1 PASS lines"; exit 1; } ;;
mpirun) # Open MPI's mpirun inside a Slurm allocation (SLURM_PROCID=0 in every rank)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun (apt-get install openmpi-bin)"; exit 77; }
    port=$(free_port)
    env -u RANK -u WORLD_SIZE -u GX_RANK -u GX_SIZE -u GX_MASTER_PORT timeout 100 \
        mpirun --allow-run-as-root --oversubscribe -np "$1" -x GX_LIBRARY -x PYTHONPATH \
        -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x SLURM_PROCID=0 -x SLURM_NTASKS=1 \
        $PY "$HERE/mpirun_check.py" >"$TMP/out" 2>&1
    rc=$?
    grep -v ' WARN ' "$TMP/out"
    [ $rc -eq 0 ] || { echo "FAIL: mpirun exited $rc"; exit 1; }
    [ "$(grep -c '^PASS rank' "$TMP/out")" -eq "$1" ] || { echo "FAIL: expected $1 PASS lines"; exit 1; } ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
