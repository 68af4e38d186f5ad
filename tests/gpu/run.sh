#!/bin/bash
# tests/gpu/run.sh - the GPU test set against the real CUDA driver, on a
# machine with a GPU (one is enough: several processes share it).
#
#   tests/gpu/run.sh [BUILD_DIR]     (default /tmp/gx-gpu-run)
#
# 1. builds gx (CMake + Ninja, tests on) and, with nvcc, the CUDA program
#    tests/gpu/gpu_stream_kernel.cu (kernels + gx_allreduce_stream);
# 2. runs, with GX_CUDA_LIB unset (libcuda.so.1): gx-info's GPU list, the
#    gpudirect checks, every collective on device buffers (coll_check matrix
#    --device both|send|recv|stream) on 2 and 4 processes and on 2 GX_NODE_ID
#    "nodes", point-to-point and request forms, gx-perf --device for every
#    collective, DDP with device gradients, the kernel program on 2 and 4
#    processes; gx's CUDA reduction kernels (every op x dtype against the
#    CPU, their bandwidth, collectives with GX_GPU_REDUCE=gpu and =cpu);
#    CUDA IPC between two processes, the chunked staging pipeline
#    (GX_GPU_CHUNK), GX_GDR over tcp (auto stages, on refuses: GPUDirect
#    into a NIC needs an RDMA NIC, which this machine lacks);
#    the torch backend "gx" on CUDA tensors against NCCL (torch_cuda_check.py);
#    PyTorch's own distributed suite, gx against gloo, 2 ranks, time-boxed to
#    4 minutes (tests/torch/dist_suite.py; per-test results in
#    perf/results/torchsuite-<gpu>-<date>/; with fewer GPUs than ranks the
#    suite skips every test, so it then runs on the CPU);
#    NCCL's own all-reduce through gx's net plugin vs NCCL Socket
#    (nccl_plugin_check.py);
#    DDP with device buckets (gpu_ddp_device_check) and examples/ddp_mlp_cuda;
# 3. benchmarks device-buffer all-reduce (gx-perf --device, 1 MiB..256 MiB)
#    on 2 and 4 processes against torch.distributed + Gloo on CUDA tensors
#    when python3 has torch with CUDA, and gx with GX_GPU_CHUNK=0 (no
#    pipeline) for comparison;
# 4. NCCL for one-node device collectives against a real libnccl
#    (GX_NCCL_LIB, else PyTorch's bundled one, else libnccl.so.2):
#    gx-info's NCCL line, every collective and nccl_check on 1 process with
#    GX_NCCL=on (one GPU: NCCL refuses two ranks on one GPU), and on 2
#    processes with GX_NCCL=auto, where NCCL may refuse and every rank must
#    fall back to staging together (the checks above run with GX_NCCL=off);
# 5. writes everything to perf/results/gpu-<gpu>-<date>.txt (commit it).
# Exit: 0 all passed, 1 a check failed, 77 no GPU (the reason is printed).
# NVIDIA_SMI names the nvidia-smi to ask (default: the one on PATH).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-/tmp/gx-gpu-run}

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
nccl_lib=${GX_NCCL_LIB:-}
export GX_NCCL=off # the staging checks; the NCCL section sets its own
gpu_name=$(echo "$gpus" | head -1 | cut -d, -f1 | tr -c 'A-Za-z0-9\n' '-' | sed 's/--*/-/g;s/-$//')
stamp=$(date -u +%Y%m%d-%H%M)
mkdir -p "$src/perf/results"
report="$src/perf/results/gpu-$gpu_name-$stamp.txt"
exec > >(tee "$report") 2>&1
echo "# tests/gpu/run.sh $(date -u) on $(hostname)"
echo "# GPUs: $gpus"
echo "# gx $(git -C "$src" describe --always --dirty 2>/dev/null)"
echo "# load: $(cat /proc/loadavg)"

gen=(-G Ninja)
command -v ninja >/dev/null 2>&1 || gen=()
cmake -S "$src" -B "$build" "${gen[@]}" -DGX_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$build" -j "$(nproc)" >/dev/null || { echo "FAIL: build"; exit 1; }
bin=$build/bin
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
kernel=""
if [ -x "$nvcc" ]; then
    "$nvcc" -O2 -I"$src/include" -o "$build/gpu_stream_kernel" "$here/gpu_stream_kernel.cu" \
        -L"$build/lib" -lgx -Xlinker -rpath="$build/lib" && kernel="$build/gpu_stream_kernel" ||
        { echo "FAIL: nvcc could not build gpu_stream_kernel.cu"; exit 1; }
else
    echo "# no nvcc: the kernel program is not built"
fi

failed=0
run() { # NAME COMMAND...
    local name=$1
    shift
    local t0
    t0=$(date +%s.%N)
    if out=$("$@" 2>&1); then
        printf 'PASS %-34s %6.1fs\n' "$name" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')"
    else
        rc=$?
        if [ $rc = 77 ]; then
            printf 'SKIP %-34s %s\n' "$name" "$(echo "$out" | tail -1)"
        else
            printf 'FAIL %-34s exit %d\n' "$name" $rc
            echo "$out" | tail -20 | sed 's/^/    /'
            failed=1
        fi
    fi
}
gxrun() { "$bin/gx-run" --timeout 600 "$@"; }

echo "## gx-info"
"$bin/gx-info" | sed -n '/^GPUs/,/^$/p'
"$bin/gx-info" | grep -q '^GPUs (CUDA driver' || { echo "FAIL: gx-info finds no GPU"; failed=1; }

echo "## checks on device buffers (real driver)"
for t in query fault copy; do run "gpudirect $t" "$bin/gpu_mem_test" $t; done
for n in 2 4; do
    for m in both send recv stream; do
        run "matrix --device $m x$n" gxrun -n $n "$bin/coll_check" matrix --device $m \
            --large-dtypes float32,float16
    done
    run "p2p x$n" gxrun -n $n "$bin/gpu_calls_check" p2p
done
run "matrix --device both, 2 nodes x4" gxrun -n 4 sh -c \
    "GX_NODE_ID=node\$((GX_RANK * 2 / GX_SIZE)) exec $bin/coll_check matrix --device both"
run "nonblocking x2" gxrun -n 2 "$bin/gpu_calls_check" nonblocking
for n in 2 4; do run "ddp, device gradients x$n" gxrun -n $n "$bin/gpu_calls_check" ddp; done
# branch gdr: CUDA IPC between two processes; the chunked staging pipeline
# (the fake's copy-size hook is absent here: the engine's own counts are
# checked); GX_GDR over tcp (no RDMA NIC here: auto stages, on refuses).
run "cuda ipc, 2 processes" "$bin/gpu_ipc_test"
for c in 65536 1048576; do
    run "pipeline GX_GPU_CHUNK=$c x2" gxrun -n 2 env GX_PROVIDER=tcp "$bin/gpu_pipe_check" $c
done
run "pipeline mixed host/device x4" gxrun -n 4 env GX_PROVIDER=tcp "$bin/gpu_pipe_check" 1048576 mixed
run "pipeline 2 nodes x4" gxrun -n 4 sh -c \
    "GX_NODE_ID=node\$((GX_RANK * 2 / GX_SIZE)) exec $bin/gpu_pipe_check 1048576"
run "GX_GDR=auto over tcp x2" gxrun -n 2 env GX_GDR=auto GX_PROVIDER=tcp "$bin/gpu_gdr_check" move staged
run "GX_GDR=on over tcp refused x2" gxrun -n 2 env GX_GDR=on GX_PROVIDER=tcp "$bin/gpu_gdr_check" \
    refuse "through the tcp provider"

# branch plugs: DDP with gradient buckets in device memory, and the MLP
# example's CUDA variant (its weights must equal the single-process run)
for n in 2 4; do
    run "ddp, device buckets x$n" gxrun -n $n "$bin/gpu_ddp_device_check" auto
    [ -x "$bin/ddp_mlp_cuda" ] && run "ddp_mlp_cuda x$n" gxrun -n $n "$bin/ddp_mlp_cuda" --quiet
done
for c in all_reduce broadcast reduce all_gather reduce_scatter gather scatter alltoall; do
    run "gx-perf $c --device x2" gxrun -n 2 "$bin/gx-perf" $c --device -b 8 -e 16M -f 16 -c 1
done
if [ -n "$kernel" ]; then
    for n in 2 4; do run "kernels + allreduce_stream x$n" gxrun -n $n "$kernel" 4194304 20; done
fi

echo "## gx's CUDA reduction kernels (branch kernels)"
kline=$("$bin/gx-info" | grep '^CUDA reduction kernels')
echo "$kline"
if [ -x "$nvcc" ]; then
    echo "$kline" | grep -q 'built for sm_80,sm_90 (+PTX), loaded$' ||
        { echo "FAIL: gx-info: the kernels were built with nvcc but do not load"; failed=1; }
fi
run "kernels: fatbin has every kernel" "$bin/gpu_kernels_test" names
run "kernels: every op x dtype vs CPU" env GX_KERNELS_TEST_REAL=1 "$bin/gpu_kernels_test" ops
run "kernels: bad image named" "$bin/gpu_kernels_test" badimage
if kout=$("$bin/gpu_kernels_test" bench 2>&1); then
    echo "PASS kernels: bandwidth"
    echo "$kout" | sed 's/^/    /'
else
    echo "FAIL kernels: bandwidth"
    echo "$kout" | tail -5 | sed 's/^/    /'
    failed=1
fi
for n in 2 4; do
    for m in gpu cpu; do
        run "reduce steps GX_GPU_REDUCE=$m x$n" env GX_GPU_REDUCE=$m \
            "$bin/gx-run" --timeout 600 -n $n "$bin/gpu_reduce_coll" $m
    done
done


# branch plugs: the torch backend "gx" on CUDA tensors (stream forms) vs NCCL
echo "## torch.distributed backend gx, CUDA tensors"
run "torch backend gx, CUDA tensors x2" env PYTHONPATH="$src/python" \
    GX_LIBRARY="$build/lib/libgx.so" "$(command -v python3 || echo python3)" \
    "$here/torch_cuda_check.py" --nproc 2

# PyTorch's distributed_test.py as test_distributed_spawn.py runs it, gx
# against gloo (issue 30): a test that passes for gloo must pass for gx.
echo "## PyTorch's distributed suite, gx against gloo"
suite_dir="$src/perf/results/torchsuite-$gpu_name-$stamp"
run "torch suite gx vs gloo x2 (4 min box)" env PYTHONPATH="$src/python" \
    GX_LIBRARY="$build/lib/libgx.so" "$(command -v python3 || echo python3)" \
    "$src/tests/torch/dist_suite.py" --world-sizes 2 --time-box 240 --results "$suite_dir"
[ -f "$suite_dir/summary.md" ] && sed -n '1,/^## Skipped/p' "$suite_dir/summary.md" | sed 's/^/    /'

# NCCL itself through gx's net plugin (issue 17): two processes on the GPU
# with their own NCCL_HOSTID, torch.distributed NCCL all-reduce correct over
# the plugin, its INFO log naming it, busbw beside NCCL's Socket transport.
echo "## NCCL net plugin libnccl-net-gx.so under real NCCL"
if pout=$(env GX_SOCKET_IFNAME=lo "$(command -v python3 || echo python3)" \
        "$here/nccl_plugin_check.py" --plugin "$build/lib/libnccl-net-gx.so" --nproc 2 2>&1); then
    echo "PASS nccl net plugin x2 (vs NCCL Socket)"
else
    prc=$?
    [ $prc = 77 ] && echo "SKIP nccl net plugin: $(echo "$pout" | tail -1)" ||
        { echo "FAIL nccl net plugin x2 (exit $prc)"; failed=1; }
fi
echo "$pout" | grep -v '^BUSBW' | tail -30 | sed 's/^/    /'

echo "## benchmark: device-buffer all-reduce, float sum, busbw in GB/s"
py=$(command -v python3 || true)
echo "## NCCL for one-node device collectives"
if [ -z "$nccl_lib" ] && [ -n "$py" ]; then
    nccl_lib=$("$py" -c 'import glob, os, torch
d = os.path.dirname(torch.__file__)
c = glob.glob(os.path.join(d, "lib", "libnccl.so*"))
try:
    import nvidia.nccl
    for p in nvidia.nccl.__path__:
        c += glob.glob(os.path.join(p, "lib", "libnccl.so*"))
except ImportError:
    pass
c += glob.glob(os.path.join(os.path.dirname(d), "nvidia", "nccl", "lib", "libnccl.so*"))
print(sorted(c)[0] if c else "")' 2>/dev/null || true)
fi
nccl_lib=${nccl_lib:-libnccl.so.2}
echo "# GX_NCCL_LIB=$nccl_lib"
GX_NCCL=on GX_NCCL_LIB=$nccl_lib "$bin/gx-info" | grep '^NCCL'
if GX_NCCL=on GX_NCCL_LIB=$nccl_lib "$bin/gx-info" | grep -q 'used for intra-node device'; then
    run "nccl: 3 collectives x1 (GX_NCCL=on)" env GX_NCCL=on GX_NCCL_LIB="$nccl_lib" \
        "$bin/gx-run" --timeout 600 -n 1 "$bin/nccl_check" used
    run "nccl: matrix --device both x1" env GX_NCCL=on GX_NCCL_LIB="$nccl_lib" \
        "$bin/gx-run" --timeout 600 -n 1 "$bin/coll_check" matrix --device both \
        --large-dtypes float32,float16
    for n in 2 4; do
        run "nccl auto (or agreed staging) x$n" env GX_NCCL=auto GX_NCCL_LIB="$nccl_lib" \
            "$bin/gx-run" --timeout 600 -n $n "$bin/coll_check" matrix --device both \
            --large-dtypes float32
    done
else
    echo "FAIL: no usable NCCL at $nccl_lib (gx-info above says why)"
    failed=1
fi

echo "## benchmark: device-buffer all-reduce, float sum, busbw in GB/s"
have_torch=0
if [ -n "$py" ] && "$py" -c 'import torch, torch.distributed as d; assert torch.cuda.is_available() and d.is_gloo_available()' 2>/dev/null; then
    have_torch=1
else
    echo "### no python3 with CUDA torch and gloo: no Gloo comparison"
fi
for n in 2 4; do
    gx_csv="$build/bench-gx-$n.csv" gloo_csv="$build/bench-gloo-$n.csv"
    echo "### gx-perf all_reduce --device, $n processes on one GPU (CSV)"
    gxrun -n $n "$bin/gx-perf" all_reduce --device -b 1M -e 256M -f 4 -n 20 -w 5 -c 1 --csv \
        > "$gx_csv" || failed=1
    cat "$gx_csv"
    echo "### the same with GX_GPU_CHUNK=0 (one whole copy in and back: no pipeline; CSV)"
    GX_GPU_CHUNK=0 gxrun -n $n "$bin/gx-perf" all_reduce --device -b 1M -e 256M -f 4 -n 20 -w 5 \
        -c 1 --csv || failed=1
    [ $have_torch = 1 ] || continue
    echo "### torch.distributed gloo, CUDA tensors, $n processes (CSV)"
    "$py" "$src/perf/gloo_allreduce_bench.py" --cuda --nproc $n -b 1M -e 256M -f 4 -n 20 \
        -w 5 -c 1 --csv > "$gloo_csv" || failed=1
    cat "$gloo_csv"
    echo "### in-place busbw, gx vs Gloo, $n processes (goal: gx >= 2x Gloo at >= 1 MiB)"
    awk -F, 'FNR == 1 { next }
             $9 != "in-place" { next }
             FILENAME == ARGV[1] { gx[$4] = $12; next }
             { gl[$4] = $12 }
             END { for (s in gx) if (s in gl && gl[s] > 0)
                       printf "  %10d B  gx %8.3f  gloo %8.3f  ratio %5.2f%s\n", s, gx[s],
                              gl[s], gx[s] / gl[s], (gx[s] >= 2 * gl[s]) ? "" : "  (below 2x)" }' \
        "$gx_csv" "$gloo_csv" | sort -n
done
echo "### gx-perf all_reduce --device, 2 processes: reduce steps on the CPU vs the GPU (CSV)"
for d in float bfloat16; do
    for m in cpu gpu; do
        echo "# GX_GPU_REDUCE=$m, $d"
        GX_GPU_REDUCE=$m gxrun -n 2 "$bin/gx-perf" all_reduce --device -b 1M -e 256M -f 4 \
            -n 20 -w 5 -c 1 -d $d --csv || failed=1
    done
done
echo "## result: $([ $failed = 0 ] && echo all passed || echo FAILURES)"
echo "# report: $report"
exit $failed
