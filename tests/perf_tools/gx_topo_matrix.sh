#!/bin/sh
# gx_topo_matrix.sh GX_TOPO - "gx-topo -m" is accepted as "nvidia-smi topo -m"
# is used: the path matrix with its CPU/NUMA affinity columns and the legend,
# nothing else (test tools.gx-topo.matrix).
set -u
out=$(GX_DEBUG=none "$1" -m) || { echo "FAIL: gx-topo -m exited $?"; exit 1; }
echo "$out"
fails=0
echo "$out" | head -n 1 | grep -q 'CPU Affinity *NUMA Affinity' || { echo "FAIL: first line is not the matrix header"; fails=1; }
echo "$out" | grep -q '^Legend:' || { echo "FAIL: no legend"; fails=1; }
echo "$out" | grep -q '^  X    = Self' || { echo "FAIL: legend lacks X = Self"; fails=1; }
if echo "$out" | grep -q -e '^Placement of' -e '^Devices:' -e '^Topology:'; then
    echo "FAIL: -m printed more than the matrix"; fails=1
fi
"$1" --matrix >/dev/null 2>&1 || { echo "FAIL: --matrix not accepted"; fails=1; }
exit $fails
