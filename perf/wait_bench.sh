#!/usr/bin/env bash
# wait_bench.sh - waits that yield against waits that spin (issue 29,
# docs/scale.md). One command:
#
#   perf/wait_bench.sh [-b BUILD_DIR] [-r RUNS] [-n ITERS] [-t "shm tcp"]
#       [--per-cpu "1 4"] [--hogs H] [--compute US] [--record]
#
# Two regimes on this machine's CPUs (nproc): one rank per CPU, and 4x
# oversubscribed (4 ranks per CPU). In each, gx-perf all_reduce at 8 B,
# 1 KiB and 128 KiB (-n ITERS, default 50, -w 5, -z 1), three waits in
# turn, RUNS times each (default 5), same run, interleaved: busy = GX_SPIN_US=-1
# GX_YIELD_WHEN_IDLE=0 (a busy poll that never gives up its CPU, as NCCL's
# and UCX's waits by default); nap = GX_SPIN_US=-1 (poll, yield and nap,
# never sleep: gx's waits before issue 29, Open MPI's mpi_yield_when_idle);
# default = neither set (poll 1000 us, then sleep on the provider's events).
# Transports: shm = one node, the shm transport (GX_COLL_SHM=off: the node
# arena polls memory and does not sleep); tcp = every rank its own node
# (GX_NODE_ID). Prints the median time per size and the ratios
# default/busy and default/nap (< 1: the default wins).
# --hogs H runs H busy loops beside the job for the whole run (the CPU a
# data loader or another job takes from the ranks), recorded apart
# (DATE-waits-hogsH.md). --compute US gives every rank US microseconds of
# its own CPU work before each all-reduce (gx-perf --compute_us, inside the
# time: a training step's compute; the job's own ranks then want the CPUs
# the waiting ones hold), recorded apart (DATE-waits-computeUS.md).
# --per-cpu "1" runs one regime only (ranks per CPU); with -n it records
# apart too (DATE-waits-ppc1-n2000-r31.md): more iterations per run steady the
# 30-300 us all-reduces of the one-rank-per-CPU regime.
set -u
cd "$(dirname "$0")/.."
build=build runs=5 iters=50 per_cpu="1 4" transports="shm tcp" record=0 hogs=0 compute=0
while [ $# -gt 0 ]; do
    case $1 in
    -b) build=$2; shift ;;
    -r) runs=$2; shift ;;
    -n) iters=$2; shift ;;
    --per-cpu) per_cpu=$2; shift ;;
    -t) transports=$2; shift ;;
    --hogs) hogs=$2; shift ;;
    --compute) compute=$2; shift ;;
    --record) record=1 ;;
    -h|--help) sed -n '2,/^set -u$/p' "$0" | sed '$d;s/^# \{0,1\}//'; exit 0 ;;
    *) echo "wait_bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
run=$build/bin/gx-run perf=$build/bin/gx-perf
[ -x "$run" ] && [ -x "$perf" ] || { echo "wait_bench.sh: build $build first" >&2; exit 2; }
case $hogs in *[!0-9]*|'') echo "wait_bench.sh: --hogs wants a count, got '$hogs'" >&2; exit 2 ;; esac
case $compute in *[!0-9]*|'') echo "wait_bench.sh: --compute wants microseconds, got '$compute'" >&2; exit 2 ;; esac
case $iters in *[!0-9]*|''|0) echo "wait_bench.sh: -n wants a count of iterations, got '$iters'" >&2; exit 2 ;; esac
for k in $per_cpu; do
    case $k in *[!0-9]*|0) echo "wait_bench.sh: --per-cpu wants counts of ranks per CPU, got '$per_cpu'" >&2; exit 2 ;; esac
done
[ -n "${per_cpu// /}" ] || { echo "wait_bench.sh: --per-cpu wants at least one count" >&2; exit 2; }
cpus=$(nproc)
out=$(mktemp /tmp/gx-wait.XXXXXX)
hog_pids=()
stop_hogs() { [ ${#hog_pids[@]} -eq 0 ] || kill "${hog_pids[@]}" 2>/dev/null; rm -f "$out"; }
trap stop_hogs EXIT
for _ in $(seq "$hogs"); do
    sh -c 'while :; do :; done' &
    hog_pids+=($!)
done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
one() { # transport ranks wait(busy|nap|default) -> "size time_us" lines
    local t=$1 n=$2 wait=$3
    local env=(-u GX_SPIN_US -u GX_YIELD_WHEN_IDLE) # own line: a `local`'s words expand first
    case $wait in
    busy) env+=(GX_SPIN_US=-1 GX_YIELD_WHEN_IDLE=0) ;;
    nap) env+=(GX_SPIN_US=-1) ;;
    esac
    [ "$t" = shm ] && env+=(GX_COLL_SHM=off)
    local cmd="$perf all_reduce -b 8 -e 128K -f 128 -n $iters -w 5 -z 1 -c 0 --compute_us $compute"
    if [ "$t" = tcp ]; then
        env "${env[@]}" "$run" -n "$n" --timeout 600 sh -c "GX_NODE_ID=n\$GX_RANK exec $cmd"
    else
        env "${env[@]}" "$run" -n "$n" --timeout 600 $cmd
    fi 2>/dev/null | awk '/^ *[0-9]+ +[0-9]+ +float/ { print $1, $6 }'
}
for t in $transports; do
    for k in $per_cpu; do
        n=$((k * cpus))
        for i in $(seq "$runs"); do
            for wait in busy nap default; do
                lines=$(one "$t" "$n" "$wait")
                if [ -z "$lines" ]; then # a failed job must not pass as a missing figure
                    echo "wait_bench.sh: $t, $n ranks, the $wait wait: gx-perf printed no figures" >&2
                    exit 1
                fi
                echo "$lines" | sed "s/^/$t $n $wait /" >>"$out"
            done
        done
    done
done
report=$(awk '
    { key = $1 " " $2 " " $4; v[key, $3, ++c[key, $3]] = $5; keys[key] = 1 }
    function med(key, s,   n, i, j, t, a) {
        n = c[key, s]; for (i = 1; i <= n; i++) a[i] = v[key, s, i]
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END { printf "%-4s %5s %8s %11s %11s %11s %8s %8s %5s\n", "tp", "ranks", "bytes", "busy_us",
                 "nap_us", "default_us", "def/busy", "def/nap", "runs"
          for (k in keys) { split(k, f, " "); mb = med(k, "busy"); mn = med(k, "nap"); md = med(k, "default")
              printf "%-4s %5d %8d %11.1f %11.1f %11.1f %8.3f %8.3f %5d\n", f[1], f[2], f[3], mb, mn,
                     md, md / mb, md / mn, c[k, "default"] } }' "$out" | sort -k1,1 -k2,2n -k3,3n)
echo "$report"
if [ $record -eq 1 ]; then
    f=perf/results/$(date +%Y-%m-%d)-waits$([ "$hogs" -eq 0 ] || echo "-hogs$hogs")$([ "$compute" -eq 0 ] || echo "-compute$compute")$([ "$per_cpu" = "1 4" ] || echo "-ppc${per_cpu// /-}")$([ "$iters" -eq 50 ] || echo "-n$iters")$([ "$runs" -eq 5 ] || echo "-r$runs").md
    { echo "# Waits that yield vs spin ($(date +%Y-%m-%d))"; echo
      echo "perf/wait_bench.sh -r $runs -n $iters --per-cpu \"$per_cpu\" -t \"$transports\"; $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')); medians of $runs same-run interleaved runs; time = gx-perf's out-of-place all_reduce time in us; busy = GX_SPIN_US=-1 GX_YIELD_WHEN_IDLE=0 (never gives up the CPU), nap = GX_SPIN_US=-1 (yields and naps, never sleeps: the waits before issue 29), default = poll 1000 us then sleep on events; ratios default/busy and default/nap (< 1: the default wins)."
      echo "busy loops beside the job: $hogs; CPU work per rank before each all-reduce: $compute us (inside the time); commit $(git rev-parse --short HEAD 2>/dev/null); load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
      echo; echo '```'; echo "$report"; echo '```'
      echo; echo "Every run (transport ranks wait bytes time_us):"
      echo; echo '```'; cat "$out"; echo '```'; } >"$f"
    echo "recorded $f"
fi
