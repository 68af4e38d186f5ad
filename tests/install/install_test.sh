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
echo "ok: pkg-config and find_package(gx) consumers build and run"
