#!/bin/sh
# The call rule (cmake/GxRooms.cmake, gx_rooms_check_calls) holds on the
# built collectives: nm shows no reference from a room to one it may not use.
# Then the fixture object (rooms_fixture/comm/planted_upward.c, compiled but
# never linked) joins the list as a file of comm/ calling the engine's
# gx_coll_comm_destroy, and the check must fail naming that call.
# usage: rooms_calls_test.sh <source tree> <objects list> <fixture object> <nm>
set -u
src=$1 list=$2 planted=$3 nm=$4
rules=$src/cmake/GxRooms.cmake
[ -s "$list" ] || { echo "FAIL: no object list at $list"; exit 1; }
cmake -DGX_ROOMS_OBJECTS="$list" -DGX_NM="$nm" -P "$rules" \
    || { echo "FAIL: the built collectives break a rooms call rule"; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
cat "$list" > "$tmp/objects.txt"
echo "$planted" >> "$tmp/objects.txt"
out=$(cmake -DGX_ROOMS_OBJECTS="$tmp/objects.txt" -DGX_NM="$nm" -P "$rules" 2>&1) \
    && { echo "FAIL: a planted upward call passed: $out"; exit 1; }
echo "$out" | tr -s "\n " "  " | grep -q "collectives/comm/planted_upward.c calls gx_coll_comm_destroy (collectives/engine/coll_engine.c): comm/ may not call engine/, a room above it" \
    || { echo "FAIL: the error does not name the planted call: $out"; exit 1; }
echo "rooms call rule holds on $(wc -l < "$list") objects, and caught the planted upward call"
