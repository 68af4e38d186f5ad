#!/bin/sh
# fake_nodes.sh LAYOUT CMD... - run CMD as this rank (GX_RANK of GX_SIZE,
# set by gx-run) on a fake node, via GX_NODE_ID, so one host tests
# multi-node layouts (shm inside a fake node, the network between them).
#   LAYOUT  "2+1+3": node sizes, ranks in order (ranks 0-1 node0, 2 node1, ...)
#           "rr:N":  N nodes, rank r on node r mod N (a node's ranks are not
#                    consecutive communicator ranks)
set -eu
layout=$1
shift
: "${GX_RANK:?fake_nodes.sh runs under gx-run (GX_RANK unset)}"
case $layout in
rr:*)
    node=$((GX_RANK % ${layout#rr:}))
    ;;
*)
    node=0 first=0
    rest=$layout+
    while [ -n "$rest" ]; do
        size=${rest%%+*}
        rest=${rest#*+}
        if [ "$GX_RANK" -lt $((first + size)) ]; then
            break
        fi
        first=$((first + size))
        node=$((node + 1))
    done
    ;;
esac
GX_NODE_ID=hiernode$node
export GX_NODE_ID
exec "$@"
