# perf_lib.sh - sourced by the perf scripts: what every one prints about its
# run, so a figure can be traced and retaken: the build's commit (with the
# count of uncommitted library files) and the load average before and after.
# Per-run figures beside their medians come from perf_stats.py.
#
#   perf_begin ROOT    prints "commit ...; load average before: ..." and sets
#                      PERF_COMMIT, PERF_LOAD_BEFORE
#   perf_end           prints "load average after: ..." and sets PERF_LOAD_AFTER
#   perf_commit ROOT   the commit line alone; perf_load the load average now
#   perf_record FILE TITLE CPU_EXTRA COMMAND RUNS_HEADING REPORT OUT
#                      writes a record: title and date, CPU (and CPU_EXTRA,
#                      e.g. "; torch 1.13"), the command, the commit and load
#                      lines (OUT.head's first and last), the report, then
#                      every run (OUT) under RUNS_HEADING

perf_load() { cut -d' ' -f1-3 /proc/loadavg; }

perf_commit() {
    local root=$1 c n
    c=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
    n=$(git -C "$root" status --porcelain -- collectives fabric common include topology gpudirect \
        tools 2>/dev/null | wc -l)
    [ "$n" -gt 0 ] && c="$c + $n uncommitted files in the library"
    echo "$c"
}

perf_begin() {
    PERF_COMMIT=$(perf_commit "$1")
    PERF_LOAD_BEFORE=$(perf_load)
    echo "commit $PERF_COMMIT; load average before: $PERF_LOAD_BEFORE"
}

perf_end() {
    PERF_LOAD_AFTER=$(perf_load)
    echo "load average after: $PERF_LOAD_AFTER"
}

perf_record() {
    local f=$1 title=$2 cpu_extra=$3 cmd=$4 heading=$5 report=$6 out=$7
    { echo "# $title ($(date +%Y-%m-%d))"; echo
      echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores$cpu_extra"
      echo "Command: $cmd"
      head -1 "$out.head"; echo
      echo "$report"; echo
      echo "Every run ($heading):"; echo; echo '```'; cat "$out"; echo '```'
      tail -1 "$out.head"; } >"$f"
    echo "recorded $f"
}
