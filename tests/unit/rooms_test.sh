#!/bin/sh
# The rooms include rule (cmake/GxRooms.cmake) holds on the source tree; it
# catches a wrong-way include planted in a copy, and a rule that would let
# a room use one above it (a possible circle) planted in a copy of the
# rules. The call rule, on the compiler's symbols, is unit.rooms-calls.
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
sed 's#gx_room_rule(comm MAY collectives/bootstrap/)#gx_room_rule(comm MAY collectives/bootstrap/ collectives/engine/)#' \
    "$rules" > "$tmp/rules.cmake"
grep -q "comm MAY collectives/bootstrap/ collectives/engine/" "$tmp/rules.cmake" \
    || { echo "FAIL: could not plant the upward rule (the comm rule changed?)"; exit 1; }
out=$(cmake -DGX_ROOMS_ROOT="$tmp" -P "$tmp/rules.cmake" 2>&1) && { echo "FAIL: a rule letting comm/ use engine/ passed"; exit 1; }
echo "$out" | tr -s "\n " "  " | grep -q "comm/ may use only rooms below it .* not engine/" \
    || { echo "FAIL: the error does not name the rooms: $out"; exit 1; }
echo "rooms include rule holds, and caught the planted include and the upward rule"
