#!/usr/bin/env bash
# gx_torch installed the two ways docs/pytorch.md gives, then used with no
# GX_LIBRARY, no PYTHONPATH into the source tree and no LD_LIBRARY_PATH:
#  1. cmake --install into a prefix: the module lands beside libgx
#     (lib/python3.N/dist-packages/gx_torch) and loads that prefix's libgx;
#     a 2-rank job uses the backend "gx" from there;
#  2. pip install ./python (into a target directory, offline): the module
#     imports and registers "gx"; libgx from the prefix's lib/ via the loader.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
BUILD=$1 SRC=$2
PY=/usr/bin/python3
$PY -c 'import torch.distributed' 2>/dev/null ||
    { echo "SKIP: python3-torch is not installed for $PY"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset GX_LIBRARY PYTHONPATH LD_LIBRARY_PATH
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
pkg=$(echo "$TMP"/prefix/lib/python3*/dist-packages/gx_torch)
[ -f "$pkg/backend.py" ] || fail "cmake --install put no gx_torch under $TMP/prefix/lib"
cd "$TMP"  # not the source tree: its python/ must not be what gets imported
got=$(PYTHONPATH="$(dirname "$pkg")" $PY -c '
import gx_torch, torch.distributed as dist
gx_torch.load_library()
print(gx_torch.__file__, gx_torch.library_path(), "GX" in dist.Backend._plugins)')
echo "cmake --install: $got"
case "$got" in
"$pkg/__init__.py $TMP/prefix/lib/libgx.so.0 True") ;;
*) fail "expected the installed module to load $TMP/prefix/lib/libgx.so.0" ;;
esac
cat >"$TMP/job.py" <<'PYEOF'
import os, torch, torch.distributed as dist, gx_torch
dist.init_process_group("gx")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert torch.equal(t, torch.full((4,), 3.0)), t
os.write(1, f"PASS rank {dist.get_rank()} libgx from {gx_torch.library_path()}\n".encode())
PYEOF
PYTHONPATH="$(dirname "$pkg")" "$BUILD/bin/gx-run" -n 2 --timeout 60 $PY "$TMP/job.py" >"$TMP/job.out" 2>&1 ||
    { cat "$TMP/job.out"; fail "2-rank job with the installed module"; }
[ "$(grep -c "^PASS rank .* libgx from $TMP/prefix/lib/" "$TMP/job.out")" -eq 2 ] ||
    { cat "$TMP/job.out"; fail "expected 2 PASS lines using the installed libgx"; }

cp -r "$SRC/python" "$TMP/src"  # pip builds in the tree it is given
$PY -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$TMP/pip" \
    "$TMP/src" >"$TMP/pip.out" 2>&1 || { cat "$TMP/pip.out"; fail "pip install ./python"; }
got=$(LD_LIBRARY_PATH="$TMP/prefix/lib" PYTHONPATH="$TMP/pip" $PY -c '
import gx_torch, torch.distributed as dist
gx_torch.load_library()
print(gx_torch.__file__, gx_torch.library_path(), "GX" in dist.Backend._plugins)')
echo "pip install: $got"
case "$got" in
"$TMP/pip/gx_torch/__init__.py libgx.so.0 True") ;;
*) fail "pip-installed gx_torch did not load libgx.so.0 from the loader path" ;;
esac
echo "ok: gx_torch from cmake --install and from pip install ./python finds libgx unaided"
