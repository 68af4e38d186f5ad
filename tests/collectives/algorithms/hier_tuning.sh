#!/bin/sh
# hier_tuning.sh GX_INFO - gx-info --tuning shows the hierarchical all-reduce:
# its predicted time beside the flat ones, the ratio, the rails' algorithm,
# the choice; uneven nodes say they are generalised; one rank per node or
# one node says hier does not apply; GX_ALGO=hier is honoured only where it
# applies.
set -u
info=$1
fail() { echo "FAIL: $*"; exit 1; }
out=$(GX_ALGO=auto "$info" --tuning -n 8 --nodes 2) || fail "gx-info --tuning -n 8 --nodes 2"
echo "$out" | grep -q '^ *bytes .* hier  *rail  *choice' || fail "no hier and rail columns: $out"
echo "$out" | grep -q '^hier: 2 nodes x 4 ranks' || fail "no layout line: $out"
row=$(echo "$out" | grep '^ *16M ') || fail "no 16M row"
echo "$row" | grep -q ' hier (hier/flat 0\.[0-9]*)$' || fail "hier not chosen at 16M on 2x4: $row"
echo "$row" | grep -q '\*.*\*' && fail "two choices marked: $row"
out=$(GX_ALGO=auto "$info" --tuning -n 6 --nodes 4) || fail "gx-info --tuning -n 6 --nodes 4"
echo "$out" | grep -q '^hier: nodes of 2 and 1 ranks: uneven, generalised' ||
    fail "uneven nodes not reported as generalised: $out"
out=$(GX_ALGO=auto "$info" --tuning -n 4 --nodes 4) || fail "gx-info --tuning -n 4 --nodes 4"
echo "$out" | grep -q '^hier: not applicable (one rank per node' || fail "one rank per node: $out"
echo "$out" | grep ' hier' | grep -q 'choice' || fail "hier column missing"
echo "$out" | grep -q ' hier (' && fail "hier chosen with one rank per node: $out"
out=$(GX_ALGO=hier "$info" --tuning -n 4 --nodes 2) || fail "GX_ALGO=hier gx-info"
echo "$out" | grep '^ *4 ' | grep -q ' hier (GX_ALGO)' || fail "GX_ALGO=hier not shown: $out"
out=$(GX_ALGO=hier "$info" --tuning -n 4 --nodes 1) || fail "GX_ALGO=hier one node"
echo "$out" | grep -q ' hier (GX_ALGO)' && fail "GX_ALGO=hier honoured on one node: $out"
# The node's link as an input: shown, and a malformed one named and ignored.
out=$(GX_ALGO=auto GX_COLL_NODE_LINK=1:450 "$info" --tuning -n 64 --nodes 8 --link 2:50 2>&1) ||
    fail "GX_COLL_NODE_LINK=1:450 gx-info"
echo "$out" | grep -q '^inside a node: node (GX_COLL_NODE_LINK) alpha 1.0 us, 450.00 GB/s' ||
    fail "GX_COLL_NODE_LINK not shown: $out"
out=$(GX_COLL_NODE_LINK=fast "$info" --tuning -n 8 --nodes 2 2>&1) || fail "GX_COLL_NODE_LINK=fast gx-info"
echo "$out" | grep -q "GX_COLL_NODE_LINK: ignoring 'fast'" || fail "a bad GX_COLL_NODE_LINK not named: $out"
echo "$out" | grep -q '^inside a node: shm alpha 4.0 us, 3.00 GB/s' || fail "bad value not ignored: $out"
echo "PASS: gx-info --tuning shows hier vs flat and the choice"
