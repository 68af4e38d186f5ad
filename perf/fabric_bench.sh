#!/usr/bin/env bash
# fabric_bench.sh - the fabric speed figures of issue 3, each ratio taken in
# the same run as its reference, medians over repeated runs:
#   shm bandwidth at 4 MiB        vs single-core memcpy of 4 MiB
#   shm one-way latency at 8 B    (goal <= 1 us)
#   tcp bandwidth at 4 MiB        vs a plain single TCP stream over loopback
# plus process_vm_readv (the copy shm uses) vs memcpy, which is why shm pulls
# with cross-memory attach rather than mapping peers' buffers.
#
# usage: perf/fabric_bench.sh [-r RUNS] [-b BUILD_DIR] [--record]
#   --record writes perf/results/<date>-fabric.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
runs=5
build=/tmp/gx-fabric-bench
record=0
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    --record) record=1; shift ;;
    *) echo "usage: $0 [-r RUNS] [-b BUILD_DIR] [--record]" >&2; exit 2 ;;
  esac
done

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGX_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target gx-bw >/dev/null
bw="$build/bin/gx-bw"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- reference programs ---------------------------------------------------
cat > "$tmp/copybench.c" <<'C'
/* memcpy and process_vm_readv bandwidth for one size, MiB/s, one core. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    size_t n = argc > 2 ? strtoull(argv[2], 0, 0) : 4 << 20;
    char *src, *dst;
    if (posix_memalign((void **)&src, 4096, n) || posix_memalign((void **)&dst, 4096, n)) return 1;
    memset(src, 1, n); memset(dst, 2, n);
    int cma = argc > 1 && strcmp(argv[1], "cma") == 0;
    pid_t pid = getpid();
    if (cma) {
        int p[2]; if (pipe(p)) return 1;
        pid = fork();
        if (pid == 0) { close(p[0]); if (write(p[1], "x", 1) != 1) _exit(1); pause(); _exit(0); }
        char c; if (read(p[0], &c, 1) != 1) return 1;  /* child has src mapped (fork copy) */
    }
    long iters = 0; double t0 = now(), t;
    do {
        for (int k = 0; k < 16; k++, iters++) {
            if (cma) { struct iovec l = { dst, n }, r = { src, n };
                       if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)n) { perror("cma"); return 1; } }
            else { memcpy(dst, src, n); __asm__ volatile("" ::: "memory"); }
        }
        t = now();
    } while (t - t0 < 0.5);
    if (cma) { kill(pid, SIGKILL); waitpid(pid, 0, 0); }
    printf("%.1f\n", (double)n * iters / (t - t0) / 1048576.0);
    return 0;
}
C
cat > "$tmp/tcpstream.c" <<'C'
/* A plain single TCP stream over loopback: 4 MiB writes for ~1 s, MiB/s at
 * the receiver (from its first to its last byte). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(void) {
    size_t n = 4 << 20; long total = 512;  /* 2 GiB */
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, (void *)&a, sizeof(a)) || listen(l, 1)) return 1;
    socklen_t al = sizeof(a); getsockname(l, (void *)&a, &al);
    char *buf = malloc(n); memset(buf, 3, n);
    if (fork() == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (void *)&a, sizeof(a))) _exit(1);
        for (long i = 0; i < total; i++)
            for (size_t off = 0; off < n;) { ssize_t w = write(s, buf + off, n - off); if (w <= 0) _exit(1); off += w; }
        close(s); _exit(0);
    }
    int s = accept(l, 0, 0); size_t got = 0; double t0 = 0;
    for (;;) { ssize_t r = read(s, buf, n); if (r <= 0) break; if (!got) t0 = now(); got += r; }
    double t = now(); wait(0);
    printf("%.1f\n", (double)got / (t - t0) / 1048576.0);
    return 0;
}
C
cc -O2 -o "$tmp/copybench" "$tmp/copybench.c"
cc -O2 -o "$tmp/tcpstream" "$tmp/tcpstream.c"

port=18700
gxbw() { # provider, args... -> JSON on stdout
  local prov=$1; shift
  port=$((port + 1))
  GX_SOCKET_IFNAME=lo "$bw" -p "$port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  GX_SOCKET_IFNAME=lo "$bw" --provider "$prov" --json -p "$port" "$@" 127.0.0.1
  wait "$spid"
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['$1'])"; }

source "$here/perf_lib.sh"
head=$(perf_begin "$root")
echo "$head"
: > "$tmp/rows"
for r in $(seq 1 "$runs"); do
  mc=$("$tmp/copybench" memcpy)
  cma=$("$tmp/copybench" cma)
  shm=$(gxbw shm -s 4M -n 500 | field bw_avg_mbs)
  lat=$(gxbw shm --lat -s 8 -n 20000 | field t_typical_us)
  stream=$("$tmp/tcpstream")
  tcp=$(gxbw tcp -s 4M -n 500 | field bw_avg_mbs)
  tlat=$(gxbw tcp --lat -s 8 -n 5000 | field t_typical_us)
  echo "$mc $cma $shm $lat $stream $tcp $tlat" | tee -a "$tmp/rows" >&2
done

report=$(python3 - "$tmp/rows" "$runs" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from perf_stats import cell, ratio_cell, ratios, median
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
col = lambda i: [r[i] for r in rows]
ratios_shm = median(ratios(col(2), col(0)))
ratios_tcp = median(ratios(col(5), col(4)))
def ok(b): return "met" if b else "NOT met"
print(f"runs: {sys.argv[2]}; each cell: the median, then every run's figure; each ratio is the "
      "median of the per-run ratios\n")
print("| figure | measured | reference (same run) | ratio | goal |")
print("|---|---|---|---|---|")
print(f"| shm write-with-imm BW, 4 MiB (MB/s) | {cell(col(2), 0)} | memcpy 4 MiB, one core: {cell(col(0), 0)} | {ratio_cell(col(2), col(0))} | >= 0.60: {ok(ratios_shm >= 0.6)} |")
print(f"| shm one-way latency, 8 B, t_typical (us) | {cell(col(3))} | - | - | <= 1 us: {ok(median(col(3)) <= 1.0)} |")
print(f"| tcp write-with-imm BW, 4 MiB, loopback (MB/s) | {cell(col(5), 0)} | plain TCP stream: {cell(col(4), 0)} | {ratio_cell(col(5), col(4))} | >= 0.80: {ok(ratios_tcp >= 0.8)} |")
print(f"| tcp one-way latency, 8 B, t_typical (us) | {cell(col(6))} | - | - | - |")
print(f"| process_vm_readv 4 MiB, shm's copy (MB/s) | {cell(col(1), 0)} | memcpy: {cell(col(0), 0)} | {ratio_cell(col(1), col(0))} | - |")
print("\nMB/s = 2^20 bytes per second, as perftest.")
PY
)
echo "$report"
tail=$(perf_end)
echo "$tail"
if [ "$record" = 1 ]; then
  out="$here/results/$(date +%Y-%m-%d)-fabric.md"
  {
    echo "# Fabric speed figures, $(date +%Y-%m-%d)"
    echo
    echo "CPU: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores"
    echo "Kernel: $(uname -r); $head (other work on the machine skews two-process figures)"
    echo "Command: perf/fabric_bench.sh -r $runs --record"
    echo
    echo "$report"
    echo
    echo "$tail"
    echo
    echo "Per-run rows (memcpy cma shm_bw shm_lat_us tcp_stream tcp_bw tcp_lat_us):"
    echo '```'
    cat "$tmp/rows"
    echo '```'
  } > "$out"
  echo "recorded in $out"
fi
