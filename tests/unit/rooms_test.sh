#!/bin/sh
# The rooms rule (cmake/GxRooms.cmake) holds on the source tree, and it
# catches a wrong-way include and a forbidden call planted in a copy.
set -u
src=$1
rules=$src/cmake/GxRooms.cmake
cmake -DGX_ROOMS_ROOT="$src" -P "$rules" || { echo "FAIL: the source tree breaks a rooms rule"; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
cp -r "$src/collectives" "$tmp/"
echo '#include "collectives/transport/xport_internal.h"' >> "$tmp/collectives/algorithms/coll_ring.c"
out=$(cmake -DGX_ROOMS_ROOT="$tmp" -P "$rules" 2>&1) && { echo "FAIL: a planted wrong-way include passed"; exit 1; }
echo "$out" | tr -s "\n " "  " | grep -q "coll_ring.c includes collectives/transport/xport_internal.h" \
    || { echo "FAIL: the error does not name the file and the include: $out"; exit 1; }
rm -rf "$tmp/collectives" && cp -r "$src/collectives" "$tmp/"
echo 'static void planted(void) { xp_post_send(0); }' >> "$tmp/collectives/algorithms/coll_tree.c"
out=$(cmake -DGX_ROOMS_ROOT="$tmp" -P "$rules" 2>&1) && { echo "FAIL: a planted transport call passed"; exit 1; }
echo "$out" | tr -s "\n " "  " | grep -q "coll_tree.c calls" || { echo "FAIL: the error does not name the file: $out"; exit 1; }
echo "rooms rule holds, and caught both planted violations"
