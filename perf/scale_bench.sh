#!/usr/bin/env bash
# scale_bench.sh - what a rank holds and how long init takes, from 8 to 256
# ranks on this machine (issue 29, docs/scale.md). One command:
#
#   perf/scale_bench.sh [-b BUILD_DIR] [-n "8 16 32 64 128 256"] [-m "shm tcp"]
#                       [-c "demand all"] [--record]
#
# For each mode, connection policy (GX_CONNECT) and N: one gx-run job of N
# ranks of scale_check (tests/collectives/transport/scale_check.c): init,
# a checked all-reduce at 8 B, 64 KiB and 1 MiB, then each rank's line of
# stats. Modes: shm = all ranks on one node (shm transport, node arena);
# tcp = every rank its own node (GX_NODE_ID=n<rank>: tcp between all,
# the issue's baseline). Per job it prints init time (slowest rank), the
# job's wall time, endpoints and file descriptors per rank (max and mean),
# RSS per rank (mean), bootstrap messages (total and the busiest rank),
# rank 0's bootstrap sockets. --record writes
# perf/results/<date>-scale.csv and .md, and PNG plots of each figure
# against N when python3-matplotlib is installed (perf/README.md).
#
# Oversubscribed as this machine must be (2 cores): run it on an idle
# machine; `uptime` is printed with every job. ulimit -n is raised for the
# launcher, which holds two pipes per rank.
set -u
cd "$(dirname "$0")/.."
build=build sizes="8 16 32 64 128 256" modes="shm tcp" policies="demand" record=0
while [ $# -gt 0 ]; do
    case $1 in
    -b) build=$2; shift ;;
    -n) sizes=$2; shift ;;
    -m) modes=$2; shift ;;
    -c) policies=$2; shift ;;
    --record) record=1 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scale_bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
run=$build/bin/gx-run check=$build/bin/scale_check
[ -x "$run" ] && [ -x "$check" ] || { echo "scale_bench.sh: build $build first (needs gx-run, scale_check)" >&2; exit 2; }
ulimit -n 65536 2>/dev/null || ulimit -n 4096 2>/dev/null || true
export GX_INIT_TIMEOUT=${GX_INIT_TIMEOUT:-1800} GX_TIMEOUT=${GX_TIMEOUT:-1800}
date=$(date +%Y-%m-%d)
csv=$(mktemp /tmp/gx-scale.XXXXXX.csv)
echo "mode,connect,ranks,init_ms_max,wall_s,endpoints_max,endpoints_mean,fds_max,fds_mean,rss_kb_mean,boot_msgs_total,boot_msgs_max,rank0_boot_sockets,load1" >"$csv"
printf '%-4s %-6s %5s %10s %8s %6s %7s %6s %7s %9s %9s %8s %6s %5s\n' mode conn ranks init_ms wall_s ep_max ep_mean fd_max fd_mean rss_kb bootmsgs boot_max r0sock load
for mode in $modes; do
for pol in $policies; do
for n in $sizes; do
    log=$(mktemp /tmp/gx-scale-job.XXXXXX)
    load=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    if [ "$mode" = shm ]; then
        GX_CONNECT=$pol "$run" -n "$n" --timeout 3000 "$check" --sizes 8,65536,1048576 >"$log" 2>&1
    else
        GX_CONNECT=$pol "$run" -n "$n" --timeout 3000 sh -c "GX_NODE_ID=n\$GX_RANK exec $check --sizes 8,65536,1048576" >"$log" 2>&1
    fi
    rc=$?
    wall=$(echo "$(date +%s.%N) - $t0" | bc)
    if [ $rc -ne 0 ] || [ "$(grep -c '^PASS rank' "$log")" -ne "$n" ]; then
        echo "$mode $pol $n: FAILED (status $rc); last lines:"; grep -v '^STATS\|^PASS' "$log" | tail -5
        echo "$mode,$pol,$n,,,,,,,,,,,$load" >>"$csv"
        rm -f "$log"; continue
    fi
    line=$(grep '^STATS' "$log" | awk -v mode="$mode" -v pol="$pol" -v n="$n" -v wall="$wall" -v load="$load" '
        { for (i = 2; i < NF; i += 2) v[$i] = $(i + 1)
          if (v["init_ms"] > im) im = v["init_ms"]
          if (v["endpoints"] > em) em = v["endpoints"]; es += v["endpoints"]
          if (v["fds"] > fm) fm = v["fds"]; fs += v["fds"]
          rs += v["rss_kb"]; bs += v["boot_msgs"]; if (v["boot_msgs"] > bm) bm = v["boot_msgs"]
          if (v["rank"] == 0) r0 = v["boot_sockets"]; c++ }
        END { printf "%s,%s,%d,%.0f,%.2f,%d,%.1f,%d,%.1f,%.0f,%d,%d,%d,%s\n", mode, pol, n, im, wall,
              em, es / c, fm, fs / c, rs / c, bs, bm, r0, load }')
    echo "$line" >>"$csv"
    echo "$line" | awk -F, '{ printf "%-4s %-6s %5d %10d %8.2f %6d %7.1f %6d %7.1f %9d %9d %8d %6d %5s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14 }'
    rm -f "$log"
done; done; done
if [ $record -eq 1 ]; then
    out=perf/results/$date-scale
    cp "$csv" "$out.csv"
    {
        echo "# Scale on this machine ($date)"
        echo
        echo "perf/scale_bench.sh -n \"$sizes\" -m \"$modes\" -c \"$policies\"; CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs."
        echo "One job per row; init_ms is the slowest rank's gx_comm_init; load is the 1-minute load average when the job started."
        echo
        echo '```'
        column -s, -t <"$csv"
        echo '```'
    } >"$out.md"
    py=/usr/bin/python3 # Debian's, where python3-matplotlib installs
    if $py -c 'import matplotlib' 2>/dev/null; then
        $py perf/scale_plot.py "$out.csv" "$out" && echo "plots: $out-*.png"
    else
        echo "no plots: python3-matplotlib is not installed (apt-get install python3-matplotlib)"
    fi
    echo "recorded $out.csv and $out.md"
fi
rm -f "$csv"
