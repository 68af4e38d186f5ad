#!/bin/bash
# hier_arena_used.sh RUNNER LAYOUT ARENA_RANKS PROGRAM [ARGS...] - run a job
# of hierarchical all-reduces with the coll trace and require that the ranks
# in ARENA_RANKS (comma list, or "none") ran every one's intra-node phases on
# the node arena (arena_node.c) and every other rank on the ring of
# messages: the test fails if the arena is silently not taken (or taken
# where it must not be).
#   RUNNER  netns:HIER_NETNS_SH (network-namespace nodes; 77 when they
#           cannot be made) or fake:GX_RUN:FAKE_NODES_SH (GX_NODE_ID nodes)
# ARENA_OFF_RANK=r: rank r alone runs with GX_HIER_ARENA=off (its node must
# then agree on the ring, the other nodes keep their arena).
set -u
runner=$1 layout=$2 want=$3
shift 3
if [ -n "${ARENA_OFF_RANK:-}" ]; then
    set -- sh -c 'if [ "$GX_RANK" = "$ARENA_OFF_RANK" ]; then export GX_HIER_ARENA=off; fi; exec "$@"' sh "$@"
fi
export GX_DEBUG=trace GX_DEBUG_SUBSYS=coll
log=$(mktemp /tmp/gxhierarena-used.XXXXXX)
trap 'rm -f "$log" "$log.out"' EXIT
n=0
IFS=+ read -r -a sizes <<<"$layout"
for s in "${sizes[@]}"; do n=$((n + s)); done
case $runner in
netns:*)
    HIER_LOG=$log bash "${runner#netns:}" "$layout" "$@" >"$log.out" 2>&1
    rc=$?
    cat "$log.out"
    [ $rc = 77 ] && exit 77
    ;;
fake:*)
    IFS=: read -r _ run fn <<<"$runner"
    "$run" -n $n --timeout 300 sh "$fn" "$layout" "$@" >"$log" 2>&1
    rc=$?
    grep -v ' TRACE ' "$log" | tail -5
    ;;
*) echo "FAIL: unknown runner $runner"; exit 1 ;;
esac
[ $rc = 0 ] || { echo "FAIL: the job failed ($rc)"; exit 1; }
for ((r = 0; r < n; r++)); do
    a=$(grep -c "\[$r\] .*hier intra-node engine arena" "$log")
    g=$(grep -c "\[$r\] .*hier intra-node engine ring" "$log")
    if [[ ",$want," == *",$r,"* ]]; then
        [ "$a" -gt 0 ] && [ "$g" = 0 ] || { echo "FAIL: rank $r: $a all-reduces on the node arena, $g on the ring (arena expected)"; exit 1; }
    else
        [ "$a" = 0 ] && [ "$g" -gt 0 ] || { echo "FAIL: rank $r: $a all-reduces on the node arena, $g on the ring (ring expected)"; exit 1; }
    fi
    echo "rank $r: $a hierarchical all-reduces on the node arena, $g on the ring"
done
echo "PASS: intra-node engine as expected on $layout (arena on ranks: $want)"
