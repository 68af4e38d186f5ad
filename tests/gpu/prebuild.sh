#!/bin/bash
# tests/gpu/prebuild.sh [OUTDIR] - build, here, what tests/gpu/run.sh runs,
# to carry to a GPU machine as the fallback for a build that fails there
# (default OUTDIR: .gpu-prebuilt in the repository root, which git ignores;
# the device tool's `carry` takes it, and run.sh uses it when its own build
# fails). Release, stripped, optional features that need libraries a GPU
# image may lack turned off (hwloc, dpdk), libcrypto linked statically where
# its archive allows, binaries finding libgx through $ORIGIN/../lib; the
# CUDA kernel program is compiled with nvcc when there is one. Also what
# run.sh --fake needs (the fake libcuda and libnccl). Prints the size.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
dst=${1:-$src/.gpu-prebuilt}
bld=$(mktemp -d /tmp/gx-prebuild.XXXXXX)
trap 'rm -rf "$bld"' EXIT
targets=(gx gx-info gx-run gx-perf coll_check gpu_mem_test gpu_kernels_test gpu_calls_check
         gpu_ddp_device_check gpu_ipc_test gpu_pipe_check gpu_gdr_check gpu_reduce_coll nccl_check
         nccl-net-gx fakecuda fakenccl)
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGX_BUILD_TESTS=ON -DGX_WITH_HWLOC=OFF
        -DGX_WITH_DPDK=OFF -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON)
if ! cmake -S "$src" -B "$bld" "${common[@]}" -DOPENSSL_USE_STATIC_LIBS=TRUE >"$bld.log" 2>&1 ||
    ! cmake --build "$bld" -j "$(nproc)" --target "${targets[@]}" >>"$bld.log" 2>&1; then
    echo "prebuild: a static libcrypto does not link here; using the shared one"
    rm -rf "$bld" && mkdir -p "$bld"
    cmake -S "$src" -B "$bld" "${common[@]}" >"$bld.log" 2>&1 &&
        cmake --build "$bld" -j "$(nproc)" --target "${targets[@]}" >>"$bld.log" 2>&1 ||
        { tail -n 30 "$bld.log"; echo "prebuild: FAILED (log $bld.log)"; exit 1; }
fi
cmake --build "$bld" --target ddp_mlp_cuda >>"$bld.log" 2>&1 || true # only with the CUDA toolkit
rm -rf "$dst" && mkdir -p "$dst/bin" "$dst/lib"
for f in "$bld"/bin/*; do [ -x "$f" ] && cp "$f" "$dst/bin/"; done
cp -a "$bld"/lib/libgx.so* "$bld"/lib/libnccl-net-gx.so "$bld"/lib/libfakecuda.so "$bld"/lib/libfakenccl.so "$dst/lib/"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc" ]; then
    "$nvcc" -O2 -I"$src/include" -o "$dst/bin/gpu_stream_kernel" "$src/tests/gpu/gpu_stream_kernel.cu" \
        -L"$dst/lib" -lgx -Xlinker -rpath='$ORIGIN/../lib' >>"$bld.log" 2>&1 ||
        echo "prebuild: nvcc could not build gpu_stream_kernel.cu (run.sh goes without it)"
fi
strip --strip-unneeded "$dst"/bin/* "$dst"/lib/*.so* 2>/dev/null || true
crypto=$(ldd "$dst/lib/libgx.so" | grep -c libcrypto || true)
{ echo "gx $(git -C "$src" describe --always --dirty 2>/dev/null || echo unknown), built $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release; echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | awk '{print $NF}')"
  echo "libcrypto: $([ "$crypto" = 0 ] && echo static || echo shared)"
  grep -E '^-- +(verbs|dpdk|cuda|nccl|hwloc)'$'\t' "$bld.log" | sed 's/^-- */  /'; } >"$dst/PREBUILT"
rm -f "$bld.log"
cat "$dst/PREBUILT"
echo "prebuild: $(du -sh "$dst" | cut -f1) in $dst"
