#!/usr/bin/env bash
# window_bench.sh - what the rendezvous write window costs where nothing
# waits behind bulk data: 2 tcp ranks on loopback (every rank its own node),
# gx-perf all_reduce 1, 4, 16 and 64 MiB (-n 10 -w 2), alternating the
# default (GX_WRITE_WINDOW 256 KiB on tcp) with the window and the lowat
# off (GX_WRITE_WINDOW=0 GX_TCP_NOTSENT_LOWAT=0), RUNS times each (default
# 5). Prints every run's busbw, the medians and the ratio window/off (> 1:
# the window is faster).
#
#   perf/window_bench.sh [-b BUILD] [-r RUNS] [-n RANKS] [--algo A]
#       [--off "VAR=VALUE ..."] [--off-build DIR] [--name NAME] [--record]
#
# The same A/B for another transport setting: --off gives the environment
# of the "off" variant instead (e.g. --off GX_RTS_AHEAD=0 --name rts-ahead;
# "" for none), --off-build runs the "off" variant from another build (an
# older commit's), -n the ranks (default 2), --algo sets GX_ALGO for both;
# --name names the record (DATE-NAME.md, default write-window).
set -u
cd "$(dirname "$0")/.."
. perf/perf_lib.sh
build=build runs=5 record=0 ranks=2 algo="" name=write-window off_build=
off_env="GX_WRITE_WINDOW=0 GX_TCP_NOTSENT_LOWAT=0"
while [ $# -gt 0 ]; do
    case $1 in
    -b) build=$2; shift ;;
    -r) runs=$2; shift ;;
    -n) ranks=$2; shift ;;
    --algo) algo=$2; shift ;;
    --off) off_env=$2; shift ;;
    --off-build) off_build=$2; shift ;;
    --name) name=$2; shift ;;
    --record) record=1 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "window_bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$build/bin/gx-perf" ] || { echo "window_bench.sh: build $build first" >&2; exit 2; }
off_given=$off_build off_build=${off_build:-$build}
[ -x "$off_build/bin/gx-perf" ] || { echo "window_bench.sh: --off-build: no $off_build/bin/gx-perf" >&2; exit 2; }
case $ranks in ''|*[!0-9]*|0|1) echo "window_bench.sh: -n '$ranks': at least 2 ranks" >&2; exit 2 ;; esac
algo_env=()
[ -n "$algo" ] && algo_env=(GX_ALGO="$algo")
out=$(mktemp /tmp/gx-window.XXXXXX)
trap 'rm -f "$out" "$out.head"' EXIT
one() { # variant build env...
    local v=$1 b=$2; shift 2
    env "${algo_env[@]}" "$@" GX_PROVIDER=tcp "$b/bin/gx-run" -n "$ranks" sh -c 'GX_NODE_ID=n$GX_RANK exec "$0" "$@"' \
        "$b/bin/gx-perf" all_reduce -b 1M -e 64M -f 4 -n 10 -w 2 -c 0 --csv --no-progress 2>/dev/null |
        awk -F, -v v="$v" '$1 == "all_reduce" && $9 == "in-place" { print v, $4, $12 }'
}
perf_begin "$PWD" | tee "$out.head"
for ((r = 1; r <= runs; r++)); do
    one window "$build" >>"$out"
    # shellcheck disable=SC2086
    one off "$off_build" $off_env >>"$out"
done
report=$(awk '{ k = $1 " " $2; n[k]++; v[k, n[k]] = $3; runs[k] = runs[k] " " $3; sizes[$2] = 1 }
    END {
        printf "| size | default busbw (GB/s, median) | off | default / off | runs: default | runs: off |\n|---|---|---|---|---|---|\n"
        for (s in sizes) order[++m] = s + 0
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
        for (i = 1; i <= m; i++) {
            s = order[i]
            for (a = 0; a < 2; a++) {
                k = (a ? "off" : "window") " " s; c = n[k]
                for (x = 1; x <= c; x++) w[x] = v[k, x] + 0
                for (x = 1; x <= c; x++) for (y = x + 1; y <= c; y++) if (w[y] < w[x]) { t = w[x]; w[x] = w[y]; w[y] = t }
                med[a] = c % 2 ? w[(c + 1) / 2] : (w[c / 2] + w[c / 2 + 1]) / 2
            }
            printf "| %d MiB | %.3f | %.3f | %.2f |%s |%s |\n", s / 1048576, med[0], med[1], med[0] / med[1], runs["window " s], runs["off " s]
        }
    }' "$out")
perf_end | tee -a "$out.head"
echo "$report"
if [ "$record" = 1 ]; then
    perf_record "perf/results/$(date +%Y-%m-%d)-$name.md" \
        "Default against '$off_env'${off_given:+ from $off_given} on tcp loopback ($ranks ranks, each its own node${algo:+, GX_ALGO=$algo})" "" \
        "perf/window_bench.sh -r $runs -n $ranks${algo:+ --algo $algo} --off '$off_env'${off_given:+ --off-build $off_given} --name $name" \
        "variant, bytes, busbw GB/s" "$report" "$out"
fi
