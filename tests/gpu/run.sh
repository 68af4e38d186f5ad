#!/bin/bash
# tests/gpu/run.sh - gx against a real GPU and driver, in one short window
# (docs/gpu.md, "The GPU run"). One GPU is enough: several processes share it.
#
#   tests/gpu/run.sh [--build DIR] [--prebuilt DIR] [--commit SHA] [--only REGEX] [--fake]
#
#   --build DIR     where to build gx (default /tmp/gx-gpu-run)
#   --prebuilt DIR  a build made elsewhere (tests/gpu/prebuild.sh; default
#                   .gpu-prebuilt when it is there): used when the build here
#                   fails, or at once with --fake
#   --commit SHA    the commit under test when there is no .git (also $GPU_RUN_COMMIT)
#   --only REGEX    run only the steps whose names match (extended regex)
#   --fake          CI's dry run: no GPU; the fake libcuda and libnccl of the
#                   --prebuilt build stand in (FAKECUDA_*/FAKENCCL_* faults kept)
#
# Time: at most GPU_RUN_TOTAL_S (480) seconds in all, the build included
# (GPU_RUN_BUILD_S, 150); each step under its own limit, GPU_RUN_STEP_S (60)
# or GPU_RUN_PY_STEP_S (180) for the Python checks, cut to what is left. A
# step over its limit is killed with its whole process group and marked
# TIMEOUT; the script goes on. Steps run in order of value: gx-info, the
# gpudirect checks, the CUDA kernels, one collective matrix on 2 processes,
# the torch backend on CUDA tensors, NCCL through gx's net plugin, NCCL
# inside the node, the rest, benchmarks last (<= 64 MiB, 5 iterations,
# 2 processes, Gloo on CUDA tensors beside gx).
#
# Output under $OUT when set (the device tool brings back only that), else
# perf/results/gpu-<gpu>-<date>/: report.txt (one line per step, written as
# each ends, so a run cut short still tells what passed), steps.log (every
# step's output in order), steps.tar.gz (one log per step), build.log.
# Standard output carries the report lines and the tail of each failure.
# Exit: 0 all passed, 1 a step failed or timed out, 77 no GPU (said why).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=/tmp/gx-gpu-run prebuilt=${GPU_RUN_PREBUILT:-} commit=${GPU_RUN_COMMIT:-} only='' fake=0
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift ;;
    --prebuilt) prebuilt=$2; shift ;;
    --commit) commit=$2; shift ;;
    --only) only=$2; shift ;;
    --fake) fake=1 ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) [ -d "$1" ] || [ ! -e "$1" ] && build=$1 || { echo "run.sh: unknown argument $1" >&2; exit 2; } ;;
    esac
    shift
done
[ -z "$prebuilt" ] || prebuilt=$(cd "$prebuilt" && pwd) || exit 2
TOTAL_S=${GPU_RUN_TOTAL_S:-480} BUILD_S=${GPU_RUN_BUILD_S:-150}
STEP_S=${GPU_RUN_STEP_S:-60} PY_STEP_S=${GPU_RUN_PY_STEP_S:-180}
start=$(date +%s)
deadline=$((start + TOTAL_S))
reserve=10 # seconds kept for the summary

if [ $fake = 1 ]; then
    [ -n "$prebuilt" ] && [ -f "$prebuilt/lib/libfakecuda.so" ] ||
        { echo "run.sh: --fake needs --prebuilt BUILD with the fake libcuda (a test build)" >&2; exit 2; }
    gpus="fake GPU (tests/fakecuda), fake, 0000:00:00.0"
    export GX_CUDA_LIB=$prebuilt/lib/libfakecuda.so GX_NCCL_LIB=$prebuilt/lib/libfakenccl.so
else
    smi=${NVIDIA_SMI:-nvidia-smi} # the test of this script points it at nothing
    if ! command -v "$smi" >/dev/null 2>&1; then
        echo "tests/gpu/run.sh: SKIP: no $smi, so no NVIDIA driver on this machine"
        exit 77
    fi
    if ! gpus=$("$smi" --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader 2>&1) ||
        [ -z "$gpus" ]; then
        echo "tests/gpu/run.sh: SKIP: nvidia-smi finds no GPU: $gpus"
        exit 77
    fi
    unset GX_CUDA_LIB FAKECUDA_FAIL FAKENCCL_FAIL FAKENCCL_HANG FAKENCCL_ASYNC
fi
export GX_NCCL=off # the staging checks; the NCCL steps set their own
gpu_name=$(echo "$gpus" | head -1 | cut -d, -f1 | tr -c 'A-Za-z0-9\n' '-' | sed 's/--*/-/g;s/-$//')
stamp=$(date -u +%Y%m%d-%H%M)
out=${OUT:-$src/perf/results/gpu-$gpu_name-$stamp}
mkdir -p "$out" "$build" || { echo "run.sh: cannot create $out or $build" >&2; exit 2; }
logs=$build/step-logs.$stamp
rm -rf "$logs" && mkdir -p "$logs"
report=$out/report.txt steps=$out/steps.log
: >"$steps"
[ -n "$commit" ] || commit=$(git -C "$src" describe --always --dirty 2>/dev/null) ||
    commit="unknown (no .git here: pass --commit or GPU_RUN_COMMIT)"
say() { echo "$*" | tee -a "$report"; }
: >"$report"
say "# tests/gpu/run.sh $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
say "# GPUs: $gpus"
say "# gx $commit"
say "# load: $(cat /proc/loadavg); budget ${TOTAL_S} s (build ${BUILD_S} s, steps ${STEP_S} s, python ${PY_STEP_S} s)"

left() { echo $((deadline - $(date +%s))); }
failed=0 n=0

# step c|py NAME COMMAND...: run COMMAND in its own session under the step's
# limit (cut to the time left); a report line when it ends; its log appended
# to steps.log and steps.tar.gz.
step() {
    local kind=$1 name=$2
    shift 2
    n=$((n + 1))
    [ -z "$only" ] || [[ $name =~ $only ]] || return 0
    local lim=$STEP_S rem
    [ "$kind" = py ] && lim=$PY_STEP_S
    rem=$(($(left) - reserve))
    [ $rem -lt $lim ] && lim=$rem
    if [ $lim -lt 5 ]; then
        say "$(printf 'SKIP %-40s out of time (%d s of %d s left)' "$name" "$(left)" "$TOTAL_S")"
        return 0
    fi
    local id slug log t0 pid rc=0 cut=0 secs status
    id=$(printf '%02d' $n)
    slug=$(echo "$name" | tr -c 'A-Za-z0-9\n' '-' | sed 's/--*/-/g;s/-$//')
    log=$logs/$id-$slug.log
    t0=$(date +%s.%N)
    setsid "$@" >"$log" 2>&1 </dev/null &
    pid=$!
    while kill -0 $pid 2>/dev/null; do
        if awk -v a="$t0" -v b="$(date +%s.%N)" -v l="$lim" 'BEGIN { exit !(b - a >= l) }'; then
            cut=1
            kill -TERM -- -$pid 2>/dev/null
            for _ in $(seq 25); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
            kill -KILL -- -$pid 2>/dev/null
            break
        fi
        sleep 0.2
    done
    wait $pid 2>/dev/null
    rc=$?
    pkill -KILL -s $pid 2>/dev/null # anything of the session still left
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [ $cut = 1 ]; then status=TIMEOUT failed=1
    elif [ $rc = 0 ]; then status=PASS
    elif [ $rc = 77 ]; then status=SKIP
    else status=FAIL failed=1
    fi
    local why=""
    [ $status = SKIP ] && why="  $(tail -n 1 "$log")"
    [ $status = TIMEOUT ] && why="  cut at its limit"
    [ $status = FAIL ] && why="  exit $rc"
    say "$(printf '%-7s %-40s %6s s (limit %d s)%s' "$status" "$name" "$secs" "$lim" "$why")"
    { printf '\n==== %s %s: %s, exit %s, %s s, limit %s s\n' "$id" "$name" "$status" "$rc" "$secs" "$lim"
      cat "$log"; } >>"$steps"
    tar -C "$logs" -czf "$out/steps.tar.gz.part" . && mv "$out/steps.tar.gz.part" "$out/steps.tar.gz"
    if [ $status = FAIL ] || [ $status = TIMEOUT ]; then tail -n 15 "$log" | sed 's/^/    /'; fi
    return 0
}

# ---- the build (or the prebuilt one) -------------------------------------
bin='' lib=''
if [ $fake = 0 ]; then
    say "## build ($(nproc) cores, limit ${BUILD_S} s)"
    gen=(-G Ninja)
    command -v ninja >/dev/null 2>&1 || gen=()
    bstart=$(date +%s)
    if timeout -k 5 "$BUILD_S" bash -c "cmake -S '$src' -B '$build' ${gen[*]} -DGX_BUILD_TESTS=ON \
            -DCMAKE_BUILD_TYPE=Release && cmake --build '$build' -j $(nproc)" >"$out/build.log" 2>&1; then
        bin=$build/bin lib=$build/lib
        say "PASS    build                                    $(($(date +%s) - bstart)) s"
        grep -E '^-- +(verbs|dpdk|cuda|nccl|hwloc|mpi|torch)'$'\t' "$out/build.log" | sed 's/^-- */# /' | tee -a "$report"
    else
        say "FAIL    build                                    $(($(date +%s) - bstart)) s (build.log's tail below)"
        tail -n 30 "$out/build.log" | sed 's/^/    /'
        failed=1
    fi
fi
[ -n "$prebuilt" ] || { [ -x "$src/.gpu-prebuilt/bin/gx-info" ] && prebuilt=$src/.gpu-prebuilt; }
if [ -z "$bin" ] && [ -n "$prebuilt" ]; then
    if [ -x "$prebuilt/bin/gx-info" ]; then
        bin=$prebuilt/bin lib=$prebuilt/lib
        export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        say "# using the prebuilt gx in $prebuilt: $(head -n 1 "$prebuilt/PREBUILT" 2>/dev/null || echo "a build tree")"
    else
        say "FAIL    prebuilt build: no $prebuilt/bin/gx-info"
    fi
fi
if [ -z "$bin" ]; then
    say "## result: FAILURES (no build to test)"
    exit 1
fi
kernel=""
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$prebuilt/bin/gpu_stream_kernel" ] && [ "$bin" = "$prebuilt/bin" ]; then
    kernel=$prebuilt/bin/gpu_stream_kernel
elif [ $fake = 0 ] && [ -x "$nvcc" ]; then
    timeout 90 "$nvcc" -O2 -I"$src/include" -o "$build/gpu_stream_kernel" "$here/gpu_stream_kernel.cu" \
        -L"$lib" -lgx -Xlinker -rpath="$lib" >>"$out/build.log" 2>&1 && kernel=$build/gpu_stream_kernel ||
        say "FAIL    nvcc gpu_stream_kernel.cu (build.log)"
fi
py=${GPU_RUN_PYTHON:-$(command -v python3 || echo python3)} # the device's python3 holds torch
gxrun=("$bin/gx-run" --timeout 600) # the step's own limit comes first

# ---- 1-4: gx-info, gpudirect, kernels, one matrix -------------------------
say "## gx-info, gpudirect, kernels, one collective matrix"
step c "gx-info lists the GPU" sh -c "'$bin/gx-info' | sed -n '/^GPUs/,/^\$/p; /^CUDA reduction kernels/p; /^NCCL/p'; '$bin/gx-info' | grep -q '^GPUs (CUDA driver'"
for t in query fault copy; do step c "gpudirect $t" "$bin/gpu_mem_test" $t; done
step c "kernels: loaded (gx-info)" sh -c "'$bin/gx-info' | grep '^CUDA reduction kernels' | tee /dev/stderr | grep -q 'loaded\$'"
step c "kernels: fatbin has every kernel" "$bin/gpu_kernels_test" names
step c "kernels: every op x dtype vs CPU" env GX_KERNELS_TEST_REAL=1 "$bin/gpu_kernels_test" ops
step c "kernels: bad image named" "$bin/gpu_kernels_test" badimage
step c "matrix --device both x2" "${gxrun[@]}" -n 2 "$bin/coll_check" matrix --device both --large-dtypes float32,float16

# ---- 5-7: torch backend, NCCL net plugin, NCCL inside the node ------------
say "## torch backend gx on CUDA tensors; NCCL through gx's net plugin; NCCL inside the node"
step py "torch backend gx, CUDA tensors x2" env PYTHONPATH="$src/python" GX_LIBRARY="$lib/libgx.so" \
    "$py" "$here/torch_cuda_check.py" --nproc 2 --deadline $((PY_STEP_S - 20))
step py "nccl net plugin x2 (vs NCCL Socket)" env GX_SOCKET_IFNAME=lo "$py" "$here/nccl_plugin_check.py" \
    --plugin "$lib/libnccl-net-gx.so" --nproc 2 --iters 5 --max-mib 64 --deadline $((PY_STEP_S - 20))
nccl_lib=${GX_NCCL_LIB:-}
if [ -z "$nccl_lib" ]; then
    nccl_lib=$(timeout 30 "$py" -c 'import glob, os, torch
d = os.path.dirname(torch.__file__)
c = glob.glob(os.path.join(d, "lib", "libnccl.so*"))
c += glob.glob(os.path.join(os.path.dirname(d), "nvidia", "nccl", "lib", "libnccl.so*"))
print(sorted(c)[0] if c else "")' 2>/dev/null || true)
fi
nccl_lib=${nccl_lib:-libnccl.so.2}
say "# GX_NCCL_LIB=$nccl_lib"
step c "nccl: gx-info uses it" sh -c "GX_NCCL=on GX_NCCL_LIB='$nccl_lib' '$bin/gx-info' | grep '^NCCL' | tee /dev/stderr | grep -q 'used for intra-node device'"
step c "nccl: 3 collectives x1 (GX_NCCL=on)" env GX_NCCL=on GX_NCCL_LIB="$nccl_lib" \
    "$bin/gx-run" --timeout 600 -n 1 "$bin/nccl_check" used
step c "nccl: matrix --device both x1" env GX_NCCL=on GX_NCCL_LIB="$nccl_lib" \
    "$bin/gx-run" --timeout 600 -n 1 "$bin/coll_check" matrix --device both --large-dtypes float32
step c "nccl auto (or agreed staging) x2" env GX_NCCL=auto GX_NCCL_LIB="$nccl_lib" \
    "$bin/gx-run" --timeout 600 -n 2 "$bin/coll_check" matrix --device both --large-dtypes float32

# ---- 8: the rest ----------------------------------------------------------
say "## the rest: other buffer placements, p2p, DDP, IPC, pipeline, GPUDirect policy"
for m in send recv stream; do step c "matrix --device $m x2" "${gxrun[@]}" -n 2 "$bin/coll_check" matrix --device $m --large-dtypes float32; done
step c "p2p x2" "${gxrun[@]}" -n 2 "$bin/gpu_calls_check" p2p
step c "nonblocking x2" "${gxrun[@]}" -n 2 "$bin/gpu_calls_check" nonblocking
step c "ddp, device gradients x2" "${gxrun[@]}" -n 2 "$bin/gpu_calls_check" ddp
step c "ddp, device buckets x2" "${gxrun[@]}" -n 2 "$bin/gpu_ddp_device_check" auto
[ -x "$bin/ddp_mlp_cuda" ] && step c "ddp_mlp_cuda x2" "${gxrun[@]}" -n 2 "$bin/ddp_mlp_cuda" --quiet
step c "cuda ipc, 2 processes" "$bin/gpu_ipc_test"
step c "pipeline GX_GPU_CHUNK=1M x2" "${gxrun[@]}" -n 2 env GX_PROVIDER=tcp "$bin/gpu_pipe_check" 1048576
step c "pipeline 2 nodes x4" "${gxrun[@]}" -n 4 sh -c "GX_NODE_ID=node\$((GX_RANK * 2 / GX_SIZE)) exec '$bin/gpu_pipe_check' 1048576"
step c "GX_GDR=auto over tcp x2" "${gxrun[@]}" -n 2 env GX_GDR=auto GX_PROVIDER=tcp "$bin/gpu_gdr_check" move staged
step c "GX_GDR=on over tcp refused x2" "${gxrun[@]}" -n 2 env GX_GDR=on GX_PROVIDER=tcp "$bin/gpu_gdr_check" refuse "through the tcp provider"
[ -n "$kernel" ] && step c "kernels + allreduce_stream x2" "${gxrun[@]}" -n 2 "$kernel" 4194304 20
for m in gpu cpu; do step c "reduce steps GX_GPU_REDUCE=$m x2" env GX_GPU_REDUCE=$m "${gxrun[@]}" -n 2 "$bin/gpu_reduce_coll" $m; done
step c "gx-perf every collective --device x2" sh -c "for c in all_reduce broadcast reduce all_gather reduce_scatter gather scatter alltoall; do '$bin/gx-run' --timeout 600 -n 2 '$bin/gx-perf' \$c --device -b 8 -e 4M -f 16 -n 3 -w 1 -c 1 || exit 1; done"
step c "matrix --device both x4" "${gxrun[@]}" -n 4 "$bin/coll_check" matrix --device both --large-dtypes float32
step c "matrix --device both, 2 nodes x4" "${gxrun[@]}" -n 4 sh -c "GX_NODE_ID=node\$((GX_RANK * 2 / GX_SIZE)) exec '$bin/coll_check' matrix --device both"
# PyTorch's distributed suite as test_distributed_spawn.py runs it, gx against
# gloo on 2 ranks (issue 30; torch 2.x here): a test that passes for gloo must
# pass for gx. The box ends it inside the step; per-test results go into
# steps.tar.gz. With fewer GPUs than ranks the suite skips every test for every
# backend, so dist_suite.py hides the GPU and runs on the CPU (it says so).
step py "torch.distributed suite, gx vs gloo x2 (time-boxed)" env PYTHONPATH="$src/python" \
    GX_LIBRARY="$lib/libgx.so" "$py" "$src/tests/torch/dist_suite.py" --world-sizes 2 \
    --time-box $((PY_STEP_S - 30)) --results "$logs/torch-suite"

# ---- 9: benchmarks (last) -------------------------------------------------
say "## benchmarks: device-buffer all-reduce, float sum, 2 processes, 1-64 MiB, 5 iterations"
perf=(-b 1M -e 64M -f 4 -n 5 -w 2 -c 1 --csv)
step c "bench gx-perf all_reduce --device x2" "${gxrun[@]}" -n 2 "$bin/gx-perf" all_reduce --device "${perf[@]}"
step c "bench gx, GX_GPU_CHUNK=0 (no pipeline) x2" env GX_GPU_CHUNK=0 "$bin/gx-run" --timeout 600 -n 2 "$bin/gx-perf" all_reduce --device "${perf[@]}"
step py "bench torch gloo, CUDA tensors x2" sh -c "'$py' -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)' 2>/dev/null || { echo 'SKIP: no CUDA torch for $py'; exit 77; }; exec '$py' '$src/perf/gloo_allreduce_bench.py' --cuda --nproc 2 ${perf[*]}"
gxcsv=$(ls "$logs"/*-bench-gx-perf-all-reduce-device-x2.log 2>/dev/null | head -1)
glcsv=$(ls "$logs"/*-bench-torch-gloo-CUDA-tensors-x2.log 2>/dev/null | head -1)
if [ -s "$gxcsv" ] && [ -s "$glcsv" ]; then
    ratios=$(awk -F, '$9 != "in-place" || $4 !~ /^[0-9]+$/ { next }
             FILENAME == ARGV[1] { gx[$4] = $12; next }
             { gl[$4] = $12 }
             END { for (s in gx) if (s in gl && gl[s] > 0)
                       printf "  %10d B  gx %8.3f  gloo %8.3f  ratio %5.2f\n", s, gx[s], gl[s], gx[s] / gl[s] }' \
        "$gxcsv" "$glcsv" | sort -n)
    [ -z "$ratios" ] || { say "### in-place busbw (GB/s), gx vs Gloo, same run"; say "$ratios"; }
fi

say "## result: $([ $failed = 0 ] && echo all passed || echo FAILURES) in $(($(date +%s) - start)) s of ${TOTAL_S} s"
say "# output: $out (report.txt, steps.log, steps.tar.gz, build.log)"
exit $failed
