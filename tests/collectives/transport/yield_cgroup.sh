#!/bin/sh
# yield_cgroup.sh GX_RUN YIELD_CHECK - a job in a control group capped at
# one CPU (a container's --cpus 1) counts one CPU, not the machine's
# online ones (common/cpus.c): 2 ranks there are oversubscribed, the init
# log says why, and the waits yield (yield_check yields). Needs root and a
# cgroup v1 cpu hierarchy or a v2 one with the cpu controller; else 77.
set -u
run=$1 check=$2
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to make a control group"; exit 77; }
group=gx-yield-$$
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
    echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    dir=/sys/fs/cgroup/$group
    mkdir "$dir" 2>/dev/null && echo "100000 100000" >"$dir/cpu.max" 2>/dev/null ||
        { rmdir "$dir" 2>/dev/null; echo "SKIP: cannot make a v2 group with a CPU quota"; exit 77; }
elif [ -d /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    dir=/sys/fs/cgroup/cpu/$group
    mkdir "$dir" 2>/dev/null && echo 100000 >"$dir/cpu.cfs_period_us" 2>/dev/null &&
        echo 100000 >"$dir/cpu.cfs_quota_us" 2>/dev/null ||
        { rmdir "$dir" 2>/dev/null; echo "SKIP: cannot make a v1 cpu group with a quota"; exit 77; }
else
    echo "SKIP: no cgroup cpu controller here"; exit 77
fi
log=$(mktemp /tmp/gx-yield-cgroup.XXXXXX)
# LeakSanitizer's tracer dies of SIGSEGV at exit in a group whose quota
# throttles it (a program of one thread does not; 2 CPUs of quota or
# taskset to one CPU do not): leaks are looked for in every other test.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export ASAN_OPTIONS
sh -c "echo \$\$ >'$dir/cgroup.procs' && exec env GX_DEBUG=info GX_DEBUG_SUBSYS=init \
    GX_SPIN_US=-1 '$run' -n 2 --timeout 120 '$check' yields" >"$log" 2>&1
rc=$?
rmdir "$dir" 2>/dev/null || sleep 1; rmdir "$dir" 2>/dev/null
grep -E "rank 0:|PASS|FAIL|on this host" "$log"
want="2 rank(s) on this host, 1 CPU(s) (cgroup CPU quota 100000/100000 us): oversubscribed"
if [ $rc -ne 0 ]; then
    echo "FAIL: the job in a one-CPU group exited with $rc"; tail -20 "$log"; rm -f "$log"; exit 1
fi
if ! grep -qF "$want" "$log"; then
    echo "FAIL: the init log does not say: $want"; rm -f "$log"; exit 1
fi
rm -f "$log"
echo "PASS: one CPU counted in a group capped at one CPU, waits yield"
