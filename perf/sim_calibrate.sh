#!/usr/bin/env bash
# sim_calibrate.sh - gx-sim's predictions against what this machine
# measures (issue 29 item 5, docs/scale.md "Calibration").
#
#   perf/sim_calibrate.sh [-b BUILD] [--rate 100mbit] [--layouts "2+2 4+4 ..."]
#       [--algos "ring tree rhd hier"] [--sizes "1M 4M 16M 64M"] [--cycles 3]
#       [--check PCT] [--record FILE]
#
# Measured: network-namespace "nodes" (tests/collectives/algorithms/
# hier_netns.sh: a namespace per node with its ranks, GX_NODE_ID per node,
# one veth per node to a bridge), each node's link capped at RATE each way
# with tc tbf (TBF_RATE), so the cap and not the 2 CPUs bounds what crosses
# nodes; gx-perf all_reduce with GX_ALGO=ALGO (hier: GX_HIER_RAIL=ring), -n 1
# -w 0 -N CYCLES, so every size has 2 x CYCLES runs (out-of-place and
# in-place rows; the first run of the first size carries the connections'
# set-up). Every run is printed; the figure is their median.
# Predicted: gx-sim --layout L --nics-per-node 1 on the same machine in
# SimGrid's terms (the numbers are below, SIM_ARGS): the NIC at RATE times
# the payload share of a 1514-byte frame (1448 bytes: tbf counts the
# Ethernet, IP and TCP headers), the node's inside at the shm transport's
# rate, reductions at the cost model's 4 GB/s (12 GB/s of memory traffic),
# the tcp provider's per-message cost and a veth hop's latency.
# Prints per case the measured and predicted busbw and predicted/measured;
# --check PCT exits 1 when any case is off by more than PCT percent (the
# ctest tools.gx-sim.calibrate: 25). Each case waits up to LOCK_WAIT seconds
# (default 120) for /tmp/gx-idle.lock exclusively and runs beside the
# others' jobs when it cannot get it: the table says which. Layout names: 2x2 = 2+2, 2x4 = 4+4
# (2 nodes of 4 ranks), 4x2 = 2+2+2+2, uneven 3+1+2.
# Needs root, iproute2, tc and a gx-sim build; exits 77 saying why without.
set -u
cd "$(dirname "$0")/.."
root=$PWD
build=build rate=100mbit layouts="2+2 4+4 2+2+2+2 3+1+2" algos="ring tree rhd hier"
sizes="1M 4M 16M 64M" cycles=3 check="" record=""
while [ $# -gt 0 ]; do
    case $1 in
    -b) build=$2; shift ;;
    --rate) rate=$2; shift ;;
    --layouts) layouts=$2; shift ;;
    --algos) algos=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --cycles) cycles=$2; shift ;;
    --check) check=$2; shift ;;
    --record) record=$2; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sim_calibrate.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
build=$(cd "$build" 2>/dev/null && pwd) || { echo "sim_calibrate.sh: -b: no build folder" >&2; exit 2; }
sim=$build/bin/gx-sim perf=$build/bin/gx-perf
netns=$root/tests/collectives/algorithms/hier_netns.sh
[ -x "$perf" ] || { echo "sim_calibrate.sh: $perf missing: build first" >&2; exit 2; }
[ -x "$sim" ] || { echo "SKIP: gx-sim was not built (no libsimgrid-dev at configure time)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v tc >/dev/null 2>&1 || { echo "SKIP: tc (iproute2) not installed"; exit 77; }
case $cycles in ''|*[!0-9]*|0) echo "sim_calibrate.sh: --cycles '$cycles': a count >= 1" >&2; exit 2 ;; esac
case $check in ''|[0-9]|[0-9][0-9]|[0-9][0-9][0-9]) ;; *) echo "sim_calibrate.sh: --check '$check': a percentage" >&2; exit 2 ;; esac
# RATE in bits/s (tc's units: kbit, mbit, gbit).
rate_bits=$(awk -v r="$rate" 'BEGIN { v = r + 0; u = tolower(substr(r, length(v "") + 1));
    m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : u == "bit" ? 1 : 0;
    if (v <= 0 || m == 0) exit 1; print v * m }') ||
    { echo "sim_calibrate.sh: --rate '$rate': a tc rate such as 200mbit" >&2; exit 2; }

# The machine in gx-sim's terms. nic: goodput of a 1514-byte frame; the
# inside of a node: the shm transport (3 GB/s, 4 us: coll_link_shm); memory:
# reductions at 4 GB/s of reduced bytes = 12 GB/s of traffic; per message
# MSG_US of the tcp provider's engine; NIC_LAT_US one way through two veths
# and the bridge (tbf's queue adds its own, which the bandwidth covers).
MSG_US=${MSG_US:-30} NIC_LAT_US=${NIC_LAT_US:-60}
nic_gbps=$(awk -v b="$rate_bits" 'BEGIN { printf "%.6g", b * 1448 / 1514 / 1e9 }')
SIM_ARGS="--nics-per-node 1 --nodes-per-leaf 64 --nic-gbps $nic_gbps --nic-lat-us $NIC_LAT_US \
--nvlink-gbps 24 --nvlink-lat-us 4 --mem-GBps 12 --msg-us $MSG_US"

bytes_of() { awk -v s="$1" 'BEGIN { v = s + 0; u = substr(s, length(v "") + 1);
    m = u == "K" ? 1024 : u == "M" ? 1048576 : u == "G" ? 1073741824 : 1; printf "%d", v * m }'; }
size_list=() sim_sizes=""
for s in $sizes; do
    b=$(bytes_of "$s")
    [ "$b" -ge 1024 ] || { echo "sim_calibrate.sh: --sizes '$s': at least 1K" >&2; exit 2; }
    size_list+=("$b")
    sim_sizes="$sim_sizes${sim_sizes:+,}$b"
done
lo=${size_list[0]} hi=${size_list[${#size_list[@]} - 1]}

tmp=$(mktemp -d /tmp/gx-simcal.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
source "$root/perf/perf_lib.sh"
out=$tmp/report
{
    echo "# sim_calibrate.sh: netns nodes at $rate each way against gx-sim"
    echo
    perf_begin "$root"
    echo "host: $(nproc) CPUs; measured: gx-perf all_reduce -n 1 -w 0 -N $cycles (2 x $cycles runs a size)"
    echo "gx-sim $SIM_ARGS"
    echo
} | tee "$out"

worst=0 bad=0 ncase=0
results=$tmp/rows
for layout in $layouts; do
    nranks=$(awk -v l="$layout" 'BEGIN { n = split(l, a, "+"); s = 0; for (i = 1; i <= n; i++) s += a[i]; print s }')
    for algo in $algos; do
        simalgo=$algo env=(GX_ALGO="$algo")
        [ "$algo" = hier ] && simalgo=hier/ring env+=(GX_HIER_RAIL=ring)
        log=$tmp/run.$layout.$algo
        # One job per case; the exclusive lock keeps other benchmarks out.
        locked=locked
        flock -x -w "${LOCK_WAIT:-120}" /tmp/gx-idle.lock true || locked=unlocked
        lockcmd=(flock -x -w "${LOCK_WAIT:-120}" /tmp/gx-idle.lock)
        [ $locked = locked ] || lockcmd=()
        "${lockcmd[@]}" env "${env[@]}" TBF_RATE="$rate" RANK_TIMEOUT=900 \
            HIER_LOG="$log" bash "$netns" "$layout" "$perf" all_reduce -b "$lo" -e "$hi" -f 4 \
            -n 1 -w 0 -N "$cycles" -c 0 --csv --no-progress >"$tmp/job" 2>&1
        rc=$?
        if [ $rc = 77 ]; then
            grep SKIP "$tmp/job"
            exit 77
        fi
        if [ $rc != 0 ]; then
            echo "FAIL: $layout $algo: the netns job failed (exit $rc):"
            tail -20 "$tmp/job"
            exit 1
        fi
        # shellcheck disable=SC2086
        pred=$("$sim" --layout "$layout" $SIM_ARGS --algo "$simalgo" --sizes "$sim_sizes") ||
            { echo "FAIL: gx-sim --layout $layout --algo $simalgo failed"; exit 1; }
        for b in "${size_list[@]}"; do
            runs=$(awk -F, -v b="$b" '$1 == "all_reduce" && $4 == b { printf "%s ", $12 }' "$log")
            [ -n "$runs" ] || { echo "FAIL: $layout $algo: no gx-perf row for $b bytes"; exit 1; }
            med=$(printf '%s\n' $runs | sort -g | awk '{ v[NR] = $1 } END {
                print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
            t=$(printf '%s\n' "$pred" | awk -v b="$b" '!/^#/ && $1 == b { print $7 }')
            [ -n "$t" ] || { echo "FAIL: gx-sim gave no time for $layout $simalgo $b"; exit 1; }
            # busbw = S / t * 2 (n-1)/n, as gx-perf's
            pb=$(awk -v s="$b" -v t="$t" -v n="$nranks" 'BEGIN { printf "%.5f", s / (t * 1e-6) / 1e9 * 2 * (n - 1) / n }')
            ratio=$(awk -v p="$pb" -v m="$med" 'BEGIN { printf "%.3f", p / m }')
            printf '%s %s %s %.5f %s %s %s %s %s\n' "$layout" "$algo" "$b" "$med" "$pb" "$ratio" \
                "$locked" "$(perf_load | cut -d' ' -f1)" "$runs" >>"$results"
            ncase=$((ncase + 1))
            off=$(awk -v r="$ratio" 'BEGIN { d = r - 1; if (d < 0) d = -d; printf "%.1f", d * 100 }')
            worst=$(awk -v a="$worst" -v b="$off" 'BEGIN { print (b > a ? b : a) }')
            if [ -n "$check" ] && awk -v o="$off" -v c="$check" 'BEGIN { exit !(o > c) }'; then
                bad=$((bad + 1))
            fi
        done
    done
done
{
    echo "| layout | algo | size | measured busbw (GB/s, median) | gx-sim busbw (GB/s) | predicted / measured | lock, load after | runs (busbw, GB/s) |"
    echo "|---|---|---|---|---|---|---|---|"
    awk '{ s = $3 >= 1048576 ? $3 / 1048576 " MiB" : $3 / 1024 " KiB";
           r = ""; for (i = 9; i <= NF; i++) r = r (i > 9 ? " " : "") sprintf("%.4f", $i);
           printf "| %s | %s | %s | %.4f | %.4f | %s | %s, %s | %s |\n", $1, $2, s, $4, $5, $6, $7, $8, r }' "$results"
    echo
    echo "$ncase cases; the worst is $worst % off"
    perf_end
} | tee -a "$out"
if [ -n "$record" ]; then
    cp "$out" "$record"
    echo "recorded in $record"
fi
if [ -n "$check" ]; then
    [ "$bad" = 0 ] || { echo "FAIL: $bad of $ncase cases more than $check % off"; exit 1; }
    echo "PASS: all $ncase cases within $check %"
fi
exit 0
