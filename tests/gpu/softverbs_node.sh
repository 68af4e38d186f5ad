#!/bin/sh
# softverbs_node.sh PROGRAM [ARGS...] - run PROGRAM with SOFTVERBS_ADDR set to
# this network namespace's address on $GX_SOCKET_IFNAME: softverbs (the test
# verbs library, in RoCE mode: SOFTVERBS_LINK=roce) sends its emulated RoCE
# packets from that address, and each namespace "node" has its own. Used by
# gpu.netns.gdr.2+2.
addr=$(ip -4 -o addr show dev "${GX_SOCKET_IFNAME:?}" | awk '{ print $4 }' | cut -d/ -f1 | head -1)
[ -n "$addr" ] || { echo "softverbs_node.sh: no IPv4 address on $GX_SOCKET_IFNAME" >&2; exit 1; }
SOFTVERBS_ADDR=$addr exec "$@"
