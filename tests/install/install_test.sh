#!/usr/bin/env bash
# Install gx into a prefix, then build a tiny out-of-tree program against it
# twice: with pkg-config and with find_package(gx). Both must run.
set -eu
BUILD=$1
SRC=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
export PKG_CONFIG_PATH="$TMP/prefix/lib/pkgconfig"
test -f "$TMP/prefix/include/gx/gx.h"
# Only gx_ symbols are exported.
bad=$(nm -D --defined-only "$TMP"/prefix/lib/libgx.so | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^gx_' || true)
[ -z "$bad" ] || { echo "FAIL: libgx.so exports non-gx symbols: $bad"; exit 1; }
readelf -d "$TMP"/prefix/lib/libgx.so | grep -q 'SONAME.*libgx.so.0' || { echo "FAIL: SONAME"; exit 1; }

cc "$SRC/hello_gx.c" $(pkg-config --cflags --libs gx) -Wl,-rpath,"$TMP/prefix/lib" -o "$TMP/hello_pc"
"$TMP/hello_pc" | grep -q "gx hello: rank 0 of 1" || { echo "FAIL: pkg-config build"; exit 1; }

mkdir "$TMP/cm"
cmake -S "$SRC/consumer" -B "$TMP/cm" -G Ninja -DCMAKE_PREFIX_PATH="$TMP/prefix" >/dev/null
cmake --build "$TMP/cm" >/dev/null
"$TMP/cm/hello_gx" | grep -q "gx hello: rank 0 of 1" || { echo "FAIL: find_package build"; exit 1; }

# Installed tools start from any prefix: RUNPATH $ORIGIN/../lib, checked by
# moving the prefix and running them with no library path.
for tool in gx-perf gx-info gx-run; do
    readelf -d "$TMP/prefix/bin/$tool" | grep -Eq '(RUNPATH|RPATH).*\$ORIGIN/\.\./lib' ||
        { echo "FAIL: $tool has no RUNPATH \$ORIGIN/../lib"; readelf -d "$TMP/prefix/bin/$tool" | grep -i path; exit 1; }
done
mv "$TMP/prefix" "$TMP/moved"
env -u LD_LIBRARY_PATH "$TMP/moved/bin/gx-perf" --help >/dev/null ||
    { echo "FAIL: gx-perf does not start from a moved prefix"; exit 1; }
env -u LD_LIBRARY_PATH "$TMP/moved/bin/gx-info" >/dev/null ||
    { echo "FAIL: gx-info does not start from a moved prefix"; exit 1; }
ldd "$TMP/moved/bin/gx-perf" | grep -q "$TMP/moved/bin/../lib/libgx.so" ||
    { echo "FAIL: gx-perf does not load the moved prefix's libgx"; ldd "$TMP/moved/bin/gx-perf"; exit 1; }
# The NCCL net plugin is installed beside libgx and exports only its tables.
plug="$TMP/moved/lib/libnccl-net-gx.so"
test -f "$plug" || { echo "FAIL: libnccl-net-gx.so is not installed"; exit 1; }
exported=$(nm -D --defined-only "$plug" | awk '$2 ~ /[TDBR]/ {print $3}' | sort | tr '\n' ' ')
[ "$exported" = "ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v8 ncclNetPlugin_v9 " ] ||
    { echo "FAIL: libnccl-net-gx.so exports: $exported"; exit 1; }
echo "ok: pkg-config and find_package(gx) consumers build and run; tools start from a moved prefix"
